"""Fusion planning on StableHLO (hlo-opt): group ops, then outline each group
as one `flow.dispatch.region` so that IREE makes exactly one dispatch of it.
The rewrites that run before planning are hlo/'s.

    graph.py    op graph of each function
    groups.py   group kinds and heroes
    rules.py    the fusion kinds as predicates over producer -> consumer edges
    indexing.py   indexing maps per op (output index -> operand index), composed
    group_maps.py the maps of a group: how it reads each op, along every path
    safety.py   XLA's index-safety rule (no silent recomputation), on group_maps
    rows.py     groups of rank > 2 (softmax-like, mean-like) rewritten on [rows, n],
                then planned again (fuse)
    recompute.py  what a column reduction and a later stage both read, cloned
                for the reduction instead of stored, then planned again (fuse)
    catalogue.py  what the kernels can take (the planner asks it; the driver builds it)
    planner.py  one planner applying the rules (no cycles, target limits)
    outline.py  flow.dispatch.region per group, in place
    dump.py     ByteIR-style outlined functions, Graphviz picture
"""

from collections.abc import Iterable
from dataclasses import dataclass, field

from iree.compiler import ir

from ..errors import GroupFailed
from ..hlo import rewrite_module
from ..irutil import context
from ..targets import Target
from . import rows
from .catalogue import KernelCatalogue
from .graph import FuncGraph, module_graphs
from .groups import Group
from .outline import LOC_PREFIX, outline_function
from .planner import plan_function
from .recompute import recompute_stored_columns


@dataclass
class FusionPlan:
    graphs: list[FuncGraph]  # over `module` as it was before outlining
    groups: dict[str, list[Group]]  # function name -> its groups, program order
    log: list[str] = field(default_factory=list)  # merges refused and functions skipped
    text: str = ""  # the module with one flow.dispatch.region per outlined group
    # Dispatches the hlo rewrites added on purpose (a reduction split in
    # steps), and their log lines (split or why not).
    split_steps: int = 0
    splits: list[str] = field(default_factory=list)
    # What the hlo rewrites changed because IREE's codegen of the program as
    # written is wrong (a grouped convolution on SPIR-V): IREE's own
    # formation of that program is then no alternative to the plan.
    corrections: list[str] = field(default_factory=list)
    # With corrections: the rewritten program before outlining, what IREE
    # forms the dispatches of if the fusion groups are dropped.
    corrected_text: str = ""
    calls_defined_functions: bool = False  # IREE inlines those: dispatch order changes
    region_order: dict[str, list[Group]] = field(default_factory=dict)  # as outlined
    # StableHLO ops in no region (pads, delegated groups): IREE forms their dispatches.
    left_to_iree: list[str] = field(default_factory=list)
    module: ir.Module | None = None  # keeps the graphs' ops alive

    def outlined(self) -> list[Group]:
        return [g for gs in self.groups.values() for g in gs if g.outlined]

    def all_groups(self) -> list[Group]:
        return [g for gs in self.groups.values() for g in gs]


def plan_module(
    module: ir.Module,
    target: Target,
    kernels: KernelCatalogue,
    withheld: dict[str, str] | None = None,
) -> FusionPlan:
    """Plan every function of `module` (not modified). Groups named in
    `withheld` (name -> why) are planned but not outlined: an earlier compile
    failed on them (driver.compile_fused), and IREE forms their dispatches."""
    graphs = module_graphs(module)
    plan = FusionPlan(graphs=graphs, groups={}, module=module)
    for g in graphs:
        if g.called:
            # IREE inlines called functions into their callers; a region inside
            # would be numbered with the caller's dispatches.
            plan.log.append(f"{g.name}: called by func.call, left to IREE's dispatch formation")
            plan.calls_defined_functions = True
            continue
        groups, log = plan_function(g, target, kernels)
        for x in groups:
            if x.outlined and x.name in (withheld or {}):
                x.outlined, x.why_not_outlined = False, f"withheld: {withheld[x.name]}"
        plan.groups[g.name] = groups
        plan.log += [f"{g.name}: {line}" for line in log]
        plan.log += [
            f"{g.name}: {x.name} not outlined: {x.why_not_outlined}"
            for x in groups
            if not x.outlined
        ]
        inside = {i for x in groups if x.outlined for i in x.members}
        plan.left_to_iree += [
            f"{g.name}: op {n.index} {n.short}"
            for n in g.nodes
            if n.index not in inside
            and n.name.startswith("stablehlo.")
            and n.cls not in ("constant", "terminator")
        ]
    return plan


