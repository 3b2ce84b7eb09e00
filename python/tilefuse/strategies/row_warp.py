"""Parameters of the register row kernel (transform_scripts/row_warp.mlir):
one subgroup per row, or (a long row normalization on a GPU) the several
subgroups the softmax kernel would give it.

Seed: XLA's row-reduction and softmax emitters, which give a row to one warp
when it fits. One subgroup of T lanes owns a row; lane t holds the V elements
at t*V of every chunk of T*V (coalesced); every reduction folds its chunks
into the lane's V partials in registers and ends in a shuffle butterfly that
leaves its result in all lanes. No barrier, no workgroup memory. Two kinds of
dispatch over [rows, N]:
  - a lone row reduction (with elementwise producers), which the row kernel
    (row_reduction.py) would also give one subgroup per row: its chunk loop
    stays a loop. It saves the row kernel's second accumulator, their round
    trip through workgroup memory and a butterfly (measured in
    docs/findings.md, 'One subgroup per row for row sums').
  - a row normalization (the chunked softmax kernel's dispatches with an
    elementwise root: softmax, layernorm, RMSNorm): the chunk loops are
    unrolled, so CSE loads each element of the row once and keeps it in
    registers for every phase, and the kernel has no loop either.

A row normalization too long for one subgroup's registers (N / subgroup >
row_register_elements) takes T threads, several subgroups, where the target
sizes the softmax kernel's threads so that each holds few vectors
(softmax_vectors_per_thread: 4 on the GPU targets, so 8192 f32 gets 512
threads of 16 elements): T is the softmax kernel's (softmax.layout), kept when
it divides N and N / T <= row_register_elements (row_threads), and T*V
divides N (no tail: layernorm's tail combines spilled on sm_90). The kernel is
the same, with T lanes to the warp op: each reduction's butterfly ends in
one value per subgroup, which IREE's warp distribution combines through
workgroup memory with one barrier (T <= subgroup_size**2), outside any loop;
such a row has its workgroup to itself (R = 1: the slots are per workgroup).
lavapipe's 64 vectors per thread never give it T > 8 with at most 128
elements each (T = next_pow2(N / 256) < N / 128), so its rows keep the kernel
they had. Seed: XLA's softmax, which keeps a row of 8192 in the registers of
a block's warps.

When it applies (else the row kernel or the chunked softmax kernel does):
  - T (the subgroup size, or the several subgroups above) divides N, so
    that the ragged tail of a row (the N mod T*V elements after the last
    full chunk) splits evenly over the lanes: no masks;
  - a normalization: N / T, the elements a lane keeps, is at most the
    target's row_register_elements (lavapipe 128; GPUs 32: more registers
    per lane would cost occupancy);
  - a reduction: at most VECTORS_PER_THREAD chunks (longer rows get several
    subgroups from the row kernel), a combiner with a known identity, a
    32-bit accumulator; on SPIR-V not a NaN-propagating float max/min (a
    lane's vector max drops NaN there; the Vulkan targets rewrite those on
    integer keys before planning anyway, hlo/minmax.py).

V is a 128-bit vector of the widest element (at most 4 on SPIR-V), halved
until T*V <= N. A normalization unrolls at most MAX_UNROLLED_CHUNKS chunks:
past that, each lane takes k such vectors per chunk (k the smallest divisor
of the chunks that brings them under the bound, so the ragged tail is
unchanged), because warp distribution's time grows faster than linearly
with the unrolled code (docs/findings.md, 'Unrolled chunks and compile
time').
Only lavapipe's 128 elements per lane reach it (GPUs keep 32, at most 8
chunks); bf16 keeps its vector (IREE's SPIR-V bf16 emulation fails on wider
ones, pipelines/vulkan.toml). R rows share a workgroup [T, R, 1] (R dividing the row count,
R*T up to the target's packed_row_threads): the rows do not synchronize, so
packing costs nothing and saves workgroups (measured in docs/findings.md,
'Rows per workgroup').
"""

from dataclasses import dataclass

from iree.compiler import ir

from ..dispatch.read import Dispatch
from ..targets import Target
from . import attrs, row_reduction, row_roots, softmax
from .contract import PASS, SKIP, Launch, Strategy
from .sizes import packed_rows

# Chunks a row normalization unrolls, at most (its lanes' vectors widen past it).
MAX_UNROLLED_CHUNKS = 8


