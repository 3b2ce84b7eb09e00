"""Parameters of the IREE tensor-core configuration (transform_scripts/matmul_mma_iree.mlir).

IREE's own TileAndFuse pipeline lowers its `NV_MMA_SYNC_F32_16x8x16_F16`
and `_BF16` intrinsics to mma.sync.aligned.m16n8k16 with f32 accumulators.
This strategy writes no kernel: its script, run from @kernel_config, sets
IREE's configuration on the dispatch (a lowering_config naming the
intrinsic with the tiles chosen here, and a TileAndFuse translation_info),
and IREE builds the kernel, the epilogue fused in it (strategies/library.py,
`configures`).

Why IREE's pipeline and not only tilefuse's own mma.sync kernel
(matmul_mma.py): IREE 3.13 reaches no bf16 tensor cores from a transform
script (its mma.sync conversion rejects bf16), and for f16 with an f32
accumulator the own kernel, which keeps the accumulator tile in workgroup
memory, ran at less than half this configuration's rate on an H100
(docs/gpu-results.md, runs 2026-11-26-h100-4 and -5). matmul_mma keeps the
f16 products this refuses, TF32, and every f16 product when the target's
`iree_mma` is off.

Takes, on CUDA targets whose `iree_mma` field is true (the CUDA targets'
files turn it on):
- f16 or bf16 operands accumulated in f32 (hlo/wide_accumulators.py gives
  every such product this form, the convert back being the epilogue's);
- the structures the matmul kernels take (matmul.structure_refusal: a fill,
  the contraction, at most one elementwise root; at most one batch loop),
  A as [M, K], B as [K, N] or [N, K];
- M and N multiples of 16 and K of 16 (tiles divide the shape); the
  largest workgroup tile of 128x128 down to 16x16 whose grid still gives
  every multiprocessor a workgroup (matmul_mma.filling_tile), warps of at
  most 64x32 outputs, K step 64, 32 or 16;
- where the target's `iree_mma_padding` is on (off by default: not yet
  checked on a GPU), also shapes no tile divides, M and N at least 16: the
  same tiles with IREE's `padding` set to the workgroup tile and K step (16
  for a ragged K, as IREE's own configuration of such shapes has it), so
  that IREE's pipeline pads each tile of A and B itself: no extra dispatch.
After the build the strategy refuses a kernel whose PTX holds no mma.sync
of the operands' type or whose block size is not the one it configured
(IREE ignored the configuration): `ptx_refusal`.
"""

from dataclasses import dataclass, replace

from iree.compiler import ir

from ..dispatch.read import Dispatch
from ..kernel.ptx import ntid_of
from ..targets import Target
from . import attrs, tuning
from .contract import PASS, Launch, Strategy, Tunable
from .matmul import contraction_signature, structure_refusal
from .matmul_mma import WORKGROUP_TILES, filling_tile

# Operand type -> IREE's intrinsic (f32 accumulators) and the PTX it lowers to.
INTRINSICS = {"f16": "NV_MMA_SYNC_F32_16x8x16_F16", "bf16": "NV_MMA_SYNC_F32_16x8x16_BF16"}


def mma_ptx(element: str) -> str:
    return f"mma.sync.aligned.m16n8k16.row.col.f32.{element}.{element}.f32"


K_TILES = (64, 32, 16)  # the first that divides K (multiples of k16)
MAX_WARP_TILE = (64, 32)  # 64 f32 accumulators per thread (123 registers at 128x128)
PREFETCH_STAGES = 2  # IREE's own choice for these matmuls


@dataclass(frozen=True)
class MatmulMmaIreeParams:
    launch: Launch
    element: str  # the operands' type: f16 or bf16
    matmul_operand: int  # the root's input the contraction produces
    workgroup_tile: tuple[int, int]  # (TM, TN)
    warp_tile: tuple[int, int]  # (WM, WN)
    k_tile: int
    padded: bool  # a padded tiling of a ragged shape (target field iree_mma_padding)
    epilogue: bool
    batch: bool


def _check(d: Dispatch, target: Target) -> str | None:
    if target.backend != "cuda":
        return f"tensor cores through IREE's pipeline: CUDA only ({target.backend} target)"
    why = structure_refusal(d)
    if why:
        return why
    (c,) = d.contractions
    operands = {c.lhs.element_type, c.rhs.element_type}
    if len(operands) != 1 or not operands <= INTRINSICS.keys():
        return f"{'/'.join(sorted(operands))} operands (f16 or bf16 only)"
    if c.result.element_type != "f32":
        return f"a {c.result.element_type} accumulator (f32 only: the intrinsic's)"
    if not c.m:
        return "no M loop (a vector-matrix product)"
    if not c.lhs_k_inner:
        return "A stored as [K, M] (not built)"
    if not target.iree_mma:
        return f"off on {target.name} (target field iree_mma)"
    return None