def fuse(
    text: str,
    target: Target,
    kernels: KernelCatalogue,
    withheld: dict[str, str] | None = None,
) -> FusionPlan:
    """Plan and outline a StableHLO module given as text, for the kernels
    `kernels` describes; `withheld`: see plan_module."""
    ctx = context(unregistered=True)
    module = ir.Module.parse(text, ctx)
    rewritten = rewrite_module(module, target)
    plan = plan_module(module, target, kernels, withheld)
    recomputed, cloned = _recompute_stored_columns(plan)
    if cloned:
        module.operation.verify()
        plan = plan_module(module, target, kernels, withheld)
    viewed = _view_as_rows(plan, withheld or {}) if target.is_gpu else []
    if viewed:
        module.operation.verify()
        plan = plan_module(module, target, kernels, withheld)
    plan.log = rewritten.log + recomputed + viewed + plan.log
    plan.split_steps, plan.splits = rewritten.split_steps, rewritten.splits
    plan.corrections = rewritten.corrections
    if plan.corrections:
        plan.corrected_text = module.operation.get_asm(enable_debug_info=True)
    for g in plan.graphs:
        if g.name in plan.groups:
            plan.region_order[g.name] = outline_function(g, plan.groups[g.name])
    module.operation.verify()
    plan.text = module.operation.get_asm(enable_debug_info=True)
    return plan


def _recompute_stored_columns(plan: FusionPlan) -> tuple[list[str], bool]:
    """recompute.py on every function: its log, and whether it cloned ops
    (then the module must be planned again)."""
    log, cloned = [], False
    for graph in plan.graphs:
        lines, changed = recompute_stored_columns(graph, plan.groups.get(graph.name, []))
        log += [f"{graph.name}: {line}" for line in lines]
        cloned |= changed
    return log, cloned


def _view_as_rows(plan: FusionPlan, withheld: dict[str, str]) -> list[str]:
    """Rewrite on [rows, n] (rows.py) the softmax-like groups of rank > 2 the
    kernel left to IREE, and the row-reduction groups of rank > 2 (or over
    several dims) with an epilogue; one log line each. The module must be
    planned again."""
    log = []
    for graph in plan.graphs:
        for group in plan.groups.get(graph.name, []):
            if group.name in withheld:
                continue
            refused_softmax = group.kind == "softmax-like" and not group.outlined
            if not refused_softmax and group.kind != "row-reduction":
                continue
            why, spaces = rows.refusal(graph, group)
            if why and refused_softmax:
                log.append(f"{graph.name}: {group.name}: not rewritten on rows: {why}")
            if why is None and (refused_softmax or rows.has_epilogue(graph, group, spaces)):
                rows.view_as_rows(graph, group, spaces)
                log.append(
                    f"{graph.name}: {group.name}: rows of {spaces.row} viewed as "
                    f"[{spaces.rows}, {spaces.n}] (reshapes at the group's edges)"
                )
    return log


def _group_in_location(location: str) -> str | None:
    """The group name outline.py put in the region's location, if present."""
    _, sep, rest = location.partition(LOC_PREFIX)
    return rest.split('"', 1)[0] if sep else None


def attach_groups(plan: FusionPlan, dispatches: list, site_locations: Iterable[str] = ()) -> None:
    """Check IREE made exactly one dispatch per outlined group; record each
    dispatch's group. Phase 1 prints locations, and a dispatch carries the
    location of the region it came from (outline.py names it after the group).
    Identical groups may share one executable (IREE deduplicates them).
    A copy in an initializer (IREE's hoisted constant expressions) is allowed.
    Dispatches from no region are IREE's own: ops left to IREE (plan.log says
    why) and what IREE adds itself (splats of i64 constants, control flow,
    scatter, builtin dispatches); they keep group_name None.
    A group none of `dispatches` names is still matched where a dispatch
    site (`site_locations`) names it: IREE gave its dispatch the executable
    of an identical one, formed from another group or by IREE itself (a
    gradient's attention matmul, whose transposed operands IREE folded,
    equal to the forward pass's).
    """
    groups = {g.name: g for g in plan.outlined()}
    matched: dict[str, str] = {}
    in_program: set[str] = set()  # groups a dispatch outside initializers claims
    for d in dispatches:
        name = _group_in_location(d.location)
        if name is None:
            continue
        # IREE hoists constant expressions (RoPE's sin/cos tables from iota)
        # into initializers that run once at load time: a group may then have
        # dispatches there too, before or after its own (initializers come
        # first in the list).
        hoisted = d.name.startswith("_initializer")
        # A copy IREE makes of a region's result (a reshape at the region's
        # edge that it materializes: CTC loss's index tables) keeps the
        # region's location beside the region's own dispatch.
        copy = d.name.endswith("_slow_memcpy")
        if name not in groups or (name in in_program and not (hoisted or copy)):
            raise GroupFailed(
                f"dispatch {d.name} claims fusion group {name}, "
                + ("already matched" if name in matched else "which was not outlined"),
                [name],
            )
        g = groups[name]
        d.group_name, d.group_kind, d.group_hero = g.name, g.kind, g.hero_op
        matched.setdefault(name, d.name)
        if not (hoisted or copy):
            in_program.add(name)
    for location in site_locations:
        name = _group_in_location(location)
        if name in groups:
            matched.setdefault(name, "")
    signatures = {groups[n].signature for n in matched}
    missing = [n for n, g in groups.items() if n not in matched and g.signature not in signatures]
    if missing:
        raise GroupFailed(
            f"IREE formed {len(matched)} dispatches for {len(groups)} fusion groups; "
            f"none for {', '.join(missing)}",
            missing,
        )


__all__ = ["FusionPlan", "Group", "KernelCatalogue", "attach_groups", "fuse", "plan_module"]
