"""Fusion groups: which ops, of what kind, around which hero.

A group's kind is a function of its members alone (so every merge the planner
tries can be judged by the kind it would produce):

    matmul            a dot_general / dot / convolution plus its epilogue
    softmax-like      reductions whose results are broadcast back over the
                      reduced dims and used again in the group (softmax,
                      layernorm, RMSNorm), or chained reductions over one row
    row-reduction     reductions over the innermost dim(s), no broadcast back
    column-reduction  reductions over outer dims that keep the innermost dim
    transpose         a transpose that moves the innermost dim, with its
                      elementwise neighbours
    loop              elementwise and index-only ops only
    other             a gather/scatter or a StableHLO op with no fusion rule
"""

from dataclasses import dataclass, field

from ..hlo.ops import dot_numbers
from .graph import FuncGraph, Node
from .indexing import reduce_result_map, reduction_dims

REDUCTION_KINDS = ("softmax-like", "row-reduction", "column-reduction")


@dataclass
class Group:
    name: str
    kind: str
    hero: int  # node index of the hero op
    members: list[int]  # node indices, program order
    inputs: list[str] = field(default_factory=list)  # types of the values read from outside
    outputs: list[str] = field(default_factory=list)  # types of the values used outside
    bytes_in: int = 0
    bytes_out: int = 0
    hero_op: str = ""  # the hero's op name
    signature: str = ""  # ops and types: equal signatures may share one executable
    outlined: bool = True  # False: no kernel of its own (IREE folds reshapes away)
    why_not_outlined: str = ""
    split_from: str = ""  # the group split_columns cut it from (planner.py)


def plain_contraction(node) -> bool:
    """dot_general in matmul layout: leading batch dims, lhs contracts its last
    dim, rhs its first non-batch dim (no operand transpose needed)."""
    if node.name != "stablehlo.dot_general":
        return node.name == "stablehlo.dot"
    numbers = dot_numbers(node.op)
    batch = len(numbers["lhs_batching_dimensions"])
    lhs_rank = len(node.operand_shapes[0] or [])
    return (
        numbers["lhs_batching_dimensions"] == list(range(batch))
        and numbers["rhs_batching_dimensions"] == list(range(batch))
        and numbers["lhs_contracting_dimensions"] == [lhs_rank - 1]
        and numbers["rhs_contracting_dimensions"] == [batch]
    )


def reduce_dims(node: Node) -> list[int]:
    """The dims a reduce reduces, in the order of its `dimensions`: those
    its input's indexing map reads through a symbol (on dynamic shapes,
    where it has no map, the attribute)."""
    if node.maps is None:
        return node.ints("dimensions")
    return reduction_dims(node.maps[0])[1]


def reduced_space(graph: FuncGraph, members: set[int], node: Node) -> Node | None:
    """The first reduce of `members` in whose reduced space `node`'s result
    lies (the reduce itself, or an elementwise op of its result's shape: a
    mean's `/ n`), or None."""
    for r in (graph.nodes[i] for i in sorted(members)):
        if r.cls != "reduce":
            continue
        in_reduced_space = node.shape == r.shape and node.shape != r.operand_shapes[0]
        if in_reduced_space and (node.index == r.index or node.cls == "elementwise"):
            return r
    return None


def moves_innermost(node: Node) -> bool:
    """A transpose whose innermost output dim is not the innermost input dim."""
    if node.name != "stablehlo.transpose":
        return False
    perm = node.ints("permutation")
    return bool(perm) and perm[-1] != len(perm) - 1


def rebroadcasts(graph: FuncGraph, bcast: Node, reduce: Node) -> bool:
    """`bcast` puts a result of `reduce` back over the dims it reduced: its
    indexing map is the reduce's result map (from the reduce's input index
    to its kept dims)."""
    if bcast.cls != "index" or not bcast.maps or reduce.maps is None:
        return False
    return bcast.maps[0] == reduce_result_map(reduce.maps[0])


