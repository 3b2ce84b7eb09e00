"""`tilefuse bench`: each model compiled by tilefuse and by plain iree-compile,
measured side by side in one process.

For every model: dispatch count, HBM bytes per dispatch, the bytes floor,
modeled time on the named GPUs, ptxas figures (CUDA targets), lavapipe wall
time and compile time (Vulkan targets), and numerics against numpy.
"""

import importlib.util
import math
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import TilefuseError
from ..frontend import Program, load_program
from ..paths import SAMPLES, shown
from ..runtime import DTYPES
from ..targets import Target, load_target
from ..toolchain import PhaseFailed
from .costmodel import io_floor
from .gpu import numerics_verdict, random_inputs
from .gpus import gpu_names, load_gpu, program_seconds
from .measure import (
    COMPILE_TIMINGS,
    CompilerRun,
    KernelStats,
    compile_iree,
    compile_tilefuse,
    cuda_targets,
    kernel_stats,
    run_and_time,
)


@dataclass
class BenchOptions:
    target: str = "vulkan"
    small: bool = False
    repeats: int = 9  # timed calls per compiler
    warmup: int = 2
    dispatch_repeat: int = 200  # at most N runs of each dispatch per timed call (see measure.py)
    fusion: bool = True  # False: tilefuse strategies on IREE's own dispatches
    device: str | None = None  # defaults to the target's runtime driver
    workdir: Path | None = None  # keep every intermediate file here
    run: bool = True  # False: compile and count only (dispatches, bytes), run nothing
    keep_going: bool = False  # a model tilefuse cannot compile is skipped, not an error
    compile_timings: int = COMPILE_TIMINGS  # compiles per model and compiler (the fastest counts)


@dataclass
class ModelResult:
    name: str
    source: str
    target: str
    function: str
    floor_bytes: int
    runs: dict[str, CompilerRun]  # no "iree" when plain iree-compile rejected the model
    modeled_seconds: dict[str, dict[str, float]]  # gpu -> compiler -> seconds
    kernels: dict[str, list[KernelStats]] = field(default_factory=dict)  # compiler -> kernels
    reference: str = "none"  # "numpy", or "none" (compilers compared with each other)
    tolerance: float | None = None
    max_error: dict[str, float] = field(default_factory=dict)  # compiler -> vs reference
    max_difference: float | None = None  # tilefuse vs iree
    numerics: str = "not run"  # "ok", "FAIL: ...", or why it did not run
    # Plain iree-compile's first error line, where it rejected the model: the
    # model is then benched for tilefuse alone.
    baseline_error: str | None = None


def samples_module():
    path = SAMPLES / "references.py"
    spec = importlib.util.spec_from_file_location("tilefuse_sample_references", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SAMPLES))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SAMPLES))
    return module


def resolve_models(names: list[str], small: bool) -> list[Path]:
    """Model files from paths, directories (every *.mlir) or sample names.

    With `small`, a sample with a variant in samples/small/ is benched at
    that size (the sample's reference is then asked for small inputs).
    """
    paths = []
    for name in names or [str(SAMPLES)]:
        p = Path(name)
        if p.is_dir():
            paths += sorted(p.glob("*.mlir"))
        elif p.is_file():
            paths.append(p)
        elif (SAMPLES / f"{name}.mlir").is_file():
            paths.append(SAMPLES / f"{name}.mlir")
        else:
            raise TilefuseError(f"no such model: {name} (a file, a directory or a sample name)")
    if not paths:
        raise TilefuseError(f"no .mlir models in {', '.join(names)}")
    if small:
        paths = [
            (p.parent / "small" / p.name) if (p.parent / "small" / p.name).is_file() else p
            for p in paths
        ]
    return paths


def entry_function(program: Program) -> str:
    if "main" in program.functions:
        return "main"
    if len(program.functions) == 1:
        return program.functions[0]
    raise TilefuseError(
        f"several public functions ({', '.join(program.functions)}) and none is @main", program.name
    )


