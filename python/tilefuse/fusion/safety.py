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

An indexing is the path of index-changing ops from a group output down to the
op. Elementwise ops keep the indexing. A broadcast that puts a reduction's
result back over the reduced dims cancels that reduction (a softmax row is
one iteration space), and so does reading a reduction result in the reduced
space itself.
"""

from collections import defaultdict

from ..hlo.ops import EXPENSIVE
from .graph import FuncGraph, Node
from .groups import kept_dims, reduce_dims

MAX_DUPLICATED_COST = 4
TRANSCENDENTAL_COST = 4
MAX_INDEXINGS = 8  # stop exploring an op once it has this many distinct indexings


def _step(node: Node, operand: int, sig: tuple) -> tuple:
    """Indexing of `node`'s operand `operand`, given `node` is read at `sig`."""
    if node.cls == "elementwise":
        return sig
    if node.name == "stablehlo.broadcast_in_dim":
        return sig + (("bcast", tuple(node.ints("broadcast_dimensions")), tuple(node.shape)),)
    if node.cls == "reduce":
        inputs = len(node.op.operands) // 2
        if operand >= inputs:
            return ("init",)
        dims = tuple(reduce_dims(node))
        rebroadcast = ("bcast", tuple(kept_dims(node)), tuple(node.operand_shapes[0] or ()))
        if sig and sig[-1] in (rebroadcast, ("reduced", dims)):
            return sig[:-1]
        return sig + (("reduce", dims),)
    named = node.op.attributes
    attrs = tuple(sorted((named[i].name, str(named[i].attr)) for i in range(len(named))))
    return sig + ((node.name, operand, attrs),)


def _output_sig(graph: FuncGraph, members: set[int], node: Node) -> tuple:
    """Indexing at which a group output is written: reduced-space values carry it."""
    for r in (graph.nodes[i] for i in members if graph.nodes[i].cls == "reduce"):
        in_reduced_space = node.shape == r.shape and node.shape != r.operand_shapes[0]
        own = node.index == r.index or node.cls == "elementwise"
        if in_reduced_space and own:
            return (("reduced", tuple(reduce_dims(r))),)
    return ()


def outputs_of(graph: FuncGraph, members: set[int]) -> list[int]:
    return [
        i for i in sorted(members) if graph.nodes[i].returned or set(graph.nodes[i].users) - members
    ]


def indexings(graph: FuncGraph, members: set[int]) -> dict[int, set[tuple]]:
    sigs: dict[int, set[tuple]] = defaultdict(set)
    stack = [(i, _output_sig(graph, members, graph.nodes[i])) for i in outputs_of(graph, members)]
    while stack:
        i, sig = stack.pop()
        if sig in sigs[i] or len(sigs[i]) >= MAX_INDEXINGS:
            continue
        sigs[i].add(sig)
        node = graph.nodes[i]
        for k, p in enumerate(node.producers):
            if p in members:
                stack.append((p, _step(node, k, sig)))
    return sigs


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
        if node.cls == "elementwise":
            cost += TRANSCENDENTAL_COST if node.name in EXPENSIVE else 1
        stack.extend(p for p in node.producers if p in members)
    return cost


def duplicated(graph: FuncGraph, members: set[int]) -> list[str]:
    """The ops a group recomputes per indexing (all within the cost bound)."""
    return [
        f"{graph.nodes[i].short} (op {i}) recomputed for {len(sigs)} indexings "
        f"(cost {cone_cost(graph, members, i):g} <= {MAX_DUPLICATED_COST})"
        for i, sigs in sorted(indexings(graph, members).items())
        if len(sigs) > 1 and graph.nodes[i].cls == "elementwise"
    ]


def unsafe_duplication(graph: FuncGraph, members: set[int]) -> str | None:
    """Why the group would recompute an expensive producer per indexing, or None."""
    for i, sigs in sorted(indexings(graph, members).items()):
        if len(sigs) > 1:
            cost = cone_cost(graph, members, i)
            if cost > MAX_DUPLICATED_COST:
                node = graph.nodes[i]
                what = "a reduction or contraction" if cost == float("inf") else f"cost {cost:g}"
                return (
                    f"{node.short} (op {i}) would be read through {len(sigs)} indexings "
                    f"and recomputed ({what} > {MAX_DUPLICATED_COST})"
                )
    return None
