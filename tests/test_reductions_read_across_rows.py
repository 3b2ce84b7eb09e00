"""A reduction and an op that reads its result across the rows it reduced,
in one dispatch: IREE 3.13's SPIR-V codegen computes it wrong (lavapipe:
row sums broadcast along columns off by 4.9, a column sum dividing its
columns by 0.97 relative, a softmax read transposed by 0.56;
docs/findings.md, 'A reduction read transposed in its own dispatch').
tilefuse's plan keeps the two apart, and never takes IREE's formation when
it holds one; with IREE's formation (--no-fusion) the dispatch stays on
IREE's codegen and the compile says it is wrong there. Tolerance: 1e-5
relative to the output's scale (f32 sums of 64)."""

import numpy as np
import pytest
import tilefuse
from tilefuse.dispatch.read import read_dispatches

# x.sum(1)[None, :] + y: IREE forms one dispatch for it.
ROW_SUMS_ALONG_COLUMNS = """func.func @main(%x: tensor<64x64xf32>, %y: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<64x64xf32>, tensor<f32>) -> tensor<64xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [1] : (tensor<64xf32>) -> tensor<64x64xf32>
  %o = stablehlo.add %sb, %y : tensor<64x64xf32>
  return %o : tensor<64x64xf32>
}
"""
# softmax(x) transposed and scaled per head (Flax BERT's head mask).
SOFTMAX_TRANSPOSED = """func.func @main(%x: tensor<2x4x16x16xf32>, %h: tensor<4xf32>) -> tensor<2x4x16x16xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %d = stablehlo.subtract %x, %mb : tensor<2x4x16x16xf32>
  %e = stablehlo.exponential %d : tensor<2x4x16x16xf32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %p = stablehlo.divide %e, %sb : tensor<2x4x16x16xf32>
  %t = stablehlo.transpose %p, dims = [0, 1, 3, 2] : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %hb = stablehlo.broadcast_in_dim %h, dims = [1] : (tensor<4xf32>) -> tensor<2x4x16x16xf32>
  %y = stablehlo.multiply %t, %hb : tensor<2x4x16x16xf32>
  return %y : tensor<2x4x16x16xf32>
}
"""


def _row_sums_case(rng):
    x, y = rng.standard_normal((2, 64, 64)).astype(np.float32)
    return (x, y), x.sum(1)[None, :] + y


def _softmax_case(rng):
    x = rng.standard_normal((2, 4, 16, 16)).astype(np.float32)
    h = rng.standard_normal(4).astype(np.float32)
    e = np.exp(x - x.max(-1, keepdims=True))
    return (x, h), np.swapaxes(e / e.sum(-1, keepdims=True), 2, 3) * h[None, :, None, None]


CASES = {
    "row_sums_along_columns": (ROW_SUMS_ALONG_COLUMNS, _row_sums_case),
    "softmax_transposed": (SOFTMAX_TRANSPOSED, _softmax_case),
}


@pytest.mark.parametrize("name", CASES)
def test_the_plan_keeps_them_apart_and_is_right(name):
    """Before: IREE's formation (one dispatch) was taken for the row sums
    against the plan's two; row_warp took its dispatch, failed in phase 3,
    and IREE's codegen computed it wrong."""
    text, case = CASES[name]
    result = tilefuse.compile_program(text, "vulkan")
    assert not [n for n in result.notes if "IREE's dispatches kept" in n], result.notes
    assert [r.status for r in result.reports] == ["applied"] * len(result.reports)
    args, want = case(np.random.default_rng(0))
    got = tilefuse.CompiledModule(result.vmfb, "vulkan", result.reports).main(*args)
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


@pytest.mark.parametrize("name", CASES)
def test_iree_formation_of_one_is_refused_by_kernels_and_warned_about(name, tmp_path):
    text, _ = CASES[name]
    result = tilefuse.compile_program(text, "vulkan", fusion=False, dump_dir=tmp_path)
    (report,) = result.reports
    assert report.status != "applied" and "across the rows it reduced" in report.reason
    (warning,) = [n for n in result.notes if n.startswith("WARNING")]
    assert report.name in warning and "computes it wrong on SPIR-V" in warning
    (dispatch,) = read_dispatches((tmp_path / "executable_sources.mlir").read_text())
    assert dispatch.transposed_reduction_read


def test_a_softmax_read_along_its_rows_is_not_flagged(tmp_path):
    """The reduction's result read row-aligned (broadcast along the reduced
    innermost dim) is what IREE gets right: no warning, a kernel."""
    text = SOFTMAX_TRANSPOSED.replace(
        "%t = stablehlo.transpose %p, dims = [0, 1, 3, 2]",
        "%t = stablehlo.transpose %p, dims = [0, 1, 2, 3]",
    )
    result = tilefuse.compile_program(text, "vulkan", fusion=False, dump_dir=tmp_path)
    assert not [n for n in result.notes if n.startswith("WARNING")]
    dispatches = read_dispatches((tmp_path / "executable_sources.mlir").read_text())
    assert dispatches and not any(d.transposed_reduction_read for d in dispatches)
