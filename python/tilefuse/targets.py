"""Compilation targets, read from the data files in `pipelines/`.

Strategies take every hardware limit (subgroup size, shared memory, thread
counts, vector width) from a Target, never from constants of their own.
"""

import tomllib
from dataclasses import dataclass

from .errors import TilefuseError
from .paths import PIPELINES


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    backend: str  # "spirv", "cuda" or "cpu"
    runtime_driver: str  # IREE runtime driver: "vulkan", "cuda", "local-task"
    compile_flags: tuple[str, ...]
    subgroup_size: int
    shared_memory_bytes: int
    max_threads: int
    preferred_threads: int
    vector_bits: int
    max_workgroup_count: tuple[int, int, int]
    ptxas_arch: str | None = None
    device_target: str | None = None  # module-carried #hal.device.target
    bf16_vector_elements: int | None = None  # cap on bf16 vector width, if any
    # Threads of a workgroup that packs several short rows (one subgroup
    # each) of a row reduction; preferred_threads when not given.
    packed_row_threads: int | None = None
    # The same for kernels with barriers between their phases (softmax).
    packed_synced_row_threads: int | None = None
    # Subgroups are formed from consecutive x only (Mesa lavapipe runs x in
    # SIMD steps, y and z in loops): a workgroup narrower than a subgroup in
    # x leaves lanes idle, so kernels put their wider thread dim on x.
    subgroups_along_x: bool = False
    # Float max/min row reductions run on ordered integer keys
    # (fusion/minmax.py): IREE's SPIR-V lowering of a lane's vector max/min
    # drops NaN, and scalars instead cost 2.8x on lavapipe.
    float_minmax_as_keys: bool = False
    # Elements of a row each lane may keep in registers (N / subgroup size):
    # up to this, a softmax-like row runs on one subgroup with the row in
    # registers (strategies/row_warp.py); 0 turns that kernel off, for row
    # reductions too.
    row_register_elements: int = 0

    @property
    def is_gpu(self) -> bool:
        return self.backend in ("spirv", "cuda")


def target_names() -> list[str]:
    return sorted(p.stem for p in PIPELINES.glob("*.toml"))


def load_target(name: str) -> Target:
    path = PIPELINES / f"{name}.toml"
    if not path.is_file():
        raise TilefuseError(f"unknown target '{name}'; known targets: {', '.join(target_names())}")
    data = tomllib.loads(path.read_text())
    return Target(
        name=name,
        description=data["description"],
        backend=data["backend"],
        runtime_driver=data["runtime_driver"],
        compile_flags=tuple(data["compile_flags"]),
        subgroup_size=data["subgroup_size"],
        shared_memory_bytes=data["shared_memory_bytes"],
        max_threads=data["max_threads"],
        preferred_threads=data["preferred_threads"],
        vector_bits=data["vector_bits"],
        max_workgroup_count=tuple(data["max_workgroup_count"]),
        ptxas_arch=data.get("ptxas_arch"),
        device_target=data.get("device_target"),
        bf16_vector_elements=data.get("bf16_vector_elements"),
        packed_row_threads=data.get("packed_row_threads"),
        packed_synced_row_threads=data.get("packed_synced_row_threads"),
        subgroups_along_x=data.get("subgroups_along_x", False),
        float_minmax_as_keys=data.get("float_minmax_as_keys", False),
        row_register_elements=data.get("row_register_elements", 0),
    )
