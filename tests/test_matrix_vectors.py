"""Matrix-vector products (hlo/matrix_vectors.py): the rewrite's IR, which
products it leaves, numerics on Vulkan against float64 with every dispatch
on a tilefuse kernel, and the decode shape on CUDA (one dispatch, its PTX
where --dump-dir says, 0 spills)."""

import shutil

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import tilefuse
from iree.compiler import ir
from support import filecheck
from tilefuse.hlo import matrix_vectors
from tilefuse.runtime import CompiledModule
from tilefuse.targets import load_target

BF16 = ml_dtypes.bfloat16

PRODUCTS = """func.func @main(%x: tensor<1x64xbf16>, %w: tensor<96x64xbf16>, %v: tensor<64xf32>, %u: tensor<64x96xf32>, %q: tensor<2x64xf32>, %k: tensor<2x96x64xf32>, %i: tensor<64xi32>, %j: tensor<96x64xi32>, %m: tensor<96x64xf32>) -> (tensor<1x96xf32>, tensor<96xf32>, tensor<2x96xf32>, tensor<96xi32>, tensor<96xf32>) {
  %wt = stablehlo.transpose %w, dims = [1, 0] : (tensor<96x64xbf16>) -> tensor<64x96xbf16>
  %a = stablehlo.dot_general %x, %wt, contracting_dims = [1] x [0] : (tensor<1x64xbf16>, tensor<64x96xbf16>) -> tensor<1x96xf32>
  %ut = stablehlo.transpose %u, dims = [1, 0] : (tensor<64x96xf32>) -> tensor<96x64xf32>
  %b = stablehlo.dot_general %ut, %v, contracting_dims = [1] x [0] : (tensor<96x64xf32>, tensor<64xf32>) -> tensor<96xf32>
  %c = stablehlo.dot_general %q, %k, batching_dims = [0] x [0], contracting_dims = [1] x [2] : (tensor<2x64xf32>, tensor<2x96x64xf32>) -> tensor<2x96xf32>
  %d = stablehlo.dot_general %j, %i, contracting_dims = [1] x [0] : (tensor<96x64xi32>, tensor<64xi32>) -> tensor<96xi32>
  %e = stablehlo.dot_general %m, %v, contracting_dims = [1] x [0] : (tensor<96x64xf32>, tensor<64xf32>) -> tensor<96xf32>
  return %a, %b, %c, %d, %e : tensor<1x96xf32>, tensor<96xf32>, tensor<2x96xf32>, tensor<96xi32>, tensor<96xf32>
}
"""


def test_the_rewrite_reads_each_matrix_as_stored(tmp_path):
    """x @ W.T (W as [N, K]) becomes a row reduction over W, the transpose
    gone; (U^T) @ v with U as [K, N] becomes dot_general(v, U), a
    vector-matrix product reading U as stored; a batched product with one
    batch dim and the matrix as B already is left, an integer one is no
    candidate, and M @ v, M an argument stored as [N, K], stays IREE's
    matvec (on CUDA; on SPIR-V too unless it is bf16)."""
    module = ir.Module.parse(PRODUCTS, ir.Context())
    log = matrix_vectors.rewrite_function(module.body.operations[0].operation, load_target("cuda"))
    assert len(log) == 4, log
    assert "row reduction over the 96x64 matrix (read through its transpose)" in log[0]
    assert "dot_general(the vector, the 64x96 matrix as stored) (read through" in log[1]
    assert "stays a contraction: already vector first as stored" in log[2]
    assert "stays a contraction: IREE's matvec reads the matrix as stored" in log[3]
    filecheck(
        str(module),
        """
CHECK-NOT: stablehlo.transpose
CHECK: %[[W:.*]] = stablehlo.broadcast_in_dim %arg1, dims = [1, 2] : (tensor<96x64xbf16>) -> tensor<1x96x64xbf16>
CHECK: %[[WF:.*]] = stablehlo.convert %[[W]] : (tensor<1x96x64xbf16>) -> tensor<1x96x64xf32>
CHECK: %[[X:.*]] = stablehlo.reshape %arg0 : (tensor<1x64xbf16>) -> tensor<64xbf16>
CHECK: %[[XB:.*]] = stablehlo.broadcast_in_dim %[[X]], dims = [2] : (tensor<64xbf16>) -> tensor<1x96x64xbf16>
CHECK: %[[XF:.*]] = stablehlo.convert %[[XB]] : (tensor<1x96x64xbf16>) -> tensor<1x96x64xf32>
CHECK: %[[P:.*]] = stablehlo.multiply %[[WF]], %[[XF]]
CHECK: %[[A:.*]] = stablehlo.reduce(%[[P]] init: %{{.*}}) applies stablehlo.add across dimensions = [2] : (tensor<1x96x64xf32>, tensor<f32>) -> tensor<1x96xf32>
CHECK: %[[B:.*]] = stablehlo.dot_general %arg2, %arg3, contracting_dims = [0] x [0]
CHECK: %[[C:.*]] = stablehlo.dot_general %arg4, %arg5, batching_dims = [0] x [0], contracting_dims = [1] x [2]
CHECK: %[[D:.*]] = stablehlo.dot_general %arg7, %arg6
CHECK: %[[E:.*]] = stablehlo.dot_general %arg8, %arg2, contracting_dims = [1] x [0]
CHECK: return %[[A]], %[[B]], %[[C]], %[[D]], %[[E]]
""",
        tmp_path,
    )


