"""Reductions over extent-1 dims become reshapes (hlo/unit_reduces.py), and
sibling reductions are not merged into a group the softmax kernel refuses
when it takes each alone (fusion/planner.FuncPlan.kernel_lost). IR checks,
then the programs run on Vulkan against numpy."""

import numpy as np
import tilefuse
from iree.compiler import ir
from support import filecheck, fusion_plan
from tilefuse.hlo import unit_reduces

# A bias gradient as JAX writes it for a [1, N] bias, a keepdims [M, 1] sum,
# and two reduces that must stay: a max whose init is not its identity, and
# a sum over an extent-1 dim and an extent-8 one.
UNIT = """func.func @main(%a: tensor<1x64xf32>, %b: tensor<32x1xf32>, %c: tensor<8x1xi32>)
    -> (tensor<64xf32>, tensor<32xf32>, tensor<8xi32>, tensor<f32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %0 = stablehlo.reduce(%a init: %zero) applies stablehlo.add across dimensions = [0]
      : (tensor<1x64xf32>, tensor<f32>) -> tensor<64xf32>
  %1 = stablehlo.reduce(%b init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<32x1xf32>, tensor<f32>) -> tensor<32xf32>
  %2 = stablehlo.reduce(%c init: %one) applies stablehlo.maximum across dimensions = [1]
      : (tensor<8x1xi32>, tensor<i32>) -> tensor<8xi32>
  %3 = stablehlo.reduce(%b init: %zero) applies stablehlo.add across dimensions = [0, 1]
      : (tensor<32x1xf32>, tensor<f32>) -> tensor<f32>
  return %0, %1, %2, %3 : tensor<64xf32>, tensor<32xf32>, tensor<8xi32>, tensor<f32>
}
"""


def test_unit_reduces_become_reshapes(tmp_path):
    module = ir.Module.parse(UNIT, ir.Context())
    func = module.body.operations[0].operation
    log = unit_reduces.rewrite_function(func)
    assert len(log) == 2 and all("over dims of extent 1" in line for line in log), log
    filecheck(
        str(module),
        """
CHECK: stablehlo.reshape %arg0 : (tensor<1x64xf32>) -> tensor<64xf32>
CHECK: stablehlo.reshape %arg1 : (tensor<32x1xf32>) -> tensor<32xf32>
CHECK: stablehlo.reduce(%arg2 init:
CHECK-SAME: across dimensions = [1]
CHECK: stablehlo.reduce(%arg1 init:
CHECK-SAME: across dimensions = [0, 1]
CHECK-NOT: stablehlo.reduce
""",
        tmp_path,
    )


def test_unit_reduces_run():
    module = tilefuse.compile(UNIT, target="vulkan")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1, 64)).astype(np.float32)
    b = rng.standard_normal((32, 1)).astype(np.float32)
    c = rng.integers(-5, 5, (8, 1)).astype(np.int32)
    s, t, m, total = module.main(a, b, c)
    np.testing.assert_array_equal(s, a[0])
    np.testing.assert_array_equal(t, b[:, 0])
    np.testing.assert_array_equal(m, np.maximum(c[:, 0], 1))
    np.testing.assert_allclose(total, b.sum(), rtol=1e-5)


# argmax and argmin of one row of integers, as JAX lowers them: after
# hlo/argminmax.py each is two chained reductions of x (an integer is its own
# key), which the softmax kernel takes; the two together (siblings: both
# reduce x) would store two rows, which it does not.
ARGMAX_ARGMIN_BODY = """  %iota = stablehlo.iota dim = 1 : tensor<16x96xi32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %lowest = stablehlo.constant dense<-2147483648> : tensor<i32>
  %highest = stablehlo.constant dense<2147483647> : tensor<i32>
  %0:2 = stablehlo.reduce(%x init: %lowest), (%iota init: %zero) across dimensions = [1]
      : (tensor<16x96xi32>, tensor<16x96xi32>, tensor<i32>, tensor<i32>) -> (tensor<16xi32>, tensor<16xi32>)
   reducer(%a: tensor<i32>, %b: tensor<i32>) (%i: tensor<i32>, %j: tensor<i32>) {
    %gt = stablehlo.compare GT, %a, %b, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %nan = stablehlo.compare NE, %a, %a, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %pick = stablehlo.or %gt, %nan : tensor<i1>
    %eq = stablehlo.compare EQ, %a, %b, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %lt = stablehlo.compare LT, %i, %j, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %tie = stablehlo.and %eq, %lt : tensor<i1>
    %first = stablehlo.or %pick, %tie : tensor<i1>
    %v = stablehlo.select %pick, %a, %b : tensor<i1>, tensor<i32>
    %k = stablehlo.select %first, %i, %j : tensor<i1>, tensor<i32>
    stablehlo.return %v, %k : tensor<i32>, tensor<i32>
  }
  %1:2 = stablehlo.reduce(%x init: %highest), (%iota init: %zero) across dimensions = [1]
      : (tensor<16x96xi32>, tensor<16x96xi32>, tensor<i32>, tensor<i32>) -> (tensor<16xi32>, tensor<16xi32>)
   reducer(%a: tensor<i32>, %b: tensor<i32>) (%i: tensor<i32>, %j: tensor<i32>) {
    %lt = stablehlo.compare LT, %a, %b, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %nan = stablehlo.compare NE, %a, %a, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %pick = stablehlo.or %lt, %nan : tensor<i1>
    %eq = stablehlo.compare EQ, %a, %b, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %ilt = stablehlo.compare LT, %i, %j, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %tie = stablehlo.and %eq, %ilt : tensor<i1>
    %first = stablehlo.or %pick, %tie : tensor<i1>
    %v = stablehlo.select %pick, %a, %b : tensor<i1>, tensor<i32>
    %k = stablehlo.select %first, %i, %j : tensor<i1>, tensor<i32>
    stablehlo.return %v, %k : tensor<i32>, tensor<i32>
  }
  return %0#1, %1#1 : tensor<16xi32>, tensor<16xi32>"""