@dataclass(frozen=True)
class RowWarpParams(row_roots.RowParams):
    vector: int  # V
    chunks: int  # full chunks of T*V in a row (a normalization unrolls them all)
    tail: int  # elements after the last full chunk (a multiple of T)
    elementwise_root: bool  # a row normalization; else a lone row reduction
    reductions: int  # the dispatch's row reductions (explain only)

    @property
    def chunk(self) -> int:  # T*V
        return self.threads * self.vector

    @property
    def full_length(self) -> int:  # where the tail starts
        return self.chunks * self.chunk

    @property
    def unrolled(self) -> bool:
        """A normalization's chunk loops are unrolled (all but a one-chunk row's)."""
        return self.elementwise_root and self.chunks > 1


def _vector(
    bits: int, d: Dispatch, n: int, threads: int, target: Target, normalization: bool
) -> int:
    bf16 = any(o.element_type == "bf16" for o in d.inputs)
    vector = target.vector_elements(bits, bf16, native=True, offset_alignment=d.offset_alignment)
    while vector > 1 and threads * vector > n:
        vector //= 2
    chunks = n // (threads * vector)
    if normalization and not bf16 and chunks > MAX_UNROLLED_CHUNKS:
        # k whole vectors per lane and chunk, k dividing the chunks: the
        # ragged tail stays what it was (less than one native chunk).
        k = next(
            k for k in range(2, chunks + 1) if not chunks % k and chunks // k <= MAX_UNROLLED_CHUNKS
        )
        vector *= k
    return vector


def row_threads(n: int, bits: int, target: Target) -> tuple[int, str]:
    """(T, "") for a row normalization too long for one subgroup's registers,
    or (0, why not): T is the chunked softmax kernel's threads per row
    (softmax.layout, sized by the target's softmax_vectors_per_thread), kept
    when they split the row evenly and each holds at most the target's
    row_register_elements. The subgroups' combines meet in workgroup memory
    (T <= subgroup_size**2: one level), so such a row has its workgroup to
    itself."""
    sg, budget = target.subgroup_size, target.row_register_elements
    threads, _vector = softmax.layout(n, bits, target)
    if threads <= sg:
        return 0, f"{n // sg} elements per lane > the target's {budget} (row_register_elements)"
    if n % threads:
        return 0, f"rows of {n} do not split evenly over {threads} threads"
    if n // threads > budget:
        return 0, (
            f"{n // threads} elements per thread of {threads} > the target's {budget} "
            "(row_register_elements)"
        )
    return threads, ""


def _lone_reduction_refusal(d: Dispatch, target: Target) -> str | None:
    why_not = row_roots.lone_reduction_refusal(d)
    if why_not:
        return why_not
    if len(d.iterator_types) != 2:
        return (
            f"a reduction over [{', '.join(map(str, d.loop_ranges))}] (the kernel takes [rows, n])"
        )
    if target.backend == "spirv" and d.combiners[0] in row_roots.NAN_PROPAGATING_MINMAX:
        return "a float max/min on SPIR-V (a lane's vector max drops NaN)"
    return None


def _root_refusal(d: Dispatch, target: Target) -> str | None:
    if not target.row_register_elements:
        return f"target {target.name} has no one-subgroup row kernel (row_register_elements = 0)"
    if d.iterator_types == row_roots.ROOT_ELEMENTWISE:
        return row_roots.row_ops_refusal(d)
    if d.iterator_types == row_roots.ROOT_REDUCTION and len(d.combiners) == 1:
        return _lone_reduction_refusal(d, target)
    if d.iterator_types == row_roots.ROOT_REDUCTION:
        return "a reduction that reads other reductions (argmax: the chunked softmax kernel)"
    return "root is neither elementwise over the rows nor a lone row reduction"


