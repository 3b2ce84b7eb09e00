"""Indexing maps (fusion/indexing.py): per op kind, with the ranges and
constraints of seed 003's examples; composed through a chain; the strides a
subgroup's lanes see; and the coalescing verdicts `explain` prints."""

import pytest
import tilefuse
from iree.compiler import ir
from tilefuse.fusion import pads, safety
from tilefuse.fusion.graph import build_graph
from tilefuse.fusion.group_maps import group_maps
from tilefuse.fusion.groups import reduce_dims
from tilefuse.fusion.indexing import (
    Unsupported,
    operand_maps,
    reduce_result_map,
    reduction_dims,
    stride,
)

OPS = """func.func @f(%x: tensor<4xf32>, %p: tensor<f32>, %a: tensor<2x3xf32>, %b: tensor<2x5xf32>,
                %y: tensor<6x4xf32>, %z: tensor<8x16x4xf32>, %v: tensor<16xf32>,
                %l: tensor<2x8x3xf32>, %r: tensor<2x3x5xf32>, %i: tensor<i32>) {
  %pad = stablehlo.pad %x, %p, low = [2], high = [1], interior = [1]
      : (tensor<4xf32>, tensor<f32>) -> tensor<10xf32>
  %cat = stablehlo.concatenate %a, %b, dim = 1 : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  %reshape = stablehlo.reshape %y : (tensor<6x4xf32>) -> tensor<2x3x4xf32>
  %transpose = stablehlo.transpose %z, dims = [2, 0, 1] : (tensor<8x16x4xf32>) -> tensor<4x8x16xf32>
  %reduce = stablehlo.reduce(%z init: %p) applies stablehlo.add across dimensions = [1]
      : (tensor<8x16x4xf32>, tensor<f32>) -> tensor<8x4xf32>
  %bcast = stablehlo.broadcast_in_dim %v, dims = [1] : (tensor<16xf32>) -> tensor<8x16xf32>
  %slice = stablehlo.slice %z [1:7:2, 0:16, 3:4] : (tensor<8x16x4xf32>) -> tensor<3x16x1xf32>
  %rev = stablehlo.reverse %x, dims = [0] : tensor<4xf32>
  %dot = stablehlo.dot_general %l, %r, batching_dims = [0] x [0], contracting_dims = [2] x [1]
      : (tensor<2x8x3xf32>, tensor<2x3x5xf32>) -> tensor<2x8x5xf32>
  %exp = stablehlo.exponential %x : tensor<4xf32>
  %gather = "stablehlo.dynamic_slice"(%x, %i) <{slice_sizes = array<i64: 2>}> : (tensor<4xf32>, tensor<i32>) -> tensor<2xf32>
  return
}"""


@pytest.fixture(scope="module")
def ops():
    module = ir.Module.parse(OPS, ir.Context())
    body = module.body.operations[0].regions[0].blocks[0].operations
    found = {op.operation.name.split(".")[1]: op.operation for op in body}
    found["module"] = module  # keeps the ops alive
    return found


def maps(ops, name):
    return [str(m) for m in operand_maps(ops[name])]


def test_pad_with_interior_padding(ops):
    # Seed 003: the operand is read where (d0 - low) is a multiple of
    # interior + 1 and inside the operand; the padding value everywhere.
    assert maps(ops, "pad") == [
        "(d0) -> (d0 floordiv 2 - 1), d0 in [0, 9], d0 mod 2 in [0, 0], d0 - 2 in [0, 6]",
        "(d0) -> (), d0 in [0, 9]",
    ]


def test_concatenate(ops):
    assert maps(ops, "concatenate") == [
        "(d0, d1) -> (d0, d1), d0 in [0, 1], d1 in [0, 7], d1 in [0, 2]",
        "(d0, d1) -> (d0, d1 - 3), d0 in [0, 1], d1 in [0, 7], d1 in [3, 7]",
    ]


def test_reshape_simplified_by_ranges(ops):
    # Delinearized row-major offsets, folded by the dims' ranges: d2 < 4 and
    # d0 * 3 + d1 < 6 never carry.
    assert maps(ops, "reshape") == [
        "(d0, d1, d2) -> (d0 * 3 + d1, d2), d0 in [0, 1], d1 in [0, 2], d2 in [0, 3]"
    ]


