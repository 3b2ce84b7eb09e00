"""Each fusion rule on a small StableHLO snippet, checked on the outlined
module (FileCheck) and on the plan's groups. Planning only: no iree-compile."""

import pytest
import tilefuse
from support import filecheck
from support import fusion_plan as plan
from tilefuse.fusion import fuse
from tilefuse.fusion.dump import outlined_functions
from tilefuse.strategies import catalogue

VULKAN = tilefuse.load_target("vulkan")


def kinds(p):
    return [(g.kind, g.outlined) for g in p.all_groups()]


def test_loop_fuses_elementwise_and_broadcast_both_ways(tmp_path):
    p, _ = plan(
        """  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<16xf32>) -> tensor<8x16xf32>
  %0 = stablehlo.multiply %a, %bb : tensor<8x16xf32>
  %1 = stablehlo.tanh %0 : tensor<8x16xf32>
  %2 = stablehlo.convert %1 : (tensor<8x16xf32>) -> tensor<8x16xf16>
  return %2 : tensor<8x16xf16>""",
        "%a: tensor<8x16xf32>, %b: tensor<16xf32>",
        "tensor<8x16xf16>",
    )
    assert kinds(p) == [("loop", True)]
    filecheck(
        p.text,
        """
CHECK: flow.dispatch.region -> (tensor<8x16xf16>) attributes {tilefuse.fusion_kind = "loop", tilefuse.group = "main_loop_convert_3", tilefuse.hero = "stablehlo.convert"}
CHECK-NEXT: stablehlo.broadcast_in_dim
CHECK-NEXT: stablehlo.multiply
CHECK-NEXT: stablehlo.tanh
CHECK-NEXT: stablehlo.convert
CHECK-NEXT: flow.return
CHECK-NOT: flow.dispatch.region
""",
        tmp_path,
    )


RMS = """  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sq = stablehlo.multiply %x, %x : tensor<4xNxf32>
  %ss = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4xNxf32>, tensor<f32>) -> tensor<4xf32>
  %r = stablehlo.rsqrt %ss : tensor<4xf32>
  %rb = stablehlo.broadcast_in_dim %r, dims = [0] : (tensor<4xf32>) -> tensor<4xNxf32>
  %y = stablehlo.multiply %x, %rb : tensor<4xNxf32>
  return %y : tensor<4xNxf32>"""


def test_reduction_takes_producers_and_broadcast_consumers(tmp_path):
    p, _ = plan(RMS.replace("N", "64"), "%x: tensor<4x64xf32>", "tensor<4x64xf32>")
    assert kinds(p) == [("softmax-like", True)]
    # The splat init value is cloned into the region.
    filecheck(
        p.text,
        """
CHECK-NOT: stablehlo.constant
CHECK: flow.dispatch.region {{.*}}tilefuse.fusion_kind = "softmax-like"
CHECK-NEXT: stablehlo.constant dense<0.000000e+00>
CHECK-NEXT: stablehlo.multiply
CHECK-NEXT: stablehlo.reduce
CHECK: stablehlo.rsqrt
CHECK-NEXT: stablehlo.broadcast_in_dim
CHECK-NEXT: stablehlo.multiply
CHECK-NEXT: flow.return
""",
        tmp_path,
    )


def test_row_longer_than_shared_memory_stays_one_group():
    # 10000 f32 = 40000 bytes > lavapipe's 32 KiB: still one softmax-like
    # group, which the softmax kernel takes (it keeps no row on chip).
    p, _ = plan(RMS.replace("N", "10000"), "%x: tensor<4x10000xf32>", "tensor<4x10000xf32>")
    assert ("softmax-like", True) in kinds(p)
    assert not any("shared memory" in line for line in p.log)


SOFTMAX = """  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<4x64xf32>, tensor<f32>) -> tensor<4xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<4xf32>) -> tensor<4x64xf32>
  %d = stablehlo.subtract %x, %mb : tensor<4x64xf32>
  %e = stablehlo.exponential %d : tensor<4x64xf32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x64xf32>, tensor<f32>) -> tensor<4xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<4xf32>) -> tensor<4x64xf32>
  %y = stablehlo.divide %e, %sb : tensor<4x64xf32>
  return %y : tensor<4x64xf32>"""


