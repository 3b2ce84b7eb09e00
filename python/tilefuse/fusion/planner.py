"""One planner for every fusion kind.

Start with one group per op that computes something (elementwise, index-only,
reduce, contraction, gather/scatter, or another StableHLO op). Then apply the
rules of rules.py, in order, to every producer -> consumer edge in program
order, and merge the two groups when the rule allows it and the merge keeps:

- no cycle between groups (a path from one group to the other through a third
  op or group would make the pair depend on itself);
- index safety (safety.py);
- the target's limits: bindings per dispatch (a softmax-like group keeps no
  row on chip: its kernel recomputes intermediates and re-reads the row
  through the cache, so a row longer than shared memory is no reason to cut
  it; whether the kernel takes the group is strategies/softmax.py's
  group_refusal, asked before outlining);
- a group kind that exists (classify() in groups.py);
- pads only in groups whose kernel reads through them (pads.py).

Repeat until nothing changes. A softmax-like group the softmax kernel
refuses is cut in two where it re-reads one of its results (split_plan), or
else left to IREE's dispatch formation; the log says which. Ops of class
"other" that are not StableHLO
(custom calls, util ops, func.call) and constants stay outside every group:
IREE handles them as they are. Results only depend on the program, so names
are derived from the function, the kind, the hero and the hero's position.
"""

import math
from dataclasses import dataclass, field
from itertools import pairwise

from iree.compiler import ir

from ..hlo.ops import (
    FORMED_BY_IREE,
    bytes_of,
    dot_free_extents,
    dot_numbers,
    element_type,
    try_cast,
)
from ..targets import Target
from . import pads
from .catalogue import NO_PAD_READER, KernelCatalogue
from .graph import FuncGraph, Node, value_key
from .groups import (
    REDUCTION_KINDS,
    Group,
    classify,
    has_chained_reductions,
    plain_contraction,
    row_value_read_twice,
    upstream_members,
)
from .rules import EDGE_RULES, siblings
from .safety import duplicated, unsafe_duplication

KERNEL_LOST = "the softmax kernel takes each part, not both together ({why})"
GROUPED_CLASSES = ("elementwise", "index", "reduce", "contraction", "gather")
# Index-only ops IREE turns into metadata changes (no kernel) when alone.
NO_KERNEL_ALONE = {"stablehlo.reshape"}


# Why a group with chained reductions is handed back to IREE: in one region
# IREE 3.13's default SPIR-V codegen (BaseVectorize) recomputes the first
# reduction for every tile of the second; left to IREE's own formation it
# becomes linalg.softmax (or two dispatches for layernorm), which runs far
# faster (measured in docs/findings.md, 'Chained reductions in one region').
CHAINED_FALLBACK = (
    "chained reductions and no tilefuse kernel keeps the row on chip yet: "
    "ops left to IREE's dispatch formation (IREE's default codegen recomputes "
    "the first reduction per tile inside one region)"
)
# The same, when a kernel for the kind exists but refuses this group.
CHAINED_REFUSED = (
    "chained reductions the softmax kernel does not take ({why}): ops left to "
    "IREE's dispatch formation (IREE's default codegen recomputes the first "
    "reduction per tile inside one region)"
)
SOFTMAX_REFUSED = (
    "softmax-like group the softmax kernel does not take ({why}): ops left to "
    "IREE's dispatch formation"
)


# A dot_general contracting q and k over their last dims becomes
# linalg.transpose + linalg.matmul inside a region, because IREE's global
# optimizations (which fold the transpose into the contraction) do not run
# inside pre-formed regions; its default codegen then runs far slower
# (measured in docs/findings.md, 'A transposed dot_general in a region').
TRANSPOSED_FALLBACK = (
    "dot_general needs a transpose of an operand: ops left to IREE, whose global "
    "optimizations fold it into the contraction (they do not run inside regions)"
)


# No tilefuse kernel takes a convolution (corpus conv_bn_relu).
CONVOLUTION = "a convolution: no tilefuse kernel takes it, ops left to IREE's dispatch formation"


# Measured on the corpus (gpt2_block, llama_block): a dot_general with several
# free dims on one side ([2,16,32] x [32,128]) becomes collapse_shape +
# linalg.matmul + expand_shape; IREE moves those reshapes out of the dispatches
# it forms itself, but inside a pre-formed region its codegen fails
# ('vector.transfer_write ... workgroup distributed contexts') or runs for
# minutes on the epilogue behind the expand_shape.
UNIT_DIM_FALLBACK = (
    "dot_general with a free dim of extent 1 (a vector-matrix product): ops left to "
    "IREE, which reshapes its linalg.vecmat result inside the dispatch (in a region "
    "its codegen fails on that store)"
)
RESHAPED_FALLBACK = (
    "dot_general with several free dims on one side: ops left to IREE, which moves "
    "the reshapes of its matmul form out of the dispatch (inside a region it cannot)"
)


def reshaped_contraction(node) -> bool:
    """A dot_general whose linalg form needs reshapes: more than one free
    (neither batch nor contracting) dim on an operand."""
    if node.name != "stablehlo.dot_general":
        return False
    return any(len(extents) > 1 for extents in dot_free_extents(node.op))


