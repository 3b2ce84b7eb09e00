"""Contractions with several batch dims and a B stored [..., N, K]
(hlo/batch_dims.py): the IR after the rewrite, attention's q @ k^T as an
einsum at decode (no transpose dispatch) on Vulkan against float64, and
prefill shapes left alone."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tilefuse
from iree.compiler import ir
from support import filecheck
from tilefuse.hlo import batch_dims
from tilefuse.runtime import CompiledModule

# q k^T with k as [B, H, S, D] (collapsed), then p v already in matmul
# layout (left: IREE collapses it without a copy).
PRODUCTS = """func.func @main(%q: tensor<2x8x4x64xf32>, %k: tensor<2x8x256x64xf32>, %p: tensor<2x8x4x256xbf16>, %v: tensor<2x8x256x64xbf16>) -> (tensor<2x8x4x256xbf16>, tensor<2x8x4x64xf32>) {
  %s = stablehlo.dot_general %q, %k, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3] : (tensor<2x8x4x64xf32>, tensor<2x8x256x64xf32>) -> tensor<2x8x4x256xf32>
  %c = stablehlo.convert %s : (tensor<2x8x4x256xf32>) -> tensor<2x8x4x256xbf16>
  %o = stablehlo.dot_general %p, %v, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<2x8x4x256xbf16>, tensor<2x8x256x64xbf16>) -> tensor<2x8x4x64xf32>
  return %c, %o : tensor<2x8x4x256xbf16>, tensor<2x8x4x64xf32>
}
"""


def test_batch_dims_collapse_where_iree_would_copy(tmp_path):
    module = ir.Module.parse(PRODUCTS, ir.Context())
    log = batch_dims.rewrite_function(module.body.operations[0].operation)
    assert len(log) == 1 and "2 batch dims collapsed into one" in log[0], log
    filecheck(
        str(module),
        """
CHECK: %[[Q:.*]] = stablehlo.reshape %arg0 : (tensor<2x8x4x64xf32>) -> tensor<16x4x64xf32>
CHECK: %[[K:.*]] = stablehlo.reshape %arg1 : (tensor<2x8x256x64xf32>) -> tensor<16x256x64xf32>
CHECK: %[[S:.*]] = stablehlo.dot_general %[[Q]], %[[K]], batching_dims = [0] x [0], contracting_dims = [2] x [2]
CHECK: %[[C:.*]] = stablehlo.convert %[[S]] : (tensor<16x4x256xf32>) -> tensor<16x4x256xbf16>
CHECK: %[[B:.*]] = stablehlo.reshape %[[C]] : (tensor<16x4x256xbf16>) -> tensor<2x8x4x256xbf16>
CHECK: %[[O:.*]] = stablehlo.dot_general %arg2, %arg3, batching_dims = [0, 1] x [0, 1]
CHECK: return %[[B]], %[[O]]
""",
        tmp_path,
    )


def _gqa(q, k, v):
    """Grouped-query attention at decode: G query heads per KV head."""
    s = jnp.einsum("bkgd,bksd->bkgs", q, k) / 8.0
    return jnp.einsum("bkgs,bksd->bkgd", jax.nn.softmax(s, -1), v)


def _prefill(q, k, v):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / 8.0
    return jax.nn.softmax(s, -1) @ v


@pytest.mark.parametrize(
    "fn,shapes,dtype,tolerance",
    [
        (_gqa, ((2, 2, 4, 64), (2, 2, 256, 64), (2, 2, 256, 64)), np.float32, 1e-5),
        (_gqa, ((2, 4, 8, 32), (2, 4, 128, 32), (2, 4, 128, 32)), np.float16, 2e-3),
    ],
    ids=["gqa_decode_f32", "gqa_decode_f16"],
)
def test_decode_attention_reads_k_as_stored(fn, shapes, dtype, tolerance):
    """No dispatch copies k transposed (plain IREE has one, and this had
    one before the rewrite); every dispatch on a tilefuse kernel."""
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(dtype) for s in shapes]
    result = tilefuse.compile_program(jax.jit(fn).lower(*args).as_text(), "vulkan")
    assert any("batch dims collapsed" in line for line in result.fusion.log), result.fusion.log
    lines = [r.line() for r in result.reports]
    assert not any("transpose" in r.name for r in result.reports), lines
    assert all(r.status == "applied" for r in result.reports), lines
    got = np.asarray(CompiledModule(result.vmfb, "vulkan").main(*args), np.float64)
    want = np.asarray(fn(*[a.astype(np.float64) for a in args]), np.float64)
    assert np.max(np.abs(got - want)) <= tolerance * np.max(np.abs(want))


def test_prefill_shapes_are_left_alone():
    """17 query rows (> split_k.MAX_M): not collapsed (the log says nothing)."""
    args = [np.zeros((2, 4, 17, 32), np.float32)] * 3
    result = tilefuse.compile_program(jax.jit(_prefill).lower(*args).as_text(), "vulkan")
    assert not any("batch dims collapsed" in line for line in result.fusion.log)