def test_softmax_is_one_outlined_group_for_the_softmax_kernel(tmp_path):
    p, _ = plan(SOFTMAX, "%x: tensor<4x64xf32>", "tensor<4x64xf32>")
    (group,) = p.all_groups()
    assert group.kind == "softmax-like" and len(group.members) == 7
    # The softmax strategy (strategies/softmax.py) takes the group, so it is
    # outlined as one region (tests/test_softmax.py runs the kernel).
    assert group.outlined, group.why_not_outlined
    filecheck(
        p.text,
        """
CHECK: flow.dispatch.region {{.*}}tilefuse.fusion_kind = "softmax-like"
CHECK: stablehlo.reduce
CHECK: stablehlo.exponential
CHECK: stablehlo.reduce
CHECK: stablehlo.divide
CHECK-NEXT: flow.return
""",
        tmp_path,
    )


def test_softmax_the_kernel_refuses_is_split(tmp_path):
    # Returning the row sums too: the planner keeps the divide out (the group
    # would return the sums and put them back over the rows: IREE keeps them
    # an op of its own over one value per row), and the group left, max through sum,
    # has two results (exp(x - max) for the divide, the sums), which the
    # softmax kernel refuses (it stores one). The split plan cuts it after
    # the first result its own ops read again: exp(x - max) as one kernel,
    # the sum of it as another; the plan says so.
    two = SOFTMAX.replace(
        "  return %y : tensor<4x64xf32>", "  return %y, %s : tensor<4x64xf32>, tensor<4xf32>"
    )
    p, _ = plan(two, "%x: tensor<4x64xf32>", "(tensor<4x64xf32>, tensor<4xf32>)")
    assert [(g.kind, g.members, g.outlined) for g in p.all_groups()] == [
        ("softmax-like", [2, 3, 4, 5], True),
        ("row-reduction", [6], True),
        ("loop", [7, 8], True),
    ]
    (line,) = [line for line in p.log if "split into" in line]
    assert "2 results" in line and "main_row_reduction_reduce_6" in line
    assert any(
        "put op 6 (reduce) back over the rows and also use it otherwise (returned)" in line
        for line in p.log
    ), p.log


LOGSUMEXP = """  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<4x64xf32>, tensor<f32>) -> tensor<4xf32>
  %k = stablehlo.negate %m : tensor<4xf32>
  %kb = stablehlo.broadcast_in_dim %k, dims = [0] : (tensor<4xf32>) -> tensor<4x64xf32>
  %d = stablehlo.add %x, %kb : tensor<4x64xf32>
  %e = stablehlo.exponential %d : tensor<4x64xf32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x64xf32>, tensor<f32>) -> tensor<4xf32>
  %l = stablehlo.log %s : tensor<4xf32>
  %y = stablehlo.subtract %l, %k : tensor<4xf32>
  return %y : tensor<4xf32>"""


def test_a_row_value_put_back_and_read_again_ends_its_group():
    """logsumexp: -max is put back over the rows and read again by the
    epilogue. Nothing would be recomputed in one group (index safety reads
    -max at its row both ways), but IREE keeps -max an op of its own over one
    value per row, which the softmax kernel refuses beside its root: the
    max ends its group, and the sum's group reads -max from memory."""
    p, _ = plan(LOGSUMEXP, "%x: tensor<4x64xf32>", "tensor<4xf32>", "cuda")
    assert [(g.kind, g.members) for g in p.all_groups()] == [
        ("row-reduction", [2, 3]),
        ("row-reduction", [4, 5, 6, 7, 8, 9]),
    ]
    assert any(
        "reduction-chain: op 3 -> op 9 not fused: the softmax-like group would put op 3 "
        "(negate) back over the rows and also use it otherwise (op 9)" in line
        for line in p.log
    ), p.log
    assert not any("indexings" in line for line in p.log), p.log


