"""Parameters of the tensor-core matmul kernel (transform_scripts/matmul_mma.mlir).

Seed: the Ampere GEMM of CUTLASS, IREE's and XLA's: a workgroup computes a
TM x TN tile, stepping over K by KT; each step's A and B slices go to
workgroup memory by 16-byte cp.async, `depth` steps in flight; each warp
reads its WM x WN piece back with ldmatrix and multiplies on tensor cores
(mma.sync m16n8k16), the accumulators in registers across the K loop. The
epilogue reads the accumulator tile from workgroup memory (nvgpu's mma.sync
fragments take no elementwise ops), spread over all threads.

Takes, on CUDA (sm_80 and later):
- f16 operands, the contraction accumulating in f32 (every f16 product after
  hlo/wide_accumulators.py, its convert back to f16 part of the epilogue) or
  in f16; bf16 is refused: IREE 3.13's mma.sync conversion fails on bf16
  reads from workgroup memory (matmul_mma_iree.py reaches bf16 tensor cores
  through IREE's pipeline);
- A as [M, K], B as [K, N] or [N, K] (attention's q k^T), at most one batch
  loop (one batch element per workgroup), an elementwise epilogue or none;
- tiles that divide M, N and K (K in steps of 32, at least two) within the
  target's workgroup memory (`shared_memory_bytes`): the largest such tile
  whose grid still has a workgroup per multiprocessor of the target's GPU
  (fewer, and some multiprocessors idle: a wave left part empty), else the
  one with the most workgroups; 2 x 2 warps where the tile allows, else
  fewer, else 8 (an f32 accumulator piece of 64 x 64 is too many registers).
The f16 kernels' numerics matched XLA's on an H200 (docs/gpu-results.md,
accumulating in f16 then); f32 accumulation with 8 warps has not run on a GPU.
"""

from dataclasses import dataclass

from iree.compiler import ir

from ..dispatch.read import Dispatch
from ..irutil import holds, walk
from ..targets import Target
from . import attrs, tuning
from .contract import SKIP, Launch, Strategy, Tunable
from .matmul import contraction_signature, structure_refusal

# Workgroup tiles tried, largest first (fewer loads of A and B per output).
WORKGROUP_TILES = (
    (128, 128),
    (128, 64),
    (64, 128),
    (64, 64),
    (64, 32),
    (32, 64),
    (32, 32),
    (32, 16),
    (16, 32),
    (16, 16),
)
MAX_WARP_TILE = 64
# Registers per lane a warp's accumulator piece may take: 64 x 64 in f16,
# 64 x 32 in f32.
ACCUMULATOR_REGISTERS = 64
# A multiple of mma.sync's k16. 16 was tried: the pipeliner left such
# loops unpipelined (the kernel check refused them), so 32 only.
K_TILES = (32,)
COPY_BYTES = 16  # one cp.async: 8 f16 or 4 f32 (TF32) operand elements
EPILOGUE_WIDTH = 8  # elements of a thread's epilogue (and fill) piece per row
OPERAND_BYTES = {"f16": 2, "f32": 4}
PIPELINE_DEPTH = 3  # the pipeliner leaves depth 2 unpipelined, silently
# IREE's CUDA kernels take workgroup memory dynamically. More than 48 KiB
# needs the launch to opt in, which IREE's runtime does for every kernel
# (runtime/src/iree/hal/drivers/cuda/native_executable.c: cuFuncSetAttribute
# MAX_DYNAMIC_SHARED_SIZE_BYTES to the kernel's size, refused above the
# device's MAX_SHARED_MEMORY_PER_BLOCK_OPTIN), so the limit is the target's
# `shared_memory_bytes` (227 KiB sm_90, 163 KiB sm_80).
ACCUMULATOR_BYTES = {"f16": 2, "f32": 4}


@dataclass(frozen=True)
class MatmulMmaParams:
    launch: Launch
    matmul_operand: int  # the root's input the contraction produces
    workgroup_tile: tuple[int, int]  # (TM, TN)
    warp_tile: tuple[int, int]  # (WM, WN)
    k_tile: int
    copy_width: int  # operand elements per cp.async (8 f16, 4 f32)
    copy_a_rows: int  # rows of a thread's [rows, copy_width] piece of A's TM x KT slice
    copy_b_rows: int  # the same for B's slice (KT x TN, or TN x KT transposed)
    epilogue_rows: int  # rows of a thread's [rows, 8] piece of the epilogue and fill
    depth: int
    shared_bytes: int
    epilogue: bool
    batch: bool


