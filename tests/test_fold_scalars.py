"""Scalar arithmetic on constants folded before planning (hlo/fold_scalars.py).

IR checks of what folds and what stays, then jnp.var's form of a layer norm
(its divisor computed from ddof on scalars, a select on `n - ddof > 0`) on
Vulkan: one dispatch on a tilefuse kernel, against numpy within 1e-5.
"""

import numpy as np
import pytest
import tilefuse
from iree.compiler import ir
from support import filecheck
from tilefuse.hlo import fold_scalars
from tilefuse.runtime import CompiledModule


def _fold(body: str, results: str) -> tuple[str, list[str]]:
    text = f"func.func @main(%x: tensor<4xf32>) -> ({results}) {{\n{body}\n}}\n"
    module = ir.Module.parse(text, ir.Context())
    log = fold_scalars.rewrite_function(module.body.operations[0].operation)
    return str(module), log


def test_jnp_var_divisor_folds(tmp_path):
    text, log = _fold(
        """
  %ddof = stablehlo.constant dense<1> : tensor<i32>
  %n = stablehlo.constant dense<3.200000e+01> : tensor<f32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %nan = stablehlo.constant dense<0x7FC00000> : tensor<4xf32>
  %d = stablehlo.convert %ddof : (tensor<i32>) -> tensor<f32>
  %m = stablehlo.subtract %n, %d : tensor<f32>
  %ok = stablehlo.compare GT, %m, %zero, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %b = stablehlo.broadcast_in_dim %m, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %v = stablehlo.divide %x, %b : tensor<4xf32>
  %y = stablehlo.select %ok, %v, %nan : tensor<i1>, tensor<4xf32>
  return %y : tensor<4xf32>""",
        "tensor<4xf32>",
    )
    assert log == [
        (
            "3 scalar ops on constants folded, 1 selects on a constant predicate replaced "
            "by the operand they pick"
        )
    ]
    filecheck(
        text,
        """
CHECK: %[[M:.*]] = stablehlo.constant dense<3.100000e+01> : tensor<f32>
CHECK: %[[B:.*]] = stablehlo.broadcast_in_dim %[[M]]
CHECK: %[[V:.*]] = stablehlo.divide %arg0, %[[B]]
CHECK: return %[[V]]
""",
        tmp_path,
    )
    for gone in ("compare", "select", "convert", "subtract", "0x7FC00000"):
        assert gone not in text, text


@pytest.mark.parametrize(
    "line,kept",
    [
        # integer division by zero, an unsigned comparison, a float to
        # integer conversion out of range: no single answer to fold to
        ("%r = stablehlo.divide %i, %z : tensor<i32>", "stablehlo.divide"),
        # INT_MIN / -1 overflows i32 (numpy raised: the whole plan was dropped)
        ("%r = stablehlo.divide %min, %m1 : tensor<i32>", "stablehlo.divide"),
        (
            "%r = stablehlo.compare LT, %i, %z, UNSIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>",
            "stablehlo.compare",
        ),
        ("%r = stablehlo.convert %big : (tensor<f32>) -> tensor<i32>", "stablehlo.convert"),
        # an op on an argument
        (
            (
                "%r = stablehlo.reduce(%x init: %f) applies stablehlo.add across dimensions = [0]"
                " : (tensor<4xf32>, tensor<f32>) -> tensor<f32>"
            ),
            "stablehlo.reduce",
        ),
    ],
)
def test_what_has_no_single_answer_stays(line, kept):
    result = line.split(" -> ")[-1] if " -> " in line else line.split(" : ")[-1]
    text, log = _fold(
        f"""
  %i = stablehlo.constant dense<7> : tensor<i32>
  %z = stablehlo.constant dense<0> : tensor<i32>
  %min = stablehlo.constant dense<-2147483648> : tensor<i32>
  %m1 = stablehlo.constant dense<-1> : tensor<i32>
  %f = stablehlo.constant dense<0.0> : tensor<f32>
  %big = stablehlo.constant dense<3.0e+10> : tensor<f32>
  {line}
  return %r : {result}""",
        result,
    )
    assert log == [] and kept in text, (log, text)