# Measured on the corpus (gpt2_block, after hlo/dot_layouts.py put q k^T in
# matmul layout): a dot_general with batch dims [batch, heads] becomes, in a
# region, linalg.batch_matmul over the collapsed batch and an expand_shape
# before its epilogue; IREE's SPIR-V codegen fails on the epilogue's store
# behind it ("write affecting operations on global resources are restricted
# to workgroup distributed contexts"). IREE's own formation collapses the
# epilogue too, and the matmul kernel takes that dispatch. A bare contraction
# (p @ v) has no epilogue behind the reshape and stays in its group.
BATCHES_RESHAPED = (
    "dot_general with several batch dims and an epilogue: ops left to IREE, which "
    "collapses the batch dims of the epilogue too (in a region a reshape stays between them)"
)


def batches_reshaped(graph: FuncGraph, g: Group) -> bool:
    """The group's contraction has several batch dims and ops after it."""
    hero = graph.nodes[g.hero]
    if hero.name != "stablehlo.dot_general":
        return False
    if len(dot_numbers(hero.op)["lhs_batching_dimensions"]) < 2:
        return False
    return any(graph.nodes[i].cls != "constant" for i in g.members if i != g.hero)


def unit_free_dim_contraction(node) -> bool:
    """A dot_general with a free dim of extent 1 (M = 1 or N = 1: a
    vector-matrix product). IREE rewrites it as linalg.vecmat / matvec and
    reshapes the result back inside the dispatch; in a region the reshape
    stays between the contraction and its epilogue, and IREE's SPIR-V
    codegen fails on the store ("write affecting operations on global
    resources are restricted to workgroup distributed contexts")."""
    if node.name != "stablehlo.dot_general":
        return False
    return any(1 in extents for extents in dot_free_extents(node.op))


def max_bindings(target: Target) -> int:
    """Buffers one dispatch may bind. Vulkan guarantees only a few storage
    buffers per stage; 16 holds on every desktop driver and lavapipe."""
    return 16 if target.backend == "spirv" else 64


# IREE 3.13's SPIR-V codegen fails on a tensor.pad inside a dispatch
# ("memref.store ... restricted to workgroup distributed contexts"), and IREE's
# own dispatch formation never puts one there. So a pad joins a group only
# when a tilefuse kernel reads through it (pads.py); otherwise it stays
# outside every group and IREE copies it into a filled buffer.
PAD_OUTSIDE = "stablehlo.pad left to IREE ({why}): IREE copies it into a filled buffer"


# A reduction group returning a reduction and another op's result (x * 2 and
# its row sums; a sum and its mean) is a dispatch with two root ops: no
# tilefuse kernel stores both, and IREE 3.13's default SPIR-V codegen fails
# on such a dispatch (sum and mean of 64x1000) or runs for over ten minutes
# (exp(x) and its column sums, 1000x64). The two stay separate groups.
MIXED_RESULTS = (
    "the {kind} group would return a reduction and another op's result "
    "(no kernel stores both; IREE's codegen fails on such a dispatch)"
)


# Measured on the corpus (lax_reduce: sum, max and min of one [8, 16, 24]
# input over dim 0 or 1; argmax and argmin over an outer axis): the column
# kernel takes one reduction, and IREE 3.13's default codegen fails on a
# column region holding several ("vector.transfer_write ... workgroup
# distributed contexts"). Sibling row reductions keep their multi-output
# group on SPIR-V (IREE compiles it; i32 rows of lax_reduce did fail, left to
# the group fallback), not on CUDA (SEVERAL_ROW_RESULTS).
SEVERAL_REDUCES = (
    "the {kind} group would hold several reductions "
    "(the column kernel takes one; IREE's codegen fails on such a region)"
)


# Sibling row reductions (sum, max and min of one [8, 16, 24] input over its
# last dim: lax_reduce in the corpus) in one group are a dispatch of several
# reduction results. No tilefuse kernel stores several rows of results, and
# IREE 3.13's codegen fails on such a dispatch ("vector.transfer_write ...
# workgroup distributed contexts"): on CUDA for f32 too, on SPIR-V for
# integers (lax_reduce_i16/i32/i64); its SPIR-V codegen compiles float ones.
# Where it fails they stay apart.
SEVERAL_ROW_RESULTS = (
    "the {kind} group would return {n} reductions (no kernel stores several; "
    "IREE's codegen fails on such a dispatch here)"
)


# A loop group whose results differ in shape (Adam's update of three
# parameters of different shapes, joined through the scalar step size they
# share) is a dispatch of several iteration spaces: the loop kernel tiles
# one root, and IREE 3.13's codegen fails on such a dispatch, on SPIR-V and
# CUDA alike ("... restricted to workgroup distributed contexts").
MIXED_SHAPES = (
    "the loop group would return results of shapes {shapes} (one iteration space per kernel)"
)


# A value over one value per row computed from a reduction that a group
# puts back over the rows and also uses otherwise (returns it: a softmax
# returning its row sums; or reads it in the reduced space: logsumexp's max,
# subtracted from the row and added to the log of the sum) stays an op of
# its own over one value per row in IREE's dispatch, as IREE fuses an op into
# one consumer only: the softmax kernel takes one such op, the root, and
# stores one result (measured on the corpus: logsumexp in one group went to
# IREE's default codegen, "several ops over one value per row"; mlp_grad's
# merged group kept five results and went to IREE whole). The reduction ends
# its group instead, and the value is read back from memory.
ROW_VALUE_READ_TWICE = (
    "the {kind} group would put {what} back over the rows and also use it otherwise "
    "({use}): IREE keeps it as an op over one value per row of its own, which the "
    "softmax kernel does not take beside its root"
)


