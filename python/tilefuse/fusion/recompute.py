"""Recompute, rather than store, what a column reduction and a later op both read.

planner.split_columns cuts a group over columns (a batch norm's statistics
over the batch, an instance norm's over H and W, a softmax over axis 0)
into stages. When an elementwise value feeds a stage's reduction and is
also read by a later stage (`c = x - mean` of `mean(c * c)` and of the
output `c / sqrt(var)`), the cut stored it: a loop dispatch writing a
tensor of the input's size, which the reduction and the later stage read
back. IREE's formation computes it again in both; so does this, when it is
cheap (MAX_RECOMPUTED_COST per element, costed as safety.py costs
recomputation): its ops are cloned for the reduction's part, which then
reads only the inputs, and the originals move down to the later stage
(planner.column_stages). The module is planned again afterwards (fuse),
as after rows.py.

bn with `c` shared: four dispatches (mean, c, var, output) become three.
"""

from collections import defaultdict

from iree.compiler import ir

from .graph import FuncGraph
from .groups import Group
from .safety import op_cost

# Two transcendental ops per element (exp(x - max) of a column softmax costs
# 6): cheaper to recompute than to write and read back a tensor of the
# input's size.
MAX_RECOMPUTED_COST = 8


def recompute_stored_columns(graph: FuncGraph, groups: list[Group]) -> tuple[list[str], bool]:
    """Clone, for the column-reduction parts that read it, each loop part of
    a split_columns cut that nothing returns and that is cheap to compute;
    one log line per loop part cloned or left stored (and why), and whether
    any was cloned (the graph is stale then)."""
    parts: dict[str, list[Group]] = defaultdict(list)
    for g in groups:
        if g.split_from:
            parts[g.split_from].append(g)
    log, cloned = [], False
    for cut in parts.values():
        for stored in (g for g in cut if g.kind == "loop" and g.outlined):
            members = set(stored.members)
            readers = [
                g
                for g in cut
                if g.kind == "column-reduction"
                and any(p in members for i in g.members for p in graph.nodes[i].producers)
            ]
            if not readers:
                continue
            cost = sum(op_cost(graph.nodes[i]) for i in members)
            if any(graph.nodes[i].returned for i in members):
                log.append(f"{stored.name}: stored, not recomputed: the function returns it")
            elif cost > MAX_RECOMPUTED_COST:
                log.append(
                    f"{stored.name}: stored, not recomputed: cost {cost} per element "
                    f"> {MAX_RECOMPUTED_COST}"
                )
            else:
                for reader in readers:
                    _clone_for(graph, stored, reader)
                cloned = True
                names = ", ".join(r.name for r in readers)
                log.append(
                    f"{stored.name}: computed again in {names} (cost {cost} per element) "
                    "instead of stored and read back"
                )
    return log, cloned


def _clone_for(graph: FuncGraph, stored: Group, reader: Group) -> None:
    """Clones of `stored`'s ops, read by `reader`'s ops instead of the originals."""
    nodes = graph.nodes
    clones: dict[int, ir.Operation] = {}
    for i in stored.members:  # program order: producers first
        op = nodes[i].op
        clone = op.clone(ir.InsertionPoint(op)).operation
        for p, v in zip(nodes[i].producers, op.operands):
            if p in clones:
                clone.replace_uses_of_with(v, clones[p].results[0])
        clones[i] = clone
    for j in reader.members:
        for p, v in zip(nodes[j].producers, nodes[j].op.operands):
            if p in clones:
                nodes[j].op.replace_uses_of_with(v, clones[p].results[0])
