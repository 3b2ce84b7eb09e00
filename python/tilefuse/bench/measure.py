"""Compile one model with tilefuse and with plain iree-compile, and measure both.

Both compilers get the same input file and the same target flags (a target
that carries its own device, such as cuda-sm90, gets the same module-level
device in both). Everything a figure is computed from is kept in the work
directory: executable sources, scheduling statistics, PTX.
"""

import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..driver import compile_program, phase1_executable_sources, phase1_input, recompile
from ..errors import TilefuseError
from ..frontend import Program
from ..kernel import ptx
from ..runtime import CompiledModule, open_device
from ..targets import Target, load_target, target_names
from ..toolchain import iree_compile, scheduled_dispatches, statistics_flags
from .costmodel import ProgramCosts, program_costs
from .gpu import time_interleaved
from .gpus import occupancy, sm_limits

# Lavapipe's fence waits return on a ~4 ms grid, coarser than many kernels.
# Timing modules repeat every dispatch N times inside one command buffer
# (with barriers between), so one call's wait is shared by N runs of each
# kernel; time per call / N is the kernels' time. N shrinks for models that
# move much memory (run.timing_repeat): their calls are long already.
REPEAT_FLAG = "--iree-hal-benchmark-dispatch-repeat-count"
# Each compiler compiles each model this many times by default; its compile
# time is the fastest (a single compile of a sub-second program moved by
# +-30% on the 2-core VM, and the first in a process pays one-time costs).
COMPILE_TIMINGS = 2


@dataclass
class KernelStats:
    kernel: str
    arch: str
    registers: int
    spill_bytes: int  # spill stores + spill loads
    shared_bytes: int
    threads: int
    occupancy: float


@dataclass
class CompilerRun:
    compiler: str  # "tilefuse" or "iree"
    vmfb: bytes
    timing_vmfb: bytes  # the program with every dispatch repeated timing_repeat times
    timing_repeat: int
    compile_seconds: float
    dispatch_count: int
    costs: ProgramCosts
    kernels: list[KernelStats] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # tilefuse: per-dispatch strategy lines
    wall_seconds: list[float] = field(default_factory=list)  # per call, / timing_repeat
    outputs: list[np.ndarray] = field(default_factory=list)


def _checked_costs(sources: Path, count: int, what: str) -> ProgramCosts:
    costs = program_costs(sources.read_text())
    if len(costs.dispatches) != count:
        raise TilefuseError(
            f"{what}: IREE scheduled {count} dispatches but the executable sources "
            f"hold {len(costs.dispatches)} dispatch sites"
        )
    return costs


def compile_tilefuse(
    program: Program,
    target: Target,
    workdir: Path,
    fusion: bool = True,
    repeat: int = 0,
    timings: int = COMPILE_TIMINGS,
) -> CompilerRun:
    """`repeat` > 1 also builds a timing module with every dispatch repeated;
    the compile time is the fastest of `timings` compiles."""
    workdir.mkdir(parents=True, exist_ok=True)
    seconds = math.inf
    for _ in range(timings):
        start = time.perf_counter()
        result = compile_program(
            program,
            target,
            dump_dir=workdir,
            fusion=fusion,
            phase2_flags=intermediates_flags(workdir, target),
            statistics=True,
        )
        seconds = min(seconds, time.perf_counter() - start)
    count = result.scheduled_dispatches
    timing = result.vmfb
    if repeat > 1:
        # Only phase 2 (and 3) depend on the flag: reuse the fusion plan,
        # the executable sources and the strategies.
        timing = recompile(result, workdir / "timing", (f"{REPEAT_FLAG}={repeat}",))
    return CompilerRun(
        compiler="tilefuse",
        vmfb=result.vmfb,
        timing_vmfb=timing,
        timing_repeat=max(repeat, 1),
        compile_seconds=seconds,
        dispatch_count=count,
        costs=_checked_costs(result.sources, count, "tilefuse"),
        notes=[r.line() for r in result.reports],
    )


