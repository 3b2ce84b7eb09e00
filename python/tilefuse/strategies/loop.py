"""Parameters of the loop kernel (transform_scripts/loop.mlir).

Seed: XLA's loop emitter. Threads of a workgroup cover the innermost dim, one
vector each, so a warp reads a contiguous run of memory; extra rows go to the
workgroup's y dim when a row is short; the next outer dim goes to grid z.
Sizes that divide are chosen when a good divisor exists (every vector full,
no masks); otherwise the last tile is ragged and masked.

A root whose body reads a tensor by tensor.extract at computed indices (a
gather: an embedding lookup, RoPE's rotate-half, a reverse) is vectorized
with `vectorize_nd_extract`: Linalg's vectorizer reads each extract as a
contiguous load, a broadcast load or a vector.gather, and each back end
lowers a gather to one scalar load per element (SPIR-V: IREE's conditional
loads; CUDA: llvm.masked.gather, scalarized by NVPTX). The tensor it reads
stays where it is (a load the body captures); only the root's operands'
producers are fused.

A root input produced by a tensor.pad (high padding of a loaded tensor, e.g.
to a tile size) is read through the pad: each thread's vector load is masked
by the source's bounds and the masked-off lanes take the padding value, so
no padded copy exists anywhere (seed 002's TensorPadSpecialization).
"""

import dataclasses
import functools
import math
from dataclasses import dataclass

from iree.compiler import ir

from ..dispatch.read import Dispatch
from ..targets import Target
from . import attrs
from .contract import PASS, SKIP, Launch, Strategy
from .sizes import largest_divisor_at_most

MAX_RANK = 6
# Leading dims beyond the grid's three become vector dims of each thread;
# keep that vector small.
MAX_SERIAL_ELEMENTS = 8


@dataclass(frozen=True)
class LoopParams:
    """Per-loop-dim sizes, outermost dim first, as the script's steps take them."""

    launch: Launch
    root_inputs: tuple[int, ...]  # the root's input operands (all): their producers fuse
    workgroup_tile: tuple[int, ...]  # 0: a dim beyond the grid, not tiled
    workgroup_mapping: tuple[str, ...]  # grid dim of each tiled dim ("z", "y", "x")
    thread_count: tuple[int, ...]  # threads per dim; 0: not distributed
    thread_mapping: tuple[str, ...]
    vector_sizes: tuple[int, ...]  # each thread's vector; dims beyond the grid are serial
    exact: bool  # the tiles divide the shape: no masked transfers
    # The root or a producer is an arith op on a tensor: written as a generic first.
    tensor_arith: bool = False
    # CUDA: transfers become loads/stores in the script (NVVM cannot take a
    # masked broadcasting read; SPIR-V lowers them itself).
    lower_transfers: bool = False
    # A ragged tile written transposed: its masked 2-D writes are unrolled
    # into 1-D ones (no back end lowers a masked transfer of rank 2).
    split_writes: bool = False


def _check(d: Dispatch) -> str | None:
    """Why the loop kernel does not apply, or None."""
    why_not = d.generic_root_problem(converts_casts=True, takes_gathers=True)
    if why_not:
        return why_not
    if "reduction" in d.iterator_types:
        return "root has reduction dims"
    why_not = _rank_refusal(d.loop_ranges)
    if why_not:
        return why_not
    if any(s < 0 for s in d.loop_ranges):
        return "dynamic shapes"
    for position, problem in d.pad_inputs.items():
        if problem:
            return f"input {position} is a tensor.pad it cannot read through: {problem}"
    serial_pad = _serial_pad_refusal(d.loop_ranges) if d.pad_inputs else None
    if serial_pad:
        return serial_pad
    others = len(d.ops) - 1  # d.ops lists the computing ops, the root among them
    reducing = [p for p in d.input_producers if p in REDUCING_PRODUCERS]
    if reducing:
        # Fused into a tile, such an op would compute only the tile's slice
        # of what it reduces over (and linalg.softmax is not tileable here:
        # the kernel kept it whole).
        return f"a producer reduces ({reducing[0]}): only elementwise producers are fused"
    fusable = [p for p in d.input_producers if p and p.startswith("linalg.")]
    fusable += [p for p in d.input_producers if p == "tensor.pad"]
    # A reshape of a load (IREE keeps one when the load is a strided slice,
    # as of GPT-2's fused q/k/v projection) is a view: cloned into the tile.
    fusable += [p for p in d.input_producers if p in RESHAPES]
    # An arith op on a whole tensor (a bool input's arith.trunci from the
    # i8 it is stored as) becomes a linalg.generic in step "tensor_arith".
    fusable += d.arith_producers
    if others > len(fusable):
        return f"{others} ops besides the root, only direct producers are fused"
    return None