def test_softmax_the_kernel_refuses_unsplit_is_left_to_iree(tmp_path):
    # More rows than the kernel has workgroups for, an odd count that
    # row_warp cannot pack several to a workgroup either: the kernel refuses
    # the group and no result of it is read again inside, so there is no
    # split; the chained reductions go to IREE's own dispatch formation (in
    # one region IREE's default codegen would recompute the max per tile),
    # and the plan says why.
    tall = SOFTMAX.replace("4x64", "70001x64").replace("tensor<4xf32>", "tensor<70001xf32>")
    p, text = plan(tall, "%x: tensor<70001x64xf32>", "tensor<70001x64xf32>")
    (group,) = [g for g in p.all_groups() if g.kind == "softmax-like"]
    assert not group.outlined
    assert "chained reductions" in group.why_not_outlined
    assert "70001 rows > 65535 workgroups" in group.why_not_outlined
    filecheck(
        outlined_functions(text, VULKAN, catalogue()),
        """
CHECK: func.func private @main_softmax_like_reduce_2
CHECK-SAME: tilefuse.fusion_kind = "softmax-like", tilefuse.hero = "stablehlo.reduce", tilefuse.left_to_iree
CHECK: stablehlo.reduce
CHECK: stablehlo.exponential
CHECK: stablehlo.reduce
""",
        tmp_path,
    )


def test_sibling_reductions_share_a_multi_output_group(tmp_path):
    p, _ = plan(
        """  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %one = stablehlo.constant dense<1.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<8x32xf32>, tensor<f32>) -> tensor<8xf32>
  %m = stablehlo.reduce(%x init: %one) applies stablehlo.multiply across dimensions = [1] : (tensor<8x32xf32>, tensor<f32>) -> tensor<8xf32>
  return %s, %m : tensor<8xf32>, tensor<8xf32>""",
        "%x: tensor<8x32xf32>",
        "(tensor<8xf32>, tensor<8xf32>)",
    )
    assert kinds(p) == [("row-reduction", True)]
    filecheck(
        p.text,
        """
CHECK: %[[R:.*]]:2 = flow.dispatch.region -> (tensor<8xf32>, tensor<8xf32>) {{.*}}"row-reduction"
CHECK: stablehlo.reduce
CHECK: stablehlo.reduce
CHECK: flow.return
CHECK: return %[[R]]#0, %[[R]]#1
""",
        tmp_path,
    )


SIBLING_SUM_MAX = """  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [2] : (tensor<8x16x24xf32>, tensor<f32>) -> tensor<8x16xf32>
  %m = stablehlo.reduce(%x init: %zero) applies stablehlo.maximum across dimensions = [2] : (tensor<8x16x24xf32>, tensor<f32>) -> tensor<8x16xf32>
  return %s, %m : tensor<8x16xf32>, tensor<8x16xf32>"""


def test_sibling_row_reductions_stay_apart_on_cuda():
    """IREE's CUDA codegen fails on a dispatch of several row-reduction
    results (lax_reduce in the corpus) and no tilefuse kernel stores several:
    on CUDA the siblings keep groups of their own."""
    args, results = "%x: tensor<8x16x24xf32>", "(tensor<8x16xf32>, tensor<8x16xf32>)"
    cuda, _ = plan(SIBLING_SUM_MAX, args, results, target="cuda")
    assert kinds(cuda) == [("row-reduction", True), ("row-reduction", True)]
    assert any("would return 2 reductions" in line for line in cuda.log), cuda.log
    vulkan, _ = plan(SIBLING_SUM_MAX.replace("maximum", "multiply"), args, results)
    assert kinds(vulkan) == [("row-reduction", True)]
    # Integer siblings stay apart on SPIR-V too (lax_reduce_i16/i32/i64).
    integer = SIBLING_SUM_MAX.replace("f32", "i32").replace("0.0", "0")
    vulkan_i32, _ = plan(integer, args.replace("f32", "i32"), results.replace("f32", "i32"))
    assert kinds(vulkan_i32) == [("row-reduction", True), ("row-reduction", True)]


