"""Which stablehlo.pad ops may join a fusion group, and which groups may hold one.

A kernel reads through a pad instead of materializing it: the load of the
pad's source is masked by the source's bounds and the masked-off lanes take
the padding value (strategies/loop.py, transform_scripts/loop.mlir). That is
a bounds check at the high end of each dim, so the pad must have:

- no low and no interior padding, and no negative (slicing) high padding
  (the map of the pad's source is the identity, masked at the high end);
- a constant padding value;

and the group must let IREE hand the kernel `tensor.pad(load(x))` read in
place by the root:

- the group is a loop group (the only kernel that reads through pads);
- the pad's operand comes from outside the group (a load, not an op the
  kernel would have to compute before padding);
- the group has one result, and every member downstream of the pad is
  elementwise, so IREE's phase 1 fuses them into one root that reads the pad
  with the identity map;
- the loop kernel takes the root's shape (IREE's own codegen cannot compile
  a dispatch holding a pad, so there is no fallback once the pad is inside).

A pad that cannot join a group stays outside, and IREE copies it into a
filled buffer (one more dispatch and a round trip through memory); the plan's
log says why.
"""

from collections.abc import Callable

from ..hlo.ops import element_bits, element_type
from .graph import FuncGraph, Node
from .groups import downstream_members

PAD = "stablehlo.pad"
# (root shape, widest element bits, any bf16) -> why the loop kernel refuses it.
ShapeRefusal = Callable[[list[int], int, bool], str | None]


def pad_refusal(graph: FuncGraph, node: Node) -> str | None:
    """Why no kernel can read through this pad, or None.

    Read from the indexing map of the pad's source (indexing.py): a kernel
    reads through the pad when that map is the identity, with a constraint
    `d in [0, n - 1]` (the source's extent) on each padded dim, and the pad
    is no smaller than its source. Element 0 of the pad is not element 0 of
    the source with low padding; with interior padding the map strides."""
    if node.maps is None:
        return "dynamic shapes (no indexing map)"
    source = node.maps[0]
    if not source.is_identity():
        origin = [0] * len(source.dim_ranges)
        if source.at(origin) != origin:
            return "low padding (a kernel reads through high padding only)"
        return "interior padding"
    if any(hi < n - 1 for (_, hi), n in zip(source.dim_ranges, node.operand_shapes[0])):
        return "negative high padding (a slice)"
    value = node.producers[1]
    if value < 0 or graph.nodes[value].cls != "constant":
        return "padding value is not a constant"
    return None


def group_refusal(
    graph: FuncGraph, members: set[int], kind: str, shape_refusal: ShapeRefusal
) -> str | None:
    """Why a group of these members may not hold its pads, or None."""
    pads = [graph.nodes[i] for i in sorted(members) if graph.nodes[i].name == PAD]
    if not pads:
        return None
    if kind != "loop":
        return f"a pad in a {kind} group (only the loop kernel reads through pads)"
    if len(graph.outputs_of(members)) > 1:
        # Several results may become several root ops in IREE's dispatch,
        # which the loop kernel refuses, and IREE cannot compile the pad.
        return "a pad in a group with several results"
    for pad in pads:
        if pad.producers[0] in members:
            return f"pad op {pad.index} pads a value computed in the group"
        later = [graph.nodes[i] for i in downstream_members(graph, members, pad)]
        if any(n.cls != "elementwise" for n in later):
            return f"pad op {pad.index} is read through a non-elementwise op"
    root = graph.nodes[max(members)]  # a loop group's hero: its last op
    # The dispatch's root reads the group's inputs and writes its result: the
    # kernel's vector width comes from those types.
    types = [v.type for v in (*graph.values_from_outside(members), *root.op.results)]
    bits = max(element_bits(t) for t in types)
    bf16 = any(str(element_type(t)) == "bf16" for t in types)
    why = shape_refusal(root.shape or [], bits, bf16)
    return f"the loop kernel would refuse the group: {why}" if why else None


def only_pads(graph: FuncGraph, members: list[int]) -> bool:
    return all(graph.nodes[i].name == PAD for i in members)
