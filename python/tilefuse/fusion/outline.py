"""Wrap each fusion group in a `flow.dispatch.region` (IREE makes exactly one
dispatch per region), in place, through the MLIR Python bindings.

The function body is re-ordered so that every group's ops sit together inside
its region: units (groups and the ops left outside) are emitted in a
topological order of their dependences, ties broken by program order, which
exists because the planner never forms a cycle between groups.

Constants: a splat constant read by a group is cloned into the group's region
(it costs nothing there and IREE would clone it in anyway); other constants
stay outside, where IREE turns them into constant buffers the dispatch reads.

Reshapes of inputs: a member that only reshapes a value from outside the
group and is read outside too is cloned outside for those readers, so the
region does not return it. Returned, IREE ties the result to the region's
operand (a readwrite binding loaded and stored back unchanged), which no
tilefuse kernel takes: jax.grad of a BERT had twenty such groups, each
costing a retry, until retries ran out and the whole plan was dropped.

Unsigned results: IREE's StableHLO conversion makes every integer signless
but leaves a region's result types alone, and then refuses the region
("failed to legalize operation 'flow.dispatch.region'"). So a region yields
an unsigned tensor as its signless twin (`stablehlo.bitcast_convert`, free
once converted) and converts it back outside.
"""

import heapq

from iree.compiler import ir

from ..hlo.ops import attributes_text, try_cast
from ..irutil import defining_op, user_op
from .graph import FuncGraph, value_key
from .groups import Group

GROUP_ATTR = "tilefuse.group"
KIND_ATTR = "tilefuse.fusion_kind"
HERO_ATTR = "tilefuse.hero"
LOC_PREFIX = "tilefuse.group:"


def _units(graph: FuncGraph, groups: list[Group]) -> tuple[dict[int, int], list[list[int]]]:
    """unit of each node, and the members of each unit (a group or one op)."""
    unit_of, units = {}, []
    for g in groups:
        if g.outlined:
            for i in g.members:
                unit_of[i] = len(units)
            units.append(list(g.members))
    for n in graph.nodes:
        if n.index not in unit_of:
            unit_of[n.index] = len(units)
            units.append([n.index])
    return unit_of, units


def schedule(graph: FuncGraph, groups: list[Group]) -> list[list[int]]:
    """Units in a dependence order, earliest first op first."""
    unit_of, units = _units(graph, groups)
    preds = [set() for _ in units]
    for n in graph.nodes:
        for p in n.producers:
            if p >= 0 and unit_of[p] != unit_of[n.index]:
                preds[unit_of[n.index]].add(unit_of[p])
    succs = [set() for _ in units]
    for u, ps in enumerate(preds):
        for p in ps:
            succs[p].add(u)
    waiting = [len(ps) for ps in preds]
    ready = [(min(units[u]), u) for u in range(len(units)) if not waiting[u]]
    heapq.heapify(ready)
    order = []
    while ready:
        _, u = heapq.heappop(ready)
        order.append(units[u])
        for s in succs[u]:
            waiting[s] -= 1
            if not waiting[s]:
                heapq.heappush(ready, (min(units[s]), s))
    if len(order) != len(units):
        raise AssertionError("fusion groups form a cycle (planner bug)")
    return order


def clone_splat_operands(
    graph: FuncGraph, i: int, members: set[int], block: ir.Block, clones: dict[int, ir.Operation]
) -> None:
    """Node i now sits in `block`: give it a copy, at the top of the block, of
    each splat constant it reads from outside the group (one copy per constant
    in `clones`), so the body needs no binding for it."""
    nodes = graph.nodes
    op = nodes[i].op
    for v, p in zip(list(op.operands), nodes[i].producers):
        if p >= 0 and p not in members and nodes[p].is_splat_constant:
            if p not in clones:
                clones[p] = nodes[p].op.clone(ir.InsertionPoint.at_block_begin(block))
            op.replace_uses_of_with(v, clones[p].results[0])


def _signless(t: ir.Type) -> ir.Type | None:
    """The signless twin of an unsigned integer tensor type, else None."""
    ranked = try_cast(ir.RankedTensorType, t)
    element = try_cast(ir.IntegerType, ranked.element_type) if ranked else None
    if element is None or not element.is_unsigned:
        return None
    with ir.Location.unknown(t.context):
        return ir.RankedTensorType.get(ranked.shape, ir.IntegerType.get_signless(element.width))


def _bitcast(value: ir.Value, to: ir.Type) -> ir.Value:
    return ir.Operation.create("stablehlo.bitcast_convert", results=[to], operands=[value]).result


# Op classes (hlo/ops.op_class) whose ops are pure: two with the same
# operands and attributes compute the same value (not rng, custom calls).
PURE_CLASSES = ("elementwise", "index", "constant")


