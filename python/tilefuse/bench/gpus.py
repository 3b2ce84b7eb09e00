"""Named GPUs (pipelines/hardware/gpus.toml): the roofline model and theoretical occupancy.

Roofline: a dispatch takes max(bytes / bandwidth, flops / peak) plus a flat
launch cost; a program takes the sum over its dispatches (no overlap between
kernels, as in a stream of dependent launches). Occupancy: resident warps per
SM over the maximum, limited by threads, blocks, registers and shared memory,
as NVIDIA's occupancy calculator computes it.
"""

import math
import tomllib
from dataclasses import dataclass

from ..errors import TilefuseError
from ..paths import PIPELINES
from .costmodel import DispatchCost

WARP = 32


@dataclass(frozen=True)
class Gpu:
    name: str
    arch: str
    bandwidth_bytes_per_s: float
    fp32_flops: float
    tensor_flops: float
    launch_seconds: float


@dataclass(frozen=True)
class SmLimits:
    max_threads: int
    max_blocks: int
    registers: int
    register_unit: int
    shared_memory_bytes: int
    shared_memory_reserved_per_block: int


def _table() -> dict:
    return tomllib.loads((PIPELINES / "hardware" / "gpus.toml").read_text())


def gpu_names() -> list[str]:
    return list(_table()["gpu"])


def load_gpu(name: str) -> Gpu:
    table = _table()
    if name not in table["gpu"]:
        raise TilefuseError(f"unknown GPU '{name}'; known: {', '.join(table['gpu'])}")
    return Gpu(name=name, launch_seconds=table["launch_seconds"], **table["gpu"][name])


def sm_limits(arch: str) -> SmLimits:
    table = _table()["arch"]
    if arch not in table:
        raise TilefuseError(f"no SM limits for {arch} in pipelines/hardware/gpus.toml")
    return SmLimits(**table[arch])


def dispatch_seconds(cost: DispatchCost, gpu: Gpu) -> float:
    memory = cost.bytes / gpu.bandwidth_bytes_per_s
    compute = (cost.flops - cost.tensor_core_flops) / gpu.fp32_flops
    compute += cost.tensor_core_flops / gpu.tensor_flops
    return max(memory, compute) + gpu.launch_seconds


def program_seconds(costs: list[DispatchCost], gpu: Gpu) -> float:
    return sum(dispatch_seconds(c, gpu) for c in costs)


def occupancy(threads: int, registers: int, shared_bytes: int, sm: SmLimits) -> float:
    """Fraction of an SM's warp slots a kernel can fill (0..1)."""
    if threads <= 0:
        raise TilefuseError(f"workgroup of {threads} threads")
    warps = math.ceil(threads / WARP)
    max_warps = sm.max_threads // WARP
    limits = [sm.max_blocks, max_warps // warps]
    if registers > 0:
        per_warp = math.ceil(registers * WARP / sm.register_unit) * sm.register_unit
        limits.append((sm.registers // per_warp) // warps)
    per_block_smem = shared_bytes + sm.shared_memory_reserved_per_block
    limits.append(sm.shared_memory_bytes // per_block_smem)
    return min(limits) * warps / max_warps