def _reaches_back(graph: FuncGraph, members: set[int], reduce: Node) -> bool:
    """Some member broadcasts a value computed from `reduce` back over its row."""
    downstream, stack = set(), [reduce.index]
    while stack:
        i = stack.pop()
        for u in graph.nodes[i].users:
            if u in members and u not in downstream:
                downstream.add(u)
                stack.append(u)
    return any(rebroadcasts(graph, graph.nodes[i], reduce) for i in downstream)


def row_value_read_twice(graph: FuncGraph, members: set[int]) -> tuple[int, str] | None:
    """(value, other use): a value of the group over one value per row (a
    reduce's result, or an op in a reduce's reduced space) that the group
    puts back over the rows through a broadcast and also uses otherwise:
    returns it ("returned"), or reads it in the reduced space without
    putting it back ("op N"); or None."""
    for v in sorted(members):
        node = graph.nodes[v]
        if reduced_space(graph, members, node) is None:
            continue
        reduces = [graph.nodes[i] for i in sorted(members)]
        reduces = [r for r in reduces if r.cls == "reduce" and r.shape == node.shape]
        inside = [u for u in node.users if u in members]
        back = [u for u in inside if _leads_back(graph, members, graph.nodes[u], reduces)]
        if not back:
            continue
        if node.returned or set(node.users) - members:
            return v, "returned"
        other = [u for u in inside if u not in back]
        if other:
            return v, f"op {other[0]}"
    return None


def _leads_back(graph: FuncGraph, members: set[int], node: Node, reduces: list[Node]) -> bool:
    """`node` puts a value of the reduces' reduced space back over their
    rows, or feeds, through ops of that space, an op that does."""
    if any(rebroadcasts(graph, node, r) for r in reduces):
        return True
    if node.cls != "elementwise" or node.shape != reduces[0].shape:
        return False
    return any(
        _leads_back(graph, members, graph.nodes[u], reduces) for u in node.users if u in members
    )


def classify(graph: FuncGraph, members: set[int]) -> tuple[str, int]:
    """(kind, hero node index) of a set of nodes."""
    nodes = [graph.nodes[i] for i in sorted(members)]
    contractions = [n for n in nodes if n.cls == "contraction"]
    if contractions:
        return "matmul", contractions[0].index
    others = [n for n in nodes if n.cls in ("gather", "other")]
    if others:
        return "other", others[0].index
    reduces = [n for n in nodes if n.cls == "reduce"]
    if reduces:
        first = reduces[0]
        chained = any(_upstream_reduce(graph, members, r) for r in reduces)
        if chained or any(_reaches_back(graph, members, r) for r in reduces):
            return "softmax-like", first.index
        rank = len(first.operand_shapes[0] or [])
        if rank and rank - 1 in reduce_dims(first):
            return "row-reduction", first.index
        return "column-reduction", first.index
    transposes = [n for n in nodes if moves_innermost(n)]
    if transposes:
        return "transpose", transposes[0].index
    # A loop group's hero is its last op: the one whose iteration space the kernel covers.
    return "loop", nodes[-1].index


def upstream_members(graph: FuncGraph, members: set[int], node: Node) -> set[int]:
    """The members `node` reads from, directly or through other members."""
    return _reachable(graph, members, node, lambda n: n.producers)


def downstream_members(graph: FuncGraph, members: set[int], node: Node) -> set[int]:
    """The members that read `node`, directly or through other members."""
    return _reachable(graph, members, node, lambda n: n.users)


def _reachable(graph: FuncGraph, members: set[int], node: Node, edges) -> set[int]:
    seen, stack = set(), [node.index]
    while stack:
        for i in edges(graph.nodes[stack.pop()]):
            if i in members and i not in seen:
                seen.add(i)
                stack.append(i)
    return seen


def _upstream_reduce(graph: FuncGraph, members: set[int], node: Node) -> bool:
    return any(graph.nodes[p].cls == "reduce" for p in upstream_members(graph, members, node))


def has_chained_reductions(graph: FuncGraph, members: set[int]) -> bool:
    """A reduction in the group reads (through other members) another's result."""
    return any(
        _upstream_reduce(graph, members, graph.nodes[i])
        for i in members
        if graph.nodes[i].cls == "reduce"
    )