def test_transpose_broadcast_slice_reverse(ops):
    assert maps(ops, "transpose") == [
        "(d0, d1, d2) -> (d1, d2, d0), d0 in [0, 3], d1 in [0, 7], d2 in [0, 15]"
    ]
    assert maps(ops, "broadcast_in_dim") == ["(d0, d1) -> (d1), d0 in [0, 7], d1 in [0, 15]"]
    assert maps(ops, "slice") == [
        "(d0, d1, d2) -> (d0 * 2 + 1, d1, d2 + 3), d0 in [0, 2], d1 in [0, 15], d2 in [0, 0]"
    ]
    assert maps(ops, "reverse") == ["(d0) -> (-d0 + 3), d0 in [0, 3]"]


def test_reductions_and_contractions_read_through_symbols(ops):
    assert maps(ops, "reduce") == [
        "(d0, d1)[s0] -> (d0, s0, d1), d0 in [0, 7], d1 in [0, 3], s0 in [0, 15]",
        "(d0, d1) -> (), d0 in [0, 7], d1 in [0, 3]",
    ]
    assert maps(ops, "dot_general") == [
        "(d0, d1, d2)[s0] -> (d0, d1, s0), d0 in [0, 1], d1 in [0, 7], d2 in [0, 4], s0 in [0, 2]",
        "(d0, d1, d2)[s0] -> (d0, s0, d2), d0 in [0, 1], d1 in [0, 7], d2 in [0, 4], s0 in [0, 2]",
    ]


def test_elementwise_and_unsupported(ops):
    assert maps(ops, "exponential") == ["(d0) -> (d0), d0 in [0, 3]"]
    with pytest.raises(Unsupported, match="dynamic_slice"):
        operand_maps(ops["dynamic_slice"])


CHAIN = """func.func @f(%z: tensor<8x16x4xf32>, %p: tensor<f32>) -> tensor<4x3xf32> {
  %s = stablehlo.slice %z [1:7:2, 0:16, 0:4] : (tensor<8x16x4xf32>) -> tensor<3x16x4xf32>
  %t = stablehlo.transpose %s, dims = [2, 0, 1] : (tensor<3x16x4xf32>) -> tensor<4x3x16xf32>
  %r = stablehlo.reduce(%t init: %p) applies stablehlo.add across dimensions = [2]
      : (tensor<4x3x16xf32>, tensor<f32>) -> tensor<4x3xf32>
  return %r : tensor<4x3xf32>
}"""


def test_composition_through_a_chain():
    """reduce(transpose(slice(z))) read from the reduce's output: one map to
    z, the reduce's symbol kept with its range, every index simplified."""
    module = ir.Module.parse(CHAIN, ir.Context())
    s, t, r = (
        op.operation for op in list(module.body.operations[0].regions[0].blocks[0].operations)[:3]
    )
    composed = operand_maps(r)[0].then(operand_maps(t)[0]).then(operand_maps(s)[0])
    assert (
        str(composed)
        == "(d0, d1)[s0] -> (d1 * 2 + 1, s0, d0), d0 in [0, 3], d1 in [0, 2], s0 in [0, 15]"
    )
    # Lanes on the reduce's innermost output dim (d1) step 2 rows of z.
    assert stride(composed, [8, 16, 4], lane_dim=1) == {2 * 16 * 4}


def test_lane_strides(ops):
    (transposed,) = operand_maps(ops["transpose"])
    assert stride(transposed, [8, 16, 4], lane_dim=2) == {4}  # a strided read
    (bcast,) = operand_maps(ops["broadcast_in_dim"])
    assert stride(bcast, [16], lane_dim=1) == {1}
    assert stride(bcast, [16], lane_dim=0) == {0}  # every lane reads one element


def test_explain_prints_the_coalescing_verdicts():
    """The transpose sample's loop kernel reads along the input's rows and
    writes the output with a stride of 20 * 160 elements."""
    text = (tilefuse.paths.SAMPLES / "transpose_exp_abs_f32.mlir").read_text()
    (report,) = tilefuse.compile_program(text, "vulkan").reports
    assert report.coalescing == "in0 coalesced, out0 strided (3200)", report.line()
    assert "coalescing: in0 coalesced, out0 strided (3200)" in report.line()


def test_the_verdict_follows_the_loop_the_kernel_puts_on_lanes():
    """A column sum's innermost loop is the reduced one (strided), but the
    column kernel walks the kept columns on its lanes: coalesced. When it
    swaps the row chunks onto lanes (lavapipe, 3 kept columns), strided."""
    from conftest import reduce_program

    wide = tilefuse.compile_program(reduce_program((64, 4096), [0], "f32", "add"), "cuda")
    (report,) = wide.reports
    assert report.strategy == "column_reduction", report.line()
    assert report.coalescing == "in0 coalesced, out0 coalesced", report.line()
    narrow = tilefuse.compile_program(reduce_program((700, 3), [0], "f32", "add"), "vulkan")
    (report,) = narrow.reports
    assert "row chunks on thread x" in report.reason, report.line()
    assert report.coalescing.startswith("in0 strided"), report.line()