def test_sibling_row_reductions_compile_on_cuda_without_a_fallback():
    text = f"func.func @main(%x: tensor<8x16x24xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {{\n{SIBLING_SUM_MAX}\n}}\n"
    result = tilefuse.compile_program(text, "cuda")
    assert not [n for n in result.notes if "FALLBACK" in n], result.notes
    assert [r.strategy for r in result.reports] == ["row_reduction", "row_reduction"]


def test_loop_groups_keep_one_iteration_space(tmp_path):
    """Two updates of different shapes sharing a scalar (Adam's step size):
    one group of both would be a dispatch of two iteration spaces, which no
    kernel tiles and IREE's codegen fails on; each update keeps its own."""
    p, _ = plan(
        """  %one = stablehlo.constant dense<1.0> : tensor<f32>
  %lr = stablehlo.add %t, %one : tensor<f32>
  %la = stablehlo.broadcast_in_dim %lr, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
  %lb = stablehlo.broadcast_in_dim %lr, dims = [] : (tensor<f32>) -> tensor<64xf32>
  %a2 = stablehlo.multiply %a, %la : tensor<64x64xf32>
  %b2 = stablehlo.multiply %b, %lb : tensor<64xf32>
  return %a2, %b2 : tensor<64x64xf32>, tensor<64xf32>""",
        "%t: tensor<f32>, %a: tensor<64x64xf32>, %b: tensor<64xf32>",
        "(tensor<64x64xf32>, tensor<64xf32>)",
    )
    shapes = [g.outputs for g in p.all_groups() if g.outlined]
    assert all(len({o for o in outs if o != "tensor<f32>"}) <= 1 for outs in shapes), shapes
    assert any("results of shapes" in line for line in p.log), p.log


def test_column_reduction_kind():
    p, _ = plan(
        """  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %c = stablehlo.convert %x : (tensor<64x50xf16>) -> tensor<64x50xf32>
  %s = stablehlo.reduce(%c init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<64x50xf32>, tensor<f32>) -> tensor<50xf32>
  return %s : tensor<50xf32>""",
        "%x: tensor<64x50xf16>",
        "tensor<50xf32>",
    )
    assert kinds(p) == [("column-reduction", True)]
    assert [p.graphs[0].nodes[i].short for i in p.all_groups()[0].members] == ["convert", "reduce"]


def test_sibling_column_reductions_stay_apart():
    """Sum and max of one input over dim 0: the column kernel takes one
    reduction and IREE's codegen fails on a region holding both, so they are
    not merged (SEVERAL_REDUCES; sibling row reductions are, above)."""
    dim, kind, out = 0, "column-reduction", "tensor<50xf32>"
    p, _ = plan(
        f"""  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [{dim}] : (tensor<64x50xf32>, tensor<f32>) -> {out}
  %m = stablehlo.reduce(%x init: %zero) applies stablehlo.maximum across dimensions = [{dim}] : (tensor<64x50xf32>, tensor<f32>) -> {out}
  return %s, %m : {out}, {out}""",
        "%x: tensor<64x50xf32>",
        f"({out}, {out})",
    )
    assert kinds(p) == [(kind, True), (kind, True)]
    assert any("would hold several reductions" in line for line in p.log), p.log


MATMUL = """  %d = stablehlo.dot_general %a, %b, contracting_dims = [1] x [DIM] : (tensor<16x32xf32>, tensor<BSHAPExf32>) -> tensor<16x64xf32>
  %bb = stablehlo.broadcast_in_dim %bias, dims = [1] : (tensor<64xf32>) -> tensor<16x64xf32>
  %0 = stablehlo.add %d, %bb : tensor<16x64xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<16x64xf32>
  %1 = stablehlo.maximum %0, %zero : tensor<16x64xf32>
  return %1 : tensor<16x64xf32>"""