CASES = {
    # name: (function, argument shapes, dtype, relative tolerance)
    "x_Wt_bf16": (lambda x, w: x @ w.T, ((1, 1000), (777, 1000)), BF16, 8e-3),
    "x_Wt_gelu_f16": (
        lambda x, w, b: jax.nn.gelu(x @ w.T + b),
        ((1024,), (513, 1024), (513,)),
        np.float16,
        2e-3,
    ),
    # W @ x with no transpose: rewritten on SPIR-V for bf16 only (plain IREE
    # fails on it there), both ways round.
    "W_x_tanh_bf16": (lambda w, x: jnp.tanh(w @ x), ((300, 2049), (2049,)), BF16, 8e-3),
    "W_x1_bf16": (lambda w, x: w @ x, ((256, 512), (512, 1)), BF16, 8e-3),
    "Wt_x_f32": (lambda w, x: w.T @ x, ((1000, 512), (1000,)), np.float32, 1e-5),
    "batched_W_x_tanh_bf16": (
        lambda w, x: jnp.tanh(jnp.einsum("bmk,bk->bm", w, x)),
        ((4, 128, 96), (4, 96)),
        BF16,
        8e-3,
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_matrix_vector_products_on_tilefuse_kernels(name):
    """Each product in one dispatch on a tilefuse kernel (the row kernels
    for a row reduction, the matmul kernel's one-row tiles for a swapped
    product), within the tolerance of float64 relative to the largest
    output (bf16 and f16 results round once to 8 and 11 bits)."""
    fn, shapes, dtype, tolerance = CASES[name]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(dtype) for s in shapes]
    result = tilefuse.compile_program(jax.jit(fn).lower(*args).as_text(), "vulkan")
    assert any(
        "matrix-vector product" in line and "rewritten" in line for line in result.fusion.log
    )
    assert len(result.reports) == 1, [r.line() for r in result.reports]
    assert result.reports[0].status == "applied", result.reports[0].line()
    got = np.asarray(CompiledModule(result.vmfb, "vulkan").main(*args), np.float64)
    want = np.asarray(fn(*[a.astype(np.float64) for a in args]), np.float64)
    assert np.max(np.abs(got - want)) <= tolerance * np.max(np.abs(want))


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
def test_decode_product_is_one_dispatch_on_cuda(root, tmp_path):
    """benchmarks/gpu/decode_m1_nk_bf16 (x @ W.T, W as 4096x4096 bf16): plain
    IREE transposes the whole weight first (2 dispatches); here one row
    kernel reads it as stored, 0 spills on sm_90. The unit M dim makes the
    first plan's dispatch one no kernel takes, so IREE's formation compiles
    it on a retry: its PTX still lands in DIR/binaries."""
    program = root / "benchmarks/gpu/decode_m1_nk_bf16.mlir"
    result = tilefuse.compile_program(program, "cuda-sm90", dump_dir=tmp_path)
    assert [(r.strategy, r.status) for r in result.reports] == [("softmax", "applied")], [
        r.line() for r in result.reports
    ]
    assert result.reports[0].spill_bytes == 0
    ptx = list((tmp_path / "binaries").glob("*.ptx"))
    assert len(ptx) == 1 and ".target sm_90" in ptx[0].read_text()


def _attention(q, k, v):
    """One decode step of attention as JAX code writes it: q @ k^T."""
    return jax.nn.softmax(q @ jnp.swapaxes(k, -1, -2) / 8.0, -1) @ v


@pytest.mark.parametrize(
    "shapes,dtype,dispatches,tolerance",
    [
        # [B, H, 1, D] against a cache of [B, H, S, D]: two batch dims, k first
        (((2, 8, 1, 64), (2, 8, 256, 64), (2, 8, 256, 64)), np.float16, 3, 2e-3),
        # batch 1, which JAX drops after the transpose (unit_transposes moves
        # the reshape first): one batch dim, q first; the softmax's rows
        # viewed through the product's [4, 100] (fusion/rows.py): 3, as
        # plain IREE
        (((1, 4, 1, 32), (1, 4, 100, 32), (1, 4, 100, 32)), np.float32, 3, 1e-5),
    ],
)
def test_decode_attention_reads_the_cache_as_stored(shapes, dtype, dispatches, tolerance):
    """q @ swapaxes(k) no longer copies k transposed (a dispatch that read
    and wrote the whole cache: 5 dispatches at [2, 8, 256, 64] before, 3
    now); every dispatch on a tilefuse kernel, against float64."""
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(dtype) for s in shapes]
    result = tilefuse.compile_program(jax.jit(_attention).lower(*args).as_text(), "vulkan")
    assert any("matrix as stored" in line for line in result.fusion.log), result.fusion.log
    assert not any("transpose" in r.name for r in result.reports), [
        r.line() for r in result.reports
    ]
    assert [r.status for r in result.reports] == ["applied"] * dispatches, [
        r.line() for r in result.reports
    ]
    got = np.asarray(CompiledModule(result.vmfb, "vulkan").main(*args), np.float64)
    want = np.asarray(_attention(*[a.astype(np.float64) for a in args]), np.float64)
    assert np.max(np.abs(got - want)) <= tolerance * np.max(np.abs(want))