def _broadcast_arith_refusal(d: Dispatch, target: Target) -> str | None:
    """Step "tensor_arith" folds an arith producer of lower rank than the
    root into it (one vectorization cannot take a rank-1 op in a rank-2
    tile), but IREE's greedy fusion stops at 3 operands: on SPIR-V the
    kernel then failed in phase 2 (two bool masks of [S] selecting [S, D]
    rows: jnp.take's fill mode, in every Hugging Face Flax embedding). CUDA
    compiles such a kernel."""
    if target.backend == "cuda" or len(d.inputs) <= GREEDY_FUSION_OPERANDS:
        return None
    for producer, root_map in zip(d.input_producers, d.root_maps):
        if (
            producer
            and producer.startswith("arith.")
            and len(root_map.results) < len(d.loop_ranges)
        ):
            return (
                f"{producer} of lower rank broadcast into a root of {len(d.inputs)} inputs: "
                f"IREE's greedy fusion folds it only into roots of at most {GREEDY_FUSION_OPERANDS}"
            )
    return None


RESHAPES = ("tensor.expand_shape", "tensor.collapse_shape")
# transform.apply_patterns.iree.linalg_elementwise_greedy_fusion fuses a
# producer only if the fused op reads at most this many operands.
GREEDY_FUSION_OPERANDS = 3


def _computes_a_producer(d: Dispatch) -> bool:
    """A producer fused into each thread's tile computes a tensor (a linalg
    op, or an arith op on a tensor written as one). In a ragged tile its
    vector is written and read back under a mask, which nothing forwards:
    bufferization put it in one workgroup buffer that every thread wrote
    and read at the same address, with no barrier (found by an unseen
    program: the f16 -> f32 convert before a softmax's max keys, 1156
    elements in tiles of 512, gave wrong keys and NaN attention). Such a
    kernel takes exact tiles only, as one reading through a pad does."""
    return bool(d.arith_producers) or any(p and p.startswith("linalg.") for p in d.input_producers)


# The widest vector step "split_writes" takes: it writes a transposed vector
# one element per output row, extracted at the row's index; SPIR-V has no
# such extract from an 8-wide vector ("failed to legalize operation
# 'vector.from_elements'": a [2, 79, 128] -> [2, 128, 79] f16 transpose).
SPLIT_WRITE_VECTOR = 4
# Named ops among a root's producers that reduce (IREE leaves a softmax
# before a transposed write as one linalg.softmax in the dispatch).
REDUCING_PRODUCERS = ("linalg.softmax", "linalg.reduce")


def plan(d: Dispatch, target: Target) -> tuple[LoopParams | None, str]:
    why_not = _check(d) or _broadcast_arith_refusal(d, target)
    if why_not:
        return None, why_not
    # The fused producers' loads count too: a bf16 compare's i1 result is
    # the root's input when the root is its widening (tensor_arith).
    values = d.inputs + d.outputs + d.loaded
    bits = max(o.bits for o in values)
    bf16 = any(o.element_type == "bf16" for o in values)
    layout = functools.partial(
        _layout,
        d.loop_ranges,
        bits,
        bf16,
        target,
        exact_only=bool(d.pad_inputs) or _computes_a_producer(d),
        narrow_ints=d.repacks_narrow_ints,
        offset_alignment=d.offset_alignment,
    )
    params, why_not = layout()
    if params is None:
        return None, why_not
    split_writes = not params.exact and not d.output_maps_identity
    if split_writes and params.vector_sizes[-1] > SPLIT_WRITE_VECTOR:
        params, why_not = layout(vector_limit=SPLIT_WRITE_VECTOR)
        if params is None:
            return None, why_not
    params = dataclasses.replace(
        params,
        root_inputs=() if d.cast_of_no_inputs else tuple(range(len(d.inputs))),
        tensor_arith=bool(d.root_cast or d.arith_producers),
        split_writes=split_writes,
    )
    notes = "" if params.exact else ", ragged edge masked"
    if d.pad_inputs:
        notes += f", {len(d.pad_inputs)} pad(s) read through masked loads"
    if d.root_gathers:
        notes += ", body gathers by tensor.extract"
    if not d.inputs or d.cast_of_no_inputs:
        notes += ", no inputs (nothing to fuse)"
    for cast in ([d.root_cast] if d.root_cast else []) + d.arith_producers:
        notes += f", {cast} on a tensor written as a linalg.generic"
    if not d.output_maps_identity:
        # Reads stay coalesced, writes are strided: a shared-memory transpose
        # strategy is future work (fusion issue's transpose kind).
        notes += ", transposed write"
    return params, f"all-parallel rank-{len(d.loop_ranges)} root{notes}"