def compile_iree(
    program: Program,
    target: Target,
    workdir: Path,
    repeat: int = 0,
    timings: int = COMPILE_TIMINGS,
) -> CompilerRun:
    """Plain iree-compile, timed from the input file to the .vmfb; `repeat` > 1
    also builds a timing module with every dispatch repeated."""
    workdir.mkdir(parents=True, exist_ok=True)
    source = phase1_input(program, target, workdir, widen=False)
    stats = workdir / "statistics.json"
    out = workdir / "module.vmfb"
    args = [str(source), *target.compile_flags, *statistics_flags(stats), "-o", str(out)]
    if target.backend == "cuda":
        args.append(f"--iree-hal-dump-executable-binaries-to={workdir / 'binaries'}")
        args += intermediates_flags(workdir, target)
    seconds = math.inf
    for _ in range(timings):
        start = time.perf_counter()
        iree_compile(args, "baseline iree-compile")
        seconds = min(seconds, time.perf_counter() - start)
    # Bytes come from the same executable sources tilefuse reads (not timed).
    sources = phase1_executable_sources(source, target, workdir)
    count = scheduled_dispatches(stats)
    timing = out.read_bytes()
    if repeat > 1:
        timed = workdir / "timing.vmfb"
        iree_compile(
            [str(source), *target.compile_flags, f"{REPEAT_FLAG}={repeat}", "-o", str(timed)],
            "baseline iree-compile (timing module)",
        )
        timing = timed.read_bytes()
    return CompilerRun(
        compiler="iree",
        vmfb=out.read_bytes(),
        timing_vmfb=timing,
        timing_repeat=max(repeat, 1),
        compile_seconds=seconds,
        dispatch_count=count,
        costs=_checked_costs(sources, count, "iree-compile"),
    )


def cuda_targets() -> list[Target]:
    """Every CUDA pipeline: bench assembles each compiler's kernels for all of them."""
    targets = [load_target(n) for n in target_names()]
    return [t for t in targets if t.backend == "cuda"]


def intermediates_flags(workdir: Path, target: Target) -> tuple[str, ...]:
    """CUDA: also dump each executable's LLVM IR next to its PTX, for the
    workgroup memory ptxas does not see (ptx.dynamic_shared_bytes)."""
    if target.backend != "cuda":
        return ()
    return (f"--iree-hal-dump-executable-intermediates-to={workdir / 'binaries'}",)


def kernel_stats(workdir: Path, target: Target) -> list[KernelStats]:
    files = sorted((workdir / "binaries").glob("*.ptx"))
    if not files:
        raise TilefuseError(f"no PTX was dumped to {workdir / 'binaries'}")
    sm = sm_limits(target.ptxas_arch)
    stats = []
    for file in files:
        resources = ptx.assemble([file], target.ptxas_arch)
        threads = ptx.threads_per_block([file])
        linked = file.with_name(file.stem + ".linked.ll")
        if not linked.is_file():
            raise TilefuseError(f"no LLVM IR dumped next to {file}")
        # Static (ptxas) plus dynamic (IREE's packed workgroup allocations);
        # an executable with several kernels charges each the whole amount.
        dynamic = ptx.dynamic_shared_bytes(linked)
        for name, res in sorted(resources.items()):
            if name not in threads:
                raise TilefuseError(f"kernel {name} has no .maxntid/.reqntid in its PTX")
            shared = res.shared_bytes + dynamic
            stats.append(
                KernelStats(
                    kernel=name,
                    arch=target.ptxas_arch,
                    registers=res.registers,
                    spill_bytes=res.spill_store_bytes + res.spill_load_bytes,
                    shared_bytes=shared,
                    threads=threads[name],
                    occupancy=occupancy(threads[name], res.registers, shared, sm),
                )
            )
    return sorted(stats, key=lambda k: k.kernel)


def run_and_time(
    runs: list[CompilerRun],
    device: str,
    function: str,
    inputs: list[np.ndarray],
    repeats: int,
    warmup: int,
) -> None:
    """Outputs and wall times of `function` in every run, on one shared device.

    Outputs come from each run's real module. Times come from its timing
    module: inputs uploaded once, each timed call the synchronous function on
    device-resident arguments, divided by the dispatch repeat count. Compilers
    alternate call by call, so drift in the machine's speed hits both alike.
    """
    config = open_device(device)
    for run in runs:
        f = CompiledModule(run.vmfb, device, config=config)[function]
        outputs = f(*inputs)
        run.outputs = list(outputs) if isinstance(outputs, tuple) else [outputs]
    functions = [CompiledModule(r.timing_vmfb, device, config=config)[function] for r in runs]
    device_args = [f.to_device(*inputs) for f in functions]
    counts = [r.timing_repeat for r in runs]
    for run, times in zip(runs, time_interleaved(functions, device_args, counts, repeats, warmup)):
        run.wall_seconds.extend(times)


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None
