"""A broadcast of a mask made from iotas, computed at its shape
(hlo/index_broadcasts.py), and iotas on a softmax's rows (fusion/rows.py):
the IR after the rewrite, and a batched causal softmax on Vulkan as one
dispatch on a tilefuse kernel, against numpy (f32, 1e-6 of the largest
|output|)."""

import jax
import jax.numpy as jnp
import numpy as np
import tilefuse
from iree.compiler import ir
from support import filecheck
from test_attention_layouts import iree_dispatches
from tilefuse.hlo import index_broadcasts
from tilefuse.runtime import CompiledModule

# A causal mask over [S, S] broadcast over batch and heads, and a
# broadcast of an argument (not an iota computation: left).
MASK = """func.func @main(%s: tensor<2x3x8x8xf32>, %b: tensor<8xf32>) -> (tensor<2x3x8x8xf32>, tensor<2x8xf32>) {
  %i = stablehlo.iota dim = 0 : tensor<8x8xi32>
  %j = stablehlo.iota dim = 1 : tensor<8x8xi32>
  %m = stablehlo.compare GE, %i, %j, SIGNED : (tensor<8x8xi32>, tensor<8x8xi32>) -> tensor<8x8xi1>
  %mb = stablehlo.broadcast_in_dim %m, dims = [2, 3] : (tensor<8x8xi1>) -> tensor<2x3x8x8xi1>
  %c = stablehlo.constant dense<-1.0e4> : tensor<f32>
  %cb = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<2x3x8x8xf32>
  %r = stablehlo.select %mb, %s, %cb : tensor<2x3x8x8xi1>, tensor<2x3x8x8xf32>
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<8xf32>) -> tensor<2x8xf32>
  return %r, %bb : tensor<2x3x8x8xf32>, tensor<2x8xf32>
}
"""


def test_a_broadcast_mask_is_computed_at_its_shape(tmp_path):
    module = ir.Module.parse(MASK, ir.Context())
    log = index_broadcasts.rewrite_function(module.body.operations[0].operation)
    assert len(log) == 1 and "computed from iotas" in log[0], log
    filecheck(
        str(module),
        """
CHECK-DAG: %[[I:.*]] = stablehlo.iota dim = 2 : tensor<2x3x8x8xi32>
CHECK-DAG: %[[J:.*]] = stablehlo.iota dim = 3 : tensor<2x3x8x8xi32>
CHECK: %[[M:.*]] = stablehlo.compare GE, %[[I]], %[[J]], SIGNED
CHECK-NOT: tensor<8x8xi
CHECK: stablehlo.select %[[M]], %arg0
CHECK: stablehlo.broadcast_in_dim %arg1, dims = [1]
""",
        tmp_path,
    )


def causal_softmax(s):
    n = s.shape[-1]
    return jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((n, n), bool)), s, -1e4), -1)


def test_a_batched_causal_softmax_is_one_dispatch(tmp_path):
    """[4, 128, 128] scores: the mask's query index is the row number
    modulo 128 on the [512, 128] rows."""
    s = np.random.default_rng(0).standard_normal((4, 128, 128)).astype(np.float32)
    text = jax.jit(causal_softmax).lower(s).as_text()
    result = tilefuse.compile_program(text, "vulkan", statistics=True)
    lines = [r.line() for r in result.reports]
    assert [r.status for r in result.reports] == ["applied"], lines
    assert result.scheduled_dispatches <= iree_dispatches(text, tmp_path)
    got = np.asarray(CompiledModule(result.vmfb, "vulkan").main(s), np.float64)
    x = np.where(np.tril(np.ones((128, 128), bool)), s.astype(np.float64), -1e4)
    e = np.exp(x - x.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    assert np.max(np.abs(got - want)) <= 1e-6 * np.max(np.abs(want))