def shape_refusal(shape: list[int], bits: int, bf16: bool, target: Target) -> str | None:
    """Why the loop kernel would refuse a root of this static shape that
    reads through a pad, or None. The fusion planner asks before it puts a
    pad in a loop group: IREE's own codegen cannot compile a dispatch holding
    a pad, so such a group must be one the loop kernel takes."""
    why_not = _rank_refusal(shape) or _serial_pad_refusal(shape)
    if why_not:
        return why_not
    params, why_not = _layout(shape, bits, bf16, target, exact_only=True)
    return None if params else why_not


def _rank_refusal(shape: list[int]) -> str | None:
    if not shape:
        return "rank-0 root (a single element: nothing to tile)"
    if len(shape) > MAX_RANK:
        return f"rank {len(shape)} > {MAX_RANK}"
    return None


def _serial_pad_refusal(shape: list[int]) -> str | None:
    # Dims beyond the 3-D grid become leading dims of each thread's vector;
    # a pad's load masked along them is a multi-dim masked transfer, which
    # nothing in the kernel's lowering breaks into 1-D loads.
    serial = math.prod(shape[: max(0, len(shape) - 3)])
    if serial > 1:
        return f"a pad read through a rank-{len(shape)} root with {serial} elements beyond the grid"
    return None


def _layout(
    shape: list[int],
    bits: int,
    bf16: bool,
    target: Target,
    exact_only: bool = False,
    narrow_ints: bool = False,
    offset_alignment: int = 0,
    vector_limit: int | None = None,
) -> tuple[LoopParams | None, str]:
    """Tiles, threads and vector for a root of this shape, or None and why
    (no root inputs yet: `plan` adds the dispatch's).

    exact_only: every thread gets a full vector (tiles divide the shape),
    whatever the thread count. A root that reads through a pad needs it: in
    a ragged tile the pad's vector is written and read back under a mask,
    which nothing forwards, so it would be staged through workgroup memory.
    """
    rank = len(shape)
    n = shape[-1]
    # Rank 3 and up: one of the dims outside y and x goes to grid z, the
    # others are serial in each thread's vector. The largest goes to z, so
    # that the serial ones are few (patchify's [B*H/P, P, W/P, P*C] =
    # [16, 4, 8, 12]: 4 serial, not 16; GQA's [1, 2, 4, 32, 32]: 2), the
    # innermost on a tie; unless a pad is read (its masked loads must not
    # span a serial dim inside the vector: _serial_pad_refusal), where it
    # is the one next to y.
    z_dim = rank - 3 if rank >= 3 else None
    if rank >= 4 and not exact_only:
        z_dim = max(range(rank - 2), key=lambda d: (shape[d], d))
    serial_dims = [d for d in range(max(0, rank - 2)) if d != z_dim and shape[d] > 1]
    # A masked transfer with a serial dim stays a multi-dim transfer on
    # SPIR-V ("'vector.transfer_read' op with rank > 1 should be broken down
    # by prior passes": [2, 3, 13, 13], 9 rows of 13 per workgroup), where
    # nothing lowers transfers to loads (CUDA's lower_transfers does):
    # there, tiles divide the shape.
    exact_tiles = exact_only or (bool(serial_dims) and target.backend != "cuda")
    # Vector: as many elements as fit vector_bits, and it must divide the row.
    max_vector = target.vector_elements(
        bits, bf16, narrow_ints=narrow_ints, offset_alignment=offset_alignment
    )
    max_vector = min(max_vector, vector_limit or max_vector)
    vector = 1
    while vector * 2 <= max_vector and n % (vector * 2) == 0:
        vector *= 2
    cols = n // vector
    pref = target.preferred_threads
    narrowed = False  # exact tiles took fewer threads than a ragged tile would
    if cols <= pref:
        threads_x, exact_x = cols, True
    else:
        divisor = largest_divisor_at_most(cols, pref)
        if divisor * 2 >= pref or exact_tiles:
            threads_x, exact_x = divisor, True
            narrowed = divisor * 2 < pref
        else:
            threads_x, exact_x = pref, False
    rows, exact_y = 1, True
    if rank >= 2:
        m = shape[-2]
        want = max(1, min(m, pref // threads_x))
        rows = largest_divisor_at_most(m, want)
        if rows * 2 < want:
            if exact_tiles:
                narrowed = True
            else:
                rows, exact_y = want, m % want == 0
    serial = math.prod(shape[d] for d in range(max(0, rank - 2)) if d != z_dim)
    if serial > MAX_SERIAL_ELEMENTS:
        return None, f"rank {rank} with {serial} elements in dims beyond the 3-D grid"
    if len(serial_dims) > 1 and not (exact_x and exact_y):
        # A masked transfer over two serial dims and the row stays a
        # multi-dim transfer ("should be broken down by prior passes":
        # [41, 2, 3, 37, 5]); with one, or unmasked, it is unrolled to rows.
        return None, (
            f"rank {rank} with {len(serial_dims)} dims beyond the 3-D grid and a ragged tile "
            "(masked transfers over two serial dims are not broken down)"
        )
    if (exact_only or narrowed) and threads_x * rows < target.subgroup_size:
        return None, (
            f"tiles that divide {shape} give {threads_x * rows} threads per workgroup, "
            f"fewer than a subgroup ({target.subgroup_size})"
        )

    tile_x = threads_x * vector
    grid = [
        math.ceil(n / tile_x),
        math.ceil(shape[-2] / rows) if rank >= 2 else 1,
        shape[z_dim] if z_dim is not None else 1,
    ]
    why_not = target.grid_refusal(grid)
    if why_not:
        return None, why_not

    # Outer dims (beyond y and x): 1 on grid z, 0 (whole, serial) otherwise.
    outer = range(max(0, rank - 2))
    workgroup_tile = (
        [1 if d == z_dim else 0 for d in outer] + ([rows] if rank >= 2 else []) + [tile_x]
    )
    block_mapping = (["z"] if rank >= 3 else []) + (["y"] if rank >= 2 else []) + ["x"]
    thread_count = [0] * max(0, rank - 2) + ([rows] if rank >= 2 else []) + [threads_x]
    thread_mapping = (["y"] if rank >= 2 else []) + ["x"]
    vector_sizes = (
        [1 if d == z_dim else shape[d] for d in outer] + ([1] if rank >= 2 else []) + [vector]
    )
    params = LoopParams(
        launch=Launch(tuple(grid), (threads_x, rows, 1), target.subgroup_size),
        root_inputs=(),
        workgroup_tile=tuple(workgroup_tile),
        workgroup_mapping=tuple(block_mapping),
        thread_count=tuple(thread_count),
        thread_mapping=tuple(thread_mapping),
        vector_sizes=tuple(vector_sizes),
        exact=exact_x and exact_y,
        lower_transfers=target.backend == "cuda",
    )
    return params, ""


def describe(p: LoopParams) -> str:
    return (
        f"tile={list(p.workgroup_tile)} grid={list(p.launch.grid)} "
        f"wg={list(p.launch.workgroup)} "
        f"vector={p.vector_sizes[-1]}{'' if p.exact else ' masked'}"
    )


def library_params(rank: int, num_inputs: int, target: Target) -> LoopParams:
    """Shape-agnostic parameters for library mode (`tilefuse flags`).

    Without shapes, every tile may be ragged: one row per workgroup, the
    target's preferred thread count along the row, 32-bit-sized vectors, all
    transfers masked.
    """
    vector = target.vector_elements(32)
    threads = target.preferred_threads
    return LoopParams(
        # Library mode has no grid: the kernel is built without shapes and
        # IREE counts each dispatch's workgroups. (0, 0, 0) fills the field;
        # nothing reads it (the driver's alias stage is not library mode).
        launch=Launch((0, 0, 0), (threads, 1, 1), target.subgroup_size),
        root_inputs=tuple(range(num_inputs)),
        workgroup_tile=(1,) * (rank - 1) + (threads * vector,),
        workgroup_mapping=("z", "y", "x")[3 - rank :],
        thread_count=(0,) * (rank - 1) + (threads,),
        thread_mapping=("x",),
        vector_sizes=(1,) * (rank - 1) + (vector,),
        exact=False,
        lower_transfers=target.backend == "cuda",
    )


def attributes(p: LoopParams, ctx: ir.Context) -> dict:
    """Values of the tagged steps of transform_scripts/loop.mlir."""
    return {
        "root_inputs": {"raw_position_list": attrs.i64_array(p.root_inputs, ctx)},
        "workgroup_tile": {
            "static_tile_sizes": attrs.i64_array(p.workgroup_tile, ctx),
            "mapping": attrs.mapping("block", p.workgroup_mapping, ctx),
        },
        "thread_count": {
            "static_num_threads": attrs.i64_array(p.thread_count, ctx),
            "mapping": attrs.mapping("thread", p.thread_mapping, ctx),
        },
        "vector_sizes": attrs.vector_sizes(p.vector_sizes, ctx),
        **attrs.workgroup(p.launch, ctx),
    }


def steps(p: LoopParams) -> dict[str, str]:
    return {
        "tensor_arith": "tilefuse_loop_tensor_arith" if p.tensor_arith else PASS,
        "producers": "tilefuse_loop_producers" if p.root_inputs else "tilefuse_loop_no_producers",
        "lower_transfers": "tilefuse_loop_lower_transfers" if p.lower_transfers else SKIP,
        "split_writes": "tilefuse_loop_split_writes" if p.split_writes else SKIP,
    }


STRATEGY = Strategy(
    name="loop",
    plan=plan,
    describe=describe,
    attributes=attributes,
    steps=steps,
    pad_shape_refusal=shape_refusal,
)