def test_matmul_takes_its_epilogue(tmp_path):
    body = MATMUL.replace("DIM", "0").replace("BSHAPE", "32x64")
    p, _ = plan(
        body,
        "%a: tensor<16x32xf32>, %b: tensor<32x64xf32>, %bias: tensor<64xf32>",
        "tensor<16x64xf32>",
    )
    assert kinds(p) == [("matmul", True)]
    filecheck(
        p.text,
        """
CHECK: flow.dispatch.region {{.*}}tilefuse.fusion_kind = "matmul", tilefuse.group = "main_matmul_dot_general_0"
CHECK-NEXT: stablehlo.constant
CHECK-NEXT: = stablehlo.dot_general
CHECK-NEXT: stablehlo.broadcast_in_dim
CHECK-NEXT: stablehlo.add
CHECK-NEXT: stablehlo.maximum
CHECK-NEXT: flow.return
""",
        tmp_path,
    )
    # A dot_general that needs an operand transpose is planned but left to IREE.
    body = MATMUL.replace("DIM", "1").replace("BSHAPE", "64x32")
    p, _ = plan(
        body,
        "%a: tensor<16x32xf32>, %b: tensor<64x32xf32>, %bias: tensor<64xf32>",
        "tensor<16x64xf32>",
    )
    assert kinds(p) == [("matmul", False)]


def test_transpose_of_the_innermost_dim_is_a_hero():
    p, _ = plan(
        """  %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<32x48xf32>) -> tensor<48x32xf32>
  %e = stablehlo.exponential %t : tensor<48x32xf32>
  %t2 = stablehlo.transpose %e, dims = [1, 0] : (tensor<48x32xf32>) -> tensor<32x48xf32>
  return %t2 : tensor<32x48xf32>""",
        "%x: tensor<32x48xf32>",
        "tensor<32x48xf32>",
    )
    # Two innermost-moving transposes are two heroes: never one group.
    assert kinds(p) == [("transpose", True), ("transpose", True)]
    p, _ = plan(
        """  %t = stablehlo.transpose %x, dims = [1, 0, 2] : (tensor<4x8x16xf32>) -> tensor<8x4x16xf32>
  %e = stablehlo.exponential %t : tensor<8x4x16xf32>
  return %e : tensor<8x4x16xf32>""",
        "%x: tensor<4x8x16xf32>",
        "tensor<8x4x16xf32>",
    )
    assert kinds(p) == [("loop", True)]  # the innermost dim stays: a plain loop


DIAMOND = """  %l = stablehlo.log %x : tensor<20x160x160xf32>
  PRODUCER
  %t = stablehlo.transpose %p, dims = [0, 2, 1] : (tensor<20x160x160xf32>) -> tensor<20x160x160xf32>
  %y = stablehlo.add %p, %t : tensor<20x160x160xf32>
  return %y : tensor<20x160x160xf32>"""


def test_diamond_recomputes_a_cheap_producer_and_says_so(tmp_path):
    body = DIAMOND.replace("PRODUCER", "%p = stablehlo.abs %l : tensor<20x160x160xf32>")
    body = body.replace("%l = stablehlo.log %x", "%l = stablehlo.negate %x")
    p, _ = plan(body, "%x: tensor<20x160x160xf32>", "tensor<20x160x160xf32>")
    assert kinds(p) == [("transpose", True)]
    assert any("recomputed for 2 indexings" in line for line in p.log)


def test_diamond_cuts_an_expensive_producer(tmp_path):
    # exp(log(x)) read directly and transposed: recomputing the cone costs
    # 8 > 4, so it is cut (seed 000: never silently duplicated). exp alone
    # (cost 4) is recomputed in the transpose group; log is computed once.
    body = DIAMOND.replace("PRODUCER", "%p = stablehlo.exponential %l : tensor<20x160x160xf32>")
    p, _ = plan(body, "%x: tensor<20x160x160xf32>", "tensor<20x160x160xf32>")
    assert kinds(p) == [("loop", True), ("transpose", True)]
    assert any("2 indexings" in line and "cost 8 > 4" in line for line in p.log)
    assert any("exponential (op 1) recomputed for 2 indexings" in line for line in p.log)
    assert p.text.count("= stablehlo.log ") == 1
    filecheck(
        p.text,
        """
CHECK: %[[L:.*]] = flow.dispatch.region {{.*}}"loop"
CHECK-NEXT: stablehlo.log
CHECK-NEXT: flow.return
CHECK: flow.dispatch.region {{.*}}"transpose"
CHECK-NEXT: %[[E:.*]] = stablehlo.exponential %[[L]]
CHECK-NEXT: %[[T:.*]] = stablehlo.transpose %[[E]]
CHECK-NEXT: stablehlo.add %[[E]], %[[T]]
CHECK-NEXT: flow.return
""",
        tmp_path,
    )


