"""The compile pipeline, top to bottom.

    load -> hlo rewrites, plan and outline fusion groups -> phase 1 (executable sources)
    -> collapse, read dispatches -> choose strategies -> write the transform library
    -> phase 2 (vmfb) -> verify
    [-> SPIR-V only: splice kernels with narrow accesses aliased -> phase 3]

Every stage is one small function; `compile_program` reads like the diagram
in docs/architecture.md.

The promise: a program plain iree-compile compiles, tilefuse compiles too.
So nothing tilefuse adds may cost the compile; each failure is undone at the
smallest scale that removes it, and reported (never silent):
  - a strategy that fails in phase 2 (an error naming its dispatch, or a
    kernel that fails verify.py) is withdrawn from that dispatch, which IREE's
    codegen then compiles (report status "failed", the error as reason);
  - phase 3 failing keeps phase 2's module (a note says so);
  - a fusion group that fails (an IREE error at one of its ops' positions,
    a dispatch of it named, no dispatch formed for it) is left to IREE and
    the program compiles again with the other groups (compile_fused, a note
    per group, fusion/blame.py finds the group);
  - a fusion failure that names no group compiles the program on IREE's own
    dispatches (a note).
`strict=True` (`--strict`) turns each of these into an error instead.
"""

import re
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from iree.compiler import ir

from . import fusion as fusion_pkg
from .dispatch.collapse import collapse_column_reductions
from .dispatch.read import Dispatch, read_dispatches
from .errors import GroupFailed, TilefuseError
from .frontend import Program, load_program
from .fusion.blame import blamed_groups
from .irutil import context, file_positions, one_context_per_compile
from .kernel import ptx
from .kernel.aliases import rewrite_kernel, splice
from .kernel.verify import DispatchReport, kernel_problems, printed_kernels, reports
from .strategies import BY_NAME, Choice, catalogue, choose
from .strategies.library import build_library
from .targets import Target, load_target
from .toolchain import DEFAULT_PHASE_TIMEOUT_S, PhaseFailed, iree_compile, mentions

DEVICE_GLOBAL = "__tilefuse_device"


@dataclass
class CompileResult:
    vmfb: bytes
    target: Target
    program: Program
    reports: list[DispatchReport]
    library: str
    fusion: "fusion_pkg.FusionPlan | None" = None  # None: IREE's own dispatch formation
    # Program-level fallbacks (groups left to IREE, fusion or phase 3 dropped).
    notes: list[str] = field(default_factory=list)
    sources: Path | None = None  # phase 1's executable sources (gone unless dump_dir)
    # What the stages between phase 1 and 2 did (collapse), one line each.
    log: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Options:
    phase1_flags: tuple[str, ...] = ()  # phase 1 only (bench: scheduling statistics)
    phase2_flags: tuple[str, ...] = ()  # phases 2 and 3 (bench: repeated dispatches)
    strict: bool = False  # a strategy or fusion failure is an error, not a fallback
    timeout_s: float | None = DEFAULT_PHASE_TIMEOUT_S  # per iree-compile run


def phase1_input(program: Program, target: Target, workdir: Path) -> Path:
    """The file phase 1 reads: the user's file, or a copy carrying a device target."""
    if target.device_target is None:
        if program.path is not None:
            return program.path
        path = workdir / "input.mlir"
        path.write_text(program.text)
        return path
    # Targets IREE does not know (sm_90) travel inside the module.
    ctx = context(unregistered=True)
    module = ir.Module.parse(program.text, ctx)
    body = ir.InsertionPoint.at_block_begin(module.body)
    device = ir.Operation.parse(
        f"util.global private @{DEVICE_GLOBAL} = {target.device_target} : !hal.device", context=ctx
    )
    body.insert(device)
    module.operation.attributes["stream.affinity.default"] = ir.Attribute.parse(
        f"#hal.device.affinity<@{DEVICE_GLOBAL}>", ctx
    )
    path = workdir / "input.mlir"
    path.write_text(module.operation.get_asm(enable_debug_info=True))
    return path


def outline_stage(program: Program, target: Target, workdir: Path, withheld: dict[str, str]):
    """Plan fusion groups and wrap each in a flow.dispatch.region (fusion.mlir)."""
    plan = fusion_pkg.fuse(program.text, target, catalogue(), withheld)
    (workdir / "fusion.mlir").write_text(plan.text)
    outlined = Program(plan.text, program.name, None, program.functions)
    return outlined, plan