def merge_twins(graph: FuncGraph, group: Group) -> int:
    """Point the readers of each member that repeats an earlier member (same
    op, operands, attributes and types) at that earlier one; the count.

    JAX repeats computations (a bilinear sample's four corners each clip the
    same coordinates). Left as twins, a region returns both; IREE's CSE
    makes them one value, and IREE 3.13's canonicalization of the region
    then drops the duplicate results and maps the uses of the others wrong
    ("'stablehlo.reshape' op requires compatible element types": an i32
    use read an f32 result), which dropped the whole fusion plan. Merged
    here, after planning, within one group only: merging before planning
    (MLIR's cse) gave values more readers and cost fusions elsewhere."""
    seen: dict[tuple, ir.Operation] = {}
    merged = 0
    for i in group.members:
        node = graph.nodes[i]
        op = node.op
        if node.cls not in PURE_CLASSES or op.regions or not op.results:
            continue
        key = (
            op.name,
            tuple(value_key(v) for v in op.operands),
            attributes_text(op),
            tuple(str(r.type) for r in op.results),
        )
        first = seen.setdefault(key, op)
        if first is not op:
            for mine, theirs in zip(op.results, first.results):
                mine.replace_all_uses_with(theirs)
            merged += 1
    return merged


def reshapes_outside(graph: FuncGraph, group: Group, before: ir.Operation) -> int:
    """Give the readers outside the group of each member reshape of a value
    from outside (directly or through member reshapes) a clone of it placed
    before `before`; the count of reshapes cloned."""
    nodes = graph.nodes
    member_ops = {nodes[i].op for i in group.members}
    outside: dict[int, ir.Value] = {}  # member index -> its value, computed outside
    for i in group.members:
        node = nodes[i]
        if node.name != "stablehlo.reshape":
            continue
        p = node.producers[0]
        if p in group.members and p not in outside:
            continue
        readers_outside = [u for u in node.op.results[0].uses if user_op(u) not in member_ops]
        clone = node.op.clone(ir.InsertionPoint(before))
        if p in outside:
            clone.operands[0] = outside[p]
        outside[i] = clone.results[0]
        if readers_outside:
            users_inside = [nodes[j].op for j in group.members]
            node.op.results[0].replace_all_uses_except(clone.results[0], users_inside)
    kept = 0
    for value in reversed(list(outside.values())):  # readers before what they read
        if list(value.uses):
            kept += 1
        else:  # no reader outside needed this clone
            defining_op(value).erase()
    return kept


def _region(graph: FuncGraph, group: Group, before: ir.Operation) -> ir.Operation:
    nodes = graph.nodes
    members = set(group.members)
    merge_twins(graph, group)
    reshapes_outside(graph, group, before)
    member_ops = {nodes[i].op for i in members}
    # Read outside the group (the function's return included), by the uses
    # as they are now: merge_twins moved some.
    results = [
        r
        for i in group.members
        for r in nodes[i].op.results
        if any(user_op(use) not in member_ops for use in r.uses)
    ]
    hero = nodes[group.hero].op
    # IREE gives the dispatch the region's location: the name ties it to the group.
    location = ir.Location.name(
        f"{LOC_PREFIX}{group.name}", childLoc=hero.location, context=hero.context
    )
    with ir.InsertionPoint(before), location:
        region = ir.Operation.create(
            "flow.dispatch.region",
            results=[_signless(r.type) or r.type for r in results],
            operands=[],
            attributes={
                "operandSegmentSizes": ir.DenseI32ArrayAttr.get([0, 0]),
                GROUP_ATTR: ir.StringAttr.get(group.name),
                KIND_ATTR: ir.StringAttr.get(group.kind),
                HERO_ATTR: ir.StringAttr.get(nodes[group.hero].name),
            },
            regions=2,  # the body, and an empty workgroup-count region
        )
    block = region.regions[0].blocks.append()
    with ir.InsertionPoint(block), location:
        ret = ir.Operation.create("flow.return", operands=results)
    clones = {}
    for i in group.members:
        op = nodes[i].op
        op.move_before(ret)
        clone_splat_operands(graph, i, members, block, clones)
    users_inside = [nodes[i].op for i in group.members] + [ret]
    for k, r in enumerate(results):
        if _signless(r.type):
            with ir.InsertionPoint(ret), location:
                ret.operands[k] = _bitcast(r, _signless(r.type))
            users_inside.append(defining_op(ret.operands[k]))
    for value, result in zip(results, region.results):
        if result.type != value.type:
            with ir.InsertionPoint(before), location:
                result = _bitcast(result, value.type)
        value.replace_all_uses_except(result, users_inside)
    return region


def outline_function(graph: FuncGraph, groups: list[Group]) -> list[Group]:
    """Rewrite the function in place; returns the outlined groups in region order."""
    nodes = graph.nodes
    by_first = {g.members[0]: g for g in groups if g.outlined}
    terminator = nodes[-1].op
    regions = []
    for unit in schedule(graph, groups):
        if unit[0] in by_first and by_first[unit[0]].members == unit:
            _region(graph, by_first[unit[0]], terminator)
            regions.append(by_first[unit[0]])
        elif nodes[unit[0]].op != terminator:
            nodes[unit[0]].op.move_before(terminator)
    for n in nodes:
        # Splat constants now cloned into every region that reads them.
        if n.is_splat_constant and not list(n.op.results[0].uses):
            n.op.erase()
    return regions
