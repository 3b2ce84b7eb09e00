"""A scatter whose update windows sit between its scattered dims (JAX's
gradient of `img[b, :, y, x]`) is rewritten into its operand transposed so
that the windows come last (hlo/scatter_windows.py): plain iree-compile
cannot lower it for any target. Checked by FileCheck and against JAX on
the CPU on Vulkan (f32 sums of at most a few terms: 1e-5 relative)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tilefuse
from iree.compiler import ir
from support import filecheck
from tilefuse.hlo import scatter_windows
from tilefuse.runtime import CompiledModule
from tilefuse.toolchain import PhaseFailed

# The scatter-add JAX writes for the gradient of img[b, :, y, x].
MIDDLE_WINDOW = """func.func @main(%idx: tensor<2x12x12x3xi32>, %upd: tensor<2x12x12x8xf32>) -> tensor<2x8x16x20xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<2x8x16x20xf32>
  %r = "stablehlo.scatter"(%z, %idx, %upd) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [3], inserted_window_dims = [0, 2, 3], scatter_dims_to_operand_dims = [0, 2, 3], index_vector_dim = 3>, unique_indices = false}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<2x8x16x20xf32>, tensor<2x12x12x3xi32>, tensor<2x12x12x8xf32>) -> tensor<2x8x16x20xf32>
  return %r : tensor<2x8x16x20xf32>
}
"""


def test_the_window_moves_last_and_the_result_back(tmp_path):
    """The zeros JAX scatters into are made at the transposed shape (a
    transpose of a constant would be a fusion group IREE folds away)."""
    module = ir.Module.parse(MIDDLE_WINDOW, ir.Context())
    log = scatter_windows.rewrite_function(module.body.operations[0].operation)
    assert len(log) == 1 and "transposed by [0, 2, 3, 1]" in log[0], log
    filecheck(
        str(module),
        """
CHECK-NOT: tensor<2x8x16x20xf32> = stablehlo.constant
CHECK: %[[T:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<2x16x20x8xf32>
CHECK: %[[S:.*]] = "stablehlo.scatter"(%[[T]], %arg0, %arg1)
CHECK-SAME: update_window_dims = [3], inserted_window_dims = [0, 1, 2], scatter_dims_to_operand_dims = [0, 1, 2], index_vector_dim = 3
CHECK: -> tensor<2x16x20x8xf32>
CHECK: %[[R:.*]] = stablehlo.transpose %[[S]], dims = [0, 3, 1, 2] : (tensor<2x16x20x8xf32>) -> tensor<2x8x16x20xf32>
CHECK: return %[[R]]
""",
        tmp_path,
    )


def test_trailing_windows_are_left_alone():
    """An embedding gradient (rows scattered, the row a trailing window)."""
    text = MIDDLE_WINDOW.replace("2x8x16x20", "2x16x20x8").replace(
        "inserted_window_dims = [0, 2, 3], scatter_dims_to_operand_dims = [0, 2, 3]",
        "inserted_window_dims = [0, 1, 2], scatter_dims_to_operand_dims = [0, 1, 2]",
    )
    module = ir.Module.parse(text, ir.Context())
    assert scatter_windows.rewrite_function(module.body.operations[0].operation) == []


def test_plain_iree_cannot_compile_it(tmp_path):
    from tilefuse.targets import load_target
    from tilefuse.toolchain import iree_compile

    source = tmp_path / "scatter.mlir"
    source.write_text(MIDDLE_WINDOW)
    flags = load_target("vulkan").compile_flags
    with pytest.raises(PhaseFailed, match="expected indices to be equal to batch rank"):
        iree_compile([str(source), *flags, "-o", str(tmp_path / "x.vmfb")], "iree-compile")


def corner_gradient(img, y, x):
    b = jnp.arange(img.shape[0])[:, None, None]
    return jax.grad(lambda im: jnp.sum(jnp.sin(im[b, :, y, x])))(img)


@pytest.mark.parametrize("target", ["vulkan", "cuda"])
def test_the_gradient_of_a_channel_gather_compiles_and_is_right(target):
    rng = np.random.default_rng(0)
    img = rng.standard_normal((2, 8, 16, 20)).astype(np.float32)
    y = rng.integers(0, 16, (2, 12, 12)).astype(np.int32)
    x = rng.integers(0, 20, (2, 12, 12)).astype(np.int32)
    text = jax.jit(corner_gradient).lower(img, y, x).as_text()
    module = ir.Module.parse(text, ir.Context())
    main = next(op.operation for op in module.body.operations if "@main" in str(op))
    assert len(scatter_windows.rewrite_function(main)) == 1
    result = tilefuse.compile_program(text, target, strict=True)
    if target != "vulkan":
        return
    got = CompiledModule(result.vmfb, "vulkan").main(img, y, x)
    want = np.asarray(jax.jit(corner_gradient)(img, y, x))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_grid_sample_gradient_keeps_its_plan_and_is_right():
    """The gradient of a bilinear grid sample: its scatters need the
    rewrite, and its coordinate group repeats the clips of each corner.
    Outlined as twins, IREE's canonicalization of the region mapped
    results wrong and the whole fusion plan was dropped (37 dispatches on
    IREE's formation; fusion/outline.merge_twins). Plain iree-compile fails
    on the program."""
    from test_stacked_concats import grid_sample

    rng = np.random.default_rng(0)
    img = rng.standard_normal((2, 8, 16, 20)).astype(np.float32)
    grid = rng.uniform(-1, 1, (2, 12, 12, 2)).astype(np.float32)
    g = jax.jit(jax.grad(lambda i, gr: jnp.sum(jnp.sin(grid_sample(i, gr))), argnums=(0, 1)))
    result = tilefuse.compile_program(g.lower(img, grid).as_text(), "vulkan")
    assert not [n for n in result.notes if "FALLBACK" in n], result.notes
    got = CompiledModule(result.vmfb, "vulkan").main(img, grid)
    for mine, want in zip(got, g(img, grid)):
        want = np.asarray(want)
        np.testing.assert_allclose(mine, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