def phase1_executable_sources(
    source: Path,
    target: Target,
    workdir: Path,
    extra_flags: tuple[str, ...] = (),
    timeout_s: float | None = DEFAULT_PHASE_TIMEOUT_S,
) -> Path:
    out = workdir / "executable_sources.mlir"
    iree_compile(
        [
            str(source),
            *target.compile_flags,
            *extra_flags,
            # Locations tie each dispatch to its fusion group (attach_groups),
            # and phase 2's errors then point into the user's file.
            "--mlir-print-debuginfo",
            "--compile-to=executable-sources",
            "-o",
            str(out),
        ],
        "phase 1 (StableHLO to executable sources)",
        timeout_s,
    )
    return out


def collapse_stage(sources: Path) -> list[str]:
    """Merge adjacent reduced / kept loops of column reductions (collapse.py);
    one line per column reduction it collapsed or left, and why."""
    text = sources.read_text()
    collapsed, log = collapse_column_reductions(text)
    if collapsed is not text:
        sources.write_text(collapsed)
    return log


def choose_strategies(
    dispatches: list[Dispatch], target: Target, fused: bool = False
) -> list[Choice]:
    choices = [choose(d, target) for d in dispatches]
    for c in choices:
        # IREE 3.13's GPU codegen fails on a pad inside a dispatch region (a
        # memref.store outside any distributed context); the planner lets a
        # pad in only where the loop kernel reads through it, so this is a
        # planner bug: its group is left to IREE (compile_fused).
        if fused and target.is_gpu and c.strategy is None and "tensor.pad" in c.dispatch.ops:
            raise GroupFailed(
                f"dispatch {c.dispatch.name} holds a pad that no tilefuse kernel reads "
                f"through ({c.reason}), and IREE cannot compile it",
                [c.dispatch.group_name] if c.dispatch.group_name else [],
                c.dispatch.location,
            )
    return choices


def write_library(choices: list[Choice], workdir: Path, name: str = "dispatch_table") -> Path:
    path = workdir / f"{name}.mlir"
    path.write_text(build_library(choices))
    return path


def alias_stage(
    choices: list[Choice], log: str, sources: Path, target: Target, workdir: Path
) -> tuple[Path, set[str]] | None:
    """SPIR-V: the executable sources with every finished kernel that has
    narrow accesses (aliases.py) spliced in, aliased, and the names of those
    dispatches; None when there is none. Only strategies that declare
    alias_narrow_accesses are spliced (their printout compiles as is)."""
    if target.backend != "spirv":
        return None
    kernels = printed_kernels(log)
    spliced = {}
    for c in choices:
        if not BY_NAME[c.strategy].alias_narrow_accesses:
            continue
        text, moved = rewrite_kernel(kernels[c.dispatch.name])
        if moved:
            spliced[c.dispatch.name] = (text, list(c.params.launch.grid))
    if not spliced:
        return None
    path = workdir / "executable_sources_spliced.mlir"
    path.write_text(splice(sources.read_text(), spliced))
    return path, set(spliced)


def phase2_executable(
    sources: Path,
    library: Path,
    target: Target,
    workdir: Path,
    use_library: bool,
    options: Options = Options(),
    what: str = "phase 2 (executable sources to GPU code)",
) -> tuple[bytes, str, list[Path]]:
    out = workdir / "module.vmfb"
    binaries = workdir / "binaries"
    shutil.rmtree(binaries, ignore_errors=True)  # no PTX left from a failed try
    args = [
        str(sources),
        *target.compile_flags,
        *options.phase2_flags,
        "--compile-from=executable-sources",
        "-o",
        str(out),
    ]
    if use_library:
        args.append(f"--iree-codegen-transform-dialect-library={library}@kernel_config")
        # Each strategy prints its finished kernel and verify.py reads the
        # printouts; kernels compiled on several threads interleave their
        # text, so compile them one after another.
        args.append("--mlir-disable-threading")
    if target.backend == "cuda":
        args.append(f"--iree-hal-dump-executable-binaries-to={binaries}")
    run = iree_compile(args, what, options.timeout_s)
    return out.read_bytes(), run.stdout + run.stderr, sorted(binaries.glob("*.ptx"))


def failing_dispatches(failure: PhaseFailed, active: list[Choice], library: Path) -> list[Choice]:
    """The dispatches a failed phase 2 names: the one whose specialized
    sequence holds a failing transform op (`dispatch_table.mlir:LINE`), or whose
    name IREE printed with the failing executable."""
    starts = _sequence_lines(library)
    blamed = set()
    for line in re.findall(rf"{re.escape(library.name)}:(\d+):\d+: error", failure.stderr):
        before = [name for start, name in starts if start <= int(line)]
        if before:
            blamed.add(before[-1])
    named = [
        c for c in active if c.dispatch.name in blamed or mentions(failure.stderr, c.dispatch.name)
    ]
    return named