def plan(d: Dispatch, target: Target) -> tuple[RowWarpParams | None, str]:
    if d.problem:
        return None, d.problem
    why_not = _root_refusal(d, target)
    if why_not:
        return None, why_not
    normalization = d.iterator_types == row_roots.ROOT_ELEMENTWISE
    rows, n = d.loop_ranges
    sg = target.subgroup_size
    if n % sg:
        return None, f"rows of {n} do not split evenly over the {sg} lanes of a subgroup"
    bits = row_roots.widest_bits(d)
    threads = sg
    budget = target.row_register_elements
    if normalization and n // sg > budget:
        threads, why_not = row_threads(n, bits, target)
        if why_not:
            return None, why_not
    vector = _vector(bits, d, n, threads, target, normalization)
    chunk = threads * vector
    chunks = n // chunk
    if threads > sg and n % chunk:
        # Measured on sm_90: layernorm over 1152, 2304 and 2560 spilled
        # (ptxas, 48 registers) with the tail's second combine.
        return None, (
            f"rows of {n} over {threads} threads leave a tail after {chunks} chunks of {chunk} "
            "(several subgroups take whole chunks only)"
        )
    most = row_reduction.VECTORS_PER_THREAD
    if not normalization and chunks > most:
        return None, (
            f"{chunks} chunks of {chunk} > {most} (the row kernel gives such rows several subgroups)"
        )
    full = chunks * chunk
    per_wg = packed_rows(
        rows, threads, sg, target.packed_row_threads or target.preferred_threads, 0, target
    )
    why_not = target.grid_refusal((rows // per_wg,))
    if why_not:
        return None, why_not
    generics = [op for op in d.op_summaries if op.name == "linalg.generic"]
    reductions = sum(op.iterator_types[-1] == "reduction" for op in generics)
    params = RowWarpParams(
        launch=Launch((rows // per_wg, 1, 1), (threads, per_wg, 1), sg),
        vector=vector,
        chunks=chunks,
        tail=n - full,
        elementwise_root=normalization,
        reductions=reductions,
    )
    group = f"{d.group_kind} group, " if d.group_kind else ""
    tail = f" and a tail of {n - full} ({(n - full) // threads} per lane)" if n != full else ""
    packing = f", {per_wg} rows per workgroup" if per_wg > 1 else ""
    if normalization:
        what = f"{reductions} reductions then the root, row of {n} in registers"
        loops = f"{chunks} chunks of {chunk} unrolled" if chunks > 1 else f"one chunk of {chunk}"
    else:
        what = f"{row_roots.COMBINERS[d.combiners[0]]}-reduction of rows of {n}"
        loops = f"{chunks} chunks of {chunk}"
    owner = "one subgroup" if threads == sg else f"{threads // sg} subgroups"
    return params, (
        f"{group}{what}: {owner} per row, {threads} lanes x {vector}-vectors, "
        f"{loops}{tail}{packing}"
    )


def describe(p: RowWarpParams) -> str:
    tail = f" tail={p.tail}" if p.tail else ""
    return (
        f"grid={list(p.launch.grid)} wg={list(p.launch.workgroup)} "
        f"vector={p.vector} chunk={p.chunk} chunks={p.chunks}{tail} "
        f"reductions={p.reductions} {_shared(p)}"
    )


def _shared(p: RowWarpParams) -> str:
    """One subgroup per row: no workgroup memory. Several: the combines'
    slots, one per subgroup (IREE's warp distribution allocates them)."""
    subgroups = p.threads // p.launch.subgroup
    if subgroups == 1:
        return "shared=0B"
    return f"subgroups={subgroups} (combined through workgroup memory)"


def attributes(p: RowWarpParams, ctx: ir.Context) -> dict:
    """Values of the tagged steps of transform_scripts/row_warp.mlir."""
    return {
        "row_tile": {"static_tile_sizes": attrs.i64_array([p.rows_per_workgroup], ctx)},
        "full_length": {
            "dimension": attrs.i64(1, ctx),
            "static_chunk_sizes": attrs.i64(p.full_length, ctx),
        },
        "reduction_chunk": {"tile_sizes": attrs.i64_list([0, p.chunk], ctx)},
        "root_chunk": attrs.static_sizes([0, p.chunk], ctx),
        "unroll": {"factor": attrs.i64(p.chunks, ctx)},
        "warp_size": {"warp_size": attrs.i64(p.threads, ctx)},
        **attrs.workgroup(p.launch, ctx),
    }


def steps(p: RowWarpParams) -> dict[str, str]:
    """The tail's split only for ragged rows; the root's chunk loop only for
    an elementwise root (peeled for ragged rows); unrolling only for an
    elementwise root of more than one chunk."""
    root = p.elementwise_root
    return {
        "split_rows": "row_warp_split_rows" if p.tail else PASS,
        "chunk_root": "row_warp_chunk_root" if root else PASS,
        "peel_root": "row_warp_peel_root" if root and p.tail else PASS,
        "unroll_reductions": "row_warp_unroll" if p.unrolled else SKIP,
        "unroll_root": "row_warp_unroll" if p.unrolled else SKIP,
    }


STRATEGY = Strategy(
    name="row_warp",
    plan=plan,
    describe=describe,
    attributes=attributes,
    steps=steps,
    # On SPIR-V the tail's one element per lane would make IREE read the
    # whole binding as scalars; between phase 2 and 3 the driver moves such
    # accesses onto an alias of the binding (driver.alias_kernels).
    alias_narrow_accesses=True,
)
