"""XLA's index-safety rule: do not silently recompute a producer per indexing.

Inside one kernel every op is evaluated at the element its consumer asks for.
When a producer is read through two different indexings (seed 000: `log`
read directly by an `add` and through a `transpose` by the same `add`), the
fused kernel evaluates it twice per output element. That is only worth it for
cheap ops, so a group may contain such a producer only when the producer's
cone inside the group costs at most MAX_DUPLICATED_COST (index-only ops and
constants cost 0, cheap elementwise ops 1, transcendental ones 4: one
recomputed log or exp per element is cheaper on a GPU than writing and
re-reading the value) and holds no reduction or contraction. Otherwise the
planner cuts the group there and the producer is written to memory once.
Allowed duplications are listed in the plan's log, never silent.

An indexing is an indexing map (indexing.py) from a group output's index to
the op's index, composed along a path through the group (`group_maps`): two
paths that compose to one map read the op at the same element, and count
once. Elementwise ops keep the indexing. A broadcast that puts a reduction's
result back over the reduced dims cancels that reduction (a softmax row is
one iteration space), and so does reading a reduction result in the reduced
space itself.
"""

from ..hlo.ops import EXPENSIVE
from .graph import FuncGraph
from .group_maps import Read, group_maps

MAX_DUPLICATED_COST = 4
TRANSCENDENTAL_COST = 4


def indexings(graph: FuncGraph, members: set[int]) -> dict[int, set[Read]]:
    """The distinct maps through which the group reads each of its members."""
    return {i: maps for i, maps in group_maps(graph, members).ops.items() if i in members}


def _listed(maps: set[Read]) -> str:
    return "; ".join(sorted(str(m) for m in maps))


def op_cost(node) -> int:
    """What recomputing one op costs per element: 1 for a cheap elementwise
    op, TRANSCENDENTAL_COST for an expensive one, 0 for anything else
    (index-only ops, constants)."""
    if node.cls != "elementwise":
        return 0
    return TRANSCENDENTAL_COST if node.name in EXPENSIVE else 1


def cone_cost(graph: FuncGraph, members: set[int], start: int) -> float:
    """Cost of recomputing `start` and its producers inside the group (inf: never)."""
    cost, seen, stack = 0.0, set(), [start]
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        node = graph.nodes[i]
        if node.cls in ("reduce", "contraction", "gather", "other"):
            return float("inf")
        cost += op_cost(node)
        stack.extend(p for p in node.producers if p in members)
    return cost


def duplicated(graph: FuncGraph, members: set[int]) -> list[str]:
    """The ops a group recomputes per indexing (all within the cost bound)."""
    return [
        f"{graph.nodes[i].short} (op {i}) recomputed for {len(maps)} indexings "
        f"(cost {cone_cost(graph, members, i):g} <= {MAX_DUPLICATED_COST}): {_listed(maps)}"
        for i, maps in sorted(indexings(graph, members).items())
        if len(maps) > 1 and graph.nodes[i].cls == "elementwise"
    ]


def unsafe_duplication(graph: FuncGraph, members: set[int]) -> str | None:
    """Why the group would recompute an expensive producer per indexing, or None."""
    for i, maps in sorted(indexings(graph, members).items()):
        if len(maps) > 1:
            cost = cone_cost(graph, members, i)
            if cost > MAX_DUPLICATED_COST:
                node = graph.nodes[i]
                what = "a reduction or contraction" if cost == float("inf") else f"cost {cost:g}"
                return (
                    f"{node.short} (op {i}) would be read through {len(maps)} indexings "
                    f"and recomputed ({what} > {MAX_DUPLICATED_COST}): {_listed(maps)}"
                )
    return None