def _sequence_lines(library: Path) -> list[tuple[int, str]]:
    """(first line, dispatch name) of every specialized sequence in the library."""
    ctx = context()
    module = ir.Module.parse(library.read_text(), ctx)
    found = []
    for op in module.body.operations:
        op = op.operation
        name = ir.StringAttr(op.attributes["sym_name"]).value
        position = next(file_positions(op.location), None)
        if "__" in name and position:
            found.append((position[1], name.split("__", 1)[1]))
    return sorted(found)


def phase2_with_fallbacks(
    choices: list[Choice], sources: Path, target: Target, workdir: Path, options: Options
) -> tuple[bytes, str, list[Path], dict[str, str], Path]:
    """Phase 2, withdrawing each strategy that fails until the compile
    succeeds: returns the module, the log, the PTX files, the failures
    (dispatch name -> why its strategy was withdrawn) and the library used."""
    failures = {c.dispatch.name: c.failure for c in choices if c.failure}
    while True:
        kept = [
            c if c.dispatch.name not in failures else replace(c, strategy=None) for c in choices
        ]
        active = [c for c in kept if c.strategy]
        library = write_library(kept, workdir)
        try:
            vmfb, log, ptx_files = phase2_executable(
                sources, library, target, workdir, bool(active), options
            )
        except PhaseFailed as e:
            if not active:
                raise
            culprits = failing_dispatches(e, active, library)
            why = e.reason.replace(f"{workdir}/", "")
            if not culprits:
                # Nothing names a dispatch (a timeout, a crash): withdraw every
                # strategy rather than guess.
                culprits, why = active, f"{why} (no dispatch named: every strategy withdrawn)"
            for c in culprits:
                failures[c.dispatch.name] = f"{c.strategy} failed in phase 2: {why}"
            _check_strict(options, culprits, failures)
            continue
        problems = kernel_problems(active, log)
        if not problems:
            return vmfb, log, ptx_files, failures, library
        failures.update(problems)
        _check_strict(options, [c for c in active if c.dispatch.name in problems], failures)


def _check_strict(options: Options, culprits: list[Choice], failures: dict[str, str]) -> None:
    if options.strict and culprits:
        name = culprits[0].dispatch.name
        raise TilefuseError(f"dispatch {name}: {failures[name]} (--strict: no fallback)")


def attach_ptxas(reports: list[DispatchReport], ptx_files: list[Path], arch: str) -> None:
    resources = ptx.assemble(ptx_files, arch)
    for r in reports:
        if r.name in resources:
            r.registers = resources[r.name].registers
            r.spill_bytes = resources[r.name].spill_store_bytes


def compile_program(
    source,
    target: str | Target = "vulkan",
    dump_dir: str | Path | None = None,
    phase1_flags: tuple[str, ...] = (),
    fusion: bool = True,
    phase2_flags: tuple[str, ...] = (),
    strict: bool = False,
    timeout_s: float | None = DEFAULT_PHASE_TIMEOUT_S,
) -> CompileResult:
    """`phase1_flags`/`phase2_flags` go to one phase only (bench asks for
    scheduling statistics and repeated dispatches). `fusion=False` leaves
    dispatch formation to IREE. `strict`: see the module docstring.
    `timeout_s` bounds each iree-compile run."""
    target = load_target(target) if isinstance(target, str) else target
    options = Options(tuple(phase1_flags), tuple(phase2_flags), strict, timeout_s)
    with one_context_per_compile(), tempfile.TemporaryDirectory(prefix="tilefuse-") as tmp:
        program = source if isinstance(source, Program) else load_program(source)
        workdir = Path(dump_dir) if dump_dir else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        if not fusion:
            return compile_dispatches(program, target, workdir, options)
        return compile_fused(program, target, workdir, options)


# Each retry is a whole compile; past this many, the fusion groups are dropped.
MAX_GROUP_RETRIES = 6


@dataclass
class FusedAttempt:
    """What one compile with fusion groups got to, for blaming its failure."""

    withheld: dict[str, str]  # group name -> why IREE forms its dispatches
    plan: "fusion_pkg.FusionPlan | None" = None
    dispatches: list[Dispatch] | None = None


