"""Transposes that move only extent-1 dims become reshapes
(hlo/unit_transposes.py): the IR after the rewrite, and the program on
Vulkan against numpy."""

import numpy as np
import tilefuse
from iree.compiler import ir
from support import filecheck
from tilefuse.hlo import unit_transposes

# jax.nn.dot_product_attention's [B, N, T, 1, S] -> [1, B, N, T, S] (the
# extent-1 dim moves, the others keep their order), a transpose that really
# moves data, and one that moves an extent-1 dim past another extent-1 dim.
TRANSPOSES = """func.func @main(%a: tensor<2x4x8x1x16xf32>, %b: tensor<2x4x8xf32>, %c: tensor<1x5x1x3xf32>)
    -> (tensor<1x2x4x8x16xf32>, tensor<2x8x4xf32>, tensor<5x1x1x3xf32>) {
  %0 = stablehlo.transpose %a, dims = [3, 0, 1, 2, 4] : (tensor<2x4x8x1x16xf32>) -> tensor<1x2x4x8x16xf32>
  %1 = stablehlo.transpose %b, dims = [0, 2, 1] : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %2 = stablehlo.transpose %c, dims = [1, 2, 0, 3] : (tensor<1x5x1x3xf32>) -> tensor<5x1x1x3xf32>
  %e = stablehlo.exponential %0 : tensor<1x2x4x8x16xf32>
  return %e, %1, %2 : tensor<1x2x4x8x16xf32>, tensor<2x8x4xf32>, tensor<5x1x1x3xf32>
}
"""


def test_transposes_of_unit_dims_become_reshapes(tmp_path):
    module = ir.Module.parse(TRANSPOSES, ir.Context())
    log = unit_transposes.rewrite_function(module.body.operations[0].operation)
    assert len(log) == 2 and all("moves only dims of extent 1" in line for line in log), log
    filecheck(
        str(module),
        """
CHECK: stablehlo.reshape %arg0 : (tensor<2x4x8x1x16xf32>) -> tensor<1x2x4x8x16xf32>
CHECK: stablehlo.transpose %arg1, dims = [0, 2, 1]
CHECK: stablehlo.reshape %arg2 : (tensor<1x5x1x3xf32>) -> tensor<5x1x1x3xf32>
""",
        tmp_path,
    )


# q @ swapaxes(k) at batch 1 as JAX writes it: the batch dim dropped after
# the transpose; and a reshape that merges dims (not moved).
DROPPED = """func.func @main(%k: tensor<1x4x100x32xf32>, %v: tensor<2x3x5xf32>) -> (tensor<4x32x100xf32>, tensor<15x2xf32>) {
  %0 = stablehlo.transpose %k, dims = [0, 1, 3, 2] : (tensor<1x4x100x32xf32>) -> tensor<1x4x32x100xf32>
  %1 = stablehlo.reshape %0 : (tensor<1x4x32x100xf32>) -> tensor<4x32x100xf32>
  %2 = stablehlo.transpose %v, dims = [1, 2, 0] : (tensor<2x3x5xf32>) -> tensor<3x5x2xf32>
  %3 = stablehlo.reshape %2 : (tensor<3x5x2xf32>) -> tensor<15x2xf32>
  return %1, %3 : tensor<4x32x100xf32>, tensor<15x2xf32>
}
"""


def test_a_reshape_dropping_unit_dims_moves_before_its_transpose(tmp_path):
    module = ir.Module.parse(DROPPED, ir.Context())
    log = unit_transposes.rewrite_function(module.body.operations[0].operation)
    assert len(log) == 1 and "moved before its transpose" in log[0], log
    filecheck(
        str(module),
        """
CHECK: %[[V:.*]] = stablehlo.reshape %arg0 : (tensor<1x4x100x32xf32>) -> tensor<4x100x32xf32>
CHECK: %[[T:.*]] = stablehlo.transpose %[[V]], dims = [0, 2, 1] : (tensor<4x100x32xf32>) -> tensor<4x32x100xf32>
CHECK: %[[U:.*]] = stablehlo.transpose %arg1, dims = [1, 2, 0]
CHECK: stablehlo.reshape %[[U]] : (tensor<3x5x2xf32>) -> tensor<15x2xf32>
CHECK: return %[[T]]
""",
        tmp_path,
    )


def test_rewritten_program_runs_on_vulkan():
    module = tilefuse.compile(TRANSPOSES, target="vulkan")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 4, 8, 1, 16)).astype(np.float32)
    b = rng.standard_normal((2, 4, 8)).astype(np.float32)
    c = rng.standard_normal((1, 5, 1, 3)).astype(np.float32)
    e, t, r = module.main(a, b, c)
    np.testing.assert_allclose(e, np.exp(a.transpose(3, 0, 1, 2, 4)), rtol=1e-6)
    np.testing.assert_array_equal(t, b.transpose(0, 2, 1))
    np.testing.assert_array_equal(r, c.transpose(1, 2, 0, 3))
