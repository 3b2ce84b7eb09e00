"""The indexing maps of a fusion group: how the group reads each op.

For every group output, the map from the output's index to the index of
each op and input the group reads, composed along every path through the
group (indexing.py's maps, `IndexingMap.then`) and simplified. Two paths
that compose to one map read the op at the same element; two distinct maps
make the kernel evaluate it twice per output element (index safety,
safety.py).
"""

from dataclasses import dataclass, field

from .graph import FuncGraph, Node
from .groups import reduced_space
from .indexing import IndexingMap, bind_symbols, identity_map, reduce_result_map


@dataclass(frozen=True)
class Undefined:
    """A read no indexing map describes: operand `operand` of op `op` (a
    gather, a convolution, an op on dynamic shapes), reached through
    `after`. Reads through the same op and operand after the same map are
    one indexing; an elementwise op keeps it."""

    after: "IndexingMap | Undefined | None"
    op: int
    operand: int
    name: str

    def __str__(self) -> str:
        return f"undefined (operand {self.operand} of {self.name}, op {self.op})"


Read = IndexingMap | Undefined
MAX_MAPS = 8  # stop exploring an op once it has this many distinct maps


@dataclass
class GroupMaps:
    """For a group: the distinct maps from a group output's index to the
    index of each op it reads (`ops`: members, and producers outside the
    group) and of each function argument it reads (`args`)."""

    ops: dict[int, set[Read]] = field(default_factory=dict)
    args: dict[int, set[Read]] = field(default_factory=dict)


def group_maps(graph: FuncGraph, members: set[int], limit: int = MAX_MAPS) -> GroupMaps:
    """The maps of every op and input of a group, along every path from
    every group output, composed and simplified; at most `limit` per op.

    An output in the reduced space of a reduce of the group (the reduce, or
    an elementwise op of that shape: a mean's `/ n`) is indexed from that
    reduce's iteration space, so that it and the row space meet: reading a
    reduction's result in its reduced space, or through a broadcast back
    over the reduced dims, reads its input in the row's index
    (`bind_symbols`), as a softmax's kernel does."""
    found = GroupMaps()
    stack = [(i, _output_map(graph, members, graph.nodes[i])) for i in graph.outputs_of(members)]
    while stack:
        i, read = stack.pop()
        maps = found.ops.setdefault(i, set())
        if read in maps or len(maps) >= limit:
            continue
        maps.add(read)
        if i not in members:
            continue
        node = graph.nodes[i]
        for k, (p, arg) in enumerate(zip(node.producers, node.arg_numbers)):
            if p >= 0:
                stack.append((p, _read(node, k, read)))
            elif arg >= 0:
                args = found.args.setdefault(arg, set())
                if len(args) < limit:
                    args.add(_read(node, k, read))
    return found


def _output_map(graph: FuncGraph, members: set[int], node: Node) -> Read:
    reduce = reduced_space(graph, members, node)
    if reduce is not None:
        return reduce_result_map(reduce.maps[0])
    if node.shape is None:
        return Undefined(None, node.index, -1, "dynamic shapes")
    return identity_map(node.shape, node.op.context)


def _read(node: Node, k: int, read: Read) -> Read:
    """The map of operand k of `node`, given `node` is read through `read`."""
    if isinstance(read, Undefined):
        return read if node.cls == "elementwise" else Undefined(read, node.index, k, node.short)
    if node.maps is None:
        return Undefined(read, node.index, k, node.short)
    composed = read.then(node.maps[k])
    first = len(read.symbol_ranges) if node.cls == "reduce" else len(composed.symbol_ranges)
    return bind_symbols(composed, first)