def test_no_cycle_through_an_op_outside_the_groups(tmp_path):
    # exp -> custom_call -> add and exp -> add: fusing exp with add would make
    # the pair depend on the custom call, which depends on it.
    p, _ = plan(
        """  %e = stablehlo.exponential %x : tensor<64xf32>
  %c = stablehlo.custom_call @ext(%e) : (tensor<64xf32>) -> tensor<64xf32>
  %y = stablehlo.add %e, %c : tensor<64xf32>
  return %y : tensor<64xf32>""",
        "%x: tensor<64xf32>",
        "tensor<64xf32>",
    )
    assert kinds(p) == [("loop", True), ("loop", True)]
    assert any("cycle" in line for line in p.log)
    filecheck(
        p.text,
        """
CHECK: %[[E:.*]] = flow.dispatch.region
CHECK-NEXT: stablehlo.exponential
CHECK: %[[C:.*]] = stablehlo.custom_call @ext(%[[E]])
CHECK: flow.dispatch.region
CHECK-NEXT: stablehlo.add %[[E]], %[[C]]
""",
        tmp_path,
    )


def test_unknown_ops_and_calls_are_boundaries_not_failures(tmp_path):
    text = """func.func private @helper(%a: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.abs %a : tensor<8xf32>
  return %0 : tensor<8xf32>
}
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.negate %x : tensor<8xf32>
  %1 = func.call @helper(%0) : (tensor<8xf32>) -> tensor<8xf32>
  %2 = "other.op"(%1) : (tensor<8xf32>) -> tensor<8xf32>
  %3 = stablehlo.exponential %2 : tensor<8xf32>
  return %3 : tensor<8xf32>
}
"""
    p = fuse(text, VULKAN, catalogue())
    # The call is inlined first (normalize.py, as IREE's input pipeline does),
    # so abs joins negate's group; the unknown op stays a boundary.
    assert [g.kind for g in p.groups["main"]] == ["loop", "loop"]
    assert "helper" not in p.groups and any("func.call inlined" in line for line in p.log)
    filecheck(
        p.text,
        """
CHECK-NOT: @helper
CHECK: func.func @main
CHECK: flow.dispatch.region
CHECK-NEXT: stablehlo.negate
CHECK-NEXT: stablehlo.abs
CHECK: "other.op"
CHECK-NEXT: flow.dispatch.region
CHECK-NEXT: stablehlo.exponential
""",
        tmp_path,
    )


def test_bindings_limit_cuts_a_wide_group():
    # 20 inputs summed: one loop group would bind 21 buffers > 16 on Vulkan.
    args = ", ".join(f"%a{i}: tensor<64xf32>" for i in range(20))
    lines = ["  %s0 = stablehlo.add %a0, %a1 : tensor<64xf32>"]
    for i in range(2, 20):
        lines.append(f"  %s{i - 1} = stablehlo.add %s{i - 2}, %a{i} : tensor<64xf32>")
    lines.append("  return %s18 : tensor<64xf32>")
    p, _ = plan("\n".join(lines), args, "tensor<64xf32>")
    assert len(p.all_groups()) == 2
    assert any("bindings > 16" in line for line in p.log)


