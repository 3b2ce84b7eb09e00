"""Parameters of the row-reduction kernel (transform_scripts/row_reduction.mlir).

Seed: XLA's row-reduction emitter. One workgroup per row; the row is read as
C chunks of T*V elements, thread t owning the V columns at t*V of every chunk
(coalesced 128-bit loads) and looping over the chunks in its own code with a
V-wide partial in registers (no barrier in the loop). The partials are
combined by subgroup shuffles, then across subgroups through workgroup
memory. The combine across subgroups is a single level (IREE's group
reduction), so at most subgroup_size subgroups: T <= subgroup_size**2.

Heuristics: V is a 128-bit vector of the widest input element. T gives each
thread about VECTORS_PER_THREAD vectors of the row, rounded up to a power of
two, at least one subgroup (short rows: one subgroup per row) and at most the
target's preferred thread count and subgroup_size**2: a row of 1000 f32 gets
one 8-lane subgroup on lavapipe (31 chunks) and one 32-lane warp on CUDA (7
chunks); long rows get more threads. Fewer threads mean fewer subgroups to
combine; on lavapipe, which runs a workgroup's subgroups one after another on
one CPU thread, that is what costs (measured in docs/findings.md, 'Threads per
row'). Rows that T*V does not divide get their last
r < T*V elements (the tail) added into a second accumulator, one masked
vector per thread (never a padded copy); rows shorter than one subgroup's
T*V are all tail. When a row gets a single subgroup (T = subgroup size), R
rows share a workgroup [T, R, 1] (R*T up to the preferred thread count, R
dividing the innermost row count): on CUDA a one-warp block per row caps
occupancy at 50% (sm_80, 4096x1000 f32: 32 threads 50% -> 256 threads 100%).
"""

import math
from dataclasses import dataclass

from iree.compiler import ir

from ..dispatch.read import Dispatch
from ..targets import Target
from . import attrs
from .contract import SKIP, Launch, Strategy
from .row_roots import COMBINERS, NAN_PROPAGATING_MINMAX, RowParams, lone_reduction_refusal
from .sizes import next_pow2, packed_rows, pow2_at_most

# Target vectors (of V elements) per thread when sizing T: enough work per
# thread to hide the combine, few enough threads to keep it cheap.
VECTORS_PER_THREAD = 64


@dataclass(frozen=True)
class RowReductionParams(RowParams):
    """Sizes are per loop dim (the parallel dims, then the row), as the
    script's steps take them; the split row has a chunk dim before the row."""

    reduction: str  # the combiner ("add", "max", ...), for explain
    layout: str  # "divisible" (chunks only), "ragged" (chunks and a tail), "short" (all tail)
    root_inputs: tuple[int, ...]  # the root's input operands (all): their producers fuse
    root_init: int  # operand number of the root's init (after its inputs)
    workgroup_tile: tuple[int, ...]  # R rows of the innermost parallel dim, 1 of the others
    workgroup_mapping: tuple[str, ...]
    reduced_dim: int  # the row's loop dim (after the parallel ones)
    # The split point: where the tail starts (n: no tail; a short row is all
    # tail, the driver then hands the whole row to the tail steps).
    full_length: int
    chunk: tuple[int, ...]  # one chunk of the row: 0 on the parallel dims, then T*V
    chunk_step: tuple[int, ...]  # one chunk per iteration of a thread's loop
    # Threads of the split row [..., C, T*V]: T on the T*V columns, none on
    # the C chunks (each thread loops over them), R on the rows when R > 1.
    chunk_threads: tuple[int, ...]
    thread_count: tuple[int, ...]  # the tail's fill: T threads (and R on the rows)
    tail_tile: tuple[int, ...]  # each thread's slice of the tail: one V-vector of one row
    combine_threads: tuple[int, ...]  # threads y of the combine, one per row
    thread_mapping: tuple[str, ...]
    vector_sizes: tuple[int, ...]

    @property
    def vector(self) -> int:  # V
        return self.vector_sizes[-1]

    @property
    def ragged(self) -> bool:
        return self.layout != "divisible"


