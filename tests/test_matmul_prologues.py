"""Operands computed in the matmul's dispatch: the FMA kernel's prologues.

A weight-only quantized layer (int8 weights, one f16 scale per output
channel, as JAX writes it: `x @ (w.astype(f16) * s)`) is one dispatch in
IREE's formation: the dequantization is an elementwise linalg.generic of
the loaded weight and scales that the contraction reads. The matmul kernel
fuses it at every level of tiling (workgroup, thread, K step, row piece),
so each thread dequantizes the slice of the weight it multiplies, in
registers, and no f16 copy of the weight is written (the plan's separate
dequantization dispatch wrote and read one: 2 dispatches against IREE's 1).

Numerics on lavapipe against float64 numpy: the dequantized weight rounds to
f16 (2^-11 relative) before the products, accumulated in f32, and the
result rounds to f16: within 2e-3 of the largest output. Also: the kernel's
K loop holds the dequantization (no buffer for it), CUDA kernels assemble
without spills, and where only ragged tiles apply (they take no prologue
yet) the dequantization stays a dispatch of its own.
"""

import dataclasses

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import tilefuse
from support import filecheck
from tilefuse.runtime import CompiledModule
from tilefuse.targets import load_target

F16 = {"f16": (jnp.float16, np.float16), "bf16": (jnp.bfloat16, ml_dtypes.bfloat16)}


def _layer(transposed: bool, dtype: str):
    """x @ dequant(w): w as [K, N], or as [N, K] read transposed (x @ w.T)."""
    jt, _ = F16[dtype]

    def layer(x, w, s):
        if transposed:
            return x @ (w.astype(jt) * s[:, None]).T
        return x @ (w.astype(jt) * s)

    return layer


def _args(m, k, n, transposed, dtype, seed=0):
    rng = np.random.default_rng(seed)
    _, nt = F16[dtype]
    w_shape = (n, k) if transposed else (k, n)
    return [
        rng.standard_normal((m, k)).astype(nt),
        rng.integers(-127, 128, w_shape).astype(np.int8),
        (rng.random(n) * 0.02 + 0.001).astype(nt),
    ]


def _reference(x, w, s, transposed):
    x, w, s = (a.astype(np.float64) for a in (x, w, s))
    return x @ (w.T * s if transposed else w * s)


def _compile(fn, args, target="vulkan", **kwargs):
    text = jax.jit(fn).lower(*args).as_text()
    return tilefuse.compile_program(text, target, **kwargs)


@pytest.mark.parametrize(
    "m,k,n,transposed,dtype",
    [
        (16, 256, 384, True, "f16"),  # x @ W.T, W [N, K] (t4_dequant_xWT_M16_f16)
        (32, 256, 512, False, "f16"),  # W [K, N]
        (64, 128, 256, False, "bf16"),
        (1, 1024, 768, False, "f16"),  # a decode step: IREE's vecmat, no M loop
    ],
)
def test_dequantized_weight_is_one_dispatch_on_lavapipe(m, k, n, transposed, dtype):
    args = _args(m, k, n, transposed, dtype)
    result = _compile(_layer(transposed, dtype), args)
    assert [(r.strategy, r.status) for r in result.reports] == [("matmul", "applied")], [
        r.line() for r in result.reports
    ]
    got = np.asarray(CompiledModule(result.vmfb, "vulkan").main(*args), np.float64)
    want = _reference(*args, transposed)
    tolerance = 2e-3 if dtype == "f16" else 1.6e-2  # bf16: 8 bits of mantissa
    assert np.max(np.abs(got - want)) <= tolerance * np.max(np.abs(want))


def test_dequantized_mlp_keeps_each_layer_one_dispatch():
    """Two quantized layers with a GELU between: the GELU is the first
    matmul's epilogue, the second layer's dequantization its prologue."""

    def mlp(x, w1, s1, w2, s2):
        h = jax.nn.gelu(x @ (w1.astype(jnp.float16) * s1))
        return h @ (w2.astype(jnp.float16) * s2)

    x, w1, s1 = _args(32, 256, 512, False, "f16")
    _, w2, s2 = _args(512, 512, 256, False, "f16", seed=1)
    args = [x, w1, s1, w2, s2]
    result = _compile(mlp, args)
    assert [(r.strategy, r.status) for r in result.reports] == [("matmul", "applied")] * 2
    got = np.asarray(CompiledModule(result.vmfb, "vulkan").main(*args), np.float64)
    x, w1, s1, w2, s2 = (a.astype(np.float64) for a in args)
    h = x @ (w1 * s1)
    h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
    want = h @ (w2 * s2)
    assert np.max(np.abs(got - want)) <= 2e-3 * np.max(np.abs(want))


