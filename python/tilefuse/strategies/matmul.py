"""Parameters of the matmul kernel (transform_scripts/matmul.mlir).

Seed: XLA's and IREE's tiled GEMM with the epilogue fused. A workgroup
computes a TM x TN tile of the dispatch's root (the elementwise epilogue of
the contraction); each thread a tm x tn tile, as tm rows of vectors held in
registers across the K loop (step KS), and the epilogue runs on those
registers before the one store. The inner loop is vector FMAs.

This first version takes what it can compile right and reports the rest:
- f32 operands and result, or i8 operands accumulated in i32 (a quantized
  layer: integer multiply-adds); on Vulkan also f16 and bf16, accumulated in the
  result's type as the program asks (and as IREE's kernel does); on CUDA
  also bf16 (no script reaches tensor cores for it in IREE 3.13; the
  configuration of IREE's pipeline that does, matmul_mma_iree.py, takes
  them where the target enables it), and f16 where the tensor-core kernel
  (matmul_mma.py) does not apply (M < 16, a vector-matrix product);
- either operand in either layout (B as [N, K]: attention's q k^T; the
  vector reads of a transposed operand are transposed in registers), the
  contraction's result as [M, N] (its epilogue may store it transposed);
- one N and K loop, at most one M loop (M = 1 is IREE's vecmat, with none)
  and at most one batch loop (batch_matmul: attention's heads), in the
  order batch, M, N, K;
- an elementwise root reading the contraction in its own loop order, or
  none (a bare matmul);
- tiles that divide M, N and K (the kernel is unmasked: see the script's
  header for why), with at least MIN_THREAD_TILE outputs per thread;
  where that tiling is degenerate (fewer than RAGGED_BELOW outputs per
  thread, vectors narrower than VECTOR, or no tiling at all), ragged tiles
  instead (ragged_params): t x t per thread whatever M, N and K, the
  edges masked inside the dispatch (the script's @tilefuse_matmul_ragged),
  for f32, f16 and bf16 contractions (one type throughout, or f16/bf16
  operands accumulated in f32 in registers, the epilogue's convert applied
  before the one store: every bf16 product, hlo/wide_accumulators.py); on a GPU that
  names its multiprocessors, a ragged grid that fills them first
  (ragged_options);
- with no M loop (one row: IREE's vecmat, decode-time projections and LM
  heads, whose N is often odd or prime: GPT-2's 50257), the ragged tiles are
  one vector of VECTOR outputs per thread, up to TARGET_THREADS threads
  along N, N's and K's edges masked; taken where no exact tiling exists or
  its workgroup falls short of a subgroup (degenerate). An M loop of one
  row (split-K's batched decode products) keeps the exact tiles;
- a batch loop with no M loop (a batched vector-matrix product: decode
  attention's q k^T and p v per head, a generic IREE does not name): the
  one-row tiles above, one batch element per workgroup row (grid y);
- the chooser's tiling, or the one `tilefuse tune` measured fastest for
  this contraction (strategies/tuning.py), exact or ragged.
"""

import math
from dataclasses import dataclass

from iree.compiler import ir

from ..dispatch.read import Dispatch
from ..irutil import holds, walk
from ..targets import Target
from . import attrs, tuning
from .contract import SKIP, Launch, Strategy, Tunable
from .sizes import largest_divisor_at_most

# Per-thread tile sizes tried, largest first: a larger tile reuses each
# loaded A and B element more (8x8 was fastest on lavapipe for 512^3, against
# 4x4 and 1x4: docs/findings.md, 'Matmul thread tiles').
THREAD_TILE_SIZES = (8, 4, 2, 1)
# Outputs per thread, at least (smaller tiles were not measured: 1x4 already
# took 2.4x IREE's time); fewer is left to IREE's codegen, reported.
MIN_THREAD_TILE = 4
TARGET_THREADS = 64  # threads per workgroup the chooser aims for
MAX_THREADS_X = 16
K_STEPS = (4, 2, 1)
# Float operand types the FMA kernels widen as they read them (to the f32
# accumulator, where they differ from it).
WIDENED = frozenset({"f32", "f16", "bf16"})
VECTOR = 4  # each row piece is one vector of at most this many elements
# The exact tiling is degenerate below this many outputs per thread (or with
# vectors narrower than VECTOR): 197x768x768 gets 1x8 with one row per
# workgroup, 100x101x99 4x1 with scalars and K step 1. Such dispatches take
# ragged tiles (docs/findings.md, 'Ragged tiles for the FMA matmul, third
# attempt').
RAGGED_BELOW = 16
RAGGED_K_STEP = 4
RAGGED_THREADS = 8  # threads per dim of a ragged workgroup, at most
# With no M loop (M = 1, IREE's vecmat) a ragged thread computes one vector
# of VECTOR outputs (the script's root, fill and K step are then one row
# piece each: the unroll patterns cut no 1-D vector), up to TARGET_THREADS
# threads along N.


@dataclass(frozen=True)
class MatmulParams:
    launch: Launch
    matmul_operand: int  # the root's input the contraction produces
    workgroup_tile: tuple[int, int]  # (TM, TN)
    thread_tile: tuple[int, int]  # (tm, tn)
    k_step: int
    vector: int  # elements per row piece (divides tn)
    epilogue: bool  # an elementwise root after the contraction (else bare)
    batch: bool  # a batch loop first: one batch element per workgroup (grid z)
    m_loop: bool  # False: no M loop (M = 1, IREE's vecmat), tiles of N alone
    # Ragged tiles (the script's @tilefuse_matmul_ragged): the workgroup tile
    # need not divide M and N nor the K step K; None for exact tiles.
    ragged: "Ragged | None" = None
    # Per operand (A, B): computed in the dispatch by a prologue (a
    # dequantization), fused at every level of tiling (exact tiles only).
    prologues: tuple[bool, bool] = (False, False)


