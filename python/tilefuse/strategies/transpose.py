"""Parameters of the transpose kernel (transform_scripts/transpose.mlir).

Seed: XLA's transpose emitter. Takes a dispatch whose root, an all-parallel
linalg.generic and its only computing op, reads one input (the staged one)
along another innermost dim than the one it writes along: the loop kernel
would read or write that operand with a stride (`explain`'s coalescing). A
workgroup owns a Ta x Tb tile of the two dims: `a`, the staged input's
innermost, and `b`, the output's. Its threads first copy the input tile to
workgroup memory along `a` (coalesced reads), then, after a barrier, compute
the root along `b` (coalesced writes), reading the tile transposed. The tile
is padded to Ta x (Tb + 1) elements so that the transposed read hits
different banks. Other inputs must be read like the output.

Taken only where coalescing matters (Target.coalescing_matters): on lavapipe,
which runs Vulkan on the CPU, the loop kernel's strided accesses are cheaper
than a barrier and a workgroup-memory round trip (docs/findings.md, 'The
transpose kernel on lavapipe').
"""

import math
from dataclasses import dataclass

from iree.compiler import ir

from ..dispatch.read import Dispatch
from ..irutil import map_dims, walk
from ..targets import Target
from . import attrs
from .contract import SKIP, Launch, Strategy
from .sizes import largest_divisor_at_most

TILE = 32  # elements of each swapped dim per workgroup, at most
MIN_TILE = 8  # smaller divisors leave too little to stage: a ragged TILE then
ROWS = (4, 2, 1)  # elements per thread along the other dim in each phase
BLOCKS = 3  # workgroup ids x, y, z: dims beyond them stay whole per workgroup
MAX_RANK = 5  # two dims beyond the block ids at most


@dataclass(frozen=True)
class TransposeParams:
    launch: Launch
    num_inputs: int
    staged: int  # the root's input staged in workgroup memory
    staged_dims: tuple[int, ...]  # its map's results (loop dims, in its own order)
    a: int  # the staged input's innermost loop dim
    b: int  # the output's innermost loop dim
    tiles: tuple[int, ...]  # per loop dim: Ta, Tb, 1, or 0 (whole)
    sizes: tuple[int, ...]  # loop ranges
    rows: int
    element_bits: int
    ragged: bool  # a swapped dim's last tile is partial: masked transfers
    padded: bool  # the staging tile's rows are padded (no bank conflicts)


def _tile(n: int) -> int:
    """A swapped dim's tile side: a divisor in [MIN_TILE, TILE] (no edge to
    mask) where there is one (170 -> 17), the whole dim when it is smaller
    than MIN_TILE, else TILE with a ragged last tile (masked: 97 -> 32)."""
    t = largest_divisor_at_most(n, TILE)
    return t if t >= MIN_TILE or t == n else TILE


def plan(d: Dispatch, target: Target) -> tuple[TransposeParams | None, str]:
    if not target.coalescing_matters:
        return None, (
            f"{target.name} runs on the CPU, where the loop kernel's strided accesses cost "
            "less than staging through workgroup memory"
        )
    why = d.generic_root_problem()
    if why:
        return None, why
    if "reduction" in d.iterator_types:
        return None, "the root reduces"
    if d.ops != ["linalg.generic"]:
        return None, f"ops {d.ops}: the root alone (producers fused into it by IREE)"
    maps = [map_dims(m) for m in d.root_maps]
    if any(m is None for m in maps) or len(d.outputs) != 1:
        return None, "an operand not indexed by loop dims alone, or several results"
    *inputs, output = maps
    if len(output) != len(d.loop_ranges) or any(not m for m in inputs):
        return None, "a broadcast output or a scalar input"
    b = output[-1]
    staged = [i for i, m in enumerate(inputs) if m[-1] != b]
    if len(staged) != 1:
        return None, (
            "no input read across the output's rows (coalesced already)"
            if not staged
            else f"{len(staged)} inputs read across the output's rows"
        )
    (i,) = staged
    if sorted(inputs[i]) != list(range(len(output))):
        return None, "the staged input is broadcast (its map is not a permutation)"
    if sorted(output) != list(range(len(output))):
        return None, "the output's map is not a permutation of the loops"
    if any(m != output for j, m in enumerate(inputs) if j != i):
        return None, "another input not indexed like the output"
    a = inputs[i][-1]
    sizes = d.loop_ranges
    if any(n <= 0 for n in sizes):
        return None, "dynamic shapes"
    rank = len(sizes)
    if rank > MAX_RANK:
        return None, f"rank {rank} (2 to {MAX_RANK})"
    ta, tb = _tile(sizes[a]), _tile(sizes[b])
    rows = next(r for r in ROWS if ta % r == 0 and tb % r == 0)
    threads = ta * tb // rows
    bits = d.inputs[i].bits
    shared = ta * (tb + 1) * max(bits, 8) // 8
    if threads > target.max_threads or shared > target.shared_memory_bytes:
        return None, f"a {ta}x{tb} tile needs {threads} threads and {shared} bytes"
    others = [dim for dim in range(rank) if dim not in (a, b)]
    whole = others[: max(0, rank - BLOCKS)]
    tiles = tuple(
        ta if dim == a else tb if dim == b else 0 if dim in whole else 1 for dim in range(rank)
    )
    counts = [math.ceil(sizes[dim] / tiles[dim]) for dim in range(rank) if tiles[dim]]
    grid = tuple(reversed(counts)) + (1,) * (3 - len(counts))
    why = target.grid_refusal(grid)
    if why:
        return None, why
    ragged = bool(sizes[a] % ta or sizes[b] % tb)
    if ragged and len(whole) > 1:
        # Masks over vectors with two whole dims fail to lower
        # ('vector.extract' position out of range, rank 5 [4, 0, 1, 3, 2]).
        return None, f"ragged tiles of {sizes[a]} x {sizes[b]} with {len(whole)} dims kept whole"
    # A ragged tile's staging buffer is padded only where it can be made
    # static (the script's step "static_tile": CUDA, not SPIR-V).
    padded = not ragged or target.backend == "cuda"
    params = TransposeParams(
        launch=Launch(grid, (threads, 1, 1), target.subgroup_size),
        num_inputs=len(inputs),
        staged=i,
        staged_dims=tuple(inputs[i]),
        a=a,
        b=b,
        tiles=tiles,
        sizes=tuple(sizes),
        rows=rows,
        element_bits=bits,
        ragged=ragged,
        padded=padded,
    )
    tile = f"a {ta}x{tb + 1} workgroup tile (padded)" if padded else f"a {ta}x{tb} workgroup tile"
    edges = ""
    if ragged:
        edges = f", the edge tiles of {sizes[a]} x {sizes[b]} masked"
        if not padded:
            edges += " (unpadded: SPIR-V cannot take the static buffer padding needs)"
    return params, (
        f"input {i} read across the output's rows: staged through {tile}, coalesced "
        f"reads and writes{edges}"
    )