def test_each_k_step_dequantizes_in_registers(tmp_path):
    """The K loop reads int8 rows of W and converts and scales them there:
    nothing is allocated or written before the epilogue's store."""
    args = _args(16, 256, 384, True, "f16")
    _compile(_layer(True, "f16"), args, dump_dir=tmp_path)
    # IREE's formation (one dispatch) is kept over the plan's two.
    log = tmp_path / "iree-formation" / "phase2.log"
    (kernel,) = tilefuse.verify.printed_kernels(log.read_text()).values()
    filecheck(
        kernel,
        """
CHECK-NOT: memref.alloc
CHECK: scf.for {{.*}} step %c4 iter_args
CHECK-NOT: vector.transfer_write
CHECK: vector.transfer_read {{.*}} memref<384x256xi8{{.*}} vector<4x4xi8>
CHECK: arith.sitofp {{.*}} vector<4x4xi8> to vector<4x4xf16>
CHECK: arith.mulf {{.*}} vector<4x4xf16>
CHECK: vector.fma {{.*}} : vector<4xf32>
CHECK-NOT: vector.transfer_write
CHECK: scf.yield
CHECK: vector.transfer_write
""",
        tmp_path,
    )
    # 8x8 outputs per thread: W's two 4x4 pieces of a K step converted once
    # each, not once per row of A that reads them (CSE after the unroll).
    assert kernel.count("arith.sitofp") == 2, kernel.count("arith.sitofp")


@pytest.mark.parametrize("target", ["cuda", "cuda-sm90"])
def test_dequantized_weight_assembles_without_spills(target):
    """On CUDA the tensor-core kernels read operands as loaded and refuse
    the dispatch (said in the reason); the FMA kernel takes it."""
    result = _compile(_layer(True, "f16"), _args(16, 256, 384, True, "f16"), target)
    (report,) = result.reports
    assert report.strategy == "matmul" and report.status == "applied", report.line()
    assert report.spill_bytes == 0, report.line()


@pytest.mark.parametrize("transposed", [True, False])
def test_ragged_tiles_keep_the_dequantization_apart(transposed):
    """M = 13 and N = 382 (2 x 191) leave the exact tiles 1 x 2 outputs per
    thread, too few, and the ragged kernel takes no prologue yet: the
    planner does not fuse it (W [K, N]: the catalogue's prologue refusal),
    and IREE's one dispatch would run on its own codegen (W [N, K]), so the
    plan's two dispatches are kept (the dequantization, then the ragged
    matmul), each on a tilefuse kernel. (M = 13 alone takes exact 1 x 8
    tiles.)"""
    args = _args(13, 256, 382, transposed, "f16")
    result = _compile(_layer(transposed, "f16"), args)
    assert [r.status for r in result.reports] == ["applied"] * 2, [r.line() for r in result.reports]
    assert "ragged" in result.reports[1].params, result.reports[1].line()
    got = np.asarray(CompiledModule(result.vmfb, "vulkan").main(*args), np.float64)
    want = _reference(*args, transposed)
    assert np.max(np.abs(got - want)) <= 2e-3 * np.max(np.abs(want))


def test_tall_products_keep_the_dequantization_apart_for_tensor_cores():
    """On CUDA (prologue_rows = 16) a 32-row quantized layer keeps its
    dequantization a dispatch of its own, so that the product runs on
    tensor cores, which read operands as loaded; on Vulkan (lavapipe: no
    limit) it is one dispatch."""
    args = _args(32, 256, 512, False, "f16")
    cuda = _compile(_layer(False, "f16"), args, "cuda")
    assert [r.strategy for r in cuda.reports] == ["loop", "matmul_mma_iree"], [
        r.line() for r in cuda.reports
    ]
    assert [r.strategy for r in _compile(_layer(False, "f16"), args).reports] == ["matmul"]


@pytest.mark.parametrize("m", [4, 1])
def test_split_k_decode_products_take_the_dequantization(m):
    """A decode step (M = 4 or 1, K = 4096) on a target with multiprocessors
    is split in K (hlo/split_k.py); each split product dequantizes its slice
    of W. Forced on lavapipe by a copy of the vulkan target claiming 64
    multiprocessors (numerics); on CUDA the kernels assemble without spills."""
    args = _args(m, 4096, 512, False, "f16")
    gpu_like = dataclasses.replace(load_target("vulkan"), multiprocessors=64)
    result = _compile(_layer(False, "f16"), args, gpu_like)
    assert any("split in K" in line for line in result.fusion.splits), result.fusion.splits
    matmuls = [r for r in result.reports if r.strategy == "matmul"]
    assert len(matmuls) == 1 and matmuls[0].status == "applied", [r.line() for r in result.reports]
    assert not any("elementwise" in r.name and "i8" in r.name for r in result.reports), [
        r.line() for r in result.reports
    ]
    got = np.asarray(CompiledModule(result.vmfb, "vulkan").main(*args), np.float64)
    want = _reference(*args, False)
    assert np.max(np.abs(got - want)) <= 2e-3 * np.max(np.abs(want))
    cuda = _compile(_layer(False, "f16"), args, "cuda")
    assert all(r.strategy and r.spill_bytes == 0 for r in cuda.reports), [
        r.line() for r in cuda.reports
    ]