# -- group_maps: the maps of a fusion group, composed along every path ------


def graph_of(body: str, args: str, result: str):
    """The op graph of `func.func @main(args) -> result { body }` and the
    members a group of all its ops would have (no constants, no return)."""
    text = f"func.func @main({args}) -> {result} {{\n{body}\n}}\n"
    module = ir.Module.parse(text, ir.Context())
    graph = build_graph(module.body.operations[0].operation)
    graph.module = module  # keeps the ops alive
    members = {n.index for n in graph.nodes if n.cls not in ("constant", "terminator")}
    return graph, members


def op_maps(graph, members, name: str) -> list[str]:
    """The maps through which the group reads its only op called `name`."""
    (node,) = [n for n in graph.nodes if n.short == name]
    return sorted(str(m) for m in group_maps(graph, members).ops[node.index])


def test_a_producer_read_directly_and_transposed_has_two_maps():
    # Seed 000: log read by the add directly and through a transpose.
    graph, members = graph_of(
        """  %l = stablehlo.log %x : tensor<2x8x8xf32>
  %t = stablehlo.transpose %l, dims = [0, 2, 1] : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %y = stablehlo.add %l, %t : tensor<2x8x8xf32>
  return %y : tensor<2x8x8xf32>""",
        "%x: tensor<2x8x8xf32>",
        "tensor<2x8x8xf32>",
    )
    ranges = "d0 in [0, 1], d1 in [0, 7], d2 in [0, 7]"
    assert op_maps(graph, members, "log") == [
        f"(d0, d1, d2) -> (d0, d1, d2), {ranges}",
        f"(d0, d1, d2) -> (d0, d2, d1), {ranges}",
    ]
    # The log's input, an argument, is read through the same two maps, and
    # index safety counts them (log costs 4: recomputed, and logged with both).
    assert len(group_maps(graph, members).args[0]) == 2
    (line,) = safety.duplicated(graph, members)
    assert line.startswith("log (op 0) recomputed for 2 indexings (cost 4 <= 4): ")
    assert f"(d0, d1, d2) -> (d0, d2, d1), {ranges}" in line


def test_paths_that_compose_to_one_map_are_one_indexing():
    """A transpose and its inverse read the log where the add reads it
    directly: one map (a signature of the ops on the path would see two);
    a scalar is read at its one element through every path."""
    graph, members = graph_of(
        """  %l = stablehlo.log %x : tensor<4x8xf32>
  %t = stablehlo.transpose %l, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %b = stablehlo.transpose %t, dims = [1, 0] : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %n = stablehlo.negate %s : tensor<f32>
  %nb = stablehlo.broadcast_in_dim %n, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
  %c = stablehlo.compare GT, %n, %s : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %a = stablehlo.add %l, %b : tensor<4x8xf32>
  %y = stablehlo.select %c, %a, %nb : tensor<i1>, tensor<4x8xf32>
  return %y : tensor<4x8xf32>""",
        "%x: tensor<4x8xf32>, %s: tensor<f32>",
        "tensor<4x8xf32>",
    )
    assert op_maps(graph, members, "log") == ["(d0, d1) -> (d0, d1), d0 in [0, 3], d1 in [0, 7]"]
    assert op_maps(graph, members, "negate") == ["(d0, d1) -> (), d0 in [0, 3], d1 in [0, 7]"]
    assert safety.duplicated(graph, members) == []


SOFTMAX_ROWS = """  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %e = stablehlo.exponential %x : tensor<4x64xf32>
  %m = stablehlo.reduce(%e init: %ninf) applies stablehlo.maximum across dimensions = [1]
      : (tensor<4x64xf32>, tensor<f32>) -> tensor<4xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<4xf32>) -> tensor<4x64xf32>
  %d = stablehlo.subtract %e, %mb : tensor<4x64xf32>
  return %d : tensor<4x64xf32>"""


def test_a_reduction_read_back_over_its_rows_is_the_rows_iteration_space():
    """Softmax's max read through the broadcast back over the reduced dim:
    the exp under it is read in the row's index, as the subtract reads it
    (the reduction's symbol is the row's dim): one map, nothing recomputed."""
    graph, members = graph_of(SOFTMAX_ROWS, "%x: tensor<4x64xf32>", "tensor<4x64xf32>")
    assert op_maps(graph, members, "reduce") == ["(d0, d1) -> (d0), d0 in [0, 3], d1 in [0, 63]"]
    assert op_maps(graph, members, "exponential") == [
        "(d0, d1) -> (d0, d1), d0 in [0, 3], d1 in [0, 63]"
    ]
    assert safety.duplicated(graph, members) == []


