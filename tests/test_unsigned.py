"""Unsigned integer and complex programs (JAX's uint8 images, bit manipulation, FFT outputs).

IREE stores a ui8 tensor as i8 and records the declared type in the ABI
(`tensor<4xi8> {iree.abi.encoding = tensor<4xui8>}`): the runtime reads the
declared one, so a function takes and returns numpy uint8. Fusion groups
with unsigned results are kept (fusion/outline.py yields their signless
twin), where IREE refused them and tilefuse fell back to IREE's formation.
Both checked on lavapipe against numpy, exactly.
"""

import numpy as np
import tilefuse
from tilefuse.runtime import CompiledModule

# Unsigned semantics throughout: wrap-around add, unsigned compare, division
# and logical shift, and a convert to f32 (200 stays 200, not -56).
CHAIN = """func.func @main(%a: tensor<64x48xui8>, %b: tensor<64x48xui8>)
    -> (tensor<64x48xui8>, tensor<64x48xf32>) {
  %s = stablehlo.add %a, %b : tensor<64x48xui8>
  %c = stablehlo.constant dense<3> : tensor<64x48xui8>
  %d = stablehlo.divide %s, %c : tensor<64x48xui8>
  %one = stablehlo.constant dense<1> : tensor<64x48xui8>
  %h = stablehlo.shift_right_logical %a, %one : tensor<64x48xui8>
  %gt = stablehlo.compare GT, %a, %b, UNSIGNED : (tensor<64x48xui8>, tensor<64x48xui8>) -> tensor<64x48xi1>
  %m = stablehlo.select %gt, %d, %h : tensor<64x48xi1>, tensor<64x48xui8>
  %f = stablehlo.convert %a : (tensor<64x48xui8>) -> tensor<64x48xf32>
  %g = stablehlo.multiply %f, %f : tensor<64x48xf32>
  return %m, %g : tensor<64x48xui8>, tensor<64x48xf32>
}
"""


def test_unsigned_programs_keep_their_fusion_and_run_right():
    result = tilefuse.compile_program(CHAIN, "vulkan")
    assert not [n for n in result.notes if "FALLBACK" in n], result.notes
    assert all(r.status == "applied" for r in result.reports), [r.line() for r in result.reports]
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    assert [s.dtype for s in module.main.arg_specs] == ["ui8", "ui8"]
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, size=(64, 48), dtype=np.uint8)
    b = rng.integers(0, 256, size=(64, 48), dtype=np.uint8)
    m, g = module.main(a, b)
    assert m.dtype == np.uint8 and g.dtype == np.float32
    want = np.where(a > b, (a + b) // np.uint8(3), a >> np.uint8(1)).astype(np.uint8)
    np.testing.assert_array_equal(m, want)
    np.testing.assert_array_equal(g, a.astype(np.float32) ** 2)


COMPLEX = """func.func @main(%z: tensor<4xcomplex<f32>>) -> (tensor<4xcomplex<f32>>, tensor<4xf32>) {
  %0 = stablehlo.multiply %z, %z : tensor<4xcomplex<f32>>
  %1 = stablehlo.abs %z : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
  return %0, %1 : tensor<4xcomplex<f32>>, tensor<4xf32>
}
"""


def test_complex_arguments_and_results():
    """A complex tensor's type nests angle brackets (`tensor<4xcomplex<f32>>`)
    and holds an x: the ABI declaration was read as `4xcomple`, and every
    call raised a ValueError. Found by an unseen-program sweep."""
    result = tilefuse.compile_program(COMPLEX, "vulkan")
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    assert [(s.shape, s.dtype) for s in module.main.arg_specs] == [((4,), "complex<f32>")]
    z = (np.arange(4) + 1j * np.arange(4)[::-1]).astype(np.complex64)
    square, magnitude = module.main(z)
    assert square.dtype == np.complex64
    np.testing.assert_allclose(square, z * z, rtol=1e-6)
    np.testing.assert_allclose(magnitude, np.abs(z), rtol=1e-6)
