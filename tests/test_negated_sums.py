"""Sums of negated values become negated sums (hlo/negated_sums.py): the IR
after the rewrite, and jax.grad of a layernorm (a sum of negated terms,
whose subtracting combiner IREE's own codegen fails on) on Vulkan against
JAX on the CPU."""

import jax
import jax.numpy as jnp
import numpy as np
import tilefuse
from iree.compiler import ir
from support import filecheck
from tilefuse.hlo import negated_sums
from tilefuse.runtime import CompiledModule

SUMS = """func.func @main(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8x16xf32>) {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %one = stablehlo.constant dense<1.0> : tensor<f32>
  %n = stablehlo.negate %x : tensor<8x16xf32>
  %s = stablehlo.reduce(%n init: %z) applies stablehlo.add across dimensions = [1] : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
  %m = stablehlo.negate %y : tensor<8x16xf32>
  %t = stablehlo.reduce(%m init: %one) applies stablehlo.add across dimensions = [1] : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
  return %s, %t, %m : tensor<8xf32>, tensor<8xf32>, tensor<8x16xf32>
}
"""


def test_a_sum_of_a_negate_becomes_a_negated_sum(tmp_path):
    """The second sum stays: its init is not 0, and its negate is returned too."""
    module = ir.Module.parse(SUMS, ir.Context())
    log = negated_sums.rewrite_function(module.body.operations[0].operation)
    assert len(log) == 1 and "rewritten as a negated sum" in log[0], log
    filecheck(
        str(module),
        """
CHECK: %[[S:.*]] = stablehlo.reduce(%arg0 init:
CHECK: %[[N:.*]] = stablehlo.negate %[[S]]
CHECK: stablehlo.negate %arg1
CHECK: return %[[N]]
""",
        tmp_path,
    )


def _layernorm(x, g, b):
    mean = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, -1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * g + b


def test_layernorm_backward_runs_on_tilefuse_kernels():
    """jax.vjp of a layernorm: plain iree-compile 3.13 fails on it ("Failed
    to get an identity value for the reduction operation"); here every
    dispatch takes a tilefuse kernel. Within 1e-5 of JAX's CPU results,
    relative to each output's largest."""
    rng = np.random.default_rng(0)
    x, dy = (rng.standard_normal((32, 128)).astype(np.float32) for _ in range(2))
    g, b = (rng.standard_normal(128).astype(np.float32) for _ in range(2))

    def backward(x, g, dy):
        return jax.vjp(lambda x, g: _layernorm(x, g, b), x, g)[1](dy)

    result = tilefuse.compile_program(jax.jit(backward).lower(x, g, dy).as_text(), "vulkan")
    assert any("negated sum" in line for line in result.fusion.log), result.fusion.log
    assert all(r.status == "applied" for r in result.reports), [r.line() for r in result.reports]
    got = CompiledModule(result.vmfb, "vulkan").main(x, g, dy)
    for mine, want in zip(got, jax.jit(backward)(x, g, dy)):
        want = np.asarray(want, np.float64)
        assert np.max(np.abs(mine - want)) <= 1e-5 * np.max(np.abs(want))