def _vector(d: Dispatch, target: Target, n: int) -> int:
    bits = max(o.bits for o in d.inputs) if d.inputs else d.outputs[0].bits
    bf16 = any(o.element_type == "bf16" for o in d.inputs)
    vector = target.vector_elements(bits, bf16, offset_alignment=d.offset_alignment)
    if target.backend == "spirv":
        # SPIR-V vectors hold at most 4 elements: an f32 accumulator of an
        # 8-wide f16 load does not legalize there, so size V by it too.
        vector = min(
            vector,
            target.vector_elements(d.outputs[0].bits, offset_alignment=d.offset_alignment),
        )
        # IREE 3.13 lowers a lane's `vector.reduction <maximumf|minimumf>`
        # of V > 1 elements to a chain of GL.FMax/FMin, which drops NaN
        # (lavapipe: max of a row holding a NaN came back finite). With
        # V = 1 that reduction is a single element and the cross-lane steps
        # are scalar arith.maximumf/minimumf, which keep NaN.
        if d.combiners and d.combiners[0] in NAN_PROPAGATING_MINMAX:
            vector = 1
    return min(vector, pow2_at_most(n))


def plan(d: Dispatch, target: Target) -> tuple[RowReductionParams | None, str]:
    why_not = lone_reduction_refusal(d)
    if why_not:
        return None, why_not
    *rows, n = d.loop_ranges
    parallel = len(rows)
    sg = target.subgroup_size
    vector = _vector(d, target, n)
    max_threads = max(sg, min(target.preferred_threads, target.max_threads, sg * sg))
    threads = min(max(next_pow2(math.ceil(n / (vector * VECTORS_PER_THREAD))), sg), max_threads)
    # A row shorter than one chunk: narrower vectors first, so that the chunk
    # loop still has work (the tail takes the rest).
    while vector > 1 and threads * vector > n:
        vector //= 2
    chunk = threads * vector
    full = n // chunk * chunk
    layout = "divisible" if full == n else ("ragged" if full else "short")
    acc_bytes = max(4, d.outputs[0].bits // 8)
    accumulators = 1 if layout == "divisible" else 2
    # Workgroup memory per row: the accumulators, plus IREE's slot per
    # subgroup when a row spans several (one subgroup combines by shuffles
    # alone).
    row_bytes = accumulators * chunk * acc_bytes + (threads // sg * 4 if threads > sg else 0)
    # Rows share a workgroup up to the target's packed_row_threads (this
    # kernel has no barrier with one-subgroup rows), fewer rather than none
    # when their accumulators do not all fit in workgroup memory.
    per_wg = packed_rows(
        rows[-1] if rows else 1,
        threads,
        sg,
        target.packed_row_threads or target.preferred_threads,
        row_bytes,
        target,
    )
    shared = per_wg * row_bytes
    if shared > target.shared_memory_bytes:
        return None, f"{shared} bytes of workgroup memory > {target.shared_memory_bytes}"
    # Grid: innermost parallel dim to x, then y, z.
    grid = list(reversed(rows[:-1])) + [1] * (3 - parallel)
    grid.insert(0, rows[-1] // per_wg)
    why_not = target.grid_refusal(grid)
    if why_not:
        return None, why_not
    params = RowReductionParams(
        launch=Launch(tuple(grid), (threads, per_wg, 1), sg),
        reduction=COMBINERS[d.combiners[0]],
        layout=layout,
        root_inputs=tuple(range(len(d.inputs))),
        root_init=len(d.inputs),
        workgroup_tile=(1,) * (parallel - 1) + (per_wg,),
        workgroup_mapping=("z", "y", "x")[3 - parallel :],
        reduced_dim=parallel,
        full_length=full or n,
        chunk=(0,) * parallel + (chunk,),
        chunk_step=(0,) * parallel + (1, 0),
        **_thread_tiles(parallel, per_wg, threads, vector),
        vector_sizes=(1,) * parallel + (vector,),
    )
    chunks = f"{full // chunk} chunks of {chunk}" if full else "no full chunk"
    notes = f", tail of {n - full} masked" if full != n else ""
    if per_wg > 1:
        notes += f", {per_wg} rows per workgroup"
    kind = params.reduction
    return params, (
        f"{kind}-reduction of rows of {n}, {threads} threads x {vector}-vectors, {chunks}{notes}"
    )


def _thread_tiles(parallel: int, per_wg: int, threads: int, vector: int) -> dict:
    """Thread-level tiling. One row per workgroup: the T threads along the
    row on x. R rows: each row also gets its own thread y (the innermost
    parallel dim is tiled by R threads, one row each), and the combine of
    row y runs on the threads x of that y, behind a `thread_id.x < 1` guard
    that step 10 turns into a T-lane warp op."""
    if per_wg == 1:
        lead = (0,) * parallel
        return {
            "chunk_threads": lead + (0, threads),
            "thread_count": lead + (threads,),
            "tail_tile": lead + (vector,),
            "combine_threads": (1,),
            "thread_mapping": ("x",),
        }
    lead = (0,) * (parallel - 1)
    return {
        "chunk_threads": lead + (per_wg, 0, threads),
        "thread_count": lead + (per_wg, threads),
        "tail_tile": lead + (1, vector),
        "combine_threads": lead + (per_wg,),
        "thread_mapping": ("y", "x"),
    }


def describe(p: RowReductionParams) -> str:
    return (
        f"grid={list(p.launch.grid)} wg={list(p.launch.workgroup)} "
        f"vector={p.vector} "
        f"chunk={p.chunk[-1]} {p.reduction}{' ragged' if p.ragged else ''}"
    )


def attributes(p: RowReductionParams, ctx: ir.Context) -> dict:
    """Values of the tagged steps of transform_scripts/row_reduction.mlir."""
    threads = attrs.mapping("thread", p.thread_mapping, ctx)
    return {
        "root_inputs": {"raw_position_list": attrs.i64_array(p.root_inputs, ctx)},
        "root_init": {"operand_number": attrs.i64(p.root_init, ctx)},
        "workgroup_tile": {
            "static_tile_sizes": attrs.i64_array(p.workgroup_tile, ctx),
            "mapping": attrs.mapping("block", p.workgroup_mapping, ctx),
        },
        "full_length": {
            "dimension": attrs.i64(p.reduced_dim, ctx),
            "static_chunk_sizes": attrs.i64(p.full_length, ctx),
        },
        "chunk": {
            "split_factor": attrs.i64(p.chunk[-1], ctx),
            "insert_split_dimension": attrs.i64(p.reduced_dim, ctx),
        },
        "tail_chunk": {"tile_sizes": attrs.i64_list(p.chunk, ctx)},
        "chunk_threads": {
            "static_num_threads": attrs.i64_array(p.chunk_threads, ctx),
            "mapping": threads,
        },
        "chunk_step": attrs.static_sizes(p.chunk_step, ctx),
        "thread_count": {
            "static_num_threads": attrs.i64_array(p.thread_count, ctx),
            "mapping": threads,
        },
        "tail_tile": {
            "static_tile_sizes": attrs.i64_array(p.tail_tile, ctx),
            "mapping": threads,
        },
        "combine_threads": {
            "static_num_threads": attrs.i64_array(p.combine_threads, ctx),
        },
        "vector_sizes": attrs.vector_sizes(p.vector_sizes, ctx),
        "warp_size": {"warp_size": attrs.i64(p.threads, ctx)},
        **attrs.workgroup(p.launch, ctx),
    }


def steps(p: RowReductionParams) -> dict[str, str]:
    """Steps 3-7 of transform_scripts/row_reduction.mlir by the row's layout:
    divisible (chunks only), ragged (chunks and a tail), short (all tail)."""
    chunks = p.layout != "short"
    tail = p.layout != "divisible"
    return {
        "split_row": "row_reduction_split_row" if chunks else "row_reduction_all_tail",
        "chunks": "row_reduction_chunks" if chunks else "row_reduction_no_chunks",
        "tail": "row_reduction_tail" if tail else "row_reduction_no_tail",
        "combine": "row_reduction_combine_tail" if tail else "row_reduction_combine_chunks",
        "vectorize_chunks": "row_reduction_vectorize_chunks" if chunks else SKIP,
        "vectorize_tail": "row_reduction_vectorize_tail"
        if tail
        else "row_reduction_no_tail_vectors",
    }


STRATEGY = Strategy(
    name="row_reduction",
    plan=plan,
    describe=describe,
    attributes=attributes,
    steps=steps,
)
