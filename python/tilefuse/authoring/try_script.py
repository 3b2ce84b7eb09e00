"""`tilefuse try SCRIPT MODEL`: a user's transform script on dispatches of a model.

1. The model is compiled as usual (the built-in strategies: the baseline).
2. The script is applied to each candidate dispatch alone (`apply`): IREE's
   translation up to the end of the transform dialect (the driver's SPIR-V
   phase 2, iree-opt) on that dispatch's executable, with a library holding
   only the script, printed with its locations: an error in the script is
   reported at `script.mlir:LINE:COL`. The finished kernel must pass the
   checks every kernel passes (kernel/verify.py) and be distributed
   (`distribution_problem`); a script that leaves the dispatch unchanged is
   refused, never a silent fallback. Without --dispatch every dispatch it
   applies to is taken.
3. The model is compiled again with the script on those dispatches (the
   driver's `rerun` from phase 2, the other dispatches keep their strategies)
   and every dispatch's report is checked.
4. Numerics: the module runs on lavapipe with random inputs against the same
   model compiled for `cpu` (IREE's llvm-cpu on local-task).
5. Time: both modules, every dispatch repeated in one call, called
   alternately on lavapipe (bench/measure.py's timing modules and
   bench/gpu.py's time_interleaved).
"""

import statistics
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from iree.compiler import ir

from ..bench.costmodel import io_floor
from ..bench.gpu import AGREEMENT, max_abs_error, random_inputs, time_interleaved
from ..bench.measure import REPEAT_FLAG
from ..bench.run import entry_function, input_signature, timing_repeat
from ..driver import (
    CompileResult,
    Options,
    compile_program,
    phase2_executable,
    phase2_kernels,
    recompile,
    rerun,
)
from ..errors import TilefuseError
from ..frontend import load_program
from ..irutil import context, translation_launch, walk
from ..kernel.splice import finished_kernels
from ..kernel.verify import DispatchReport, kernel_problems, printed_kernels
from ..runtime import CompiledModule, open_device
from ..strategies import Choice, registered
from ..strategies.contract import Launch
from ..strategies.library import build_library
from ..targets import Target, load_target
from ..toolchain import PhaseFailed
from .extract import pick_dispatch
from .script import UserParams, UserScript, load_script, step_printouts, user_strategy

# Ops that only a kernel distributed over its threads holds.
THREAD_IDS = ("gpu.thread_id", "gpu.lane_id", "gpu.subgroup_id")
RUNS_ON_LAVAPIPE = "vulkan"  # the one target whose modules run here


def distribution_problem(func: ir.Operation, params=None) -> str | None:
    """Why a finished kernel is not distributed, or None: a forall left (not
    mapped to workgroups or threads), or a workgroup of several threads
    none of which reads its id (each would do the whole tile)."""
    ops = {op.name for op in walk(func)}
    if "scf.forall" in ops:
        return "scf.forall left: a loop was not mapped to workgroups or threads"
    threads = int(np.prod(translation_launch(func)[0]))
    if threads > 1 and not ops & set(THREAD_IDS):
        return f"not distributed over the workgroup's {threads} threads (no thread id read)"
    return None


@dataclass
class Applied:
    """The script on one dispatch, alone."""

    dispatch: str
    kernel: str  # the finished function
    launch: Launch | None
    steps: dict[int, str]  # step -> the function after it (0: before the first)
    problem: str | None = None  # why the kernel is refused (then launch is None)


@dataclass
class TryResult:
    script: UserScript
    applied: list[Applied]
    skipped: dict[str, str]  # dispatch -> why the script does not take it
    reports: list[DispatchReport]  # the model with the script
    builtin: list[DispatchReport]  # the model with the built-in strategies
    notes: list[str] = field(default_factory=list)
    max_error: float | None = None  # against the CPU reference (None: not run)
    builtin_error: float | None = None
    tolerance: float | None = None
    seconds: float | None = None  # median per call with the script
    builtin_seconds: float | None = None
    timing_repeat: int = 0


# IREE's error for a dispatch whose strategy set no final translation_info.
NOT_FINISHED = "expected transform dialect lowering to set the translation_info"


