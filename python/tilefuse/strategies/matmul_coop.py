"""Parameters of the cooperative-matrix matmul kernel (transform_scripts/matmul_coop.mlir).

Seed: the tensor-core kernel (matmul_mma.py) on Vulkan, through IREE's
WMMA path: a workgroup computes a TM x TN tile stepping over K by KT; each
subgroup a WM x WN piece of it as 16x16x16 cooperative matrices
(gpu.subgroup_mma_* in the finished kernel, which IREE's SPIR-V lowering
turns into `spirv.KHR.CooperativeMatrix{Load,MulAdd,Store}`), the
accumulators in registers across the K loop. A and B are loaded straight
from global memory (no workgroup-memory staging yet, no cp.async on
Vulkan). The epilogue reads the accumulator tile from workgroup memory
(cooperative matrices take no general elementwise ops), spread over all
threads.

Takes, on SPIR-V targets whose pipelines/*.toml name a `cooperative_matrix`
shape (vulkan-nvidia, vulkan-amd; not lavapipe, which has none):
- f16 operands, the contraction accumulating in f16 or f32;
- A as [M, K], B as [K, N] or [N, K], at most one batch loop (one batch
  element per workgroup), an elementwise epilogue or none;
- tiles that divide M, N and K (K in steps of KT, a multiple of the
  cooperative matrix's K), the epilogue's accumulator tile within the
  target's workgroup memory.
Compile-only: no device here runs cooperative matrices, so its numerics have
not been checked.
"""

from dataclasses import dataclass

from iree.compiler import ir

from ..dispatch.read import Dispatch
from ..irutil import walk
from ..targets import Target
from . import attrs
from .contract import SKIP, Launch, Strategy
from .matmul import structure_refusal
from .matmul_mma import filling_tile

# Workgroup tiles tried, largest first.
WORKGROUP_TILES = ((64, 64), (64, 32), (32, 64), (32, 32), (32, 16), (16, 32), (16, 16))
MAX_SUBGROUP_TILE = 32  # 2 x 2 cooperative matrices of 16x16 per subgroup
K_TILES = (32, 16)
EPILOGUE_WIDTH = 4  # elements per row of a thread's epilogue piece (one SPIR-V vector)
ACCUMULATOR_BYTES = {"f16": 2, "f32": 4}


@dataclass(frozen=True)
class MatmulCoopParams:
    launch: Launch
    matmul_operand: int  # the root's input the contraction produces
    workgroup_tile: tuple[int, int]  # (TM, TN)
    subgroup_tile: tuple[int, int]  # (WM, WN)
    k_tile: int
    epilogue_rows: int  # rows of a thread's [rows, 4] piece of the epilogue and fill
    shared_bytes: int
    epilogue: bool
    batch: bool


def _check(d: Dispatch, target: Target) -> str | None:
    if target.backend != "spirv":
        return f"cooperative matrices: SPIR-V only ({target.backend} target)"
    if not target.cooperative_matrix:
        return f"target {target.name} has no cooperative matrices (cooperative_matrix unset)"
    if tuple(target.cooperative_matrix) != (16, 16, 16):
        return f"cooperative matrix {list(target.cooperative_matrix)} (16x16x16 only)"
    if target.subgroup_size != 32:
        return f"subgroup size {target.subgroup_size} (built for 32)"
    why = structure_refusal(d)
    if why:
        return why
    (c,) = d.contractions
    if {c.lhs.element_type, c.rhs.element_type} != {"f16"}:
        types = "/".join(sorted({c.lhs.element_type, c.rhs.element_type}))
        return f"{types} operands (f16 only)"
    if c.result.element_type not in ACCUMULATOR_BYTES:
        return f"a {c.result.element_type} accumulator (f16 or f32)"
    if not c.m:
        return "no M loop (a vector-matrix product)"
    if not c.lhs_k_inner:
        return "A stored as [K, M] (not built)"
    return None


@dataclass(frozen=True)
class TileConfig:
    tm: int
    tn: int
    wm: int
    wn: int
    kt: int
    threads: int
    re: int  # rows of a thread's [re, 4] piece of the epilogue and the fill
    shared: int  # bytes of workgroup memory