@dataclass(frozen=True)
class Ragged:
    k_padded: int  # K rounded up to the K step
    a_padded: bool  # A's thread tiles need a pad (M or K ragged)
    b_padded: bool  # B's (N or K ragged)
    a_k_inner: bool  # A is [.., M, K] (else [.., K, M])
    b_k_inner: bool  # B is [.., N, K] (else [.., K, N])
    bare: bool  # no epilogue: a copy of the product is the root
    root_inputs: int  # the root's input count (its init's operand position)
    element: str  # A's and B's element type (their pads'): f32, f16, bf16
    # The epilogue's other inputs (bias, residual): the padded type the
    # script finds their pads by (r_pad_type_N); the operands' or f32.
    inputs_element: str
    # What kernel_refusal checks: the operands (by their buffers' shapes)
    # every read of which must be masked, and the output's shape, every
    # store into which must be masked or guarded (None: M and N divide).
    masked_reads: tuple[tuple[int, ...], ...] = ()
    guarded_writes: tuple[int, ...] | None = None


def _check(d: Dispatch, target: Target) -> str | None:
    """Why the matmul kernel does not take this dispatch, or None."""
    why = structure_refusal(d, prologues=True)
    if why:
        return why
    (c,) = d.contractions
    if any(c.prologues):
        why = prologue_refusal(c.m[0] if c.m else 1, c.n[0], target)
        if why:
            return f"an operand computed in the dispatch: {why}"
    if c.k[0] == 1:
        # No K loop for the multiply-adds to sit in (the kernel check
        # refuses such a build): an outer product is elementwise work.
        return "K of 1 (an outer product: no K loop)"
    types = {c.lhs.element_type, c.rhs.element_type, c.result.element_type}
    operands = {c.lhs.element_type, c.rhs.element_type}
    if len(operands) == 1 and operands <= {"f16", "bf16"} and c.result.element_type == "f32":
        # f16/bf16 operands accumulated in f32 (hlo/wide_accumulators.py
        # gives JAX's narrow matmuls this form): the operands widen as they
        # are read, the multiply-adds are f32 FMAs; as for narrow results.
        types = operands
    if len(operands) > 1 and operands <= WIDENED and c.result.element_type == "f32":
        # Operands of different float types accumulated in f32
        # (hlo/narrow_operands.py reads an f16 operand of an f32 product as
        # stored): each widens as it is read, the multiply-adds are f32 FMAs.
        # No tensor-core kernel takes mixed operands.
        return None
    if target.backend == "cuda" and len(types) == 1:
        # Tensor cores where a tensor-core strategy takes it
        # (_tensor_core_plans); elsewhere FMAs, as below.
        taker, _ = _tensor_core_plans(d, target)
        if taker:
            element = "f32 as TF32" if types == {"f32"} else c.lhs.element_type
            return f"{element} on CUDA: the tensor-core {taker} takes it"
    if types == {"f32"} or (types <= {"f16", "bf16"} and target.backend == "spirv"):
        return None
    if {c.lhs.element_type, c.rhs.element_type} == {"i8"} and c.result.element_type == "i32":
        # A quantized layer (preferred_element_type=int32): integer
        # multiply-adds in registers, exact (tests/test_matmul.py).
        return None
    if types <= {"f16", "bf16"} and len(types) == 1 and target.backend == "cuda":
        # No tensor-core strategy takes it (no 16-wide tile: decode shapes,
        # M < 16, vector-matrix products): FMAs accumulated in the result
        # type (f32 for every f16/bf16 product after
        # hlo/wide_accumulators.py; IREE's codegen fails on a bf16 result:
        # "failed to distribute").
        return None
    if types != {"f32"}:
        return (
            f"{'/'.join(sorted(types))} contraction: f32, i8 x i8 -> i32, bf16 or (where the "
            f"tensor-core kernel does not apply) f16 only on {target.backend}"
        )
    return None


def prologue_refusal(rows: int, columns: int, target: Target) -> str | None:
    """Why the kernel would not compute an operand's prologue (a
    dequantization) for a rows x columns product, or None: the planner
    asks before it fuses one into a matmul group (fusion/rules.py), the
    chooser again on the dispatch. Only the exact tiles take prologues, and
    on targets whose taller products run on tensor cores or cooperative
    matrices (Target.prologue_rows) only short products."""
    if target.prologue_rows and rows > target.prologue_rows:
        return (
            f"{rows} rows: on {target.name} products of more than {target.prologue_rows} rows "
            "belong to the tensor-core kernels, which read operands as loaded "
            "(target field prologue_rows)"
        )
    if not _thread_tiles(rows, columns, target):
        return f"no exact tiles of {rows}x{columns} (the ragged tiles take no prologue yet)"
    return None


def structure_refusal(d: Dispatch, prologues: bool = False) -> str | None:
    """Why the dispatch is not a fill, one contraction and at most one
    elementwise epilogue in the form the matmul kernels take, or None;
    with `prologues` (the FMA kernel), also an elementwise op computing an
    operand from loads (Contraction.prologues) before the contraction."""
    if not d.contractions:
        return "no contraction in the dispatch"
    if len(d.contractions) > 1:
        return f"{len(d.contractions)} contractions in the dispatch"
    (c,) = d.contractions
    if len(c.batch) > 1 or len(c.m) > 1 or len(c.n) != 1 or len(c.k) != 1:
        return (
            f"contraction loops B{c.batch} M{c.m} N{c.n} K{c.k}: not one of each (B and M optional)"
        )
    if not c.loops_bmnk:
        return "its loops are not ordered batch, M, N, K"
    if not c.result_n_inner:
        return "a transposed result ([N, M]: not built yet)"
    if c.init != "linalg.fill":
        return "its accumulator is not a linalg.fill"
    if any(s < 0 for s in (*c.batch, *c.m, c.n[0], c.k[0])):
        return "dynamic shapes"
    # (A binding's offset passed as a push constant is not among d.ops:
    # dispatch/read.py leaves uniform scalar arithmetic out.)
    ops = list(d.ops)
    if any(c.prologues):
        if not prologues:
            return (
                "an operand computed in the dispatch (a dequantization): "
                "the FMA matmul kernel takes it, this one reads operands as loaded"
            )
        for _ in range(sum(c.prologues)):  # they come before the contraction
            ops.remove("linalg.generic")
    if ops == ["linalg.fill", c.op] and c.is_root:
        return None  # a bare contraction
    if ops != ["linalg.fill", c.op, "linalg.generic"]:
        return f"ops {ops}: a fill, the contraction and at most one elementwise root"
    why = d.generic_root_problem()
    if why:
        return why
    if "reduction" in d.iterator_types:
        return "the root after the contraction reduces"
    if d.loop_ranges != [*c.batch, *c.m, c.n[0]]:
        return "the root's loops are not the contraction's [B,] M, N"
    if [p == c.op for p in d.input_producers].count(True) != 1:
        return "the root reads the contraction more than once"
    if not d.input_maps_identity[d.input_producers.index(c.op)]:
        # Then its row pieces are not the contraction's row pieces; no
        # program here does this, so it is refused rather than untested.
        return "the root reads the contraction's result through a permutation"
    return None