def _warp_tile(tm: int, tn: int) -> tuple[int, int]:
    """(WM, WN): two warps along M where the tile has 32 rows, up to four
    along N, each warp at most MAX_WARP_TILE."""
    wm = min(MAX_WARP_TILE[0], tm // 2 if tm >= 32 else tm)
    wn = min(MAX_WARP_TILE[1], tn // 2 if tn >= 16 else tn)
    return wm, wn


# The K step of a padded K: IREE's own configuration's for ragged shapes
# (reduction = [0, 0, 1], padding [64, 64, 16] for 1000^3 f16 on sm_80).
PADDED_K_TILE = 16


def _configs(m: int, n: int, k: int, padding: bool):
    """(TM, TN, WM, WN, KT) that divide the shape, largest tiles first;
    where none divides and `padding`, the padded tiles (M and N at least
    16: a smaller one is a decode shape, hlo/split_k.py's)."""
    kt = next((t for t in K_TILES if k % t == 0), None)
    exact = [] if kt is None else [(tm, tn) for tm, tn in WORKGROUP_TILES if not (m % tm or n % tn)]
    for tm, tn in exact:
        yield _Tile(tm, tn, *_warp_tile(tm, tn), kt)
    if exact or not padding or m < 16 or n < 16:
        return
    for tm, tn in WORKGROUP_TILES:
        yield _Tile(tm, tn, *_warp_tile(tm, tn), kt or PADDED_K_TILE, padded=True)


@dataclass(frozen=True)
class _Tile:
    tm: int
    tn: int
    wm: int
    wn: int
    kt: int
    padded: bool = False  # IREE's pipeline pads M, N, K to the tiles


def _params(d: Dispatch, target: Target, t: _Tile) -> MatmulMmaIreeParams | None:
    (c,) = d.contractions
    grid = (-(-c.n[0] // t.tn), -(-c.m[0] // t.tm), c.batch[0] if c.batch else 1)
    if target.grid_refusal(grid):
        return None
    warps = (t.tm // t.wm) * (t.tn // t.wn)
    epilogue = not c.is_root
    return MatmulMmaIreeParams(
        launch=Launch(grid, (target.subgroup_size * warps, 1, 1), target.subgroup_size),
        element=c.lhs.element_type,
        matmul_operand=d.input_producers.index(c.op) if epilogue else 0,
        workgroup_tile=(t.tm, t.tn),
        warp_tile=(t.wm, t.wn),
        k_tile=t.kt,
        padded=t.padded,
        epilogue=epilogue,
        batch=bool(c.batch),
    )


def candidates(d: Dispatch, target: Target) -> list[MatmulMmaIreeParams]:
    """Every tile configuration that fits the dispatch, the chooser's pick
    first (what `tilefuse tune` times); [] when the kernel refuses it."""
    return [] if _check(d, target) else _with_k_tiles(d, _options(d, target))


def _with_k_tiles(d: Dispatch, options: list) -> list[MatmulMmaIreeParams]:
    """Each option, then the same tiles with the other K steps that fit
    (the chooser takes the longest; a tuned one may be shorter): any where
    IREE pads K, else those that divide it."""
    (c,) = d.contractions
    k = c.k[0]
    out = []
    for p in options:
        out.append(p)
        out += [
            replace(p, k_tile=kt) for kt in K_TILES if kt != p.k_tile and (p.padded or k % kt == 0)
        ]
    return out


def _options(d: Dispatch, target: Target) -> list[MatmulMmaIreeParams]:
    """candidates, for a dispatch _check accepts."""
    (c,) = d.contractions
    m, n, k = c.m[0], c.n[0], c.k[0]
    fitting = list(_configs(m, n, k, target.iree_mma_padding))
    batch = c.batch[0] if c.batch else 1
    first = filling_tile(fitting, m, n, batch, target.multiprocessors)
    if first is None:
        return []
    ordered = [first, *(t for t in fitting if t != first)]
    return [p for p in (_params(d, target, t) for t in ordered) if p is not None]


def choice_of(p: MatmulMmaIreeParams) -> dict:
    choice = {"tile": list(p.workgroup_tile), "k_tile": p.k_tile}
    return {**choice, "padded": True} if p.padded else choice


def plan(d: Dispatch, target: Target) -> tuple[MatmulMmaIreeParams | None, str]:
    why = _check(d, target)
    if why:
        return None, why
    (c,) = d.contractions
    m, n, k = c.m[0], c.n[0], c.k[0]
    options = _options(d, target)
    if not options:
        padding = (
            "M or N below 16"
            if target.iree_mma_padding
            else "padding ragged shapes is off: target field iree_mma_padding"
        )
        return None, (
            f"no tile configuration divides {m}x{n}x{k} (M, N by 16-128, K by 16) "
            f"within the target's workgroup counts ({padding})"
        )
    params, note = tuning.pick(
        _with_k_tiles(d, options), choice_of, target, "matmul_mma_iree", contraction_signature(d)
    )
    batch = f"{c.batch[0]} x " if c.batch else ""
    epilogue = " with its epilogue" if params.epilogue else ""
    padded = ", tiles padded by IREE's pipeline" if params.padded else ""
    return params, (
        f"{batch}{m}x{k} @ {k}x{n} {params.element} -> f32{epilogue}{padded}: mma.sync m16n8k16 "
        f"{params.element} through IREE's TileAndFuse pipeline ({INTRINSICS[params.element]})"
        f"{note}"
    )


def steps(p: MatmulMmaIreeParams) -> dict[str, str]:
    return {"contraction": "tilefuse_matmul_mma_iree_contraction" if p.epilogue else PASS}


def describe(p: MatmulMmaIreeParams) -> str:
    padded = " padded" if p.padded else ""
    return (
        f"tile={list(p.workgroup_tile)}{padded} warp={list(p.warp_tile)} k_tile={p.k_tile} "
        f"grid={list(p.launch.grid)} wg={list(p.launch.workgroup)} (IREE TileAndFuse)"
    )


def lowering_config(p: MatmulMmaIreeParams) -> str:
    """The contraction's #iree_gpu.lowering_config: tile sizes per loop
    ([B,] M, N, K); subgroup and reduction sizes count intrinsics (m16, n8,
    k16), not elements; `padding` (a padded tiling) in elements, the
    workgroup tile and K step."""
    lead = [1] if p.batch else []
    below = [0] if p.batch else []
    tm, tn = p.workgroup_tile
    wm, wn = p.warp_tile
    workgroup = [*lead, tm, tn, 0]
    subgroup = [*below, wm // 16, wn // 8, 0]
    reduction = [*below, 0, 0, p.k_tile // 16]
    padding = f"padding = {[*lead, tm, tn, p.k_tile]}, " if p.padded else ""
    return (
        "#iree_gpu.lowering_config<{convert_acc_gemm, "
        f"mma_kind = #iree_gpu.mma_layout<{INTRINSICS[p.element]}>, {padding}"
        "promote_operands = [0, 1], "
        f"reduction = {reduction}, subgroup = {subgroup}, workgroup = {workgroup}}}>"
    )


def translation_info(p: MatmulMmaIreeParams) -> str:
    x, y, z = p.launch.workgroup
    return (
        "#iree_codegen.translation_info<pipeline = #iree_gpu.pipeline<TileAndFuse> "
        f"workgroup_size = [{x}, {y}, {z}] subgroup_size = {p.launch.subgroup}, "
        "{gpu_pipeline_options = #iree_gpu.pipeline_options<"
        f"prefetch_num_stages = {PREFETCH_STAGES}, no_reduce_shared_memory_bank_conflicts = "
        "false, use_igemm_convolution = false>}>"
    )


def attributes(p: MatmulMmaIreeParams, ctx: ir.Context) -> dict:
    """Values of the tagged steps of transform_scripts/matmul_mma_iree.mlir."""
    return {
        "matmul_operand": {"raw_position_list": attrs.i64_array([p.matmul_operand], ctx)},
        "lowering_config": {"value": ir.Attribute.parse(lowering_config(p), ctx)},
        "translation_info": {"value": ir.Attribute.parse(translation_info(p), ctx)},
    }


def ptx_refusal(entry: str, p: MatmulMmaIreeParams) -> str | None:
    """Why the kernel IREE built (`entry`: its PTX) is not the promised one."""
    mma = mma_ptx(p.element)
    if mma not in entry:
        return f"no {mma} in the PTX (the contraction did not reach tensor cores)"
    threads = p.launch.workgroup[0] * p.launch.workgroup[1] * p.launch.workgroup[2]
    ntid = ntid_of(entry)
    if ntid != threads:
        return f"{ntid} threads per block, not the {threads} configured (configuration ignored)"
    return None


STRATEGY = Strategy(
    name="matmul_mma_iree",
    plan=plan,
    tunable=Tunable(candidates, choice_of, contraction_signature),
    describe=describe,
    attributes=attributes,
    steps=steps,
    configures=True,
    ptx_refusal=ptx_refusal,
    switch="iree_mma",
)
