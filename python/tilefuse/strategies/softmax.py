"""Parameters of the one-kernel row normalization (transform_scripts/softmax.mlir).

Seed: XLA's softmax fusion. A softmax, layernorm or RMSNorm is one dispatch of
rank-2 ops over [rows, N]: row reductions and elementwise ops, the last
elementwise op stored. T threads per row (R rows per workgroup when a row
takes one subgroup, see sizes.packed_rows) run the reductions over the row
in chunks of T*V elements, thread t on the V-vector at t*V of every chunk
(coalesced), looping over the chunks in its own code. Reductions keep a
V-wide partial per thread in registers, then combine with subgroup shuffles
and workgroup memory; their results stay in workgroup memory. Then all R*T
threads write the root's R*N/V vectors cyclically (thread l takes vectors l,
l + R*T, ...), one loop with no barrier inside. Elementwise ops other than
the root are recomputed in registers where they are read (no row is kept
anywhere). Only the root's row is written to global memory, once.

The root may instead be a row reduction that reads earlier ones (argmax and
argmin, which hlo/argminmax.py rewrites as a max of keys, then a min of
the indices holding it): it is then the last reduction, its combine writes
one value per row to global memory, and there is no root loop. Or it may be
an epilogue over one value per row (a mean's sum / N, a variance's rsqrt):
the reductions' results stay in workgroup memory and one thread per row
computes the epilogue from them and writes it.

Why recompute rather than keep such a row (softmax's exp(x - max)) in
workgroup memory: kept, the row is written by two ops when the last chunk is
peeled, and IREE's bufferization then copies it, by every thread (a race);
unpeeled, every chunk is masked, and the kernel ran far slower than one that
recomputes (measured in docs/findings.md, 'Keeping a row in workgroup
memory').

Rows that fit in registers and split evenly over one subgroup, or over the
T threads this kernel would give them, take the register kernel instead
(row_warp.py, tried first): it has no loop and loads the row once. This
kernel takes the others (long rows, rows that do not split evenly over
their threads, reduction and epilogue roots).

The fusion planner outlines a softmax-like group only if `group_refusal`
accepts it here, from the StableHLO group alone: otherwise its ops go to
IREE's own dispatch formation (inside one region, IREE 3.13's default codegen
would recompute the first reduction per tile). `plan` checks the dispatch
IREE made of it again, exactly.

Heuristics: V is a 128-bit vector of the widest element (at most 4 on
SPIR-V), halved until it divides the row (so every thread's tile is a whole
vector, also in the last, shorter chunk: no masks); T gives each thread about
the target's softmax_vectors_per_thread vectors of the row, rounded up to a
power of two, at least one subgroup, at most the target's thread limit and
subgroup_size**2 (one level of combine across subgroups), halved while the
reductions' accumulators would not fit in workgroup memory. lavapipe gives
each thread 64 vectors (few threads keep the combines cheap there: it runs a
workgroup's subgroups one after another on one CPU thread); the GPU targets 4,
so that a GPU row has many threads, each with a few loads in flight (a row of
8192 f32: 512 threads, where 64 vectors gave one warp looping over 64 chunks).
Such a row, when its T threads split it evenly with few elements each, is
row_warp's (its row in registers, loaded once: row_warp.row_threads).
"""

import math
from dataclasses import dataclass

from iree.compiler import ir

from ..dispatch.read import Dispatch
from ..irutil import element_bits
from ..targets import Target
from . import attrs, row_roots
from .contract import SKIP, Launch, Strategy
from .row_roots import (
    MAX_ACCUMULATOR_BITS,
    ROOT_EPILOGUE,
    ROOT_KINDS,
    ROOT_REDUCTION,
    RowParams,
    row_ops_refusal,
)
from .sizes import next_pow2, packed_rows

# The fusion kinds whose groups this strategy compiles (fusion/planner.py).
FUSION_KINDS = ("softmax-like",)

# StableHLO ops a softmax-like group may hold: the kernel handles rank-2 rows,
# elementwise ops over them, reductions over the row, and broadcasts (of a
# reduction's result back over the row, or of a [N] vector such as a scale).
GROUP_OPS = ("elementwise", "reduce", "constant")
GROUP_INDEX_OPS = ("stablehlo.broadcast_in_dim", "stablehlo.iota")
# Reduction bodies, as StableHLO ops (the dispatch-level names are in COMBINERS).
GROUP_COMBINERS = {
    "stablehlo.add": "add",
    "stablehlo.maximum": "max",
    "stablehlo.minimum": "min",
    "stablehlo.multiply": "mul",
}


@dataclass(frozen=True)
class SoftmaxParams(RowParams):
    vector: int  # V
    reductions: int  # the dispatch's row reductions (explain only)
    shared_bytes: int  # workgroup memory of the R rows (explain only)
    ragged: bool  # T*V does not divide the row: its last chunk is shorter
    # Peel the reductions' last chunk: a ragged row with full chunks before
    # it (a row shorter than one chunk is one masked chunk, no loop).
    peel: bool

    @property
    def chunk(self) -> int:  # T*V
        return self.threads * self.vector