def steps(p: TransposeParams) -> dict[str, str]:
    return {"static_tile": "tilefuse_transpose_static_tile" if p.ragged and p.padded else SKIP}


def describe(p: TransposeParams) -> str:
    ta, tb = p.tiles[p.a], p.tiles[p.b]
    edges = (" ragged" + ("" if p.padded else " unpadded")) if p.ragged else ""
    return (
        f"tile={ta}x{tb} swap=d{p.a},d{p.b} staged=in{p.staged} grid={list(p.launch.grid)} "
        f"wg={list(p.launch.workgroup)}{edges}"
    )


def attributes(p: TransposeParams, ctx: ir.Context) -> dict:
    """Values of the tagged steps of transform_scripts/transpose.mlir."""
    rank = len(p.sizes)
    tiled = [dim for dim in range(rank) if p.tiles[dim]]
    blocks = ["x", "y", "z"]
    block_map = [blocks[len(tiled) - 1 - k] for k in range(len(tiled))]
    whole = {dim for dim in range(rank) if p.tiles[dim] == 0}
    # Phase 1, in the staged input's dim order: 1 along `a` (thread x), R
    # along `b`; phase 2, in loop order: 1 along `b` (thread x), R along `a`.
    ta, tb = p.tiles[p.a], p.tiles[p.b]
    copy_threads, copy_map, copy_vector = [], [], []
    for dim in p.staged_dims:
        copy_threads.append(ta if dim == p.a else tb // p.rows if dim == p.b else 0)
        copy_vector.append(p.sizes[dim] if dim in whole else p.rows if dim == p.b else 1)
        if dim == p.a:
            copy_map.append("linear_dim_0")
        elif dim == p.b:
            copy_map.append("linear_dim_1")
    compute_threads, compute_map, compute_vector = [], [], []
    for dim in range(rank):
        compute_threads.append(tb if dim == p.b else ta // p.rows if dim == p.a else 0)
        compute_vector.append(p.sizes[dim] if dim in whole else p.rows if dim == p.a else 1)
        if dim == p.b:
            compute_map.append("linear_dim_0")
        elif dim == p.a:
            compute_map.append("linear_dim_1")
    return {
        "root_inputs": {"raw_position_list": attrs.i64_array(range(p.num_inputs), ctx)},
        "workgroup_tile": {
            "static_tile_sizes": attrs.i64_array(p.tiles, ctx),
            "mapping": attrs.mapping("block", block_map, ctx),
        },
        "staged_input": {"operand_index": attrs.i64(p.staged, ctx)},
        "copy_threads": {
            "static_num_threads": attrs.i64_array(copy_threads, ctx),
            "mapping": attrs.mapping("thread", copy_map, ctx),
        },
        "copy_vector": attrs.vector_sizes(copy_vector, ctx),
        "compute_threads": {
            "static_num_threads": attrs.i64_array(compute_threads, ctx),
            "mapping": attrs.mapping("thread", compute_map, ctx),
        },
        "compute_vector": attrs.vector_sizes(compute_vector, ctx),
        "bank_padding_bits": {"padding_size_bits": attrs.i64(max(p.element_bits, 8), ctx)},
        **attrs.workgroup(p.launch, ctx),
    }


def kernel_refusal(func: ir.Operation, p: TransposeParams) -> str | None:
    """Why a printed kernel is not the staged transpose, or None."""
    ops = list(walk(func))
    allocs = [
        op for op in ops if op.name == "memref.alloc" and "workgroup" in str(op.results[0].type)
    ]
    if not allocs:
        return "no workgroup-memory tile (the input was not staged)"
    if p.padded:
        row = p.tiles[p.a] + 1  # the staged input's innermost dim is `a`
        shapes = [ir.MemRefType(op.results[0].type).shape for op in allocs]
        if not any(shape and shape[-1] == row for shape in shapes):
            return f"the workgroup tile's rows are not padded to {row} elements ({shapes})"
    if not any(op.name == "gpu.barrier" for op in ops):
        return "no barrier between staging the tile and reading it"
    return None


STRATEGY = Strategy(
    name="transpose",
    plan=plan,
    describe=describe,
    attributes=attributes,
    steps=steps,
    kernel_refusal=kernel_refusal,
)
