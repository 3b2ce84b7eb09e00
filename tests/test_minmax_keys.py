"""Float row max/min on SPIR-V targets, rewritten on ordered i32 keys by
hlo/minmax.py and run by the softmax kernel with a decode epilogue.

Results must equal numpy exactly, including where it matters most: a NaN
anywhere in a row gives NaN, infinities; and -0 is below +0 as in IEEE's
maximum/minimum, which StableHLO's are (a row of -0 and +0 has max +0 and
min -0; numpy takes either zero, so the sign is checked from the data). Every numerics case asserts the rewrite and the
kernel.
"""

import ml_dtypes
import numpy as np
import pytest
import tilefuse
from conftest import REDUCE_OPS, cpu_hypothesis, reduce_program
from hypothesis import given
from hypothesis import strategies as st
from support import filecheck, kernel_ops
from tilefuse.runtime import CompiledModule

NUMPY = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def program(shape, dtype, op, reduced=1):
    """Reduce the innermost `reduced` dims of x (in its own type) with op."""
    text = reduce_program(shape, range(len(shape) - reduced, len(shape)), dtype, op)
    if dtype == "f32":
        return text
    # reduce_program converts to f32 first; reduce the f16/bf16 values as
    # they are instead (the key path sign-extends 16-bit floats).
    out = [s for i, s in enumerate(shape) if i < len(shape) - reduced]
    t = f"tensor<{''.join(f'{s}x' for s in shape)}{dtype}>"
    r = f"tensor<{''.join(f'{s}x' for s in out)}{dtype}>"
    body, init, _ = REDUCE_OPS[op]
    init = {"max": {"f16": "0xFC00", "bf16": "0xFF80"}, "min": {"f16": "0x7C00", "bf16": "0x7F80"}}[
        op
    ][dtype]
    dims = list(range(len(shape) - reduced, len(shape)))
    return "\n".join(
        [
            f"func.func @main(%x: {t}) -> {r} {{",
            f"  %init = stablehlo.constant dense<{init}> : tensor<{dtype}>",
            (
                f"  %r = stablehlo.reduce(%x init: %init) applies stablehlo.{body} "
                f"across dimensions = {dims} : ({t}, tensor<{dtype}>) -> {r}"
            ),
            f"  return %r : {r}",
            "}",
        ]
    )