def _largest_dividing(n: int, sizes) -> int:
    return next(s for s in sizes if n % s == 0)


def _aligned_vector(d: Dispatch, target: Target) -> int:
    """VECTOR, or fewer where a binding's offset does not align it on
    SPIR-V (Target.vector_elements: a matmul written into a concatenate)."""
    bits = max(o.bits for o in (*d.inputs, *d.outputs))
    return min(VECTOR, target.vector_elements(bits, offset_alignment=d.offset_alignment))


def _k_step(k: int) -> int:
    """The largest K step dividing K that leaves a loop of two steps or more:
    with one step (K = 4) the loop folds away and the kernel check, which
    looks for the multiply-adds in a loop, refuses the build."""
    return next((s for s in K_STEPS if k % s == 0 and k // s >= 2), 1)


def _thread_tiles(m: int, n: int, target: Target) -> list[tuple[int, int, int, int]]:
    """(tm, tn, threads x, threads y) candidates, best first: the largest
    thread tile (more reuse of each loaded element) whose workgroup still
    fills a subgroup; when none does (a small matrix), the most threads."""
    found = []
    # With one row (M = 1) every thread of the workgroup goes along N.
    x_limit = TARGET_THREADS if m == 1 else MAX_THREADS_X
    for tm in THREAD_TILE_SIZES:
        for tn in THREAD_TILE_SIZES:
            if m % tm or n % tn or tm * tn < MIN_THREAD_TILE:
                continue
            tx = largest_divisor_at_most(n // tn, x_limit)
            ty = largest_divisor_at_most(m // tm, max(1, TARGET_THREADS // tx))
            found.append((tm, tn, tx, ty))
    full = [t for t in found if t[2] * t[3] >= target.subgroup_size]
    if not full:
        # Too few rows of threads for any tile (M prime: 197 has no divisor
        # but 1): the threads go along N instead, up to TARGET_THREADS, in
        # whole subgroups where a divisor of N allows, rather than leave
        # part of every subgroup idle.
        wide = [
            (tm, tn, _threads_along_n(n // tn, ty, target.subgroup_size), ty)
            for tm, tn, _, ty in found
        ]
        full = [t for t in wide if t[2] * t[3] >= target.subgroup_size]
    if full:
        return sorted(full, key=lambda t: (-t[0] * t[1], -t[1]))
    return sorted(found, key=lambda t: (-t[2] * t[3], -t[0] * t[1]))


def _threads_along_n(columns: int, ty: int, subgroup: int) -> int:
    """Threads x for `columns` thread tiles along N beside `ty` along M:
    the most, up to TARGET_THREADS in all, that make whole subgroups, else
    the most (a divisor of `columns`, so that every workgroup is full)."""
    limit = max(1, TARGET_THREADS // ty)
    divisors = [d for d in range(limit, 0, -1) if columns % d == 0]
    return next((d for d in divisors if d * ty % subgroup == 0), divisors[0])


def workgroups(m: int, n: int, target: Target) -> int | None:
    """The chooser's workgroup count for an M x N result (one batch
    element), or None when no tiling of it is taken: what hlo/split_k.py
    weighs against the target's multiprocessors."""
    tiles = _thread_tiles(m, n, target)
    if not tiles:
        return None
    tm, tn, threads_x, threads_y = tiles[0]
    return (n // (tn * threads_x)) * (m // (tm * threads_y))


def contraction_signature(d: Dispatch) -> str:
    """What a tuned choice is keyed by: the contraction's loops, types and
    layouts and whether an epilogue follows (not the program it is in)."""
    (c,) = d.contractions
    loops = f"B{c.batch}M{c.m}N{c.n}K{c.k}".replace(" ", "")
    types = f"{c.lhs.element_type}x{c.rhs.element_type}->{c.result.element_type}"
    layout = f"A{'k' if c.lhs_k_inner else 'm'}B{'k' if c.rhs_k_inner else 'n'}"
    return f"{loops} {types} {layout} {'epilogue' if not c.is_root else 'bare'}"


def _params(d: Dispatch, target: Target, tiles) -> MatmulParams | None:
    """The kernel's parameters for one (tm, tn, threads x, threads y), or
    None when its grid exceeds the target."""
    (c,) = d.contractions
    m, n, k = (c.m[0] if c.m else 1), c.n[0], c.k[0]
    tm, tn, threads_x, threads_y = tiles
    grid = _grid(c, n // (tn * threads_x), m // (tm * threads_y))
    if target.grid_refusal(grid):
        return None
    epilogue = not c.is_root
    return MatmulParams(
        launch=Launch(grid, (threads_x, threads_y, 1), target.subgroup_size),
        matmul_operand=d.input_producers.index(c.op) if epilogue else 0,
        workgroup_tile=(tm * threads_y, tn * threads_x),
        thread_tile=(tm, tn),
        k_step=_k_step(k),
        vector=math.gcd(tn, _aligned_vector(d, target)),
        epilogue=epilogue,
        batch=bool(c.batch),
        m_loop=bool(c.m),
        prologues=c.prologues,
    )


def _grid(c, n_tiles: int, m_tiles: int) -> tuple[int, int, int]:
    """Workgroups along x (N), y (M) and z (batch). With a batch loop and
    no M loop (a batched vector-matrix product: decode attention's q k^T
    per head) the batch goes to y, as the script's mapping drops z with M."""
    if c.batch and not c.m:
        return (n_tiles, c.batch[0], 1)
    return (n_tiles, m_tiles, c.batch[0] if c.batch else 1)


def degenerate(p: MatmulParams | None) -> bool:
    """Whether an exact tiling does too little per thread to keep: the
    ragged kernel's case (or no exact tiling at all). With no M loop (one
    row) a thread's 1 x 4 or 1 x 8 is the tile a vector-matrix product
    wants; such a tiling is degenerate where its workgroup falls short of a
    subgroup (1x256x1004: 251 columns of 4, one thread per workgroup)."""
    if p is None or p.vector < VECTOR:
        return True
    if not p.m_loop:
        tx, ty, _ = p.launch.workgroup
        return tx * ty < p.launch.subgroup
    return p.thread_tile[0] * p.thread_tile[1] < RAGGED_BELOW


def _ragged_refusal(d: Dispatch, target: Target) -> str | None:
    """Why the ragged kernel does not take this dispatch (which the exact
    kernel's structure checks passed), or None."""
    (c,) = d.contractions
    if any(c.prologues):
        return "an operand computed in the dispatch (a dequantization): exact tiles only"
    if not c.m and not target.one_row_masked_tiles:
        return (
            f"target {target.name} keeps one-row products off masked tiles "
            "(one_row_masked_tiles = false: measured slower than IREE's kernel)"
        )
    if c.m and c.m[0] == 1:
        # An M loop of extent 1 (split-K's batched decode products,
        # [S, 1, K/S] @ [S, K/S, N]): t x t thread tiles would pad the one
        # row to t and compute t - 1 rows for nothing (4x1x256 @ 4x256x1001
        # so forced compiled and matched numpy; it once failed); the exact
        # tiles (1 x 8) take such products. A plain one-row product has no
        # M loop (IREE's vecmat): ragged tiles of N alone take it.
        return "an M loop of one row (t x t ragged tiles would pad it to t rows)"
    if len(d.outputs) > 1:
        # Found on a training step (jax.value_and_grad of an MLP: the
        # epilogue yields the output and its gradient): tiling such a root
        # to ragged workgroups fails ("tracking listener failed to find
        # replacement op"); the exact tiles take it.
        return f"an epilogue with {len(d.outputs)} results (ragged tiles take one)"
    if _aligned_vector(d, target) < VECTOR:
        return (
            f"a binding at an offset of {d.offset_alignment} bytes, which "
            f"{VECTOR}-wide vectors would not align (ragged tiles write them)"
        )
    if not c.is_root and not d.output_maps_identity:
        # Found on an MLP's weight gradient ((x^T @ g)^T, M = 5): IREE's
        # bufferization copies a masked tile written transposed (the kernel
        # check finds the buffer); the exact tiles take such epilogues.
        return "an epilogue that writes its result transposed (ragged tiles write rows)"
    _, why = _ragged_types(d)
    return why


def _ragged_types(d: Dispatch) -> tuple[tuple[str, str] | None, str]:
    """(operands' element, the element of the epilogue's other inputs) for
    the ragged kernel, or None and why not.
    One type throughout (accumulated in it, as the program asks), or f16 or
    bf16 operands accumulated in f32 (hlo/wide_accumulators.py gives every
    bf16 product this form: the convert back is the epilogue's, applied to
    the f32 registers before the one store). The script finds the
    epilogue inputs' pads by their padded type (Ragged.inputs_element), so
    those inputs share one type, the operands' or the accumulator's. (bf16
    needed its unmasked reads cut to 4 wide: the script's R9;
    docs/findings.md, 'Ragged tiles for bf16'.)"""
    (c,) = d.contractions
    operands = {c.lhs.element_type, c.rhs.element_type}
    accumulator = c.result.element_type
    if not operands <= WIDENED:
        return None, f"{'/'.join(sorted(operands))} operands: f32, f16 or bf16"
    if len(operands) > 1 and accumulator != "f32":
        return None, f"{'/'.join(sorted(operands))} operands accumulated in {accumulator}: f32 only"
    # (Mixed operands: each operand's pad is found as its producer, so they
    # need no one type; `element` names both.)
    element = "/".join(sorted(operands))
    if accumulator not in (element, "f32"):
        return None, f"{element} operands accumulated in {accumulator}: in {element} or f32 only"
    epilogue = not c.is_root
    product = d.input_producers.index(c.op) if epilogue else None
    others = {o.element_type for i, o in enumerate(d.inputs) if epilogue and i != product}
    outputs = {o.element_type for o in d.outputs}
    if len(others) > 1:
        # (a bias in one type and a residual in another: the script
        # matches the epilogue inputs' pads by one padded type)
        return None, f"epilogue inputs in {'/'.join(sorted(others))}: one type (the pads')"
    if not (others | outputs) <= {*operands, accumulator}:
        kinds = "/".join(sorted(others | outputs))
        return None, f"{element} x {element} -> {accumulator} with a {kinds} epilogue"
    (inputs_element,) = others or ({element} if len(operands) == 1 else {accumulator})
    return (element, inputs_element), ""


def _pad_shape(d: Dispatch, position: int, t: int, ragged: tuple[bool, ...]):
    """(padded shape, whether it is padded) of the root's input `position`
    in a thread's t x t tile ([1, ..] for a batch dim or a broadcast one;
    [t] alone with no M loop): padded when it spans a loop, M or N (N alone
    with no M loop), that the workgroup tile does not divide (`ragged`).
    None when its map is not a projection of the loops."""
    (c,) = d.contractions
    batch = len(c.batch)
    shape, padded = [], False
    for expr in d.root_maps[position].results:
        expr = expr.maybe_downcast()
        if isinstance(expr, ir.AffineConstantExpr):
            shape.append(1)
            continue
        if not isinstance(expr, ir.AffineDimExpr):
            return None
        loop = expr.position
        shape.append(1 if loop < batch else t)
        padded = padded or (loop >= batch and ragged[loop - batch])
    return shape, padded


def _thread_extent_dynamic(extent: int, tile: int, threads: int) -> bool:
    """Whether a thread's share of a ragged kernel's dim (num_threads over
    workgroup tiles of `tile`) varies: an edge workgroup, or one workgroup
    whose threads get different counts."""
    if extent % tile == 0:
        return False
    if extent > tile:
        return True
    share = math.ceil(extent / threads)
    return len({max(0, min(share, extent - i * share)) for i in range(threads)}) > 1


def ragged_options(d: Dispatch, target: Target, exact_exists: bool) -> list[tuple[int, int, int]]:
    """(t, threads y, threads x) of the ragged tilings for this contraction,
    the chooser's first: t = 8 or 4 (4 alone for small M or N), up to 8 x 8
    threads, the largest tile whose workgroup fills a subgroup first (as the
    exact chooser does); then half the threads along either dim (what
    `tilefuse tune` times beside it). Where no workgroup fills a subgroup
    (a small matrix, 32-wide warps) the smallest tile, and only when no
    exact tiling exists."""
    (c,) = d.contractions
    m, n = (c.m[0] if c.m else 1), c.n[0]
    if c.m:
        sizes = (8, 4) if min(m, n) >= 16 else (4,)
        first = [
            (t, min(RAGGED_THREADS, math.ceil(m / t)), min(RAGGED_THREADS, math.ceil(n / t)))
            for t in sizes
        ]
    else:
        # No M loop: one vector of VECTOR outputs per thread, threads along N.
        first = [(VECTOR, 1, min(TARGET_THREADS, math.ceil(n / VECTOR)))]
    full = [o for o in first if o[1] * o[2] >= target.subgroup_size]
    if not full:
        return [] if exact_exists else first[-1:]
    options = list(full)
    for t, y, x in full:
        halves = ((t, max(1, y // 2), x), (t, y, max(1, x // 2))) if c.m else ((t, y, x // 2),)
        for half in halves:
            if half[1] * half[2] >= target.subgroup_size and half not in options:
                options.append(half)
    if target.multiprocessors > 0:
        # A grid with fewer workgroups than the GPU has multiprocessors
        # leaves some idle (197x768 in 64x64 tiles: 48 of sm_80's 108):
        # such tilings go last (197x768 then takes 4x4 per thread in 32x32
        # tiles, 168 workgroups). A guess from the grid alone, not measured
        # on a GPU.
        batch = c.batch[0] if c.batch else 1

        def workgroups(o):
            t, y, x = o
            rows = math.ceil(m / (t * y)) if c.m else 1
            return rows * math.ceil(n / (t * x)) * batch

        # Where none fills them (a small matrix), the most workgroups first.
        def key(o):
            short = workgroups(o) < target.multiprocessors
            return (short, -workgroups(o) if short else 0)

        options.sort(key=key)
    return options


def ragged_params(
    d: Dispatch,
    target: Target,
    exact_exists: bool = False,
    option: tuple[int, int, int] | None = None,
) -> tuple[MatmulParams | None, str]:
    """The ragged kernel's parameters for `option` (one of ragged_options;
    default the chooser's), or None and why not. A heuristic apart from the
    script: the edges of M, N and K are masked inside the dispatch, so any
    shape takes the same register tile (K step 4)."""
    why = _ragged_refusal(d, target)
    if why:
        return None, why
    (c,) = d.contractions
    (element, inputs_element), _ = _ragged_types(d)
    m, n, k = (c.m[0] if c.m else 1), c.n[0], c.k[0]
    options = ragged_options(d, target, exact_exists)
    if not options:
        return None, "a ragged workgroup would not fill a subgroup"
    t, threads_y, threads_x = option or options[0]
    if threads_x * threads_y == 1:
        # M and N within one t x t tile (3x5x2): the slices of the one
        # thread fold away, and with them the fold of the epilogue's read of
        # the padded product; the kernel copied the tile (kernel_refusal).
        return None, f"{m}x{n} is one thread's tile"
    # With no M loop a thread's tile is one row of t (tile_m: 1).
    tm = t if c.m else 1
    tile_m, tile_n = tm * threads_y, t * threads_x
    grid = _grid(c, math.ceil(n / tile_n), math.ceil(m / tile_m))
    if target.grid_refusal(grid):
        return None, "its grid exceeds the target's workgroup counts"
    # The K loop must keep two steps at least: a one-trip loop is folded
    # away, and with it the loop the script finds its row pieces in (K = 3
    # at step 4 failed). K of 4 or less steps by 1.
    if k < 2:
        return None, "K = 1 (no K loop)"
    ks = RAGGED_K_STEP if k > RAGGED_K_STEP else 1
    k_padded = math.ceil(k / ks) * ks
    m_ragged, n_ragged, k_ragged = m % tile_m != 0, n % tile_n != 0, k % ks != 0
    epilogue = not c.is_root
    operand = d.input_producers.index(c.op) if epilogue else 0
    # The script vectorizes each input pad of the root by its padded type;
    # these are the types it looks for (a pad of any other shape would be
    # left to pad_vectorization, which reads it without a row mask).
    known = ([t, t], [t], [1, t, t], [1, t]) if c.m else ([t], [1, t])
    # Where a thread's extent is not known statically its reads are masked
    # (kernel_refusal checks it); where it is (one workgroup along the dim,
    # as many rows for every thread) the masks fold away.
    m_dynamic = _thread_extent_dynamic(m, tile_m, threads_y)
    n_dynamic = _thread_extent_dynamic(n, tile_n, threads_x)
    # The root's loops: [B,] M, N, or [N] alone with no M loop.
    ragged_dims, dynamic_dims = (
        ((m_ragged, n_ragged), (m_dynamic, n_dynamic)) if c.m else ((n_ragged,), (n_dynamic,))
    )
    masked = []
    if m_dynamic or k_ragged:
        masked.append(tuple(c.lhs.shape))
    if n_dynamic or k_ragged:
        masked.append(tuple(c.rhs.shape))
    if epilogue:
        for i in range(len(d.inputs)):
            if i == operand:
                continue
            found = _pad_shape(d, i, t, ragged_dims)
            if found is None:
                return None, f"the root's input {i} is not read through a projection"
            shape, padded = found
            if padded and shape not in known:
                return None, f"the root's input {i} pads to {shape} (not built)"
            if _pad_shape(d, i, t, dynamic_dims)[1]:
                masked.append(tuple(d.inputs[i].shape))
    params = MatmulParams(
        launch=Launch(grid, (threads_x, threads_y, 1), target.subgroup_size),
        matmul_operand=operand,
        workgroup_tile=(tile_m, tile_n),
        thread_tile=(tm, t),
        k_step=ks,
        vector=VECTOR,
        epilogue=epilogue,
        batch=bool(c.batch),
        m_loop=bool(c.m),
        ragged=Ragged(
            k_padded=k_padded,
            a_padded=m_ragged or k_ragged,
            b_padded=n_ragged or k_ragged,
            a_k_inner=c.lhs_k_inner,
            b_k_inner=c.rhs_k_inner,
            bare=not epilogue,
            root_inputs=len(d.inputs) if epilogue else 1,
            element=element,
            inputs_element=inputs_element,
            masked_reads=tuple(masked),
            guarded_writes=tuple(d.outputs[0].shape) if m_dynamic or n_dynamic else None,
        ),
    )
    return params, ""


def _exact_candidates(d: Dispatch, target: Target) -> list[MatmulParams]:
    (c,) = d.contractions
    tiles = _thread_tiles(c.m[0] if c.m else 1, c.n[0], target)
    return [p for p in (_params(d, target, t) for t in tiles) if p is not None]


def _ragged_candidates(d: Dispatch, target: Target, exact_exists: bool) -> list[MatmulParams]:
    if _ragged_refusal(d, target):
        return []
    found = (
        ragged_params(d, target, exact_exists, o)[0]
        for o in ragged_options(d, target, exact_exists)
    )
    return [p for p in found if p is not None]


def candidates(d: Dispatch, target: Target) -> list[MatmulParams]:
    """Every tiling the kernel takes for this dispatch, the chooser's first
    (what `tilefuse tune` times): the exact tilings and the ragged ones; a
    degenerate exact first choice gives way to the first ragged tiling.
    [] when the kernel refuses it."""
    if _check(d, target):
        return []
    exact = _exact_candidates(d, target)
    ragged = _ragged_candidates(d, target, exact_exists=bool(exact))
    if ragged and degenerate(exact[0] if exact else None):
        return ragged + exact
    return exact + ragged


def choice_of(p: MatmulParams) -> dict:
    """The fields a tuned choice records (an exact tiling's as before
    ragged tilings were tuned: caches written then still match)."""
    tx, ty, _ = p.launch.workgroup
    choice = {"thread_tile": list(p.thread_tile), "threads": [tx, ty]}
    return {**choice, "ragged": True} if p.ragged else choice


def plan(d: Dispatch, target: Target) -> tuple[MatmulParams | None, str]:
    why = _check(d, target)
    if why:
        return None, why
    (c,) = d.contractions
    m, n, k = (c.m[0] if c.m else 1), c.n[0], c.k[0]
    options = candidates(d, target)
    params, note = (
        tuning.pick(options, choice_of, target, "matmul", contraction_signature(d))
        if options
        else (None, "")
    )
    if params is None:
        _, ragged_why = ragged_params(d, target)
        if _thread_tiles(m, n, target):
            return None, "every tiling's grid exceeds the target's workgroup counts"
        tm = _largest_dividing(m, THREAD_TILE_SIZES)
        tn = _largest_dividing(n, THREAD_TILE_SIZES)
        return None, (
            f"thread tile {tm}x{tn} (M={m}, N={n} have no larger small divisor): "
            f"too little work per thread, and no ragged tiles: {ragged_why}"
        )
    tm, tn = params.thread_tile
    batch = f"{c.batch[0]} x " if c.batch else ""
    element = c.result.element_type
    operands = "/".join(sorted({c.lhs.element_type, c.rhs.element_type}))
    if operands != element:  # e.g. bf16 operands accumulated in f32
        element = f"{operands} -> {element}"
    epilogue = " with its epilogue" if params.epilogue else ""
    ragged = ", ragged tiles (edges masked)" if params.ragged else ""
    return params, (
        f"{batch}{m}x{k} @ {k}x{n} {element}{epilogue}, {tm}x{tn} outputs "
        f"per thread in registers{ragged}, K step {params.k_step}, "
        f"{'vector multiply-adds' if element.startswith('i') else 'vector FMAs'}{note}"
        f"{_tensor_cores_note(d, target)}"
    )


def _tensor_core_plans(d: Dispatch, target: Target) -> tuple[str | None, list[str]]:
    """(the tensor-core strategy that takes the contraction on CUDA, or
    None; the refusals of those tried before it), trying in order those
    for its operand type: IREE's TileAndFuse configuration
    (matmul_mma_iree: f16, bf16, on targets with iree_mma), then tilefuse's
    own kernel (matmul_mma: f16, and f32 as TF32 where the target opts in;
    IREE 3.13 reaches no bf16 tensor cores from a transform script)."""
    from . import matmul_mma, matmul_mma_iree  # they read this module's checks

    (c,) = d.contractions
    tried = {
        "f16": (matmul_mma_iree, matmul_mma),
        "bf16": (matmul_mma_iree,),
        "f32": (matmul_mma,),
    }.get(c.lhs.element_type, ())
    refusals = []
    for strategy in tried:
        params, why = strategy.plan(d, target)
        if params:
            return strategy.STRATEGY.name, refusals
        refusals.append(f"{strategy.STRATEGY.name}: {why}")
    return None, refusals


def _tensor_cores_note(d: Dispatch, target: Target) -> str:
    """Why a contraction on CUDA is not on tensor cores (the refusals of
    the tensor-core strategies that could take its types), for explain;
    "" otherwise."""
    if target.backend != "cuda":
        return ""
    _, refusals = _tensor_core_plans(d, target)
    return f"; not on tensor cores: {'; '.join(refusals)}" if refusals else ""


def steps(p: MatmulParams) -> dict[str, str]:
    """The script's optional steps: the exact or the ragged kernel; tiles
    with or without an epilogue, row pieces with or without an M loop; for
    ragged tiles, whether A and B have pads to read masked."""
    if p is not None and p.ragged:
        r, no_pad = p.ragged, "tilefuse_matmul_no_source"
        chosen = {
            "kernel": "tilefuse_matmul_ragged",
            "r_tile": "tilefuse_matmul_ragged_tile_" + ("bare" if r.bare else "epilogue"),
            "a_pads": "tilefuse_matmul_a_pads" if r.a_padded else SKIP,
            "b_pads": "tilefuse_matmul_b_pads" if r.b_padded else SKIP,
        }
        if not p.m_loop:
            # One row piece per thread (t = v): no fill rows, no K step rows;
            # A's pad is the K loop's, shared by the thread's one piece.
            return {**chosen, "r_fill_rows": SKIP, "r_k_rows": SKIP}
        return {
            **chosen,
            "r_fill_rows": "tilefuse_matmul_rows",
            "r_k_rows": "tilefuse_matmul_ragged_k_rows",
            "a_rows": "tilefuse_matmul_fuse_a_source" if r.a_padded else no_pad,
            "b_rows": "tilefuse_matmul_fuse_b_source" if r.b_padded else no_pad,
        }
    m_loop = p is None or p.m_loop
    rows = "tilefuse_matmul_rows" + ("" if m_loop else "_1d")
    epilogue = p is None or p.epilogue
    a, b = p.prologues if p is not None else (False, False)
    no_source = "tilefuse_matmul_no_source"
    chosen = {
        "kernel": "tilefuse_matmul_exact",
        "tile": "tilefuse_matmul_tile_" + ("epilogue" if epilogue else "bare"),
        "epilogue_rows": rows if epilogue else SKIP,
        "fill_rows": rows,
        "k_rows": "tilefuse_matmul_k_rows" + ("" if m_loop else "_1d"),
        "prologues": "tilefuse_matmul_prologues" if a or b else no_source,
    }
    if a or b:
        chosen["a_prologue"] = "tilefuse_matmul_fuse_a_source" if a else no_source
        chosen["b_prologue"] = "tilefuse_matmul_fuse_b_source" if b else no_source
    if m_loop:  # the row pieces' loops (the _1d form has one, over N)
        chosen["a_rows"] = "tilefuse_matmul_fuse_a_source" if a else no_source
    chosen["b_rows"] = "tilefuse_matmul_fuse_b_source" if b else no_source
    return chosen


def describe(p: MatmulParams) -> str:
    ragged = " ragged" if p.ragged else ""
    return (
        f"tile={list(p.workgroup_tile)} thread={list(p.thread_tile)}{ragged} k_step={p.k_step} "
        f"grid={list(p.launch.grid)} wg={list(p.launch.workgroup)} vector={p.vector}"
    )


def attributes(p: MatmulParams, ctx: ir.Context) -> dict:
    """Values of the tagged steps of transform_scripts/matmul.mlir."""
    tm, tn = p.thread_tile
    # A batch loop comes first: one batch element per workgroup (block z);
    # below the workgroup it has extent 1 and is not tiled again (size 0).
    lead, blocks = ((1,), ("z", "y", "x")) if p.batch else ((), ("y", "x"))
    below = (0,) * len(lead)
    # With no M loop the tiles are of N alone (block x, thread x).
    keep = slice(None) if p.m_loop else slice(1, None)
    workgroup_tile, thread_tile = p.workgroup_tile[keep], p.thread_tile[keep]
    blocks, threads, row = blocks[keep], ("y", "x")[keep], (1,)[keep]
    return {
        "matmul_operand": {"raw_position_list": attrs.i64_array([p.matmul_operand], ctx)},
        "workgroup_tile": {
            "static_tile_sizes": attrs.i64_array((*lead, *workgroup_tile), ctx),
            "mapping": attrs.mapping("block", blocks, ctx),
        },
        "thread_tile": {
            "static_tile_sizes": attrs.i64_array((*below, *thread_tile), ctx),
            "mapping": attrs.mapping("thread", threads, ctx),
        },
        "k_step": attrs.static_sizes([*below, *(0 for _ in row), 0, p.k_step], ctx),
        "rows": attrs.static_sizes([*below, *row, p.vector], ctx),
        "k_rows": attrs.static_sizes([*below, *row, p.vector, 0], ctx),
        "m_unroll": {"factor": attrs.i64(tm, ctx)},
        "n_unroll": {"factor": attrs.i64(tn // p.vector, ctx)},
        **attrs.workgroup(p.launch, ctx),
        **(_ragged_attributes(p, ctx) if p.ragged else {}),
    }


def _ragged_attributes(p: MatmulParams, ctx: ir.Context) -> dict:
    """Values of the ragged kernel's own tags (@tilefuse_matmul_ragged)."""
    r, (_, t), v, ks = p.ragged, p.thread_tile, p.vector, p.k_step
    tx, ty, _ = p.launch.workgroup
    # Below the workgroup a batch loop is not tiled (0) and pads to 1.
    below, one = ((0,), (1,)) if p.batch else ((), ())
    a_piece = (1, ks) if r.a_k_inner else (ks, 1)
    b_piece = (v, ks) if r.b_k_inner else (ks, v)
    # With no M loop: threads along N alone, a row of t; A is a vector of K.
    threads, mapping, tile = ((ty, tx), ("y", "x"), (t, t)) if p.m_loop else ((tx,), ("x",), (t,))
    if not p.m_loop:
        a_piece = (ks,)
    pads = ([t, t], [t], [1, t, t], [1, t])
    found = {}
    for i, shape in enumerate(pads):
        found[f"r_pad_type_{i}"] = {
            "filter_result_type": ir.Attribute.parse(
                f"tensor<{'x'.join(map(str, shape))}x{r.inputs_element}>", ctx
            )
        }
        found[f"r_pad_vector_{i}"] = attrs.vector_sizes(shape, ctx)
    return {
        "r_threads": {
            "static_num_threads": attrs.i64_array((*below, *threads), ctx),
            "mapping": attrs.mapping("thread", mapping, ctx),
        },
        "r_matmul_pad": {"static_padding_sizes": attrs.i64_array((*one, *tile, r.k_padded), ctx)},
        "r_root_pad": {"static_padding_sizes": attrs.i64_array((*one, *tile), ctx)},
        "a_pad_vector": attrs.vector_sizes((*one, *a_piece), ctx),
        "b_pad_vector": attrs.vector_sizes((*one, *b_piece), ctx),
        "r_root_init": {"raw_position_list": attrs.i64_array([r.root_inputs], ctx)},
        "r_unroll": {"m": attrs.i64(1, ctx), "n": attrs.i64(v, ctx), "k": attrs.i64(1, ctx)},
        **found,
    }


def _multiply_adds(loop: ir.Operation) -> bool:
    """The loop multiplies and adds on vectors: vector.fma, or for integers
    (i8 x i8 -> i32) arith.muli on vectors."""
    for op in walk(loop):
        if op.name == "vector.fma":
            return True
        if op.name == "arith.muli" and isinstance(op.results[0].type, ir.VectorType):
            return True
    return False


def kernel_refusal(func: ir.Operation, p: MatmulParams) -> str | None:
    """Why a printed matmul kernel is not the register-blocked FMA kernel,
    or None. Each of these compiled and ran, slower, while the script was
    written: a copy of the tile per thread, a contraction left scalar, the
    accumulators stored and reloaded every K step."""
    ops = list(walk(func))
    if any(op.name in ("memref.alloc", "memref.alloca") for op in ops):
        return "a buffer is allocated in the kernel (a tile copied, not kept in registers)"
    k_loops = [op for op in ops if op.name == "scf.for" and _multiply_adds(op)]
    if not k_loops:
        return "no vector.fma in a loop (the contraction was not lowered to vector FMAs)"
    if any(holds(loop, "vector.transfer_write") for loop in k_loops):
        return "the K loop stores (the accumulators are not kept in registers)"
    return _unguarded_access(ops, p.ragged if p is not None else None)


TRANSFERS = ("vector.transfer_read", "vector.transfer_write")
VIEWS = ("memref.subview", "memref.cast", "memref.expand_shape", "memref.collapse_shape")


def _buffer_shape(value: ir.Value) -> tuple[int, ...] | None:
    """The shape of the binding a transfer's memref views, or None."""
    while True:
        if isinstance(value, ir.BlockArgument) and isinstance(value.type, ir.MemRefType):
            return tuple(ir.MemRefType(value.type).shape)  # a test's kernel
        owner = value.owner
        if not isinstance(owner, ir.OpView):
            return None
        op = owner.operation
        if op.name == "hal.interface.binding.subspan":
            return tuple(ir.MemRefType(op.results[0].type).shape)
        if op.name not in VIEWS:
            return None
        value = op.operands[0]


def _masked(op: ir.Operation) -> bool:
    """A transfer with a mask operand (operandSegmentSizes' last entry)."""
    return list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[-1] == 1


def _guarded(op: ir.Operation) -> bool:
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        if parent.name == "scf.if":
            return True
        parent = parent.parent
    return False


def _unguarded_access(ops: list[ir.Operation], r: "Ragged | None") -> str | None:
    """Why a kernel's edges are not masked, or None: a transfer with an out
    of bounds dim and no mask (what the earlier ragged prototypes left: the
    row's flag is dropped when the row dim is cast away, and the row past M
    is read unguarded); in a ragged kernel, a read of an operand that needs
    padding without a mask, or a store past a ragged edge neither masked nor
    guarded."""
    for op in ops:
        if op.name not in TRANSFERS:
            continue
        in_bounds = [ir.BoolAttr(b).value for b in ir.ArrayAttr(op.attributes["in_bounds"])]
        if not all(in_bounds) and not _masked(op):
            return f"{op.name} out of bounds with no mask: its edge is not guarded"
        if r is None:
            continue
        source = op.operands[1] if op.name == "vector.transfer_write" else op.operands[0]
        shape = _buffer_shape(source)
        if op.name == "vector.transfer_read" and shape in r.masked_reads and not _masked(op):
            return f"a read of the {'x'.join(map(str, shape))} operand with no mask (a ragged edge)"
        if (
            op.name == "vector.transfer_write"
            and shape == r.guarded_writes
            and not (_masked(op) or _guarded(op))
        ):
            return "a store into the output neither masked nor guarded (a ragged edge)"
    return None


STRATEGY = Strategy(
    name="matmul",
    plan=plan,
    tunable=Tunable(candidates, choice_of, contraction_signature),
    describe=describe,
    attributes=attributes,
    steps=steps,
    kernel_refusal=kernel_refusal,
)