def test_a_reduction_result_read_in_its_reduced_space():
    """A mean (sum / n, returned): the group is indexed from the reduce's
    input space; the sum is read at its row, the input at the row's index."""
    graph, members = graph_of(
        """  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %n = stablehlo.constant dense<64.0> : tensor<4xf32>
  %e = stablehlo.exponential %x : tensor<4x64xf32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<4x64xf32>, tensor<f32>) -> tensor<4xf32>
  %y = stablehlo.divide %s, %n : tensor<4xf32>
  return %y : tensor<4xf32>""",
        "%x: tensor<4x64xf32>",
        "tensor<4xf32>",
    )
    assert op_maps(graph, members, "divide") == ["(d0, d1) -> (d0), d0 in [0, 3], d1 in [0, 63]"]
    assert op_maps(graph, members, "reduce") == ["(d0, d1) -> (d0), d0 in [0, 3], d1 in [0, 63]"]
    assert op_maps(graph, members, "exponential") == [
        "(d0, d1) -> (d0, d1), d0 in [0, 3], d1 in [0, 63]"
    ]
    # Not a member: only the reduce's own map says it.
    (reduce,) = [n for n in graph.nodes if n.cls == "reduce"]
    assert reduction_dims(reduce.maps[0]) == ([0], [1])


def test_an_op_with_no_map_is_read_through_an_undefined_indexing():
    graph, members = graph_of(
        """  %e = stablehlo.exponential %x : tensor<4xf32>
  %d = "stablehlo.dynamic_slice"(%e, %i) <{slice_sizes = array<i64: 2>}> : (tensor<4xf32>, tensor<i32>) -> tensor<2xf32>
  return %d : tensor<2xf32>""",
        "%x: tensor<4xf32>, %i: tensor<i32>",
        "tensor<2xf32>",
    )
    assert op_maps(graph, members, "exponential") == [
        "undefined (operand 0 of dynamic_slice, op 1)"
    ]


def test_reduce_dims_come_from_the_map_in_attribute_order():
    graph, _ = graph_of(
        """  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [2, 0]
      : (tensor<3x4x5xf32>, tensor<f32>) -> tensor<4xf32>
  return %s : tensor<4xf32>""",
        "%x: tensor<3x4x5xf32>",
        "tensor<4xf32>",
    )
    (reduce,) = [n for n in graph.nodes if n.cls == "reduce"]
    assert reduce_dims(reduce) == [2, 0] == reduce.ints("dimensions")
    assert reduction_dims(reduce.maps[0]) == ([1], [2, 0])
    assert str(reduce_result_map(reduce.maps[0])) == (
        "(d0, d1, d2) -> (d1), d0 in [0, 2], d1 in [0, 3], d2 in [0, 4]"
    )


@pytest.mark.parametrize(
    "low,high,interior,why",
    [
        ([0, 0], [2, 3], [0, 0], None),
        ([1, 0], [1, 3], [0, 0], "low padding"),
        ([-1, 0], [3, 3], [0, 0], "low padding"),
        ([-2, 0], [0, 1], [1, 0], "low padding"),
        ([0, 0], [-5, 3], [1, 0], "interior padding"),
        ([0, 0], [-1, 3], [0, 0], "negative high padding"),
    ],
)
def test_how_a_pad_is_read_comes_from_its_map(low, high, interior, why):
    """A kernel reads through a pad whose source map is the identity with a
    bound `d in [0, n - 1]` on each padded dim (pads.pad_refusal)."""
    shape = [6 + lo + hi + 5 * i for lo, hi, i in zip(low, high, interior)]
    graph, _ = graph_of(
        f"""  %v = stablehlo.constant dense<0.0> : tensor<f32>
  %p = stablehlo.pad %x, %v, low = {low}, high = {high}, interior = {interior}
      : (tensor<6x6xf32>, tensor<f32>) -> tensor<{shape[0]}x{shape[1]}xf32>
  return %p : tensor<{shape[0]}x{shape[1]}xf32>""",
        "%x: tensor<6x6xf32>",
        f"tensor<{shape[0]}x{shape[1]}xf32>",
    )
    pad = graph.nodes[1]
    refusal = pads.pad_refusal(graph, pad)
    if why is None:
        assert refusal is None
        assert str(pad.maps[0]) == (
            "(d0, d1) -> (d0, d1), d0 in [0, 7], d1 in [0, 8], d0 in [0, 5], d1 in [0, 5]"
        )
    else:
        assert refusal.startswith(why), refusal