def _script_error(failure: PhaseFailed, script: UserScript, dispatch: str, workdir: Path):
    """The first error IREE located in the user's script. An op that reports
    its failure on the payload alone (vectorize does) is found by the step
    printouts: the step after the last one printed failed."""
    stderr = failure.stderr
    if NOT_FINISHED in stderr:
        return TilefuseError(
            f"refused: the script leaves dispatch {dispatch} unfinished: it sets no "
            "translation_info with pipeline no_pipeline and the workgroup size (a script "
            "that does nothing ends so; see docs/authoring.md, step 7)",
            script.path,
        )
    for line in stderr.splitlines():
        head, sep, message = line.partition(": error: ")
        if sep and head.startswith(f"{script.path}:"):
            return TilefuseError(f"{message} (on dispatch {dispatch})", head)
    first = next((line for line in stderr.splitlines() if ": error: " in line), stderr.strip())
    first = first.replace(f"{workdir}/", "")
    printed = step_printouts(failure.stdout)
    failed = max(printed, default=-1) + 1  # the step after the last printed
    if 1 <= failed <= len(script.steps):
        step = script.steps[failed - 1]
        message = first.split(": error: ", 1)[-1]
        return TilefuseError(
            f"{message} (step {failed}, {step.op}, on dispatch {dispatch}; IREE located "
            f"it in the payload: {first.split(': error: ', 1)[0]})",
            step.location,
        )
    return TilefuseError(f"the script failed on dispatch {dispatch}: {first}", script.path)


def apply(
    script: UserScript,
    printing: UserScript,
    sources: Path,
    choice: Choice,
    workdir: Path,
    target: Target,
) -> Applied:
    """The script (`printing`: its copy that prints every step) on one
    dispatch of the executable sources, as phase 2 runs a strategy: on
    SPIR-V the strategies alone (iree-opt), on CUDA the whole translation
    (iree-compile; the kernel's grid is not read back then)."""
    name = choice.dispatch.name
    workdir.mkdir(parents=True, exist_ok=True)
    library = workdir / "library.mlir"
    record = user_strategy(printing, distribution_problem)
    mine = replace(choice, strategy=record.name, params=None)
    out = None
    with registered(record):
        library.write_text(build_library([mine], debug_info=True))
        try:
            if target.backend == "spirv":
                out, log = phase2_kernels(sources, library, [mine], workdir, Options())
            else:
                # The whole sources (iree-compile makes a module of them): the
                # library names only this dispatch, IREE compiles the others.
                _vmfb, log, _ptx = phase2_executable(
                    sources, library, target, workdir, True, what=f"the script on {name}"
                )
        except PhaseFailed as e:
            raise _script_error(e, script, name, workdir) from None
        problems = kernel_problems([mine], log)
    steps = step_printouts(log)
    if problems:
        problem = problems[name].split(": ", 1)[-1] if name in problems else "?"
        return Applied(name, "", None, steps, problem)
    kernel = printed_kernels(log)[name]
    grid = finished_kernels(out.read_text())[name][1] if out else ()
    return Applied(name, kernel, _launch(kernel, grid), steps)


def refusal(applied: Applied, script: UserScript) -> TilefuseError:
    return TilefuseError(
        f"refused: the script leaves dispatch {applied.dispatch} unchanged or "
        f"undistributed: {applied.problem}",
        script.path,
    )


def _launch(kernel: str, grid) -> Launch:
    """The launch of a printed kernel (a func.func), its grid given."""
    module = ir.Module.parse(kernel, context(unregistered=True))
    func = next(op for op in walk(module.operation) if op.name == "func.func")
    workgroup, subgroup = translation_launch(func)
    return Launch(tuple(grid), workgroup, subgroup)


def _pick(choices: list[Choice], wanted: str | None, model: str) -> list[Choice]:
    if wanted is None:
        return choices
    names = [c.dispatch.name for c in choices]
    return [choices[pick_dispatch(names, wanted, model)]]