def test_names_are_deterministic_and_local():
    body = RMS.replace("N", "64")
    a, _ = plan(body, "%x: tensor<4x64xf32>", "tensor<4x64xf32>")
    b, _ = plan(body, "%x: tensor<4x64xf32>", "tensor<4x64xf32>")
    assert [g.name for g in a.all_groups()] == [g.name for g in b.all_groups()]
    # Another function in the module does not shift this function's names.
    text = (
        "func.func @other(%y: tensor<3xf32>) -> tensor<3xf32> {\n"
        "  %0 = stablehlo.negate %y : tensor<3xf32>\n  return %0 : tensor<3xf32>\n}\n"
        f"func.func @main(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {{\n{body}\n}}\n"
    )
    c = fuse(text, VULKAN, catalogue())
    assert [g.name for g in c.groups["main"]] == [g.name for g in a.all_groups()]


@pytest.mark.parametrize("kind", ["softmax", "layernorm"])
def test_plan_is_stable_against_op_order(kind):
    # Group membership does not depend on where independent ops are written.
    p, _ = plan(SOFTMAX, "%x: tensor<4x64xf32>", "tensor<4x64xf32>")
    swapped = SOFTMAX.replace(
        "  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>\n  %zero = stablehlo.constant dense<0.0> : tensor<f32>",
        "  %zero = stablehlo.constant dense<0.0> : tensor<f32>\n  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>",
    )
    q, _ = plan(swapped, "%x: tensor<4x64xf32>", "tensor<4x64xf32>")
    assert [len(g.members) for g in p.all_groups()] == [len(g.members) for g in q.all_groups()]


SOFTMAX_3D = SOFTMAX.replace("4x64", "2x4x64").replace("tensor<4xf32>", "tensor<2x4xf32>")
SOFTMAX_3D = SOFTMAX_3D.replace("dimensions = [1]", "dimensions = [2]").replace(
    "dims = [0]", "dims = [0, 1]"
)


def test_rank_3_softmax_is_viewed_as_rows():
    # The kernel takes rank-2 rows; rows.py rewrites the group on [8, 64]
    # and the second plan outlines it, with the input's reshape inside (IREE
    # folds it into the load) and the result's reshape left alone.
    p, _ = plan(SOFTMAX_3D, "%x: tensor<2x4x64xf32>", "tensor<2x4x64xf32>")
    assert any("rows of [2, 4, 64] viewed as [8, 64]" in line for line in p.log), p.log
    (group,) = [g for g in p.all_groups() if g.kind == "softmax-like"]
    assert group.outlined and group.inputs == ["tensor<2x4x64xf32>"]
    assert group.outputs == ["tensor<8x64xf32>"]


def test_rank_3_softmax_with_a_broadcast_across_rows_stays_with_iree():
    # A [4] bias added along dim 1: not a row-by-row op, so no view as rows;
    # the planner's reason (rank 3) stands.
    body = SOFTMAX_3D.replace(
        "  return %y : tensor<2x4x64xf32>",
        "  %pb = stablehlo.broadcast_in_dim %p, dims = [1] : (tensor<4xf32>) -> tensor<2x4x64xf32>\n"
        "  %z = stablehlo.add %y, %pb : tensor<2x4x64xf32>\n"
        "  return %z : tensor<2x4x64xf32>",
    )
    p, _ = plan(body, "%x: tensor<2x4x64xf32>, %p: tensor<4xf32>", "tensor<2x4x64xf32>")
    assert not any("viewed as" in line for line in p.log), p.log
    (group,) = [g for g in p.all_groups() if g.kind == "softmax-like"]
    assert not group.outlined and "rank-3" in group.why_not_outlined