def _check(d: Dispatch, target: Target) -> str | None:
    if target.backend != "cuda":
        return f"tensor cores through mma.sync: CUDA only ({target.backend} target)"
    why = structure_refusal(d)
    if why:
        return why
    (c,) = d.contractions
    operands = {c.lhs.element_type, c.rhs.element_type}
    if operands == {"f32"} and not target.tf32:
        return (
            f"f32 operands: TF32 tensor cores keep 10 bits of their mantissa, "
            f"opt-in only (target field tf32, off on {target.name})"
        )
    if operands == {"f32"} and c.result.element_type != "f32":
        return f"f32 operands with a {c.result.element_type} result"
    if operands not in ({"f16"}, {"f32"}):
        types = "/".join(sorted(operands))
        if "bf16" in types:
            return (
                "bf16 operands: IREE 3.13's mma.sync conversion fails on them "
                "(matmul_mma_iree configures IREE's pipeline for them instead)"
            )
        return f"{types} operands (f16, or f32 as TF32 where the target opts in)"
    if c.result.element_type not in ACCUMULATOR_BYTES:
        return f"a {c.result.element_type} accumulator (f16 or f32)"
    if not c.m:
        return "no M loop (a vector-matrix product)"
    if not c.lhs_k_inner:
        return "A stored as [K, M] (not built)"
    return None


def _warps(tm: int, tn: int, accumulator: str) -> list[tuple[int, int]]:
    """(WM, WN) candidates, most warps first up to 2 x 2 (2 x 2, 2 x 1,
    1 x 2, one warp for small tiles), then 2 x 4 and 4 x 2; each warp's
    piece a whole number of m16n8 tiles, at most MAX_WARP_TILE a side and
    at most ACCUMULATOR_REGISTERS of accumulators per lane. (A 64 x 64 f32
    piece is 128 registers per lane: with a GELU epilogue ptxas spilled,
    and 8 warps of 64 x 32 take a 128 x 128 tile instead.)"""
    found = []
    for wy, wx in ((2, 2), (2, 1), (1, 2), (1, 1), (4, 2), (2, 4)):
        wm, wn = tm // wy, tn // wx
        if wm % 16 or wn % 8 or wm > MAX_WARP_TILE or wn > MAX_WARP_TILE:
            continue
        if wm * wn * ACCUMULATOR_BYTES[accumulator] // 4 // 32 > ACCUMULATOR_REGISTERS:
            continue
        found.append((wm, wn))
    return found


def _pieces(rows: int, cols: int, threads: int, width: int) -> int | None:
    """Rows of a thread's [r, width] piece when a rows x cols slice is split
    into exactly `threads` pieces, or None."""
    pieces = rows * cols // width
    if cols % width or pieces % threads:
        return None
    r = pieces // threads
    return r if r >= 1 and rows % r == 0 else None


@dataclass(frozen=True)
class Product:
    """What the tile chooser reads of a dispatch's contraction."""

    m: int
    n: int
    k: int
    epilogue: bool
    b_k_inner: bool  # B stored as [N, K]
    accumulator: str  # "f16" or "f32"
    operand: str = "f16"  # "f16", or "f32" multiplied as TF32
    batch: int = 1

    @property
    def copy_width(self) -> int:
        return COPY_BYTES // OPERAND_BYTES[self.operand]


def product_of(d: Dispatch) -> Product:
    (c,) = d.contractions
    return Product(
        c.m[0],
        c.n[0],
        c.k[0],
        epilogue=not c.is_root,
        b_k_inner=c.rhs_k_inner,
        accumulator=c.result.element_type,
        operand=c.lhs.element_type,
        batch=c.batch[0] if c.batch else 1,
    )


@dataclass(frozen=True)
class TileConfig:
    tm: int
    tn: int
    wm: int
    wn: int
    kt: int
    threads: int
    ra: int  # rows of a thread's [ra, copy_width] piece of A's slice
    rb: int  # the same for B
    re: int  # the same for the epilogue and the fill
    shared: int  # bytes of workgroup memory


def _config(p: Product, shared_limit: int, multiprocessors: int = 0) -> TileConfig | None:
    """The largest tile configuration that fits and still gives every
    multiprocessor a workgroup; when none does (a small product), the one
    with the most workgroups. None when nothing fits."""
    fitting = list(_configs(p, shared_limit))
    return filling_tile(fitting, p.m, p.n, p.batch, multiprocessors)