def layout(
    n: int, bits: int, target: Target, reductions: int = 1, offset_alignment: int = 0
) -> tuple[int, int]:
    """(threads T, vector V) for rows of n elements, the widest being `bits`,
    with `reductions` accumulators in workgroup memory (`offset_alignment`:
    Target.vector_elements)."""
    vector = target.vector_elements(bits, native=True, offset_alignment=offset_alignment)
    # V divides the row, so that every thread's tile is a whole V-vector
    # (also in the last, shorter chunk): no masks, no dynamic shapes.
    while n % vector:
        vector //= 2
    sg = target.subgroup_size
    most = max(sg, min(target.max_threads, sg * sg))
    per_thread = vector * target.softmax_vectors_per_thread
    threads = min(max(next_pow2(math.ceil(n / per_thread)), sg), most)
    # Each reduction keeps a T*V accumulator in workgroup memory: fewer
    # threads where the row's accumulators would not fit.
    while threads > sg and _row_shared_bytes(threads, vector, reductions, target) > (
        target.shared_memory_bytes
    ):
        threads //= 2
    return threads, vector


def _row_shared_bytes(threads: int, vector: int, reductions: int, target: Target) -> int:
    """Per reduction its T*V accumulator (f32), its result and one slot per
    subgroup (counted twice: IREE rounds the slot buffer up)."""
    subgroups = max(1, threads // target.subgroup_size)
    return reductions * (threads * vector * 4 + 4 + 2 * subgroups * 4)


def shared_bytes(
    n: int, reductions: int, bits: int, target: Target, offset_alignment: int = 0
) -> int:
    """Workgroup memory of one row: its reductions' accumulators, results and
    slots (_row_shared_bytes). No row is kept: it does not depend on N
    otherwise."""
    threads, vector = layout(n, bits, target, reductions, offset_alignment)
    return _row_shared_bytes(threads, vector, reductions, target)


def _bits(type_: ir.Type) -> int:
    """Element width of a tensor (or scalar) type; 64 for types of no width."""
    return element_bits(type_) or 64


def group_refusal(graph, group, target: Target) -> str | None:
    """Why the kernel cannot take this softmax-like fusion group, or None.

    `graph` is the function's fusion.graph.FuncGraph, `group` a
    fusion.groups.Group. Conservative: a group accepted here must give a
    dispatch `plan` accepts, or it would meet IREE's slow in-region codegen.
    """
    if not target.is_gpu:
        return f"target {target.name} has no GPU kernel"
    members = [graph.nodes[i] for i in group.members]
    for node in members:
        if node.name == "stablehlo.reshape":
            # Of a value from outside (argmax over [B, S, N] viewed as
            # [B*S, N], hlo/argminmax.py): IREE folds it into the load's
            # binding. Inside the group it would stay a reshape in the dispatch.
            if any(p in group.members for p in node.producers):
                return "a reshape of a value computed in the group"
        elif node.cls not in GROUP_OPS and node.name not in GROUP_INDEX_OPS:
            return f"{node.name} in the group (only elementwise, broadcast, reduce, iota)"
    reduces = [node for node in members if node.cls == "reduce"]
    if not reduces:
        return "no reduction"
    rows_n = set()
    for r in reduces:
        if len(r.op.operands) != 2:
            return "a variadic reduce"
        shape = r.operand_shapes[0]
        if shape is None or len(shape) != 2:
            return f"a reduce of a rank-{len(shape or [])} tensor (the kernel takes rank 2)"
        if r.ints("dimensions") != [1]:
            return "a reduce over the outer dim"
        body = [op.operation.name for op in r.op.regions[0].blocks[0].operations]
        if len(body) != 2 or body[0] not in GROUP_COMBINERS:
            return f"a reduce whose body is {body[:-1]}"
        rows_n.add(tuple(shape))
    if len(rows_n) != 1:
        return f"reductions over different rows {sorted(rows_n)}"
    ((rows, n),) = rows_n
    if n == 1:
        return "rows of one element (IREE folds the unit dim away)"
    if len(group.outputs) != 1:
        return f"{len(group.outputs)} results (the kernel stores one row)"
    bits = max((_bits(r.type) for node in members for r in node.op.results), default=32)
    if bits > MAX_ACCUMULATOR_BITS:
        return f"{bits}-bit elements (shuffles are 32-bit)"
    if target.grid_refusal((rows,)) and not _packed_within_grid(rows, n, target):
        return f"{rows} rows > {target.max_workgroup_count[0]} workgroups"
    need = shared_bytes(n, len(reduces), bits, target)
    if need > target.shared_memory_bytes:
        return f"{need} bytes of workgroup memory > {target.shared_memory_bytes}"
    return None


def _packed_within_grid(rows: int, n: int, target: Target) -> bool:
    """The register row kernel (row_warp.py) would take rows of `n` whole in
    one subgroup and pack enough of them per workgroup to keep the grid
    within the target's: attention's scores have far more rows (B*H*S) than
    a grid has workgroups, the softmax kernel one row per workgroup."""
    sg = target.subgroup_size
    if n % sg or n // sg > target.row_register_elements:
        return False
    want = target.packed_row_threads or target.preferred_threads
    per_workgroup = packed_rows(rows, sg, sg, want, 0, target)
    return target.grid_refusal((rows // per_workgroup,)) is None


def plan(d: Dispatch, target: Target) -> tuple[SoftmaxParams | None, str]:
    why_not = row_ops_refusal(d, indexed_lone_ok=True)
    if why_not:
        return None, why_not
    if d.iterator_types == ROOT_EPILOGUE:
        (rows,) = d.loop_ranges
        n = max(op.loop_ranges[1] for op in d.op_summaries if op.iterator_types == ROOT_REDUCTION)
    else:
        rows, n = d.loop_ranges
    sg = target.subgroup_size
    bits = row_roots.widest_bits(d)
    generics = [op for op in d.op_summaries if op.name == "linalg.generic"]
    reductions = sum(op.iterator_types[-1] == "reduction" for op in generics)
    threads, vector = layout(n, bits, target, reductions, d.offset_alignment)
    row_bytes = shared_bytes(n, reductions, bits, target, d.offset_alignment)
    if row_bytes > target.shared_memory_bytes:
        return None, f"{row_bytes} bytes of workgroup memory > {target.shared_memory_bytes}"
    # Rows share a workgroup up to packed_synced_row_threads, not the row
    # kernel's packed_row_threads: this kernel has barriers between its
    # phases, and on lavapipe each barrier switches every subgroup of the
    # workgroup, so packed rows ran slower there (docs/findings.md, 'Rows
    # per workgroup'); on CUDA packing lifts the 50% occupancy cap of
    # one-warp blocks.
    per_wg = packed_rows(
        rows,
        threads,
        sg,
        target.packed_synced_row_threads or target.preferred_threads,
        row_bytes,
        target,
    )
    shared = per_wg * row_bytes
    why_not = target.grid_refusal((rows // per_wg,))
    if why_not:
        return None, why_not
    chunk = threads * vector
    params = SoftmaxParams(
        launch=Launch((rows // per_wg, 1, 1), (threads, per_wg, 1), sg),
        vector=vector,
        reductions=reductions,
        shared_bytes=shared,
        ragged=n % chunk != 0,
        peel=n % chunk != 0 and n > chunk,
    )
    group = f"{d.group_kind} group, " if d.group_kind else ""
    stored = {
        "reduction": "the last one stored",
        "epilogue": "then the root, one value per row",
        "elementwise": "then the root",
    }[ROOT_KINDS[tuple(d.iterator_types)]]
    notes = ""
    if params.peel:
        notes = f", {n // chunk} chunks of {chunk} and one of {n % chunk}"
    elif params.ragged:
        notes = f", one chunk of {n}"
    if per_wg > 1:
        notes += f", {per_wg} rows per workgroup"
    return params, (
        f"{group}{reductions} reductions ({stored}) + {len(generics) - reductions} "
        f"elementwise ops (recomputed where read) per row of {n}, "
        f"{threads} threads x {vector}-vectors{notes}"
    )


def describe(p: SoftmaxParams) -> str:
    return (
        f"grid={list(p.launch.grid)} wg={list(p.launch.workgroup)} "
        f"vector={p.vector} "
        f"chunk={p.chunk} reductions={p.reductions} "
        f"shared={p.shared_bytes}B{' ragged' if p.ragged else ''}"
    )


def attributes(p: SoftmaxParams, ctx: ir.Context) -> dict:
    """Values of the tagged steps of transform_scripts/softmax.mlir."""
    rows = [p.rows_per_workgroup]  # the rows of a workgroup, one thread y each
    return {
        "reduction_chunk": {"tile_sizes": attrs.i64_list([0, p.chunk], ctx)},
        "row_tile": {"static_tile_sizes": attrs.i64_array(rows, ctx)},
        "thread_tile": {"static_tile_sizes": attrs.i64_array([1, p.vector], ctx)},
        "combine_threads": {"static_num_threads": attrs.i64_array(rows, ctx)},
        "vector_sizes": attrs.vector_sizes([1, p.vector], ctx),
        "warp_size": {"warp_size": attrs.i64(p.threads, ctx)},
        **attrs.workgroup(p.launch, ctx),
    }


def steps(p: SoftmaxParams) -> dict[str, str]:
    """A row the chunk divides has no peeled chunk."""
    return {"peel_chunks": "softmax_peel_chunks" if p.peel else SKIP}


STRATEGY = Strategy(
    name="softmax",
    plan=plan,
    describe=describe,
    attributes=attributes,
    steps=steps,
    fusion_kinds=FUSION_KINDS,
    group_refusal=group_refusal,
)