def compile_fused(
    program: Program, target: Target, workdir: Path, options: Options
) -> CompileResult:
    """Compile with fusion groups. A failure that names groups (blame.py)
    leaves just those to IREE and compiles again; one that names none, or
    too many retries, drops every group (IREE forms all dispatches)."""
    withheld: dict[str, str] = {}
    for retry in range(MAX_GROUP_RETRIES + 1):
        attempt = FusedAttempt(dict(withheld))
        attempt_dir = workdir / f"retry-{retry}" if retry else workdir
        try:
            result = compile_dispatches(program, target, attempt_dir, options, attempt)
        except Exception as e:
            if options.strict:
                if isinstance(e, TilefuseError):
                    raise
                raise TilefuseError(f"fusion stage: {_describe(e)} (--strict)") from None
            why = _describe(e).replace(f"{attempt_dir}/", "")
            blamed = {}
            if attempt.plan is not None:
                stderr = e.stderr if isinstance(e, PhaseFailed) else ""
                blamed = blamed_groups(e, stderr, why, attempt.plan, attempt.dispatches)
            blamed = {n: r for n, r in blamed.items() if n not in withheld}
            if not blamed or retry == MAX_GROUP_RETRIES:
                break
            withheld.update(blamed)
            continue
        result.notes[:0] = [
            f"FALLBACK: fusion group {name} left to IREE: {reason}"
            for name, reason in withheld.items()
        ]
        return result
    # The fusion groups cost the compile: IREE forms the dispatches.
    result = compile_dispatches(program, target, workdir / "no-fusion", options)
    result.notes.insert(0, f"FALLBACK: fusion groups dropped, IREE formed the dispatches: {why}")
    return result


def _describe(error: Exception) -> str:
    if isinstance(error, TilefuseError):
        return str(error)
    return f"internal error {type(error).__name__}: {error}"


def compile_dispatches(
    program: Program,
    target: Target,
    workdir: Path,
    options: Options,
    fused: FusedAttempt | None = None,
) -> CompileResult:
    """Everything after loading: fusion (when `fused` is given: it records
    the plan and dispatches), phase 1, strategies, phase 2 (and 3), checks."""
    workdir.mkdir(parents=True, exist_ok=True)
    phase1_program, plan = program, None
    if fused is not None:
        phase1_program, plan = outline_stage(program, target, workdir, fused.withheld)
        fused.plan = plan
    sources = phase1_executable_sources(
        phase1_input(phase1_program, target, workdir),
        target,
        workdir,
        options.phase1_flags,
        options.timeout_s,
    )
    stage_log = collapse_stage(sources) if target.is_gpu else []
    dispatches = read_dispatches(sources.read_text())
    if plan is not None:
        fused.dispatches = dispatches
        fusion_pkg.attach_groups(plan, dispatches)
    choices = choose_strategies(dispatches, target, plan is not None)
    vmfb, log, ptx_files, failures, library = phase2_with_fallbacks(
        choices, sources, target, workdir, options
    )
    (workdir / "phase2.log").write_text(log)
    result = CompileResult(
        vmfb, target, program, reports(choices, failures), library.read_text(), plan
    )
    result.sources, result.log = sources, stage_log
    applied = [c for c in choices if c.strategy and c.dispatch.name not in failures]
    result.vmfb, ptx_files = phase3_stage(applied, log, sources, target, workdir, options, result)
    if target.backend == "cuda":
        if not ptx_files:
            raise TilefuseError("phase 2 wrote no PTX to check")
        attach_ptxas(result.reports, ptx_files, target.ptxas_arch)
    return result


def phase3_stage(
    applied: list[Choice],
    log: str,
    sources: Path,
    target: Target,
    workdir: Path,
    options: Options,
    result: CompileResult,
) -> tuple[bytes, list[Path]]:
    """SPIR-V: compile again with the aliased kernels spliced in (alias_stage);
    if that fails, phase 2's module stands and a note says why."""
    ptx_files = sorted((workdir / "binaries").glob("*.ptx"))
    aliased = alias_stage(applied, log, sources, target, workdir)
    if aliased is None:
        return result.vmfb, ptx_files
    spliced_sources, names = aliased
    rest = [c for c in applied if c.dispatch.name not in names]
    library3 = write_library(rest, workdir, "dispatch_table_phase3")
    try:
        vmfb, log3, ptx_files = phase2_executable(
            spliced_sources,
            library3,
            target,
            workdir,
            bool(rest),
            options,
            "phase 3 (kernels with aliased bindings to GPU code)",
        )
        (workdir / "phase3.log").write_text(log3)
        problems = kernel_problems(rest, log3)
        if problems:
            name, problem = next(iter(problems.items()))
            raise TilefuseError(f"phase 3: dispatch {name}: {problem}")
    except TilefuseError as e:
        if options.strict:
            raise
        why = str(e).replace(f"{workdir}/", "")
        result.notes.append(f"FALLBACK: phase 3 dropped, phase 2's kernels kept: {why}")
        return result.vmfb, ptx_files
    return vmfb, ptx_files