def filling_tile(fitting: list, m: int, n: int, batch: int, multiprocessors: int):
    """Of tile configurations (with .tm, .tn), largest first: the first whose
    grid gives every multiprocessor a workgroup, else the one with the most
    workgroups; None for none (matmul_coop's chooser too). A tile that does
    not divide the shape (a padded one) counts its last, partial row or
    column of workgroups."""
    if not fitting:
        return None

    def workgroups(cfg) -> int:
        return -(-m // cfg.tm) * -(-n // cfg.tn)

    for cfg in fitting:
        if batch * workgroups(cfg) >= multiprocessors:
            return cfg
    return max(fitting, key=workgroups)


def _configs(p: Product, shared_limit: int):
    """Every tile configuration that fits, largest tiles first."""
    cw = p.copy_width
    for kt in K_TILES:
        # One K step is no loop at all: nothing to pipeline.
        if p.k % kt or p.k // kt < 2:
            continue
        for tm, tn in WORKGROUP_TILES:
            if p.m % tm or p.n % tn:
                continue
            shared = PIPELINE_DEPTH * (tm * kt + kt * tn) * OPERAND_BYTES[p.operand]
            if p.epilogue:
                shared += tm * tn * ACCUMULATOR_BYTES[p.accumulator]
            if shared > shared_limit:
                continue
            for wm, wn in _warps(tm, tn, p.accumulator):
                threads = 32 * (tm // wm) * (tn // wn)
                ra = _pieces(tm, kt, threads, cw)
                rb = _pieces(tn, kt, threads, cw) if p.b_k_inner else _pieces(kt, tn, threads, cw)
                re = max(1, tm * tn // EPILOGUE_WIDTH // threads)
                if ra is None or rb is None or tm % re:
                    continue
                if (tm // re) * (tn // EPILOGUE_WIDTH) > threads:
                    continue
                yield TileConfig(tm, tn, wm, wn, kt, threads, ra, rb, re, shared)
                break  # the most warps that fit this tile


def _params(d: Dispatch, target: Target, cfg: TileConfig) -> MatmulMmaParams | None:
    (c,) = d.contractions
    grid = (c.n[0] // cfg.tn, c.m[0] // cfg.tm, c.batch[0] if c.batch else 1)
    if target.grid_refusal(grid):
        return None
    epilogue = not c.is_root
    return MatmulMmaParams(
        launch=Launch(grid, (32 * (cfg.tn // cfg.wn), cfg.tm // cfg.wm, 1), target.subgroup_size),
        matmul_operand=d.input_producers.index(c.op) if epilogue else 0,
        workgroup_tile=(cfg.tm, cfg.tn),
        warp_tile=(cfg.wm, cfg.wn),
        k_tile=cfg.kt,
        copy_width=product_of(d).copy_width,
        copy_a_rows=cfg.ra,
        copy_b_rows=cfg.rb,
        epilogue_rows=cfg.re,
        depth=PIPELINE_DEPTH,
        shared_bytes=cfg.shared,
        epilogue=epilogue,
        batch=bool(c.batch),
    )


def candidates(d: Dispatch, target: Target) -> list[MatmulMmaParams]:
    """Every tile configuration that fits the dispatch, the chooser's pick
    first (what `tilefuse tune` times); [] when the kernel refuses it."""
    return [] if _check(d, target) else _options(d, target)


def _options(d: Dispatch, target: Target) -> list[MatmulMmaParams]:
    """candidates, for a dispatch _check accepts."""
    product = product_of(d)
    limit = target.shared_memory_bytes
    first = _config(product, limit, target.multiprocessors)
    if first is None:
        return []
    others = [cfg for cfg in _configs(product, limit) if cfg != first]
    return [p for p in (_params(d, target, cfg) for cfg in [first, *others]) if p is not None]


def choice_of(p: MatmulMmaParams) -> dict:
    return {"tile": list(p.workgroup_tile), "k_tile": p.k_tile}


def plan(d: Dispatch, target: Target) -> tuple[MatmulMmaParams | None, str]:
    why = _check(d, target)
    if why:
        return None, why
    (c,) = d.contractions
    m, n, k = c.m[0], c.n[0], c.k[0]
    options = _options(d, target)
    if not options:
        return None, (
            f"no tile configuration divides {m}x{n}x{k} (M, N by 16-128, K by 32 "
            f"in at least two steps, {target.shared_memory_bytes // 1024} KiB of workgroup memory)"
        )
    params, note = tuning.pick(options, choice_of, target, "matmul_mma", contraction_signature(d))
    batch = f"{c.batch[0]} x " if c.batch else ""
    epilogue = " with its epilogue" if params.epilogue else ""
    operands, shape = (
        ("f32 as TF32", "m16n8k8") if c.lhs.element_type == "f32" else ("f16", "m16n8k16")
    )
    return params, (
        f"{batch}{m}x{k} @ {k}x{n} {operands} -> {c.result.element_type}{epilogue}: mma.sync "
        f"{shape}, {PIPELINE_DEPTH}-stage cp.async, ldmatrix{note}"
    )


def steps(p: MatmulMmaParams) -> dict[str, str]:
    return {
        "tile": "tilefuse_matmul_mma_tile_" + ("epilogue" if p.epilogue else "bare"),
        "epilogue_threads": "tilefuse_matmul_mma_epilogue_threads" if p.epilogue else SKIP,
    }


def describe(p: MatmulMmaParams) -> str:
    return (
        f"tile={list(p.workgroup_tile)} warp={list(p.warp_tile)} k_tile={p.k_tile} "
        f"depth={p.depth} shared={p.shared_bytes}B grid={list(p.launch.grid)} "
        f"wg={list(p.launch.workgroup)}"
    )


def epilogue_piece(p: MatmulMmaParams) -> tuple[int, int]:
    """A thread's piece of the epilogue: one row segment of E elements (E
    = the tile over the threads) where a row holds a whole number of them,
    else [rows, 8].

    Why one row: IREE 3.13's mma.sync conversion takes a 2-D read of the
    shared accumulator tile, with every elementwise op after it that it
    can express as an mma fragment op (addf, truncf, maximumf, ...), for
    fragments to convert, then fails on them ("unhandled vector to mma
    type": f16 matmul + relu, f16 x f16 -> f32 + convert). A chain holding
    an op it cannot express (a broadcast bias) was left alone, which is why
    bias epilogues compiled. A [1, E] piece is read as a 1-D vector once
    the unit dim is cast away (step 10), which the conversion never takes."""
    tm, tn = p.workgroup_tile
    threads = p.launch.workgroup[0] * p.launch.workgroup[1]
    per_thread = tm * tn // threads
    if per_thread <= tn and tn % per_thread == 0:
        return 1, per_thread
    return p.epilogue_rows, EPILOGUE_WIDTH


def attributes(p: MatmulMmaParams, ctx: ir.Context) -> dict:
    """Values of the tagged steps of transform_scripts/matmul_mma.mlir."""
    lead, blocks, below = attrs.batch_lead(p.batch)
    sizes = {
        "workgroup_tile": (*lead, *p.workgroup_tile),
        "warp_tile": (*below, *p.warp_tile),
        "copy_a_tile": (*below, p.copy_a_rows, p.copy_width),
        "copy_b_tile": (*below, p.copy_b_rows, p.copy_width),
        "epilogue_tile": (*below, *epilogue_piece(p)),
        "epilogue_step": (*below, 1, EPILOGUE_WIDTH),
        "fill_tile": (*below, p.epilogue_rows, EPILOGUE_WIDTH),
    }
    values = {tag: {"static_tile_sizes": attrs.i64_array(v, ctx)} for tag, v in sizes.items()}
    values["workgroup_tile"]["mapping"] = attrs.mapping("block", blocks, ctx)
    return {
        **values,
        "matmul_operand": {"raw_position_list": attrs.i64_array([p.matmul_operand], ctx)},
        "k_tile": attrs.static_sizes([*below, 0, 0, p.k_tile], ctx),
        "multibuffer_depth": {"factor": attrs.i64(p.depth, ctx)},
        "pipeline_depth": {"depth": attrs.i64(p.depth, ctx)},
        **attrs.workgroup(p.launch, ctx),
    }


# The printed kernel's ops that show each promise kept (a kernel that
# compiles without one of them degraded silently: shared/IREE_NOTES.md).
PROMISED_OPS = {
    "nvgpu.mma.sync": "no mma.sync (the contraction did not reach tensor cores)",
    "nvgpu.ldmatrix": "no ldmatrix (operands read from workgroup memory element by element)",
    "nvgpu.device_async_copy": "no cp.async (operands not staged asynchronously)",
}


def kernel_refusal(func: ir.Operation, p: MatmulMmaParams) -> str | None:
    """Why a printed kernel is not the tensor-core kernel, or None."""
    names = {op.name for op in walk(func)}
    for name, why in PROMISED_OPS.items():
        if name not in names:
            return why
    # Pipelined: the copies of later steps are issued before the loop.
    loops = [op for op in walk(func) if op.name == "scf.for"]
    if not any(holds(op, "nvgpu.device_async_copy") for op in loops):
        return "no cp.async in a loop"
    if not any(op.name == "nvgpu.device_async_copy" and not _in_loop(op) for op in walk(func)):
        return "the K loop is not pipelined (no cp.async issued before it)"
    return None


def _in_loop(op: ir.Operation) -> bool:
    parent = op.parent
    while parent is not None:
        if parent.name == "scf.for":
            return True
        if parent.name == "func.func":
            return False
        parent = parent.parent
    return False


STRATEGY = Strategy(
    name="matmul_mma",
    plan=plan,
    tunable=Tunable(candidates, choice_of, contraction_signature),
    describe=describe,
    attributes=attributes,
    steps=steps,
    kernel_refusal=kernel_refusal,
)
