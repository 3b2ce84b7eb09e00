"""f16 and bf16 products accumulate in f32, as XLA's do (hlo/wide_accumulators.py).

IR checks of the rewrite (bf16 and f16 widened, in a while body too; f32
left), then numerics on lavapipe: a bf16 and an f16 product with K = 4096
against float64 numpy, within 2 ulps of the type of the largest output (one
rounding of an f32 sum; accumulated in bf16 it was off by far more on an
H200, and in f16 by more than 2 f16 ulps here), with the matmul on a
tilefuse kernel.
"""

import ml_dtypes
import numpy as np
import pytest
import tilefuse
from iree.compiler import ir
from support import filecheck
from tilefuse.hlo import wide_accumulators
from tilefuse.runtime import CompiledModule

DOT = """func.func @main(%a: tensor<8x64x{t}>, %b: tensor<64x16x{t}>) -> tensor<8x16x{t}> {{
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<8x64x{t}>, tensor<64x16x{t}>) -> tensor<8x16x{t}>
  %1 = stablehlo.tanh %0 : tensor<8x16x{t}>
  return %1 : tensor<8x16x{t}>
}}
"""

# A JAX scan over two layers: the matmul is in the while loop's body.
SCAN = """func.func @main(%w: tensor<2x16x16xbf16>, %x: tensor<4x16xbf16>) -> tensor<4x16xbf16> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c2 = stablehlo.constant dense<2> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %h = %x) : tensor<i32>, tensor<4x16xbf16>
   cond {
    %lt = stablehlo.compare LT, %i, %c2 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %z = stablehlo.constant dense<0> : tensor<i32>
    %s = stablehlo.dynamic_slice %w, %i, %z, %z, sizes = [1, 16, 16]
      : (tensor<2x16x16xbf16>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x16x16xbf16>
    %wi = stablehlo.reshape %s : (tensor<1x16x16xbf16>) -> tensor<16x16xbf16>
    %y = stablehlo.dot_general %h, %wi, contracting_dims = [1] x [0]
      : (tensor<4x16xbf16>, tensor<16x16xbf16>) -> tensor<4x16xbf16>
    %n = stablehlo.add %i, %c1 : tensor<i32>
    stablehlo.return %n, %y : tensor<i32>, tensor<4x16xbf16>
  }
  return %r#1 : tensor<4x16xbf16>
}
"""


def _rewrite(text: str) -> tuple[str, list[str]]:
    module = ir.Module.parse(text, ir.Context())
    log = wide_accumulators.rewrite_function(module.body.operations[0].operation)
    return str(module), log


@pytest.mark.parametrize("t", ["bf16", "f16"])
def test_narrow_products_get_an_f32_result_and_a_convert(t, tmp_path):
    text, log = _rewrite(DOT.format(t=t))
    assert log == ["1 f16/bf16 contractions accumulate in f32 (XLA's precision)"]
    filecheck(
        text,
        f"""
CHECK: %[[P:.*]] = stablehlo.dot_general {{{{.*}}}} -> tensor<8x16xf32>
CHECK: %[[C:.*]] = stablehlo.convert %[[P]] : (tensor<8x16xf32>) -> tensor<8x16x{t}>
CHECK: stablehlo.tanh %[[C]] : tensor<8x16x{t}>
""",
        tmp_path,
    )


def test_f32_products_left_and_scan_bodies(tmp_path):
    text, log = _rewrite(DOT.format(t="f32"))
    assert log == [] and "convert" not in text, text
    text, log = _rewrite(SCAN)
    assert len(log) == 1, log
    filecheck(
        text,
        """
CHECK: stablehlo.while
CHECK: %[[P:.*]] = stablehlo.dot_general {{.*}} -> tensor<4x16xf32>
CHECK: %[[C:.*]] = stablehlo.convert %[[P]] : (tensor<4x16xf32>) -> tensor<4x16xbf16>
CHECK: stablehlo.return %{{.*}}, %[[C]]
""",
        tmp_path,
    )


# Mantissa bits of each narrow type: 2 ulps of the largest output bound one
# rounding of an f32 sum.
MANTISSA = {"bf16": (ml_dtypes.bfloat16, 8), "f16": (np.float16, 11)}


@pytest.mark.parametrize("t", ["bf16", "f16"])
def test_long_narrow_sums_are_rounded_once_on_lavapipe(t):
    m, k, n = 32, 4096, 64
    dtype, bits = MANTISSA[t]
    text = DOT.format(t=t).replace("8x64", f"{m}x{k}").replace("64x16", f"{k}x{n}")
    text = text.replace("8x16", f"{m}x{n}").replace("tanh", "abs")
    result = tilefuse.compile_program(text, "vulkan")
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    (report,) = module.reports
    assert report.strategy == "matmul" and report.status == "applied", report.line()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    want = np.abs(a.astype(np.float64) @ b.astype(np.float64))
    got = module.main(a, b).astype(np.float64)
    scale = np.max(want)
    assert np.max(np.abs(got - want)) <= 2 * 2**-bits * scale, (np.max(np.abs(got - want)), scale)
