"""Parameters of the column-reduction kernel (transform_scripts/column_reduction.mlir).

Applies to a root that reduces OUTER dims and keeps the innermost one, as IREE
forms it: loops (batch?, kept, reduced), input indexed (batch?, reduced, kept),
so the kept dim is contiguous in memory. Seed: XLA's column reduction emitter.
Also to an elementwise root over the kept loops that reads such a reduction
(its epilogue: a mean's division, a norm's sqrt; `reduction_of`), applied
in registers after the combine, with workgroup tiles that divide the kept
dim (`_dividing_tile`).

Thread x owns `vector` consecutive kept columns (coalesced vector loads);
thread y owns one of `split` chunks of the reduced dim (the split must divide
the reduced length: split_reduction needs it). Each thread accumulates in
registers; the chunks meet in workgroup memory, the y == 0 threads combine
them. Few kept columns means few workgroups, so the split then grows to put
more threads on the reduced dim.

Where the target names its multiprocessors (CUDA), the grid must fill them:
workgroups narrow (down to one subgroup of threads, each reading a vector:
still one coalesced row segment per subgroup) until there are at least
WORKGROUPS_PER_MULTIPROCESSOR per multiprocessor, and the split then grows
until the grid's threads fill the multiprocessors' resident threads
(fill_threads). 8192x50257 f16 on sm_90 went from 50 workgroups of 1024
columns x 2 row chunks to 393 of 128 columns x 16 row chunks.
"""

import math
from dataclasses import dataclass

from iree.compiler import ir

from ..dispatch.read import Dispatch
from ..targets import Target
from . import attrs
from .contract import PASS, Launch, Strategy
from .sizes import next_pow2

# Body ops split_reduction can recombine (it needs the neutral element).
COMBINERS = {
    "arith.addf",
    "arith.maximumf",
    "arith.minimumf",
    "arith.mulf",
    "arith.addi",
    "arith.muli",
    "arith.maxsi",
    "arith.minsi",
}
# Rows each loop iteration reads; 1 keeps the accumulator one vector.
REDUCTION_STEP = 1
# Workgroups the grid should have at least where the target does not name
# its multiprocessors (lavapipe: a few CPU cores).
MIN_WORKGROUPS = 4
# Workgroups per multiprocessor the grid should have at least where the
# target names them: two or more resident on each, so that none idles and
# one's barrier and combine overlap another's loads (8192x50257 f16 on an
# H200: 1588 us with 50 workgroups, 260 us with 393 of 512 threads;
# docs/findings.md, 'Filling the GPU with the column kernel').
WORKGROUPS_PER_MULTIPROCESSOR = 2


@dataclass(frozen=True)
class Tuning:
    """Knobs the heuristic leaves open (tests and benchmarks may override)."""

    threads: int | None = None  # threads per workgroup; None: the target's preference
    split: int | None = None  # thread-y split of the reduced dim; None: heuristic


@dataclass(frozen=True)
class ColumnReductionParams:
    """Sizes per loop dim as the script's steps take them (its header lists
    each tag's layout); a leading entry for the batch dim of a rank-3 root."""

    # workgroup (Tx kept-column threads, S chunk threads, 1); (S, Tx, 1) when swapped
    launch: Launch
    root_init: int  # operand position of the root's init (after its inputs)
    split: int  # S: chunks of the reduced dim, one per thread y; divides it
    insert_split_dimension: int  # where the split dim goes in the partial tensor
    workgroup_tile: tuple[int, ...]  # [.., 0, Tx*V]: kept columns per workgroup
    workgroup_mapping: tuple[str, ...]
    thread_count: tuple[int, ...]  # threads of the partial op, [.., S, Tx, 0]
    thread_mapping: tuple[str, ...]  # (chunk dim, kept dim) of the partial op's threads
    kept_mapping: tuple[str, ...]  # the kept dim's thread dim, for the combine and output
    reduction_step: tuple[int, ...]  # rows each loop iteration reads
    loop_vector: tuple[int, ...]  # vector shape of one loop iteration, [.., 1, V, K]
    partial_vector: tuple[int, ...]
    combine_threads: tuple[int, ...]
    combine_step: tuple[int, ...]  # partial rows per combine iteration
    combine_vector: tuple[int, ...]
    output_threads: tuple[int, ...]  # threads filling the output with the init
    output_vector: tuple[int, ...]
    exact: bool  # the tiles divide the kept dim: no masked transfers
    # The root is an elementwise epilogue of the reduction: the root's input
    # the reduction produces (None: the root is the reduction), and the
    # epilogue's tile per workgroup [.., T] (its threads: output_threads).
    epilogue_operand: int | None = None
    epilogue_tile: tuple[int, ...] = ()

    @property
    def vector(self) -> int:  # V
        return self.loop_vector[-2]