# A reshape of [1] to [] returned by a group stays a collapse_shape before
# the dispatch's store (IREE folds no rank-0 view into it), which no kernel
# takes (and a rank-0 loop root has nothing to tile): it stays outside, a
# view with no kernel of its own.
SCALAR_RESHAPE = (
    "a reshape to a scalar would end the {kind} group "
    "(IREE keeps it as a collapse_shape before the store; no kernel takes that)"
)


# A reshape between two ops of a reduction group stays outside it: IREE
# folds a reshape of an input into the load and one of a result into the
# store, but keeps a reshape of a value the dispatch computes and reads again
# as an expand/collapse_shape between its ops, which the reduction kernels
# do not take (IREE's own codegen then ran out of shared memory on
# sum(reshape(reverse(y)))).
INNER_RESHAPE = (
    "the {kind} group would reshape a value it computes "
    "(IREE keeps that reshape inside the dispatch; the kernels read only views of inputs)"
)


def pad_outside(graph: FuncGraph, node, kernels: KernelCatalogue) -> str | None:
    """Why this pad stays outside every group, or None."""
    if kernels.pad_shape_refusal is None:
        return NO_PAD_READER
    return pads.pad_refusal(graph, node)


# StableHLO ops that IREE never puts inside a dispatch: control flow (its
# regions become host code) and ops that are no computation. In a region of
# their own IREE's codegen fails on them ("failed to run translation of
# source executable" for a while loop).
NEVER_IN_A_DISPATCH = {
    "stablehlo.while",
    "stablehlo.case",
    "stablehlo.if",
    "stablehlo.optimization_barrier",
    "stablehlo.custom_call",
    "stablehlo.composite",
}


# No kernel here takes a dynamic shape (jax.export with symbolic dims):
# such ops are IREE's to form, as they were without fusion.
DYNAMIC_OUTSIDE = "a result of dynamic shape: left to IREE's dispatch formation"


def _dynamic(node) -> bool:
    """Some result is a tensor with a dynamic dim."""
    for result in node.op.results:
        ranked = try_cast(ir.RankedTensorType, result.type)
        if ranked is not None and not ranked.has_static_shape:
            return True
    return False


def groupable(node) -> bool:
    """The op may join a group (a pad also needs pad_outside to be None)."""
    if node.cls in GROUPED_CLASSES:
        return True
    # Other StableHLO ops (sort, reduce_window, rng, ...) get a group of their
    # own so each one still makes exactly one dispatch.
    return (
        node.cls == "other"
        and node.name.startswith("stablehlo.")
        and node.name not in NEVER_IN_A_DISPATCH
    )