def signature(program: Program, function: str, results: bool = False):
    """(shape, element type name) of each argument of @function, or of each
    result with `results`."""
    from iree.compiler import ir

    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    module = ir.Module.parse(program.text, ctx)
    for op in module.body.operations:
        op = op.operation
        if op.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == function:
            ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            types = ftype.results if results else ftype.inputs
            return [
                (tuple(ir.ShapedType(t).shape), str(ir.ShapedType(t).element_type)) for t in types
            ]
    raise TilefuseError(f"no function @{function}", program.name)


def input_signature(program: Program, function: str) -> list[tuple[tuple[int, ...], str]]:
    return signature(program, function)


def model_inputs(path: Path, program: Program, function: str):
    """(inputs, references or None, tolerance or None) for a model.

    A sample's inputs and numpy reference come from samples/references.py
    (asked for its small size when the model is the samples/small/ variant);
    any other model gets random inputs and the compilers are compared.
    """
    rng = np.random.default_rng(0)
    signature = input_signature(program, function)
    name = path.stem
    folder = path.resolve().parent
    if folder in (SAMPLES.resolve(), (SAMPLES / "small").resolve()):
        samples = samples_module().SAMPLES
        if name in samples:
            small = folder == (SAMPLES / "small").resolve()
            inputs, refs, tol = samples[name](rng, small=small)
            got = [(tuple(a.shape), np.dtype(a.dtype)) for a in inputs]
            want = [(s, DTYPES.get(d)) for s, d in signature]
            if got != want:
                raise TilefuseError(
                    f"samples/references.py gives {name} inputs {got}, the program takes {want}",
                    str(path),
                )
            return inputs, refs, tol
    return random_inputs(signature, rng), None, None


def check_numerics(result: ModelResult, refs, tol) -> None:
    verdict = numerics_verdict({c: run.outputs for c, run in result.runs.items()}, refs, tol)
    result.reference = verdict["reference"]
    result.tolerance = verdict.get("tolerance")
    result.max_error = verdict["max_error"]
    result.max_difference = verdict.get("max_difference")  # none without IREE's outputs
    result.numerics = verdict["numerics"]


# Repeat dispatches until a timed call moves about this much memory, so that a
# call lasts ~200 ms or more against lavapipe's ~4 ms fence grid (a call's
# time comes in steps of 4 ms / N); fewer repeats left ratios jumping between
# runs of the same build (docs/findings.md, 'Timing on lavapipe').
TIMED_CALL_BYTES = 2**30


def timing_repeat(floor_bytes: int, limit: int) -> int:
    """Dispatch repeats per timed call: as many as move TIMED_CALL_BYTES, at
    most `limit`, at least 1."""
    return max(1, min(limit, math.ceil(TIMED_CALL_BYTES / max(floor_bytes, 1))))


def compile_model(
    path: Path, options: BenchOptions, workdir: Path, progress, root: Path | None = None
) -> ModelResult:
    """Both compilers' modules and figures for one model (nothing runs yet).
    `progress(step)` is told what is happening, for the terminal's progress bar.
    A model plain iree-compile rejects is kept for tilefuse alone, with
    IREE's first error line (paths under `root`, the work directory, and
    the model's own path shown as reports show them) as baseline_error."""
    target = load_target(options.target)
    program = load_program(path)
    function = entry_function(program)
    floor = io_floor(program.text, function)
    # Nothing runs on CUDA here, nor with run=False: no timing modules then.
    repeat = timing_repeat(floor, options.dispatch_repeat) if _runs_here(target, options) else 0
    progress("compiling with tilefuse")
    timings = options.compile_timings
    runs = {
        "tilefuse": compile_tilefuse(
            program, target, workdir / "tilefuse", options.fusion, repeat, timings
        )
    }
    progress("compiling with iree-compile")
    baseline_error = None
    try:
        runs["iree"] = compile_iree(program, target, workdir / "iree", repeat, timings)
    except PhaseFailed as e:
        baseline_error = _without_paths(e.reason, path, root or workdir)
        progress("plain iree-compile rejected it: tilefuse alone")
    result = ModelResult(
        name=path.stem,
        source=str(path),
        target=target.name,
        function=function,
        floor_bytes=floor,
        runs=runs,
        modeled_seconds={
            gpu: {c: program_seconds(runs[c].costs.dispatches, load_gpu(gpu)) for c in runs}
            for gpu in gpu_names()
        },
        baseline_error=baseline_error,
    )
    if target.backend == "cuda":
        progress("assembling with ptxas")
        _cuda_kernels(result, program, target, workdir, options.fusion)
        result.numerics = "not run (no CUDA device here)"
    elif not options.run:
        result.numerics = "not run (--no-run)"
    return result