def test_products_in_a_scan_body_are_rewritten():
    """A scan over layers keeps its products in a while body: W @ h there is
    rewritten too (bf16 on SPIR-V), and the log names the op's own line."""

    def layers(ws, h):
        return jax.lax.scan(lambda h, w: (jnp.tanh(w @ h), None), h, ws)[0]

    rng = np.random.default_rng(0)
    ws = (rng.standard_normal((3, 128, 128)) / 8).astype(BF16)
    h = rng.standard_normal(128).astype(BF16)
    result = tilefuse.compile_program(jax.jit(layers).lower(ws, h).as_text(), "vulkan")
    (line,) = [line for line in result.fusion.log if "matrix-vector product" in line]
    assert "rewritten as a row reduction" in line and "callsite" not in line, line
    got = np.asarray(CompiledModule(result.vmfb, "vulkan").main(ws, h), np.float64)
    want = np.asarray(layers(ws.astype(np.float64), h.astype(np.float64)), np.float64)
    assert np.max(np.abs(got - want)) <= 8e-3 * np.max(np.abs(want))


def test_swiglu_decode_step_is_three_dispatches():
    """A SwiGLU MLP at decode (x [1, 128]; gate and up [344, 128], down
    [128, 344], each read as W.T): gate and up are row reductions, and the
    down projection's row reduction reads their product through the rows
    views' reshapes (a chain of reshapes over a group's input is one view,
    planner._reshapes_computed; it had been refused as a reshape of a
    computed value, and a loop dispatch wrote the broadcast vector, 4
    dispatches). Plain IREE: 6. Within 2e-3 (f16 output) of float64."""

    def swiglu(x, wg, wu, wd):
        return (jax.nn.silu(x @ wg.T) * (x @ wu.T)) @ wd.T

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 128)).astype(np.float16)
    wg, wu = ((rng.standard_normal((344, 128)) / 8).astype(np.float16) for _ in range(2))
    wd = (rng.standard_normal((128, 344)) / 8).astype(np.float16)
    text = jax.jit(swiglu).lower(x, wg, wu, wd).as_text()
    result = tilefuse.compile_program(text, "vulkan")
    assert [r.status for r in result.reports] == ["applied"] * 3, [r.line() for r in result.reports]
    got = np.asarray(CompiledModule(result.vmfb, "vulkan").main(x, wg, wu, wd), np.float64)
    x64, g64, u64, d64 = (a.astype(np.float64) for a in (x, wg, wu, wd))
    gate = x64 @ g64.T
    want = (gate / (1 + np.exp(-gate)) * (x64 @ u64.T)) @ d64.T
    assert np.max(np.abs(got - want)) <= 2e-3 * np.max(np.abs(want))