def reduction_of(d: Dispatch) -> tuple[Dispatch, str | None]:
    """The reduction the kernel computes: the root, or where the root is an
    elementwise epilogue of one reduction (a mean's division, a norm's
    sqrt), that reduction (Dispatch.reduction_hero); and why such an
    epilogue is not taken, or None."""
    hero = d.reduction_hero
    if hero is None:
        return d, None
    why = d.generic_root_problem()
    if why:
        return d, why
    if not d.output_maps_identity or len(d.outputs) != 1:
        return hero, "the epilogue's result is not written in its loop order"
    kept = [r for r, it in zip(hero.loop_ranges, hero.iterator_types) if it != "reduction"]
    if d.loop_ranges != kept or not d.input_maps_identity[hero.epilogue_operand]:
        return hero, "the epilogue's loops are not the reduction's kept loops"
    # Besides the reduction's ops, only the epilogue: its other inputs are
    # loads or constants the script leaves as they are.
    if any(
        p == "linalg.generic" for i, p in enumerate(d.input_producers) if i != hero.epilogue_operand
    ):
        return hero, "the epilogue reads another computed tensor"
    return hero, None


def _check(d: Dispatch) -> str | None:
    """Why the column kernel does not apply, or None."""
    d, why_not = reduction_of(d)
    if why_not:
        return why_not
    why_not = d.generic_root_problem()
    if why_not:
        return why_not
    its = d.iterator_types
    if "reduction" not in its:
        return "root has no reduction dims"
    if its.count("reduction") != 1 or its[-1] != "reduction":
        return "not a single reduced dim (IREE collapses adjacent reduced dims into one)"
    if len(its) not in (2, 3):
        return f"rank-{len(its)} root (column kernel takes (batch?, kept, reduced) loops)"
    if any(s < 0 for s in d.loop_ranges):
        return "dynamic shapes"
    kept_dim = len(its) - 2
    if not d.input_inner_dims or any(i != kept_dim for i in d.input_inner_dims):
        return "innermost input dim is not the kept dim (a row reduction)"
    if len(d.outputs) != 1 or len(d.combiners) != 1 or d.combiners[0] not in COMBINERS:
        return f"combiner {d.combiners} is not one of add/max/min/mul"
    if any(o.indexes for o in d.op_summaries):
        # A column argmax's iota along the reduced dim: the kernel's split
        # and interchange of the loops left linalg.index reading the kept
        # dim (every index came out as its column's number).
        return "an op reads a loop index (linalg.index), which the kernel's loop split renumbers"
    # Besides the root and its init's fill, only direct elementwise producers
    # of its inputs (a convert kept apart); the script fuses them into the root.
    producers = sum(1 for p in d.input_producers if p == "linalg.generic")
    if len(d.ops) - 2 > producers:
        return f"{len(d.ops) - 1} ops besides the root, only direct producers are fused"
    return None


