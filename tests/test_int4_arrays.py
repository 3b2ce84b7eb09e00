"""4-bit integer arguments and results from Python: numpy holds them one per
byte (ml_dtypes.int4 / uint4, what JAX's jnp.int4 arrays convert to), IREE two
per byte; runtime.py packs the arguments and unpacks the results."""

import ml_dtypes
import numpy as np
import pytest
import tilefuse

# IREE 3.13 takes whole bytes only (a tensor<15xi4> fails to compile).
DEQUANT = """func.func @main(%w: tensor<3x4x{t}>, %s: tensor<3x1xf32>) -> (tensor<3x4xf32>, tensor<3x4x{t}>) {{
  %f = stablehlo.convert %w : (tensor<3x4x{t}>) -> tensor<3x4xf32>
  %b = stablehlo.broadcast_in_dim %s, dims = [0, 1] : (tensor<3x1xf32>) -> tensor<3x4xf32>
  %r = stablehlo.multiply %f, %b : tensor<3x4xf32>
  %n = stablehlo.not %w : tensor<3x4x{t}>
  return %r, %n : tensor<3x4xf32>, tensor<3x4x{t}>
}}"""


@pytest.mark.parametrize("element", ["i4", "ui4"])
def test_int4_arguments_and_results_round_trip_on_vulkan(element):
    dtype = ml_dtypes.int4 if element == "i4" else ml_dtypes.uint4
    module = tilefuse.compile(DEQUANT.format(t=element), target="vulkan")
    lo, hi = (-8, 8) if element == "i4" else (0, 16)
    w = (np.arange(12).reshape(3, 4) % (hi - lo) + lo).astype(dtype)
    s = np.array([[0.5], [-1.0], [2.0]], np.float32)
    scaled, inverted = module.main(w, s)
    np.testing.assert_array_equal(scaled, w.astype(np.float32) * s)
    assert inverted.dtype == dtype and inverted.shape == (3, 4)
    np.testing.assert_array_equal(
        inverted.astype(np.int32),
        ~w.astype(np.int32) & 0xF if element == "ui4" else ~w.astype(np.int32),
    )


def test_an_int8_array_for_an_int4_argument_is_refused():
    module = tilefuse.compile(DEQUANT.format(t="i4"), target="vulkan")
    with pytest.raises(tilefuse.TilefuseError, match="argument 0 of main: expected tensor<3x4xi4>"):
        module.main(np.zeros((3, 4), np.int8), np.ones((3, 1), np.float32))
