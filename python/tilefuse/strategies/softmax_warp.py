"""Parameters of the register-resident row kernel (transform_scripts/softmax_warp.mlir).

Seed: XLA's softmax emitter, which keeps a row in registers when it fits.
The dispatches are the chunked softmax kernel's (softmax.py) with an
elementwise root: softmax, layernorm, RMSNorm. One subgroup of T lanes owns
a row; lane t holds the V elements at t*V of every chunk of T*V (coalesced),
the chunk loops are unrolled, and every reduction ends in a shuffle
butterfly that leaves its result in all lanes. The kernel has no loop, no
barrier and no workgroup memory, and loads each element of the row once.

When it applies (else the chunked kernel takes the dispatch):
  - T (the subgroup size) divides N, so that the ragged tail of a row (the
    N mod T*V elements after the last full chunk) splits evenly over the
    lanes: no masks;
  - N / T, the elements a lane keeps, is at most the target's
    row_register_elements (lavapipe 128; GPUs 32: more registers per lane
    would cost occupancy).

V is a 128-bit vector of the widest element (at most 4 on SPIR-V), halved
until T*V <= N. R rows share a workgroup [T, R, 1] (R dividing the row count,
R*T up to the target's packed_row_threads): the rows do not synchronize, so
packing costs nothing and saves workgroups.
"""

from iree.compiler import ir

from ..dispatches import Dispatch
from ..irutil import walk
from ..targets import Target
from . import attrs, softmax
from .sizes import packed_rows

# On SPIR-V the tail's one element per lane would make IREE read the whole
# binding as scalars; the driver moves such accesses onto an alias of the
# binding and recompiles the finished kernel (aliases.py, driver.alias_stage).
ALIAS_NARROW_ACCESSES = True


def _vector(bits: int, input_bits: list[int], n: int, threads: int, target: Target) -> int:
    vector = max(1, target.vector_bits // bits)
    if target.backend == "spirv":
        vector = min(vector, 4)  # SPIR-V vectors hold at most 4 elements
    if target.bf16_vector_elements and 16 in input_bits:
        vector = min(vector, target.bf16_vector_elements)
    while vector > 1 and threads * vector > n:
        vector //= 2
    return vector


def plan(d: Dispatch, target: Target) -> tuple[dict | None, str]:
    why_not = softmax.check(d)
    if why_not:
        return None, why_not
    if d.iterator_types != softmax.ROOT_ELEMENTWISE:
        return None, "root is not elementwise over the rows"
    budget = target.row_register_elements
    if not budget:
        return None, f"target {target.name} keeps no rows in registers"
    rows, n = d.loop_ranges
    threads = target.subgroup_size
    if n % threads:
        return None, f"rows of {n} do not split evenly over the {threads} lanes of a subgroup"
    if n // threads > budget:
        return None, (
            f"{n // threads} elements per lane > the target's {budget} (row_register_elements)"
        )
    bits = max(b for op in d.op_summaries for b in op.result_bits)
    bits = max([bits] + [o.bits for o in d.inputs])
    vector = _vector(bits, [o.bits for o in d.inputs], n, threads, target)
    chunk = threads * vector
    chunks = n // chunk
    full = chunks * chunk
    per_wg = packed_rows(rows, threads, threads, target.preferred_threads, 0, target)
    if rows // per_wg > target.max_workgroup_count[0]:
        return None, (
            f"grid x would be {rows // per_wg} > {target.max_workgroup_count[0]} workgroups"
        )
    generics = [op for op in d.op_summaries if op.name == "linalg.generic"]
    reductions = sum(op.iterator_types[-1] == "reduction" for op in generics)
    params = {
        "row_tile": [per_wg],
        "full_length": full,
        "reduction_chunk": [0, chunk],
        "root_chunk": [0, chunk],
        "chunks": chunks,
        "tail": n - full,
        "threads": threads,
        "rows_per_workgroup": per_wg,
        "vector": vector,
        "subgroup_size": threads,
        "grid": [rows // per_wg, 1, 1],
        "reductions": reductions,
    }
    group = f"{d.group_kind} group, " if d.group_kind else ""
    tail = f" and a tail of {n - full} ({(n - full) // threads} per lane)" if n != full else ""
    packing = f", {per_wg} rows per workgroup" if per_wg > 1 else ""
    return params, (
        f"{group}{reductions} reductions then the root, row of {n} in registers: "
        f"{threads} lanes x {vector}-vectors, {chunks} chunks of {chunk} unrolled{tail}{packing}"
    )


def describe(p: dict) -> str:
    tail = f" tail={p['tail']}" if p["tail"] else ""
    return (
        f"grid={p['grid']} wg=[{p['threads']}, {p['rows_per_workgroup']}, 1] "
        f"vector={p['vector']} chunk={p['reduction_chunk'][-1]} chunks={p['chunks']}{tail} "
        f"reductions={p['reductions']} shared=0B"
    )


def attributes(p: dict, ctx: ir.Context) -> dict:
    """Values of the tagged steps of transform_scripts/softmax_warp.mlir."""
    return {
        "row_tile": {"static_tile_sizes": attrs.i64_array(p["row_tile"], ctx)},
        "full_length": {
            "dimension": attrs.i64(1, ctx),
            "static_chunk_sizes": attrs.i64(p["full_length"], ctx),
        },
        "reduction_chunk": {"tile_sizes": attrs.i64_list(p["reduction_chunk"], ctx)},
        "root_chunk": attrs.static_sizes(p["root_chunk"], ctx),
        "unroll": {"factor": attrs.i64(p["chunks"], ctx)},
        "warp_size": {"warp_size": attrs.i64(p["threads"], ctx)},
        **attrs.workgroup([p["threads"], p["rows_per_workgroup"], 1], p["subgroup_size"], ctx),
    }


RAGGED_TAIL = "tilefuse.ragged_tail"
SEVERAL_CHUNKS = "tilefuse.several_chunks"


def edit_sequence(seq: ir.Operation, p: dict) -> None:
    """Drop the tail's steps when T*V divides the row (their users then take
    the unsplit reductions and the unpeeled root loop), and the unrolling
    when a row is one chunk."""
    if not p["tail"]:
        for op in walk(seq):
            if RAGGED_TAIL not in op.attributes:
                continue
            if op.name == "transform.foreach":  # the split: mains = the reductions
                op.results[0].replace_all_uses_with(op.operands[0])
            elif op.name == "transform.loop.peel":  # main loop = the root's loop
                cast = op.operands[0].owner
                op.results[0].replace_all_uses_with(cast.operands[0])
        attrs.erase_tagged(seq, {RAGGED_TAIL})
    if p["chunks"] == 1:
        attrs.erase_tagged(seq, {SEVERAL_CHUNKS})