ARGS, RESULTS = "%x: tensor<16x96xi32>", "(tensor<16xi32>, tensor<16xi32>)"


def test_siblings_keep_the_kernel_each_takes():
    plan, _ = fusion_plan(ARGMAX_ARGMIN_BODY, ARGS, RESULTS)
    groups = plan.outlined()
    assert [g.kind for g in groups] == ["softmax-like", "softmax-like"], plan.all_groups()
    assert any("the softmax kernel takes each part, not both together" in line for line in plan.log)


def test_argmax_and_argmin_of_one_row_run_as_two_softmax_kernels():
    _, text = fusion_plan(ARGMAX_ARGMIN_BODY, ARGS, RESULTS)
    module = tilefuse.compile(text, target="vulkan")
    assert [r.strategy for r in module.reports] == ["softmax", "softmax"], [
        r.line() for r in module.reports
    ]
    rng = np.random.default_rng(1)
    x = rng.integers(-1000, 1000, (16, 96)).astype(np.int32)
    x[3, 7] = x[3, 50] = 5000  # ties: the first index wins
    x[4, 9] = x[4, 60] = -5000
    hi, lo = module.main(x)
    np.testing.assert_array_equal(hi, np.argmax(x, axis=1))
    np.testing.assert_array_equal(lo, np.argmin(x, axis=1))


# jnp.take's bounds check: `all` over the index vector's one dim, and an
# `or` from false; an `and` from false (not its identity) stays a reduce.
BOOLEAN = """func.func @main(%i: tensor<2x16x1xi32>, %n: tensor<2x16x1xi32>)
    -> (tensor<2x16xi1>, tensor<2x16xi1>, tensor<2x16xi1>) {
  %zero = stablehlo.constant dense<0> : tensor<2x16x1xi32>
  %ge = stablehlo.compare GE, %i, %zero, SIGNED : (tensor<2x16x1xi32>, tensor<2x16x1xi32>) -> tensor<2x16x1xi1>
  %lt = stablehlo.compare LT, %i, %n, SIGNED : (tensor<2x16x1xi32>, tensor<2x16x1xi32>) -> tensor<2x16x1xi1>
  %in = stablehlo.and %ge, %lt : tensor<2x16x1xi1>
  %true = stablehlo.constant dense<true> : tensor<i1>
  %false = stablehlo.constant dense<false> : tensor<i1>
  %all = stablehlo.reduce(%in init: %true) applies stablehlo.and across dimensions = [2]
      : (tensor<2x16x1xi1>, tensor<i1>) -> tensor<2x16xi1>
  %any = stablehlo.reduce(%in init: %false) applies stablehlo.or across dimensions = [2]
      : (tensor<2x16x1xi1>, tensor<i1>) -> tensor<2x16xi1>
  %none = stablehlo.reduce(%in init: %false) applies stablehlo.and across dimensions = [2]
      : (tensor<2x16x1xi1>, tensor<i1>) -> tensor<2x16xi1>
  return %all, %any, %none : tensor<2x16xi1>, tensor<2x16xi1>, tensor<2x16xi1>
}
"""


def test_boolean_unit_reduces_become_reshapes():
    """Each was a group no kernel takes (T5: a retry and a dispatch of its
    own per embedding lookup); as reshapes they fold into their readers."""
    module = ir.Module.parse(BOOLEAN, ir.Context())
    log = unit_reduces.rewrite_function(module.body.operations[0].operation)
    assert [line.split("-reduction")[0] for line in log] == ["and", "or"], log
    assert str(module).count("stablehlo.reduce") == 1
    result = tilefuse.compile_program(BOOLEAN, "vulkan")
    module = tilefuse.CompiledModule(result.vmfb, "vulkan", result.reports)
    rng = np.random.default_rng(5)
    i = rng.integers(-3, 20, (2, 16, 1)).astype(np.int32)
    n = np.full((2, 16, 1), 16, np.int32)
    inside = ((i >= 0) & (i < n))[..., 0]
    got_all, got_any, got_none = module.main(i, n)
    np.testing.assert_array_equal(got_all, inside)
    np.testing.assert_array_equal(got_any, inside)
    np.testing.assert_array_equal(got_none, np.zeros_like(inside))