def _split(reduced: int, limit: int) -> int | None:
    """Largest divisor of the reduced length in [2, limit], if any."""
    best = None
    for d in range(1, math.isqrt(reduced) + 1):
        if reduced % d == 0:
            for c in (d, reduced // d):
                if 2 <= c <= limit and (best is None or c > best):
                    best = c
    return best


def _dividing_tile(kept: int, vector: int, threads: int) -> tuple[int, int]:
    """(vector, threads) at most these whose tile divides the kept columns,
    the widest tile first. The epilogue variant takes exact tiles only:
    with a ragged last tile, bufferization copied the output slice through
    workgroup memory around the epilogue (tried on 777x1000 f32, whose
    kernel the check refused for the copies it left as linalg ops)."""
    options = [
        (v * t, v, t)
        for v in (vector >> i for i in range(vector.bit_length()))
        for t in range(threads, 0, -1)
        if kept % (v * t) == 0
    ]
    _, v, t = max(options)
    return v, t


def _smallest_divisor(n: int, limit: int) -> int | None:
    return next((d for d in range(2, min(n, limit) + 1) if n % d == 0), None)


def fill_workgroups(target: Target) -> int:
    """The grid the chooser narrows its workgroups for: at least
    WORKGROUPS_PER_MULTIPROCESSOR per multiprocessor where the target names
    them (8192x50257 on sm_90: 393 workgroups of 128 columns, not 50 of
    1024), else MIN_WORKGROUPS."""
    if target.multiprocessors > 0:
        return WORKGROUPS_PER_MULTIPROCESSOR * target.multiprocessors
    return MIN_WORKGROUPS


def fill_threads(target: Target, workgroups: int) -> int:
    """Threads per workgroup that fill the GPU: the multiprocessors'
    resident threads shared among the grid's workgroups, rounded down to a
    power of two and capped at half the workgroup limit (so that a
    multiprocessor still holds two); 0 where the target names neither
    figure. 393 workgroups on sm_90 (132 x 2048 threads): 512 each."""
    if target.multiprocessors <= 0 or target.multiprocessor_threads <= 0:
        return 0
    share = target.multiprocessors * target.multiprocessor_threads // max(1, workgroups)
    if share < 1:
        return 0
    return min(1 << (share.bit_length() - 1), target.max_threads // 2)


def plan(
    d: Dispatch, target: Target, tuning: Tuning = Tuning()
) -> tuple[ColumnReductionParams | None, str]:
    why_not = _check(d)
    if why_not:
        return None, why_not
    epilogue = d if d.reduction_hero is not None else None
    d, _ = reduction_of(d)
    *batch, kept, reduced = d.loop_ranges
    # The accumulator vector must be legal too (SPIR-V: at most 4 elements),
    # so an f16 input summed in f32 reads 4-element vectors.
    bits = max(o.bits for o in d.inputs + d.outputs + (epilogue.outputs if epilogue else []))
    max_vector = target.vector_elements(
        bits,
        any(o.element_type == "bf16" for o in d.inputs),
        offset_alignment=d.offset_alignment,
    )
    vector = min(max_vector, next_pow2(kept))
    # A kept dim narrower than a subgroup's vectors is all ragged edge: every
    # load would be masked, which costs more than narrower unmasked loads
    # (measured in docs/findings.md, 'Narrow kept dims in the column
    # kernel'). Take the widest vector that divides it.
    if kept % vector and kept < target.subgroup_size * vector:
        while kept % vector:
            vector //= 2
    want = tuning.threads or target.preferred_threads
    threads_x = min(want, next_pow2(math.ceil(kept / vector)))
    rows = batch[0] if batch else 1
    # Narrower workgroups (down to one subgroup, still a coalesced row of
    # vectors) until the grid has enough of them: see fill_workgroups.
    enough = fill_workgroups(target)
    while (
        threads_x > target.subgroup_size and math.ceil(kept / (threads_x * vector)) * rows < enough
    ):
        threads_x //= 2
    if epilogue and kept % (threads_x * vector):
        vector, threads_x = _dividing_tile(kept, vector, threads_x)
        if vector * threads_x < min(kept, target.subgroup_size):
            return None, (
                f"an epilogue after a column reduction takes workgroup tiles that divide the "
                f"kept columns, and {kept} has none of at least a subgroup"
            )
    tile = threads_x * vector
    grid_x = math.ceil(kept / tile)
    workgroups = grid_x * rows
    # Fill the workgroup with thread-y rows; with few workgroups also use the
    # target's larger thread limit, so the reduced dim gets the parallelism
    # the kept dim cannot give.
    budget = want if workgroups >= MIN_WORKGROUPS else target.max_threads // 2
    if tuning.threads is None:
        budget = max(budget, fill_threads(target, workgroups))
    limit = tuning.split or max(2, budget // threads_x)
    # The partials of a workgroup must fit its shared memory (f32 slots).
    cap = min(target.shared_memory_bytes // (4 * tile), target.max_threads // threads_x)
    # The largest divisor within the wanted split, else the smallest one the
    # workgroup can hold (an odd length gets 3, 5, ... rows of threads).
    split = _split(reduced, min(limit, cap)) or _smallest_divisor(reduced, cap)
    if split is None:
        return None, f"reduced length {reduced} has no divisor in [2, {cap}] to split it by"
    why_not = target.grid_refusal((grid_x, rows))
    if why_not:
        return None, why_not
    # Thread x over the kept columns (coalesced), thread y over the row
    # chunks; swapped when x would be narrower than a subgroup on a target
    # that forms subgroups from x alone (lavapipe: its idle lanes would cost
    # more than the lost coalescing, which a CPU does not have).
    swap = target.subgroups_along_x and threads_x < target.subgroup_size
    kept_dim, chunk_dim = ("y", "x") if swap else ("x", "y")
    lead = (0,) * len(batch)  # loop dims before the kept one, per op
    one = (1,) * len(batch)
    params = ColumnReductionParams(
        launch=Launch(
            (grid_x, batch[0] if batch else 1, 1),
            (split, threads_x, 1) if swap else (threads_x, split, 1),
            target.subgroup_size,
        ),
        root_init=len(d.inputs),
        split=split,
        insert_split_dimension=len(batch),
        workgroup_tile=one + (0, tile),
        workgroup_mapping=(("y",) if batch else ()) + ("x",),
        thread_count=lead + (split, threads_x, 0),
        thread_mapping=(chunk_dim, kept_dim),
        kept_mapping=(kept_dim,),
        reduction_step=lead + (0, 0, REDUCTION_STEP),
        loop_vector=one + (1, vector, REDUCTION_STEP),
        partial_vector=one + (1, vector),
        combine_threads=lead + (0, threads_x),
        combine_step=lead + (1, 0),
        combine_vector=one + (1, vector),
        output_threads=lead + (threads_x,),
        output_vector=one + (vector,),
        exact=kept % tile == 0,
        epilogue_operand=d.epilogue_operand if epilogue else None,
        epilogue_tile=one + (tile,),
    )
    notes = "" if params.exact else ", ragged edge masked"
    if epilogue:
        notes += ", then its elementwise epilogue in registers"
    if swap:
        notes += f", row chunks on thread x ({threads_x} kept threads < a subgroup)"
    return params, f"column reduction {kept} kept x {reduced} reduced{notes}"


def describe(p: ColumnReductionParams) -> str:
    return (
        f"tile={list(p.workgroup_tile)} grid={list(p.launch.grid)} "
        f"wg={list(p.launch.workgroup)} split={p.split} "
        f"vector={p.vector}{'' if p.exact else ' masked'}"
        f"{' epilogue' if p.epilogue_operand is not None else ''}"
    )


def steps(p: ColumnReductionParams) -> dict[str, str]:
    if p.epilogue_operand is None:
        return {
            "reduction": PASS,
            "workgroups": "tilefuse_column_reduction_workgroups",
            "threads": "tilefuse_column_reduction_threads",
        }
    return {
        "reduction": "tilefuse_column_reduction_reduction",
        "workgroups": "tilefuse_column_reduction_workgroups_epilogue",
        "threads": "tilefuse_column_reduction_threads_epilogue",
    }


def attributes(p: ColumnReductionParams, ctx: ir.Context) -> dict:
    """Values of the tagged steps of transform_scripts/column_reduction.mlir."""
    return {
        "root_init": {"raw_position_list": attrs.i64_array([p.root_init], ctx)},
        "split": {
            "split_factor": attrs.i64(p.split, ctx),
            "insert_split_dimension": attrs.i64(p.insert_split_dimension, ctx),
        },
        "workgroup_tile": {
            "static_tile_sizes": attrs.i64_array(p.workgroup_tile, ctx),
            "mapping": attrs.mapping("block", p.workgroup_mapping, ctx),
        },
        "thread_count": {
            "static_num_threads": attrs.i64_array(p.thread_count, ctx),
            "mapping": attrs.mapping("thread", p.thread_mapping, ctx),
        },
        "reduction_step": attrs.static_sizes(p.reduction_step, ctx),
        "loop_vector": attrs.vector_sizes(p.loop_vector, ctx),
        "partial_vector": attrs.vector_sizes(p.partial_vector, ctx),
        "combine_threads": {
            "static_num_threads": attrs.i64_array(p.combine_threads, ctx),
            "mapping": attrs.mapping("thread", p.kept_mapping, ctx),
        },
        "combine_step": attrs.static_sizes(p.combine_step, ctx),
        "combine_vector": attrs.vector_sizes(p.combine_vector, ctx),
        "output_threads": {
            "static_num_threads": attrs.i64_array(p.output_threads, ctx),
            "mapping": attrs.mapping("thread", p.kept_mapping, ctx),
        },
        "output_vector": attrs.vector_sizes(p.output_vector, ctx),
        "epilogue_operand": {"raw_position_list": attrs.i64_array([p.epilogue_operand or 0], ctx)},
        "epilogue_tile": {
            "static_tile_sizes": attrs.i64_array(p.epilogue_tile, ctx),
            "mapping": attrs.mapping("block", p.workgroup_mapping, ctx),
        },
        "epilogue_threads": {
            "static_num_threads": attrs.i64_array(p.output_threads, ctx),
            "mapping": attrs.mapping("thread", p.kept_mapping, ctx),
        },
        **attrs.workgroup(p.launch, ctx),
    }


def lane_loop(d: Dispatch, p: ColumnReductionParams) -> int:
    """Thread x walks the kept columns (the loop before the reduced one),
    unless the chooser swapped it onto the row chunks (lavapipe with few
    kept columns): then the reduced loop, a chunk of rows per lane."""
    if p.epilogue_operand is not None:
        # The root is the epilogue, over (batch?, kept): its lanes walk kept.
        return len(d.loop_ranges) - 1
    return len(d.loop_ranges) - (1 if p.kept_mapping == ("y",) else 2)


STRATEGY = Strategy(
    name="column_reduction",
    plan=plan,
    describe=describe,
    attributes=attributes,
    lane_loop=lane_loop,
    steps=steps,
)