# From jax.grad of a layer norm (reduced): the loop group around op 7 reads
# the row reduction, which reads op 3, whose group reads op 0. Merging op 0's
# group with op 10's would close a cycle no op-level path shows: the third
# group is entered at op 7 and left at op 10's producer.
GROUP_LEVEL_CYCLE = """
  %17 = stablehlo.rsqrt %c16 : tensor<16x1xf32>
  %18 = stablehlo.divide %17, %c16 : tensor<16x1xf32>
  %20 = stablehlo.multiply %c19, %18 : tensor<16x1xf32>
  %33 = stablehlo.multiply %c25, %c32 : tensor<16x48xf32>
  %35 = stablehlo.multiply %c14, %33 : tensor<16x48xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %36 = stablehlo.reduce(%35 init: %zero) applies stablehlo.add across dimensions = [1]
    : (tensor<16x48xf32>, tensor<f32>) -> tensor<16xf32>
  %37 = stablehlo.reshape %36 : (tensor<16xf32>) -> tensor<16x1xf32>
  %38 = stablehlo.broadcast_in_dim %17, dims = [0, 1] : (tensor<16x1xf32>) -> tensor<16x48xf32>
  %39 = stablehlo.multiply %33, %38 : tensor<16x48xf32>
  %40 = stablehlo.multiply %37, %20 : tensor<16x1xf32>
  %45 = stablehlo.divide %40, %c44 : tensor<16x1xf32>
  %46 = stablehlo.reshape %45 : (tensor<16x1xf32>) -> tensor<16xf32>
  %47 = stablehlo.broadcast_in_dim %46, dims = [0] : (tensor<16xf32>) -> tensor<16x48xf32>
  %48 = stablehlo.multiply %47, %c8 : tensor<16x48xf32>
  %52 = stablehlo.add %39, %48 : tensor<16x48xf32>
  return %52 : tensor<16x48xf32>"""


def test_merges_that_close_a_cycle_through_a_third_group_are_refused():
    args = ", ".join(
        f"%c{n}: tensor<16x{w}xf32>"
        for n, w in [(8, 48), (14, 48), (16, 1), (19, 1), (25, 48), (32, 48), (44, 1)]
    )
    p, _ = plan(GROUP_LEVEL_CYCLE, args, "tensor<16x48xf32>")  # outlining raised before
    assert any("would form a cycle between groups" in line for line in p.log), p.log
    assert all(g.outlined for g in p.all_groups() if g.kind != "other"), kinds(p)


def test_dynamic_shapes_are_left_to_iree_not_an_internal_error():
    """jax.export with a symbolic dim gives tensor<?x16xf32>: the planner
    read its shape as None and raised (the whole plan dropped); such ops
    now stay out of every group, and the log says why."""
    body = """  %t = stablehlo.tanh %x : tensor<?x16xf32>
  %y = stablehlo.add %t, %x : tensor<?x16xf32>
  return %y : tensor<?x16xf32>"""
    p, _ = plan(body, "%x: tensor<?x16xf32>", "tensor<?x16xf32>")
    assert not [g for g in p.all_groups() if g.outlined], kinds(p)
    assert any("a result of dynamic shape" in line for line in p.log), p.log


def test_dynamic_sibling_reductions_are_not_an_internal_error():
    """Two reduces of one dynamic-shaped argument (a row sum and a column
    max under jax.export's symbolic dims): the sibling rule looked up their
    groups, which dynamic ops do not have, and raised (KeyError)."""
    body = """  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [1] : (tensor<?x?xf32>, tensor<f32>) -> tensor<?xf32>
  %m = stablehlo.reduce(%x init: %z) applies stablehlo.maximum across dimensions = [1] : (tensor<?x?xf32>, tensor<f32>) -> tensor<?xf32>
  %y = stablehlo.add %s, %m : tensor<?xf32>
  return %y : tensor<?xf32>"""
    p, _ = plan(body, "%x: tensor<?x?xf32>", "tensor<?xf32>")
    assert not [g for g in p.all_groups() if g.outlined], kinds(p)
    assert any("a result of dynamic shape" in line for line in p.log), p.log


def test_a_complex_constant_is_not_an_internal_error():
    """The MLIR bindings cannot read a complex dense attribute; the planner
    asked whether it was a splat and raised (the whole plan dropped)."""
    body = """  %i = stablehlo.constant dense<(0.0, 1.0)> : tensor<complex<f32>>
  %b = stablehlo.broadcast_in_dim %i, dims = [] : (tensor<complex<f32>>) -> tensor<8xcomplex<f32>>
  %y = stablehlo.multiply %z, %b : tensor<8xcomplex<f32>>
  return %y : tensor<8xcomplex<f32>>"""
    p, _ = plan(body, "%z: tensor<8xcomplex<f32>>", "tensor<8xcomplex<f32>>")
    assert p.all_groups(), kinds(p)