def _configs(m: int, n: int, k: int, epilogue: bool, accumulator: str, shared_limit: int):
    """Every tile configuration that fits, largest tiles first."""
    kt = next((s for s in K_TILES if k % s == 0), None)
    if kt is None:
        return
    for tm, tn in WORKGROUP_TILES:
        if m % tm or n % tn:
            continue
        shared = tm * tn * ACCUMULATOR_BYTES[accumulator] if epilogue else 0
        if shared > shared_limit:
            continue
        wm, wn = min(tm, MAX_SUBGROUP_TILE), min(tn, MAX_SUBGROUP_TILE)
        threads = 32 * (tm // wm) * (tn // wn)
        pieces = tm * tn // EPILOGUE_WIDTH
        re = max(1, pieces // threads)
        if tm % re:
            continue
        yield TileConfig(tm, tn, wm, wn, kt, threads, re, shared)


def _config(m, n, k, epilogue, accumulator, shared_limit, batch=1, multiprocessors=0):
    """The largest tile whose grid gives every multiprocessor a workgroup,
    else the one with the most workgroups; None when nothing fits."""
    fitting = list(_configs(m, n, k, epilogue, accumulator, shared_limit))
    return filling_tile(fitting, m, n, batch, multiprocessors)


def plan(d: Dispatch, target: Target) -> tuple[MatmulCoopParams | None, str]:
    why = _check(d, target)
    if why:
        return None, why
    (c,) = d.contractions
    m, n, k = c.m[0], c.n[0], c.k[0]
    epilogue = not c.is_root
    accumulator = c.result.element_type
    batch = c.batch[0] if c.batch else 1
    cfg = _config(
        m, n, k, epilogue, accumulator, target.shared_memory_bytes, batch, target.multiprocessors
    )
    if cfg is None:
        return None, (f"no tile configuration divides {m}x{n}x{k} (M, N by 16-64, K by 16 or 32)")
    grid = (n // cfg.tn, m // cfg.tm, batch)
    why = target.grid_refusal(grid)
    if why:
        return None, why
    params = MatmulCoopParams(
        launch=Launch(grid, (32 * (cfg.tn // cfg.wn), cfg.tm // cfg.wm, 1), target.subgroup_size),
        matmul_operand=d.input_producers.index(c.op) if epilogue else 0,
        workgroup_tile=(cfg.tm, cfg.tn),
        subgroup_tile=(cfg.wm, cfg.wn),
        k_tile=cfg.kt,
        epilogue_rows=cfg.re,
        shared_bytes=cfg.shared,
        epilogue=epilogue,
        batch=bool(c.batch),
    )
    batched = f"{c.batch[0]} x " if c.batch else ""
    with_epilogue = " with its epilogue" if epilogue else ""
    return params, (
        f"{batched}{m}x{k} @ {k}x{n} f16 -> {accumulator}{with_epilogue}: "
        f"cooperative matrices 16x16x16 (KHR), operands from global memory"
    )


def steps(p: MatmulCoopParams) -> dict[str, str]:
    return {
        "tile": "tilefuse_matmul_coop_tile_" + ("epilogue" if p.epilogue else "bare"),
        "epilogue_threads": "tilefuse_matmul_coop_epilogue_threads" if p.epilogue else SKIP,
    }


def describe(p: MatmulCoopParams) -> str:
    return (
        f"tile={list(p.workgroup_tile)} subgroup={list(p.subgroup_tile)} k_tile={p.k_tile} "
        f"shared={p.shared_bytes}B grid={list(p.launch.grid)} wg={list(p.launch.workgroup)}"
    )


def attributes(p: MatmulCoopParams, ctx: ir.Context) -> dict:
    """Values of the tagged steps of transform_scripts/matmul_coop.mlir."""
    lead, blocks, below = attrs.batch_lead(p.batch)
    sizes = {
        "workgroup_tile": (*lead, *p.workgroup_tile),
        "subgroup_tile": (*below, *p.subgroup_tile),
        "epilogue_tile": (*below, p.epilogue_rows, EPILOGUE_WIDTH),
        "fill_tile": (*below, p.epilogue_rows, EPILOGUE_WIDTH),
    }
    values = {tag: {"static_tile_sizes": attrs.i64_array(v, ctx)} for tag, v in sizes.items()}
    values["workgroup_tile"]["mapping"] = attrs.mapping("block", blocks, ctx)
    return {
        **values,
        "matmul_operand": {"raw_position_list": attrs.i64_array([p.matmul_operand], ctx)},
        "k_tile": attrs.static_sizes([*below, 0, 0, p.k_tile], ctx),
        "epilogue_row": attrs.static_sizes([*below, 1, 0], ctx),
        **attrs.workgroup(p.launch, ctx),
    }


# The printed kernel's ops that IREE's SPIR-V lowering turns into
# spirv.KHR.CooperativeMatrix{MulAdd,Load,Store}; a kernel that compiles
# without them multiplied with plain FMAs (the silent degradation of
# shared/IREE_NOTES.md: no prepare_vector_to_mma before unrolling).
PROMISED_OPS = {
    "gpu.subgroup_mma_compute": "no gpu.subgroup_mma_compute (no cooperative-matrix multiply)",
    "gpu.subgroup_mma_load_matrix": "no gpu.subgroup_mma_load_matrix (no cooperative-matrix load)",
    "gpu.subgroup_mma_store_matrix": "no gpu.subgroup_mma_store_matrix",
}
# Left over when part of the contraction missed the conversion.
SCALAR_CONTRACT = ("vector.contract", "vector.fma", "vector.outerproduct")


def kernel_refusal(func: ir.Operation, p: MatmulCoopParams) -> str | None:
    """Why a printed kernel is not the cooperative-matrix kernel, or None."""
    names = {op.name for op in walk(func)}
    for name, why in PROMISED_OPS.items():
        if name not in names:
            return why
    left = sorted(names & set(SCALAR_CONTRACT))
    if left:
        return f"{', '.join(left)} left beside the cooperative matrices"
    if p is not None and p.epilogue and not _barrier_after_stores(func):
        return "no barrier between the accumulators' stores and the epilogue's reads"
    return None


def _barrier_after_stores(func: ir.Operation) -> bool:
    """A gpu.barrier after the last subgroup_mma_store_matrix (in program
    order) and before any later read: other subgroups' pieces of the C tile
    are complete before the epilogue reads them."""
    ops = list(walk(func))
    last = max(i for i, op in enumerate(ops) if op.name == "gpu.subgroup_mma_store_matrix")
    for op in ops[last + 1 :]:
        if op.name == "gpu.barrier":
            return True
        if op.name in ("vector.transfer_read", "memref.load", "vector.load"):
            return False
    return False


STRATEGY = Strategy(
    name="matmul_coop",
    plan=plan,
    describe=describe,
    attributes=attributes,
    steps=steps,
    kernel_refusal=kernel_refusal,
)