@dataclass
class FuncPlan:
    """The planner's state for one function; satisfies rules.Plan."""

    graph: FuncGraph
    target: Target
    kernels: KernelCatalogue
    group_of: dict[int, int] = field(default_factory=dict)  # node -> group id
    members: dict[int, set[int]] = field(default_factory=dict)  # group id -> nodes
    kinds: dict[int, str] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)  # merges refused, and why

    def kind_of(self, node: int) -> str:
        return self.kinds[self.group_of[node]] if node in self.group_of else "none"

    def members_of(self, node: int) -> set[int]:
        return self.members[self.group_of[node]]

    # -- checks every merge must pass -------------------------------------
    def _creates_cycle(self, a: set[int], b: set[int]) -> bool:
        """A path a -> (outside a and b) -> b, or the other way round."""
        return self._path_outside(a, b) or self._path_outside(b, a)

    def _path_outside(self, src: set[int], dst: set[int]) -> bool:
        """A path from src to dst through other ops, a third group taken
        whole: a group is one dispatch, so what enters it at one member
        leaves it at every member (b -> c -> [x ... y] -> a, where the
        group reads c at x and a reads it at y, is a cycle once a and b
        merge, though no op-level path joins them)."""
        nodes = self.graph.nodes
        stack = [u for i in src for u in nodes[i].users if u not in src and u not in dst]
        seen = set()
        while stack:
            i = stack.pop()
            if i in seen:
                continue
            group = self.group_of.get(i)
            whole = self.members.get(group, {i})
            seen |= whole
            for u in (u for m in whole for u in nodes[m].users):
                if u in dst:
                    return True
                if u not in src and u not in seen:
                    stack.append(u)
        return False

    def _reshapes_computed(self, reshape: Node, merged: set[int]) -> bool:
        """`reshape` reshapes a value the group `merged` computes. Reshapes of
        reshapes are followed: a chain of them over an input (the rows views'
        reshapes at a group's edge, read by the next group's reshape) is one
        view of the input, which IREE folds into the load."""
        for p in reshape.producers:
            while p in merged and self.graph.nodes[p].name == "stablehlo.reshape":
                p = self.graph.nodes[p].producers[0]
            if p in merged:
                return True
        return False

    def _bindings(self, merged: set[int]) -> int:
        inputs = self.graph.values_from_outside(merged)
        return len(inputs) + len(self.graph.outputs_of(merged))

    def refusal(self, a: int, b: int) -> str | None:
        """Why groups a and b may not merge, or None."""
        ga, gb = self.members[a], self.members[b]
        merged = ga | gb
        if self._creates_cycle(ga, gb):
            return "would form a cycle between groups"
        kind, _ = classify(self.graph, merged)
        if kind == "other":
            return "an op with no fusion rule"
        why = pads.group_refusal(self.graph, merged, kind, self._pad_shape_refusal)
        if why:
            return why
        outs = self.graph.outputs_of(merged)
        mixed = len(outs) > 1 and any(self.graph.nodes[i].cls != "reduce" for i in outs)
        if kind in ("row-reduction", "column-reduction") and mixed:
            return MIXED_RESULTS.format(kind=kind)
        if kind == "column-reduction" and (
            sum(self.graph.nodes[i].cls == "reduce" for i in merged) > 1
        ):
            return SEVERAL_REDUCES.format(kind=kind)
        if kind == "loop":
            # Unit dims aside: [4, 16, 1] and [4, 16] are one iteration space.
            shapes = {tuple(d for d in self.graph.nodes[i].shape if d != 1) for i in outs}
            if len(shapes) > 1:
                return MIXED_SHAPES.format(shapes=sorted(list(s) for s in shapes))
        if kind == "row-reduction" and len(outs) > 1:
            integer = any(
                try_cast(ir.IntegerType, element_type(self.graph.nodes[i].result_type()))
                is not None
                for i in outs
            )
            if self.target.backend == "cuda" or integer:
                return SEVERAL_ROW_RESULTS.format(kind=kind, n=len(outs))
        if any(
            self.graph.nodes[i].name == "stablehlo.reshape" and self.graph.nodes[i].shape == []
            for i in outs
        ):
            return SCALAR_RESHAPE.format(kind=kind)
        if kind in REDUCTION_KINDS:
            nodes = [self.graph.nodes[i] for i in merged]
            read = {p for n in nodes for p in n.producers}
            if any(
                n.name == "stablehlo.reshape"
                and n.index in read
                and self._reshapes_computed(n, merged)
                for n in nodes
            ):
                return INNER_RESHAPE.format(kind=kind)
        bindings = self._bindings(merged)
        if bindings > max_bindings(self.target):
            return f"{bindings} bindings > {max_bindings(self.target)}"
        twice = row_value_read_twice(self.graph, merged) if kind in REDUCTION_KINDS else None
        if twice:
            value, use = twice
            what = f"op {value} ({self.graph.nodes[value].short})"
            return ROW_VALUE_READ_TWICE.format(kind=kind, what=what, use=use)
        return unsafe_duplication(self.graph, merged)

    def _pad_shape_refusal(self, shape: list[int], bits: int, bf16: bool) -> str | None:
        return self.kernels.pad_refusal(shape, bits, bf16, self.target)

    def merge(self, a: int, b: int) -> None:
        keep, gone = min(a, b), max(a, b)
        for i in self.members[gone]:
            self.group_of[i] = keep
        self.members[keep] |= self.members.pop(gone)
        self.kinds.pop(gone)
        self.kinds[keep], _ = classify(self.graph, self.members[keep])

    def kernel_lost(self, a: int, b: int) -> str | None:
        """Why merging groups a and b would give a softmax-like group no
        kernel takes when each part alone is one a kernel takes, or None.

        Siblings share an input to read it once; two argmaxes of one row
        merged are a group of two results the softmax kernel refuses, and
        IREE's formation then makes three dispatches of what two kernels did."""
        if not self.kernels.kernel_for("softmax-like"):
            return None
        merged = self.members[a] | self.members[b]
        if classify(self.graph, merged)[0] != "softmax-like":
            return None
        why = self.kernels.refusal("softmax-like", self.graph, self.group(merged), self.target)
        if why is None:
            return None
        for part in (self.members[a], self.members[b]):
            kind = classify(self.graph, part)[0]
            if kind == "softmax-like" and self.kernels.refusal(
                "softmax-like", self.graph, self.group(part), self.target
            ):
                return None  # a part no kernel takes either: nothing is lost
        return KERNEL_LOST.format(why=why)

    def group(self, members: set[int]) -> Group:
        return _describe(self.graph, sorted(members))

    def try_merge(self, rule: str, p: int, c: int) -> bool:
        a, b = self.group_of[p], self.group_of[c]
        if a == b:
            return False
        why = self.refusal(a, b)
        if not why and rule == "siblings":
            why = self.kernel_lost(a, b)
        if why:
            line = f"{rule}: op {p} -> op {c} not fused: {why}"
            if line not in self.log:
                self.log.append(line)
            return False
        self.merge(a, b)
        return True


def _edges(graph: FuncGraph, plan: FuncPlan):
    for c in graph.nodes:
        for p in dict.fromkeys(c.producers):
            if p in plan.group_of and c.index in plan.group_of:
                yield graph.nodes[p], c