def try_script(
    script_path: str,
    model: str,
    dispatch: str | None = None,
    target: str = "vulkan",
    workdir: Path | None = None,
    repeats: int = 7,
    progress=lambda line: None,
    show_steps=None,
    strategies_dir: str | None = None,
) -> TryResult:
    """Everything `tilefuse try` does (the module docstring); raises
    TilefuseError for a script that fails, does nothing or computes wrong.
    `show_steps(script, applied)` sees each dispatch's steps as soon as the
    script ran on it, also when its kernel is then refused."""
    script = load_script(script_path)
    printing = load_script(script_path, with_step_prints=True)
    tgt = load_target(target)
    if not tgt.is_gpu:
        raise TilefuseError(f"tilefuse try takes GPU targets (vulkan*, cuda*), not {target}")
    with tempfile.TemporaryDirectory(prefix="tilefuse-try-") as tmp:
        work = Path(workdir) if workdir else Path(tmp)
        progress("compiling with the built-in strategies")
        base = compile_program(model, tgt, dump_dir=work / "builtin", strategies_dir=strategies_dir)
        c = base.compilation
        applied, skipped = [], {}
        candidates = _pick(c.choices, dispatch, model)
        for choice in candidates:
            progress(f"applying the script to {choice.dispatch.name}")
            try:
                one = apply(
                    script, printing, c.sources, choice, work / "apply" / choice.dispatch.name, tgt
                )
                if show_steps is not None and (one.problem is None or dispatch is not None):
                    show_steps(script, one)
                if one.problem is not None:
                    raise refusal(one, script)
                applied.append(one)
            except TilefuseError as e:
                if dispatch is not None:
                    raise
                skipped[choice.dispatch.name] = e
        if not applied:
            first = next(iter(skipped.values()))
            if len(skipped) == 1:
                raise first
            raise TilefuseError(
                f"the script applies to no dispatch of {model}; the first: {first}", script.path
            )
        progress("compiling with the script")
        user = _compile_with_script(base, script, applied, work / "try")
        result = TryResult(
            script,
            applied,
            {k: str(v) for k, v in skipped.items()},
            user.reports,
            base.reports,
            notes=list(user.notes),
        )
        if target == RUNS_ON_LAVAPIPE:
            progress("running on lavapipe and on the CPU reference")
            _check_and_time(result, base, user, model, work, repeats)
        else:
            result.notes.append(f"not run: modules for {target} do not run on lavapipe")
    return result


def _compile_with_script(
    base: CompileResult, script: UserScript, applied: list[Applied], workdir: Path
) -> CompileResult:
    """The model again from phase 2, the script on the `applied` dispatches."""
    c = base.compilation
    by_name = {a.dispatch: a for a in applied}
    record = user_strategy(script, distribution_problem)
    choices = [
        replace(
            ch,
            strategy=record.name,
            params=UserParams(by_name[ch.dispatch.name].launch, script.path),
            reason=f"user script {script.path}",
            failure="",
        )
        if ch.dispatch.name in by_name
        else ch
        for ch in c.choices
    ]
    failures = {k: v for k, v in c.failures.items() if k not in by_name}
    again = replace(base, compilation=replace(c, failures=failures))
    with registered(record):
        user = rerun(again, workdir, (), choices=choices)
        for report in user.reports:
            if report.name in by_name and report.status != "applied":
                raise TilefuseError(
                    f"dispatch {report.name}: the script failed in the model's compile: "
                    f"{report.reason}",
                    script.path,
                )
    return user


def tolerance(reference: np.ndarray) -> float:
    """Agreement expected with the CPU reference: bench's, relative to the
    largest magnitude for floats (f32 1e-4, f16 1e-2, bf16 5e-2); exact for integers."""
    if not np.issubdtype(reference.dtype, np.floating) and str(reference.dtype) != "bfloat16":
        return 0.0
    scale = float(np.max(np.abs(reference.astype(np.float64)), initial=0))
    return AGREEMENT.get(str(reference.dtype), 1e-4) * max(scale, 1.0)