def test_integer_division_truncates_toward_zero(tmp_path):
    text, _ = _fold(
        """
  %a = stablehlo.constant dense<-7> : tensor<i32>
  %b = stablehlo.constant dense<2> : tensor<i32>
  %r = stablehlo.divide %a, %b : tensor<i32>
  return %r : tensor<i32>""",
        "tensor<i32>",
    )
    filecheck(text, "CHECK: stablehlo.constant dense<-3> : tensor<i32>", tmp_path)


# jax.nn.standardize-like layer norm as jnp.var writes it (ddof = 0).
LAYERNORM = """func.func @main(%x: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %n = stablehlo.constant dense<1.280000e+02> : tensor<f32>
  %ddof = stablehlo.constant dense<0> : tensor<i32>
  %nan = stablehlo.constant dense<0x7FC00000> : tensor<f32>
  %eps = stablehlo.constant dense<1.000000e-05> : tensor<64x128xf32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<64x128xf32>, tensor<f32>) -> tensor<64xf32>
  %nb = stablehlo.broadcast_in_dim %n, dims = [] : (tensor<f32>) -> tensor<64xf32>
  %mean = stablehlo.divide %s, %nb : tensor<64xf32>
  %mb = stablehlo.broadcast_in_dim %mean, dims = [0] : (tensor<64xf32>) -> tensor<64x128xf32>
  %c = stablehlo.subtract %x, %mb : tensor<64x128xf32>
  %sq = stablehlo.multiply %c, %c : tensor<64x128xf32>
  %ss = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<64x128xf32>, tensor<f32>) -> tensor<64xf32>
  %d = stablehlo.convert %ddof : (tensor<i32>) -> tensor<f32>
  %m = stablehlo.subtract %n, %d : tensor<f32>
  %mbb = stablehlo.broadcast_in_dim %m, dims = [] : (tensor<f32>) -> tensor<64xf32>
  %var0 = stablehlo.divide %ss, %mbb : tensor<64xf32>
  %ok = stablehlo.compare GT, %m, %zero, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %nanb = stablehlo.broadcast_in_dim %nan, dims = [] : (tensor<f32>) -> tensor<64xf32>
  %var = stablehlo.select %ok, %var0, %nanb : tensor<i1>, tensor<64xf32>
  %vb = stablehlo.broadcast_in_dim %var, dims = [0] : (tensor<64xf32>) -> tensor<64x128xf32>
  %ve = stablehlo.add %vb, %eps : tensor<64x128xf32>
  %r = stablehlo.rsqrt %ve : tensor<64x128xf32>
  %y = stablehlo.multiply %c, %r : tensor<64x128xf32>
  return %y : tensor<64x128xf32>
}
"""


def test_layernorm_with_jnp_var_is_one_kernel_on_lavapipe():
    result = tilefuse.compile_program(LAYERNORM, "vulkan")
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    lines = [r.line() for r in module.reports]
    assert len(module.reports) == 1 and module.reports[0].status == "applied", lines
    x = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
    c = x - x.mean(axis=1, keepdims=True)
    want = c / np.sqrt((c * c).mean(axis=1, keepdims=True) + 1e-5)
    assert np.max(np.abs(module.main(x) - want)) <= 1e-5 * np.max(np.abs(want))


def test_nan_propagates_and_integers_wrap(tmp_path):
    text, _ = _fold(
        """
  %n = stablehlo.constant dense<0x7FC00000> : tensor<f32>
  %o = stablehlo.constant dense<1.0> : tensor<f32>
  %a = stablehlo.maximum %o, %n : tensor<f32>
  %c = stablehlo.compare NE, %n, %n, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %i = stablehlo.constant dense<2147483647> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %e = stablehlo.add %i, %one : tensor<i32>
  return %a, %c, %e : tensor<f32>, tensor<i1>, tensor<i32>""",
        "tensor<f32>, tensor<i1>, tensor<i32>",
    )
    filecheck(
        text,
        """
CHECK: %[[A:.*]] = stablehlo.constant dense<0x7FC00000> : tensor<f32>
CHECK: %[[C:.*]] = stablehlo.constant dense<true> : tensor<i1>
CHECK: %[[E:.*]] = stablehlo.constant dense<-2147483648> : tensor<i32>
CHECK: return %[[A]], %[[C]], %[[E]]
""",
        tmp_path,
    )
