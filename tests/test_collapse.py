"""collapse.py on phase 1's executable sources: a column reduction with
several reduced or kept loops becomes (batch?, kept, reduced) loops over
re-viewed bindings, and says so; one it cannot rewrite is left and says why."""

import numpy as np
import tilefuse
from support import filecheck
from tilefuse import driver
from tilefuse.dispatch.collapse import collapse_column_reductions
from tilefuse.frontend import load_program
from tilefuse.targets import load_target

# Sum over the three outer dims of [2, 3, 4, 64]: loops (kept, r, r, r)
# before, (kept, reduced) after.
RANK4 = """func.func @main(%x: tensor<2x3x4x64xf32>) -> tensor<64xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0, 1, 2]
    : (tensor<2x3x4x64xf32>, tensor<f32>) -> tensor<64xf32>
  return %s : tensor<64xf32>
}
"""


def _sources(text, tmp_path):
    """Phase 1's executable sources of `text` with its fusion groups outlined
    (IREE collapses the loops of the dispatches it forms itself)."""
    target = load_target("vulkan")
    fused, _ = driver.outline_stage(load_program(text), target, tmp_path, {})
    source = driver.phase1_input(fused, target, tmp_path)
    return driver.phase1_executable_sources(source, target, tmp_path).read_text()


def test_rank4_column_reduction_is_collapsed(tmp_path):
    sources = _sources(RANK4, tmp_path)
    collapsed, (line,) = collapse_column_reductions(sources)
    assert "collapsed to ['parallel', 'reduction']" in line, line
    filecheck(
        collapsed,
        """
CHECK: dispatch.tensor.load {{.*}} -> tensor<24x64xf32>
CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
CHECK: dispatch.tensor.store {{.*}} tensor<64xf32>
""",
        tmp_path,
    )
    # The collapsed dispatch still computes the sum (column_reduction kernel).
    result = tilefuse.compile_program(RANK4, "vulkan", strict=True)
    assert any("collapsed" in line for line in result.log), result.log
    x = np.random.default_rng(0).random((2, 3, 4, 64), np.float32)
    got = tilefuse.CompiledModule(result.vmfb, "vulkan").main(x)
    np.testing.assert_allclose(got, x.astype(np.float64).sum((0, 1, 2)), rtol=1e-5)


def test_rows_and_collapsed_roots_are_left_silently(tmp_path):
    rows = RANK4.replace("across dimensions = [0, 1, 2]", "across dimensions = [3]").replace(
        "tensor<64xf32>", "tensor<2x3x4xf32>"
    )
    sources = _sources(rows, tmp_path)
    collapsed, log = collapse_column_reductions(sources)
    assert collapsed is sources and log == []


def test_column_reduction_it_cannot_rewrite_says_why(tmp_path):
    # The reduce reads a slice of its input: IREE folds the slice into the
    # load, which then reads part of the binding, so the binding cannot be
    # re-viewed with merged dims.
    sliced = RANK4.replace("%x: tensor<2x3x4x64xf32>", "%w: tensor<2x3x4x128xf32>").replace(
        "  %z = stablehlo.constant",
        "  %x = stablehlo.slice %w [0:2, 0:3, 0:4, 0:64]"
        " : (tensor<2x3x4x128xf32>) -> tensor<2x3x4x64xf32>\n  %z = stablehlo.constant",
    )
    sources = _sources(sliced, tmp_path)
    collapsed, log = collapse_column_reductions(sources)
    assert collapsed is sources
    assert log and "not collapsed: input 0 is not a whole-binding load" in log[0], log