def _check_and_time(
    result: TryResult,
    base: CompileResult,
    user: CompileResult,
    model: str,
    work: Path,
    repeats: int,
) -> None:
    program = load_program(model)
    function = entry_function(program)
    inputs = random_inputs(input_signature(program, function), np.random.default_rng(0))
    cpu = compile_program(program, "cpu")
    reference = CompiledModule(cpu.vmfb, "local-task")[function](*inputs)
    reference = list(reference) if isinstance(reference, tuple) else [reference]
    config = open_device("vulkan")
    outputs = {}
    for label, compiled in (("script", user), ("builtin", base)):
        out = CompiledModule(compiled.vmfb, "vulkan", config=config)[function](*inputs)
        outputs[label] = list(out) if isinstance(out, tuple) else [out]
    errors = {
        label: [max_abs_error(o, r) for o, r in zip(outs, reference)]
        for label, outs in outputs.items()
    }
    tolerances = [tolerance(r) for r in reference]
    result.max_error = max(errors["script"], default=0.0)
    result.builtin_error = max(errors["builtin"], default=0.0)
    result.tolerance = max(tolerances, default=0.0)
    bad = [i for i, (e, t) in enumerate(zip(errors["script"], tolerances)) if e > t]
    if bad:
        i = bad[0]
        names = ", ".join(a.dispatch for a in result.applied)
        raise TilefuseError(
            f"wrong result with the script on {names}: output {i} of @{function} differs "
            f"from the CPU reference by {errors['script'][i]:g} (tolerance {tolerances[i]:g}; "
            f"the built-in strategies: {errors['builtin'][i]:g})",
            result.script.path,
        )
    repeat = timing_repeat(io_floor(program.text, function), 50)
    flags = (f"{REPEAT_FLAG}={repeat}",)
    record = user_strategy(result.script, distribution_problem)
    with registered(record):
        timing = {
            "script": recompile(user, work / "try-timing", flags),
            "builtin": recompile(base, work / "builtin-timing", flags),
        }
    functions = [CompiledModule(v, "vulkan", config=config)[function] for v in timing.values()]
    device_args = [f.to_device(*inputs) for f in functions]
    times = time_interleaved(functions, device_args, [repeat, repeat], repeats, 2)
    result.seconds, result.builtin_seconds = (statistics.median(t) for t in times)
    result.timing_repeat = repeat


def summary(result: TryResult, print_after: int | None = None) -> list[str]:
    """What `tilefuse try` prints."""
    s = result.script
    applied_to = ", ".join(a.dispatch for a in result.applied)
    lines = [f"{s.path}: applied to {applied_to} ({len(s.steps)} top-level steps)"]
    lines += [f"  not applied to {name}: {why}" for name, why in result.skipped.items()]
    lines += result.notes
    applied = {a.dispatch for a in result.applied}
    builtin = {r.name: r for r in result.builtin}
    for report in result.reports:
        if report.name in applied:
            lines.append(report.line())
            lines.append(f"  built-in: {builtin[report.name].line()}")
    if result.max_error is not None:
        lines.append(
            f"numerics: max error {result.max_error:g} against the CPU reference "
            f"(tolerance {result.tolerance:g}); built-in strategies: {result.builtin_error:g}"
        )
    if result.seconds is not None:
        ratio = result.seconds / result.builtin_seconds if result.builtin_seconds else float("nan")
        lines.append(
            f"lavapipe: {result.seconds * 1e3:.4f} ms per call with {s.name}, "
            f"{result.builtin_seconds * 1e3:.4f} ms with the built-in strategies "
            f"({ratio:.2f}x; median of alternating calls, every dispatch "
            f"repeated {result.timing_repeat}x)"
        )
    return lines


def step_text(script: UserScript, applied: Applied, step: int) -> str:
    """The dispatch's function after top-level step `step` of the script."""
    if not 1 <= step <= len(script.steps):
        raise TilefuseError(
            f"--print-after {step}: the script's entry has {len(script.steps)} top-level steps",
            script.path,
        )
    info = script.steps[step - 1]
    where = f"{info.op} ({info.location})"
    return f"// {applied.dispatch} after step {step}: {where}\n{applied.steps[step]}"


def write_steps(script: UserScript, applied: Applied, directory: Path) -> list[Path]:
    """One file per step, DIR/NN-<op>.mlir (00-input.mlir: before the first)."""
    names = {0: ("input", "the dispatch before the script")}
    for info in script.steps:
        names[info.index] = (info.op.removeprefix("transform."), f"{info.op} at {info.location}")
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for step, text in sorted(applied.steps.items()):
        short, what = names[step]
        path = directory / f"{step:02d}-{short}.mlir"
        path.write_text(f"// {applied.dispatch} after step {step}: {what}\n{text}")
        written.append(path)
    return written