def run_model(result: ModelResult, options: BenchOptions, progress) -> None:
    """Run both modules of a compiled model on the device: time and numerics."""
    progress("running on the device")
    path = Path(result.source)
    program = load_program(path)
    inputs, refs, tol = model_inputs(path, program, result.function)
    device = options.device or load_target(options.target).runtime_driver
    run_and_time(
        list(result.runs.values()), device, result.function, inputs, options.repeats, options.warmup
    )
    check_numerics(result, refs, tol)


def _without_paths(text: str, path: Path, root: Path) -> str:
    """`text` without this machine's paths: the work directory's dropped,
    the model's own as reports show it."""
    text = text.replace(f"{root}/", "")
    for p in {str(path.resolve()), str(path)}:
        text = text.replace(p, shown(path))
    return text


def _runs_here(target: Target, options: BenchOptions) -> bool:
    return target.backend != "cuda" and options.run


def _cuda_kernels(
    result: ModelResult, program: Program, target: Target, workdir: Path, fusion: bool
) -> None:
    """ptxas figures for every CUDA architecture, each compiled for that target
    (IREE's for none where it rejected the model for the benched target)."""
    compilers = list(result.runs)
    for compiler in compilers:
        result.kernels[compiler] = kernel_stats(workdir / compiler, target)
    for other in cuda_targets():
        if other.name == target.name:
            continue
        sub = workdir / other.name
        # For their kernels only: compiled once each, not timed.
        compile_tilefuse(program, other, sub / "tilefuse", fusion=fusion, timings=1)
        if "iree" in compilers:
            compile_iree(program, other, sub / "iree", timings=1)
        for compiler in compilers:
            result.kernels[compiler] += kernel_stats(sub / compiler, other)


def bench(
    models: list[str],
    options: BenchOptions,
    progress=None,
    skipped: list[tuple[str, str]] | None = None,
) -> list[ModelResult]:
    """`progress(done, total, model, step)`, if given, follows along. A model
    plain iree-compile rejects is benched for tilefuse alone (its
    baseline_error says why). With options.keep_going, a model tilefuse
    cannot compile is left out and (name, why) appended to `skipped`. Every
    model is compiled before any runs: a device opened in the process slowed
    later compiles (0.27 -> 0.46 s for row_sum_f32 after one lavapipe run),
    which would skew the compile times."""
    paths = resolve_models(models, options.small)
    runs = _runs_here(load_target(options.target), options)
    steps = len(paths) * (2 if runs else 1)  # a compile, then a run, per model
    compiled = []
    with tempfile.TemporaryDirectory(prefix="tilefuse-bench-") as tmp:
        root = options.workdir or Path(tmp)
        for i, path in enumerate(paths):

            def step(what, i=i, path=path):
                if progress:
                    progress(i, steps, path.stem, what)

            try:
                compiled.append(compile_model(path, options, root / path.stem, step, root))
            except TilefuseError as e:
                if not options.keep_going:
                    raise
                if skipped is not None:
                    skipped.append((path.stem, str(e).replace(f"{root}/", "")))
        if runs:
            for i, result in enumerate(compiled):

                def step(what, i=i, result=result):
                    if progress:
                        progress(len(paths) + i, steps, result.name, what)

                run_model(result, options, step)
        if progress:
            progress(steps, steps, "", "done")
    return compiled