def _sibling_pairs(graph: FuncGraph, plan: FuncPlan):
    """Reduces that read a common value (an argument or an op's result),
    both in the plan (a dynamic-shaped reduce is left outside it)."""
    reads: dict[tuple, list[int]] = {}
    for n in graph.nodes:
        if n.cls == "reduce" and n.index in plan.group_of:
            for v in list(n.op.operands)[: len(n.op.operands) // 2]:
                reads.setdefault(value_key(v), []).append(n.index)
    for readers in reads.values():
        for x, y in pairwise(readers):
            yield graph.nodes[x], graph.nodes[y]


def plan_function(
    graph: FuncGraph, target: Target, kernels: KernelCatalogue
) -> tuple[list[Group], list[str]]:
    plan = FuncPlan(graph, target, kernels)
    for n in graph.nodes:
        outside = pad_outside(graph, n, kernels) if n.name == pads.PAD else None
        if outside:
            plan.log.append(f"op {n.index}: " + PAD_OUTSIDE.format(why=outside))
        elif groupable(n) and _dynamic(n):
            plan.log.append(f"op {n.index} {n.short}: {DYNAMIC_OUTSIDE}")
        elif FORMED_BY_IREE in n.op.attributes:
            # A sort network's step (hlo/sorts.py): IREE's formation fuses it
            # into one elementwise op the loop kernel takes; in a region it
            # stays several. Left out of every group rather than merged and
            # then refused: trying merges over a long sort's thousands of ops
            # took most of the compile (18 of 29 s for a sort of 2000).
            continue
        elif groupable(n):
            plan.group_of[n.index] = n.index
            plan.members[n.index] = {n.index}
            plan.kinds[n.index], _ = classify(graph, {n.index})
    changed = True
    while changed:
        changed = False
        for rule_name, rule in EDGE_RULES:
            for p, c in list(_edges(graph, plan)):
                if plan.group_of[p.index] != plan.group_of[c.index] and rule(plan, p, c):
                    changed |= plan.try_merge(rule_name, p.index, c.index)
        for a, b in list(_sibling_pairs(graph, plan)):
            if plan.group_of[a.index] != plan.group_of[b.index] and siblings(plan, a, b):
                changed |= plan.try_merge("siblings", a.index, b.index)
    groups = [_describe(graph, sorted(m)) for _, m in sorted(plan.members.items())]
    for g in groups:
        plan.log += [f"{g.name}: {line}" for line in duplicated(graph, set(g.members))]
    split: dict[str, list[Group]] = {}
    constant = computed_from_constants(graph)
    for g in groups:
        chained = g.outlined and has_chained_reductions(graph, set(g.members))
        if chained and not kernels.kernel_for("softmax-like"):
            g.outlined = False
            g.why_not_outlined = CHAINED_FALLBACK
        elif g.outlined and g.kind == "softmax-like" and kernels.kernel_for("softmax-like"):
            # A kernel exists: outline only the groups it takes, so that none
            # meets IREE's default codegen inside a region.
            why = kernels.refusal("softmax-like", graph, g, target)
            parts = (
                (split_plan(graph, g, target, kernels) or split_columns(graph, g)) if why else None
            )
            if parts:
                split[g.name] = parts
                plan.log.append(
                    f"{g.name}: split into {', '.join(p.name for p in parts)} "
                    f"(the softmax kernel does not take it whole: {why})"
                )
            elif why:
                g.outlined = False
                g.why_not_outlined = (CHAINED_REFUSED if chained else SOFTMAX_REFUSED).format(
                    why=why
                )
        if g.outlined and g.kind == "matmul" and not plain_contraction(graph.nodes[g.hero]):
            g.outlined = False
            g.why_not_outlined = (
                CONVOLUTION
                if graph.nodes[g.hero].name == "stablehlo.convolution"
                else TRANSPOSED_FALLBACK
            )
        elif g.outlined and g.kind == "matmul" and reshaped_contraction(graph.nodes[g.hero]):
            g.outlined = False
            g.why_not_outlined = RESHAPED_FALLBACK
        elif g.outlined and g.kind == "matmul" and batches_reshaped(graph, g):
            g.outlined = False
            g.why_not_outlined = BATCHES_RESHAPED
        elif g.outlined and g.kind == "matmul" and unit_free_dim_contraction(graph.nodes[g.hero]):
            g.outlined = False
            g.why_not_outlined = UNIT_DIM_FALLBACK
        elif g.outlined and g.kind == "other":
            g.outlined = False
            g.why_not_outlined = OTHER
        elif g.outlined and folded_by_iree(graph, set(g.members)):
            g.outlined = False
            g.why_not_outlined = FOLDED
        elif g.outlined and g.kind == "loop" and scalars_only(graph, set(g.members)):
            g.outlined = False
            g.why_not_outlined = SCALARS
        elif (
            g.outlined
            and g.kind == "loop"
            and reads_constants_only(graph, set(g.members), constant)
        ):
            g.outlined = False
            g.why_not_outlined = CONSTANT_INPUTS
    groups = [part for g in groups for part in split.get(g.name, [g])]
    leave_feeders_to_iree(graph, groups)
    return groups, plan.log


# IREE's dispatch formation fuses an elementwise producer into the dispatch of
# its consumer; a region of its own costs a dispatch (corpus conv_bn_relu: the
# batch-norm scale rsqrt(var + eps) beside a convolution left to IREE: three
# dispatches where IREE has two).
# Neither rule takes a group that takes a strided slice: IREE copies one in a
# dispatch of its own (slow_memcpy) instead of fusing it into the reader or
# folding it into the contraction it reads (corpus gpt2_block, a BERT block:
# the head split of a qkv projection, a copy and a transpose per head).
FEEDS_IREE = "read only by ops IREE forms dispatches for ({ops}): IREE fuses it into them"
# A transpose or elementwise epilogue of a contraction IREE forms: its global
# optimizations fold a transpose into the contraction and its dispatch
# formation fuses the epilogue (corpus sdpa: attention's head merge after p @ v).
EPILOGUE_OF_IREE = "reads a contraction left to IREE, which folds it in"


def leave_feeders_to_iree(graph: FuncGraph, groups: list[Group]) -> None:
    """Leave to IREE each loop group whose results only ops outside every
    outlined group read (none returned), and each loop or transpose group
    that reads a contraction left to IREE and nothing outlined; repeated, as
    a group left to IREE can leave its neighbours touching only IREE's ops."""
    leave_gather_neighbours_to_iree(graph, groups)
    changed = True
    epilogues: set[int] = set()  # ops of the groups left as a contraction's epilogue
    while changed:
        changed = False
        outlined = {i for g in groups if g.outlined for i in g.members}
        for g in groups:
            if not g.outlined or g.kind not in ("loop", "transpose"):
                continue
            members = set(g.members)
            users = {u for i in members for u in graph.nodes[i].users} - members
            returned = any(graph.nodes[i].returned for i in members)
            feeds = users and not users & outlined and not returned and _stablehlo(graph, users)
            if g.kind == "loop" and feeds and not _strided_slices(graph, members):
                ops = sorted({graph.nodes[u].name.removeprefix("stablehlo.") for u in users})
                g.why_not_outlined = FEEDS_IREE.format(ops=", ".join(ops))
            elif not _strided_slices(graph, members) and _after_iree_contraction(
                graph, members, outlined, epilogues
            ):
                g.why_not_outlined = EPILOGUE_OF_IREE
                epilogues |= members
            else:
                continue
            g.outlined = False
            changed = True


# A gather's index arithmetic and the select of its fill value, around a
# gather left to IREE: IREE's formation fuses all three into one dispatch;
# two regions around the gather cost two more (jnp.take in every embedding
# lookup: T5's encoder and decoder, six dispatches where IREE has two).
GATHER_INDICES = (
    "computes the indices of a gather left to IREE (and what reads the gather): IREE fuses them"
)
GATHER_EPILOGUE = "reads a gather left to IREE (and its indices' arithmetic): IREE fuses them"


def leave_gather_neighbours_to_iree(graph: FuncGraph, groups: list[Group]) -> None:
    """Leave to IREE, around each gather it forms, the loop groups that read
    the gather's result (E) and those whose results only such gathers and E
    read (F), where every outlined group E reads is in F."""
    outlined = {i for g in groups if g.outlined for i in g.members}
    gathers = {n.index for n in graph.nodes if n.cls == "gather" and n.index not in outlined}
    loops = [g for g in groups if g.outlined and g.kind == "loop"]

    def outside(g: Group) -> tuple[set[int], set[int]]:
        members = set(g.members)
        producers = {p for i in members for p in graph.nodes[i].producers if p >= 0}
        users = {u for i in members for u in graph.nodes[i].users}
        return producers - members, users - members

    readers = [g for g in loops if outside(g)[0] & gathers]
    feeders = []
    for g in loops:
        _, users = outside(g)
        returned = any(graph.nodes[i].returned for i in g.members)
        ends = gathers | {i for e in readers for i in e.members}
        if users & gathers and users <= ends and not returned:
            feeders.append(g)
    fed = {i for f in feeders for i in f.members}
    readers = [e for e in readers if (outside(e)[0] & outlined) <= fed]
    read = {i for e in readers for i in e.members}
    feeders = [f for f in feeders if outside(f)[1] <= gathers | read]
    if not readers:
        return
    for g, why in [(e, GATHER_EPILOGUE) for e in readers] + [(f, GATHER_INDICES) for f in feeders]:
        g.outlined = False
        g.why_not_outlined = why


def _strided_slices(graph: FuncGraph, members: set[int]) -> bool:
    """The group takes a strided slice of a tensor (rows of it, not one
    contiguous block: gpt2's [:, :, 0:32] of [2, 16, 96]). IREE folds a
    contiguous slice (split-K's partial [i:i+1] of [S, M, N]) into the
    reader's load; a strided one it copies."""
    return any(_strided(graph.nodes[i]) for i in members)


def _strided(node) -> bool:
    if node.name != "stablehlo.slice" or node.shape is None:
        return False
    if any(step != 1 for step in node.ints("strides")):
        return True
    source, result = node.operand_shapes[0] or [], node.shape
    partial = [d for d, (s, r) in enumerate(zip(source, result)) if s != r]
    if not partial:
        return False
    first = partial[0]
    return math.prod(result[:first]) > 1 or result[first + 1 :] != source[first + 1 :]


def _stablehlo(graph: FuncGraph, nodes: set[int]) -> bool:
    """StableHLO ops (IREE's to fuse into), not a call or another dialect's op."""
    return all(graph.nodes[i].name.startswith("stablehlo.") for i in nodes)


def _after_iree_contraction(
    graph: FuncGraph, members: set[int], outlined: set[int], epilogues: set[int]
) -> bool:
    """The group reads a contraction left to IREE (or its epilogue, left to
    IREE with it), and nothing outlined. A slice of the contraction is no
    epilogue: IREE cannot fuse a reader of part of a result into the
    dispatch that computes it (split-K's sum of partials, hlo/split_k.py,
    with a bias and activation after it: IREE formed the sum and the
    epilogue as two dispatches)."""
    producers = {p for i in members for p in graph.nodes[i].producers if p >= 0} - members
    read_whole = {
        p
        for i in members
        if graph.nodes[i].name != "stablehlo.slice"
        for p in graph.nodes[i].producers
        if p >= 0
    } - members
    return (
        not producers & outlined
        and any(graph.nodes[p].cls == "contraction" or p in epilogues for p in read_whole)
        and _stablehlo(graph, producers)
    )


# Measured on the corpus (lax_shape: jnp's index arithmetic for a
# dynamic_slice, `select(c, a + b, c')` on i32 constants): IREE folds such a
# computation, so a region around it leaves no dispatch, and attach_groups
# found none for the group.
FOLDED = "scalars computed from constants only: IREE folds them, no dispatch is left"


# A sort, gather, reduce_window, ...: no tilefuse kernel takes it, and in a
# region of its own IREE could not fuse its producers into it (corpus top_k:
# the iota beside a sort, four dispatches where IREE has one).
OTHER = "no tilefuse kernel takes this op: IREE forms its dispatches"

# No kernel takes a rank-0 root, and a region of its own costs a dispatch
# where IREE's formation often has none (corpus lax_shape: the clamp of a
# dynamic_slice's index read from an argument, one dispatch per index here).
SCALARS = "elementwise math on scalars only: no kernel takes it, IREE forms its dispatches"


def scalars_only(graph: FuncGraph, members: set[int]) -> bool:
    """Every result of the group is a scalar."""
    return all(graph.nodes[i].shape == [] for i in graph.outputs_of(members))


def folded_by_iree(graph: FuncGraph, members: set[int]) -> bool:
    """Every value the group reads is a constant, and every result a scalar
    or a constant broadcast or reshaped (a cross-entropy's NaN for rows it
    masks: IREE folds it into a constant, and a region around it got no
    dispatch, which cost a retry)."""
    for i in members:
        for p in graph.nodes[i].producers:
            if p in members:
                continue
            if p < 0 or graph.nodes[p].cls != "constant":
                return False
    if all(graph.nodes[i].shape == [] for i in graph.outputs_of(members)):
        return True
    return all(graph.nodes[i].name in LAYOUT_OPS for i in members)


# An elementwise group whose inputs all come from constants (RoPE's sin/cos
# tables, an embedding's position ids and their bounds checks): IREE hoists
# such a region into an initializer and evaluates it when compiling, and its
# CPU codegen (llvm-cpu, what evaluates it) failed on some of the regions
# outlined here ("'vector.store' op write affecting operations on global
# resources are restricted to workgroup distributed contexts": every Hugging
# Face Flax model's position embedding), a retry each. Left to IREE, which
# folds them or, past its hoisting limits, forms their dispatch itself.
CONSTANT_INPUTS = "computed from constants alone: IREE evaluates it when compiling"

# Classes of ops whose value is a constant when their operands are (a
# gather: JAX's bounds checks read a table's shape that way).
PURE_FROM_CONSTANTS = ("constant", "elementwise", "index", "gather")


def computed_from_constants(graph: FuncGraph) -> set[int]:
    """The nodes whose every value comes from constants, through pure ops
    (no function argument, no op with regions, no random numbers)."""
    found: set[int] = set()
    for n in graph.nodes:
        pure = n.cls in PURE_FROM_CONSTANTS or n.name == "stablehlo.concatenate"
        if not pure or "rng" in n.name or (n.op.regions and n.cls != "gather"):
            continue
        if all(p in found for p in n.producers):
            found.add(n.index)
    return found


def reads_constants_only(graph: FuncGraph, members: set[int], constant: set[int]) -> bool:
    outside = [p for i in members for p in graph.nodes[i].producers if p not in members]
    return all(p in constant for p in outside)


# Ops that only lay a constant out anew.
LAYOUT_OPS = {"stablehlo.constant", "stablehlo.broadcast_in_dim", "stablehlo.reshape"}


def split_plan(
    graph: FuncGraph, group: Group, target: Target, kernels: KernelCatalogue
) -> list[Group] | None:
    """A softmax-like group the kernel refuses, cut after a result it both
    returns and reads again (softmax(x) returned and argmaxed): the ops that
    result depends on, then the rest, which reads it back from memory. None
    unless every part is a group some kernel takes (then the whole group is
    left to IREE, as before)."""
    members = set(group.members)
    reread = [i for i in graph.outputs_of(members) if set(graph.nodes[i].users) & members]
    if not reread:
        return None
    cut = graph.nodes[reread[0]]
    head = upstream_members(graph, members, cut) | {cut.index}
    parts = []
    for part in (head, members - head):
        described = _describe(graph, sorted(part))
        if described.kind == "softmax-like":
            if kernels.refusal("softmax-like", graph, described, target):
                return None
        elif has_chained_reductions(graph, part):
            return None
        parts.append(described)
    return parts


def split_columns(graph: FuncGraph, group: Group) -> list[Group] | None:
    """A softmax-like group over columns (every reduction over an outer dim:
    jax.nn.softmax(x, axis=0)), which no kernel keeps on chip, cut into
    parts that each read what the parts before them stored: per stage (the
    reductions an op's inputs pass through), the elementwise ops a later
    stage reads as a loop group, then the stage's reductions with their
    other producers. softmax over axis 0 is four dispatches: max, exp(x -
    max), its sum, the division. Left to IREE's own formation instead, its
    two dispatches came out wrong on lavapipe (docs/findings.md, 'Column
    softmax'). None unless every part is a group some kernel takes and no
    part holds chained reductions."""
    members = set(group.members)
    nodes = graph.nodes
    reduces = {i for i in members if nodes[i].cls == "reduce"}
    if not reduces or not all(_over_outer_dims(nodes[i]) for i in reduces):
        return None
    stage = column_stages(graph, members, reduces)
    parts = []
    for k in sorted(set(stage.values())):
        ops = {i for i in members if stage[i] == k}
        if not ops & reduces:
            parts.append(ops)
            continue
        # What anything but this stage reads of its elementwise ops (a later
        # stage, another group, the function's return), with what it is
        # computed from: stored by a loop group, so that the reductions'
        # part returns reductions only.
        read_later = [
            i
            for i in ops - reduces
            if nodes[i].returned or any(u not in ops for u in nodes[i].users)
        ]
        stored = set()
        for i in read_later:
            stored |= upstream_members(graph, ops, nodes[i]) | {i}
        stored -= reduces
        parts += [part for part in (stored, ops - stored) if part]
    groups = [_describe(graph, sorted(part)) for part in parts]
    if any(
        g.kind in ("softmax-like", "other") or has_chained_reductions(graph, set(g.members))
        for g in groups
    ):
        return None
    for g in groups:
        g.split_from = group.name
    return groups


def column_stages(graph: FuncGraph, members: set[int], reduces: set[int]) -> dict[int, int]:
    """Each member's stage: how many of the group's reductions its inputs
    pass through one after another. An op that feeds no reduction of its
    own stage (the `x - mean` a batch norm's output reads) moves down to
    its first reader's stage, which computes it again from what it reads
    rather than read it back from memory; so does an op reading nothing
    of the group (a broadcast constant)."""
    nodes = graph.nodes
    stage: dict[int, int] = {}
    for i in sorted(members):  # program order: producers first
        inside = [q for q in nodes[i].producers if q in members]
        stage[i] = max((stage[q] + (q in reduces) for q in inside), default=0)
    feeding = {r: upstream_members(graph, members, nodes[r]) for r in reduces}
    for i in sorted(members - reduces, reverse=True):  # readers first
        users = [u for u in nodes[i].users if u in members]
        if not users or nodes[i].returned:
            continue
        feeds_own_stage = any(i in feeding[r] for r in reduces if stage[r] == stage[i])
        reads_group = any(q in members for q in nodes[i].producers)
        if not reads_group or not feeds_own_stage:
            stage[i] = max(stage[i], min(stage[u] for u in users))
    return stage


def _over_outer_dims(node) -> bool:
    """A reduce whose dimensions leave its operand's innermost dim."""
    rank = len(node.operand_shapes[0] or [])
    return rank > 1 and rank - 1 not in node.ints("dimensions")


CONCATENATE = "stablehlo.concatenate"


def _concat_problem(graph: FuncGraph, members: set[int]) -> str | None:
    """Why IREE 3.13 cannot compile this group's concatenate inside a region.

    There a concatenate becomes slice inserts that no distribution reaches
    ("'memref.store' op write affecting operations on global resources are
    restricted to workgroup distributed contexts"), unless it only reads
    the region's inputs and feeds other ops of the group (then it is folded
    into their loads); IREE's own formation writes each operand in place."""
    outputs = set(graph.outputs_of(members))
    for i in sorted(members):
        node = graph.nodes[i]
        if node.name != CONCATENATE:
            continue
        if i in outputs:
            where = "is a result of the group"
        elif any(p in members for p in node.producers):
            where = "concatenates values the group computes"
        else:
            continue
        return (
            f"op {i} concatenate {where}: IREE 3.13 cannot compile that inside a "
            "dispatch region, so IREE forms these dispatches"
        )
    return None


def _describe(graph: FuncGraph, members: list[int]) -> Group:
    kind, hero = classify(graph, set(members))
    hero_node = graph.nodes[hero]
    name = f"{graph.name}_{kind.replace('-', '_')}_{hero_node.short}_{hero}"
    inputs = graph.values_from_outside(set(members))
    outputs = [r for i in graph.outputs_of(set(members)) for r in graph.nodes[i].op.results]
    group = Group(
        name=name,
        kind=kind,
        hero=hero,
        members=members,
        inputs=[str(v.type) for v in inputs],
        outputs=[str(v.type) for v in outputs],
        bytes_in=sum(bytes_of(v.type) for v in inputs),
        bytes_out=sum(bytes_of(v.type) for v in outputs),
        hero_op=hero_node.name,
        signature=";".join(
            f"{graph.nodes[i].name}:{[str(r.type) for r in graph.nodes[i].op.results]}"
            for i in members
        ),
    )
    names = {graph.nodes[i].name for i in members}
    concat = _concat_problem(graph, set(members))
    if names <= NO_KERNEL_ALONE:
        group.outlined = False
        group.why_not_outlined = "only reshapes: IREE folds them into metadata, no kernel"
    elif names <= NO_KERNEL_ALONE | {"stablehlo.slice"}:
        # A copy of part of a tensor: the loop kernel would gain nothing on
        # IREE's copy, and a region around a slice of a sort's result
        # (corpus top_k) fails in IREE's codegen.
        group.outlined = False
        group.why_not_outlined = "only slices: IREE copies them or folds them into their readers"
    elif pads.only_pads(graph, members):
        group.outlined = False
        group.why_not_outlined = (
            "a pad with no consumer in its group to read through it: IREE copies it"
        )
    elif concat:
        group.outlined = False
        group.why_not_outlined = concat
    elif any(graph.nodes[i].shape is None and graph.nodes[i].op.results for i in members):
        group.outlined = False
        group.why_not_outlined = "dynamic shapes: left to IREE's dispatch formation"
    return group


def kinds_summary(groups: list[Group]) -> dict[str, int]:
    out: dict[str, int] = {}
    for g in groups:
        out[g.kind] = out.get(g.kind, 0) + 1
    return out


__all__ = ["REDUCTION_KINDS", "FuncPlan", "kinds_summary", "plan_function"]
