"""JAX's idioms plan like the hand-written samples: each export in
tests/jax_idioms/ (the same math and shapes as a sample, written by
tests/jax_idioms/generate.py) gets the sample's dispatches and kernels, and
runs right on Vulkan against jax.jit on the CPU (2e-5 relative to the
largest output magnitude; argmax exact)."""

import sys
from pathlib import Path

import jax
import numpy as np
import pytest
import tilefuse
from support import filecheck
from tilefuse.hlo import broadcasts
from tilefuse.irutil import context
from tilefuse.paths import SAMPLES

HERE = Path(__file__).parent / "jax_idioms"
sys.path.insert(0, str(HERE))
from generate import IDIOMS


@pytest.mark.parametrize("name", sorted(IDIOMS))
def test_jax_export_plans_like_its_sample(name):
    fn, shapes, sample = IDIOMS[name]
    got = tilefuse.compile_program(HERE / f"{name}.mlir", "vulkan", strict=True)
    want = tilefuse.compile_program(SAMPLES / f"{sample}.mlir", "vulkan", strict=True)
    assert [r.strategy for r in got.reports] == [r.strategy for r in want.reports], [
        r.line() for r in got.reports
    ]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    out = tilefuse.CompiledModule(got.vmfb, "vulkan").main(*args)
    ref = np.asarray(jax.jit(fn)(*args))
    if ref.dtype.kind == "i":
        np.testing.assert_array_equal(out, ref)
    else:
        scale = max(1.0, float(np.abs(ref).max()))
        assert float(np.abs(out - ref).max()) <= 2e-5 * scale


KEEPDIMS = """
func.func @main(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1]
    : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
  %k = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<8xf32>) -> tensor<8x1xf32>
  %eps = stablehlo.constant dense<1.0e-5> : tensor<f32>
  %e = stablehlo.broadcast_in_dim %eps, dims = [] : (tensor<f32>) -> tensor<8x1xf32>
  %a = stablehlo.add %k, %e : tensor<8x1xf32>
  %r = stablehlo.rsqrt %a : tensor<8x1xf32>
  %b = stablehlo.broadcast_in_dim %r, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x16xf32>
  %y = stablehlo.multiply %x, %b : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
"""


def test_keepdims_math_is_sunk_and_the_chain_folded(tmp_path):
    from iree.compiler import ir

    module = ir.Module.parse(KEEPDIMS, context())
    func = module.body.operations[0].operation
    log = broadcasts.rewrite_function(func)
    assert len(log) == 3, log  # add and rsqrt sunk, one chain folded
    filecheck(
        str(module),
        """
CHECK: %[[S:.*]] = stablehlo.reduce
CHECK: %[[E:.*]] = stablehlo.broadcast_in_dim %{{.*}}, dims = [] : (tensor<f32>) -> tensor<8xf32>
CHECK: %[[A:.*]] = stablehlo.add %[[S]], %[[E]] : tensor<8xf32>
CHECK: %[[R:.*]] = stablehlo.rsqrt %[[A]] : tensor<8xf32>
CHECK: %[[B:.*]] = stablehlo.broadcast_in_dim %[[R]], dims = [0] : (tensor<8xf32>) -> tensor<8x16xf32>
CHECK: stablehlo.multiply %arg0, %[[B]]
CHECK-NOT: tensor<8x1xf32>
""",
        tmp_path,
    )


def test_a_real_broadcast_is_not_sunk():
    """[8, 1] -> [8, 16] broadcasts along a dim: math on it stays where it is."""
    from iree.compiler import ir

    wide = """
func.func @main(%x: tensor<8x1xf32>, %y: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %b = stablehlo.broadcast_in_dim %x, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x16xf32>
  %z = stablehlo.add %b, %y : tensor<8x16xf32>
  return %z : tensor<8x16xf32>
}
"""
    module = ir.Module.parse(wide, context())
    assert broadcasts.rewrite_function(module.body.operations[0].operation) == []


def test_one_broadcast_read_twice_is_sunk_once(tmp_path):
    """add %k, %k: the broadcast both operands read goes once (erasing it
    twice crashed the compiler)."""
    from iree.compiler import ir

    text = """
func.func @main(%x: tensor<8xf32>) -> tensor<8x16xf32> {
  %k = stablehlo.broadcast_in_dim %x, dims = [0] : (tensor<8xf32>) -> tensor<8x1xf32>
  %a = stablehlo.add %k, %k : tensor<8x1xf32>
  %b = stablehlo.broadcast_in_dim %a, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x16xf32>
  return %b : tensor<8x16xf32>
}
"""
    module = ir.Module.parse(text, context())
    assert len(broadcasts.rewrite_function(module.body.operations[0].operation)) == 2
    module.operation.verify()
    filecheck(
        str(module),
        """
CHECK: %[[A:.*]] = stablehlo.add %arg0, %arg0 : tensor<8xf32>
CHECK: stablehlo.broadcast_in_dim %[[A]], dims = [0] : (tensor<8xf32>) -> tensor<8x16xf32>
""",
        tmp_path,
    )