def inputs(shape, dtype, seed=0):
    """Normal values with special rows: NaN (first, middle, last element),
    all -0, -0 and +0 mixed, all -inf, a +inf."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).reshape(-1, shape[-1])
    rows, n = x.shape
    specials = [
        lambda r: r.__setitem__(0, np.nan),
        lambda r: r.__setitem__(n // 2, np.nan),
        lambda r: r.__setitem__(n - 1, np.nan),
        lambda r: r.__setitem__(slice(None), -0.0),
        lambda r: (r.__setitem__(slice(None), -0.0), r.__setitem__(n // 3, 0.0)),
        lambda r: r.__setitem__(slice(None), -np.inf),
        lambda r: r.__setitem__(n // 4, np.inf),
    ]
    for i, special in enumerate(specials[:rows]):
        special(x[(i * 3) % rows])
    return x.reshape(shape).astype(NUMPY[dtype])


def check_case(shape, dtype, op, reduced=1):
    result = tilefuse.compile_program(program(shape, dtype, op, reduced), "vulkan")
    assert any(f"row {op} at" in line for line in result.fusion.log), result.fusion.log
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    assert [(r.strategy, r.status) for r in module.reports] == [("softmax", "applied")], [
        r.line() for r in module.reports
    ]
    x = inputs(shape, dtype)
    axes = tuple(range(len(shape) - reduced, len(shape)))
    wide = x.astype(np.float64)
    ref = (np.max if op == "max" else np.min)(wide, axis=axes)
    out = module.main(x).astype(np.float64)
    assert out.shape == ref.shape
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(out), nan), (np.isnan(out) != nan).nonzero()
    assert np.array_equal(out[~nan], ref[~nan])
    # StableHLO's maximum/minimum are IEEE's: max(-0, +0) = +0 and
    # min(-0, +0) = -0 (numpy's max/min take either zero).
    zeros = ~nan & (ref == 0)
    is_zero = wide == 0
    positive = (is_zero & ~np.signbit(wide)).any(axis=axes)
    negative = (is_zero & np.signbit(wide)).any(axis=axes)
    want_negative = ~positive if op == "max" else negative
    assert np.array_equal(np.signbit(out[zeros]), want_negative[zeros])


CASES = [
    ((4096, 1000), "f32", "max", 1),
    ((64, 1000), "f32", "min", 1),
    ((9, 257), "f16", "max", 1),
    ((33, 130), "bf16", "min", 1),
    ((2, 70000), "f32", "max", 1),
    ((8, 16, 300), "f32", "min", 1),  # rank 3: viewed as rows by rows.py
    ((6, 8, 8), "f32", "max", 2),  # two reduced dims
]


@pytest.mark.parametrize(
    "shape,dtype,op,reduced", CASES, ids=["-".join(map(str, c)).replace(" ", "") for c in CASES]
)
def test_minmax_on_keys_vulkan(shape, dtype, op, reduced):
    check_case(shape, dtype, op, reduced)


@cpu_hypothesis(6)
@given(
    rows=st.integers(7, 4096),
    n=st.one_of(st.integers(2, 2048), st.integers(2049, 70000)),
    dtype=st.sampled_from(["f32", "f16", "bf16"]),
    op=st.sampled_from(["max", "min"]),
)
def test_minmax_on_keys_hypothesis(rows, n, dtype, op):
    rows = max(7, min(rows, (1 << 21) // n))
    check_case((rows, n), dtype, op)


def test_cuda_keeps_float_max():
    """CUDA lowers a lane's vector max with NaN checks: no rewrite there, the
    row kernel runs the float max with 4-vectors."""
    result = tilefuse.compile_program(program((64, 1000), "f32", "max"), "cuda")
    assert not any("ordered i32 keys" in line for line in result.fusion.log)
    (report,) = result.reports
    assert report.strategy == "row_reduction" and "vector=4" in report.params, report.line()


def test_softmax_max_stays_a_float_max():
    """A max broadcast back over its rows (softmax) is not rewritten."""
    from test_softmax import program as softmax_program

    result = tilefuse.compile_program(softmax_program("softmax", 8, 100), "vulkan")
    assert not any("ordered i32 keys" in line for line in result.fusion.log)


# jax.nn.softmax's max: `maximum(-inf, max)`, then a reshape-like broadcast to
# [rows, 1] before the one over the rows.
JAX_SOFTMAX = """func.func @main(%x: tensor<8x100xf32>) -> tensor<8x100xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1]
    : (tensor<8x100xf32>, tensor<f32>) -> tensor<8xf32>
  %ninf_rows = stablehlo.broadcast_in_dim %ninf, dims = [] : (tensor<f32>) -> tensor<8xf32>
  %m2 = stablehlo.maximum %ninf_rows, %m : tensor<8xf32>
  %m3 = stablehlo.reshape %m2 : (tensor<8xf32>) -> tensor<8x1xf32>
  %mb = stablehlo.broadcast_in_dim %m3, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x100xf32>
  %d = stablehlo.subtract %x, %mb : tensor<8x100xf32>
  %e = stablehlo.exponential %d : tensor<8x100xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1]
    : (tensor<8x100xf32>, tensor<f32>) -> tensor<8xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<8xf32>) -> tensor<8x100xf32>
  %y = stablehlo.divide %e, %sb : tensor<8x100xf32>
  return %y : tensor<8x100xf32>
}
"""


def test_a_max_broadcast_back_through_elementwise_ops_stays_a_float_max():
    """JAX's softmax passes its max through `maximum(-inf, .)` and a reshape
    before the broadcast: still a softmax's max, not rewritten. As keys, their
    encoding took a dispatch of its own before the softmax kernel (attention
    scores: 5 dispatches against IREE's 4)."""
    result = tilefuse.compile_program(JAX_SOFTMAX, "vulkan")
    assert not any("ordered i32 keys" in line for line in result.fusion.log)
    assert [(r.strategy, r.status) for r in result.reports] == [("softmax", "applied")], [
        r.line() for r in result.reports
    ]
    x = np.random.default_rng(0).standard_normal((8, 100)).astype(np.float32)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    got = tilefuse.CompiledModule(result.vmfb, "vulkan").main(x)
    np.testing.assert_allclose(got, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_ir_minmax_keys(tmp_path):
    """Row max of 256x1000 f32: the chunk loop folds 4-vectors of integer
    keys into a running arith.maxsi (no float max, no scalar reads), the
    combine shuffles i32, and thread 0 decodes the row's key back into its
    float bits and writes it."""
    dump = tmp_path / "dump"
    tilefuse.compile_program(program((256, 1000), "f32", "max"), "vulkan", dump_dir=dump)
    (kernel,) = tilefuse.verify.printed_kernels((dump / "phase2.log").read_text()).values()
    filecheck(
        kernel,
        """
CHECK: scf.for {{.*}} to %c992 step %c32 iter_args({{.*}}) -> (vector<4xi32>)
CHECK: vector.transfer_read {{.*}}#hal.descriptor_type<storage_buffer>>, vector<4xf32>
CHECK-NEXT: arith.bitcast {{.*}} : vector<4xf32> to vector<4xi32>
CHECK: arith.maxsi {{.*}} : vector<4xi32>
CHECK: gpu.shuffle xor {{.*}} : i32
CHECK: gpu.barrier
CHECK: scf.if
CHECK: arith.xori
CHECK: arith.bitcast {{.*}} to vector<1xf32>
CHECK: vector.transfer_write {{.*}}#hal.descriptor_type<storage_buffer>>
""",
        tmp_path,
    )
    ops, _module = kernel_ops(kernel)
    float_max = [
        op
        for op in ops
        if op.name == "arith.maximumf"
        or (op.name == "vector.reduction" and "maximumf" in str(op.attributes["kind"]))
    ]
    assert not float_max
