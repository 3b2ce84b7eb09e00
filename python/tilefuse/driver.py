"""The compile pipeline, top to bottom.

    load -> fusion (plan and outline groups) -> phase 1 (executable sources)
    -> dispatches (collapse, read) -> strategies -> phase 2 (library,
    strategies, verify) -> phase 3 (SPIR-V: finished kernels, aliased, to a
    vmfb)

On CUDA phase 2 is one iree-compile to the module. On SPIR-V it runs only
the strategies (iree-opt, IREE's translation stopped after the transform
dialect) and phase 3 compiles the sources with the finished kernels spliced
in: the kernels with narrow accesses are aliased in between
(kernel/aliases.py), and neither the strategies nor IREE's lowering runs
twice.

`STAGES` (at the end of this file) is that list: named stages that each read
and extend one `Compilation` record, run in order by `run_stages`. A later
stage's inputs are kept, so `recompile` reruns the last compile with other
flags without planning, running phase 1 or (SPIR-V) the strategies again
(bench's timing modules). The functions before the stages are the pieces
they call, each testable alone.

The promise: a program plain iree-compile compiles, tilefuse compiles too.
So nothing tilefuse adds may cost the compile; each failure is undone at the
smallest scale that removes it, and reported (never silent):
  - a strategy that fails in phase 2 (an error naming its dispatch, or a
    kernel that fails verify.py) is withdrawn from that dispatch, which IREE's
    codegen then compiles (report status "failed", the error as reason);
  - phase 3 failing runs phase 2 again as one compile with the library and
    no aliases, which withdraws any strategy IREE's lowering fails on (a
    note says so);
  - a fusion group that fails (an IREE error at one of its ops' positions,
    a dispatch of it named, no dispatch formed for it) is left to IREE and
    the program compiles again with the other groups (compile_fused, a note
    per group, fusion/blame.py finds the group);
  - a fusion failure that names no group compiles the program on IREE's own
    dispatches (a note);
  - a run holding tilefuse's regions or strategies that runs out of time
    (Options.timeout_s) fails like the above; IREE's own runs have no time
    limit, as plain iree-compile has none.
`strict=True` (`--strict`) turns each of these into an error instead.
"""

import re
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from iree.compiler import ir

from . import fusion as fusion_pkg
from .dispatch import rewrite_sources
from .dispatch.collapse import collapse_in
from .dispatch.fold_reshapes import fold_reshapes_in
from .dispatch.fuse_broadcasts import fuse_broadcasts_in
from .dispatch.fuse_roots import fuse_roots_in
from .dispatch.own_extracts import own_extracts_in
from .dispatch.read import Dispatch, dispatch_sites, read_sources
from .errors import GroupFailed, GroupsLeftToIree, TilefuseError
from .frontend import Program, load_program
from .fusion.blame import blamed_groups
from .hlo import wide_accumulators
from .irutil import context, file_positions, one_context_per_compile
from .kernel import ptx
from .kernel.aliases import alias_report
from .kernel.splice import finished_kernels, splice, strategy_executables
from .kernel.verify import DispatchReport, kernel_problems, reports
from .strategies import BY_NAME, Choice, catalogue, choose, registered
from .strategies.library import build_library
from .strategies.tuning import using as tuning_cache
from .strategies.user import load_directory
from .targets import Target, load_target
from .toolchain import (
    DEFAULT_PHASE_TIMEOUT_S,
    PhaseFailed,
    error_site,
    iree_compile,
    iree_opt,
    mentions,
    scheduled_dispatches,
    statistics_flags,
)

DEVICE_GLOBAL = "__tilefuse_device"


@dataclass
class CompileResult:
    vmfb: bytes
    target: Target
    program: Program
    reports: list[DispatchReport]
    library: str
    fusion: "fusion_pkg.FusionPlan | None" = None  # None: IREE's own dispatch formation
    # Program-level notes (groups left to IREE, fusion dropped, IREE's dispatches
    # kept, phase 3 failed).
    notes: list[str] = field(default_factory=list)
    sources: Path | None = None  # phase 1's executable sources (gone unless dump_dir)
    # Dispatches one call issues, from IREE's scheduling statistics
    # (Options.statistics; None without them).
    scheduled_dispatches: int | None = None
    # What the stages between phase 1 and 2 did (collapse, fuse_roots,
    # fold_reshapes), one line each.
    log: list[str] = field(default_factory=list)
    # Every stage's output, for `recompile` (None for a loaded module).
    compilation: "Compilation | None" = None


@dataclass(frozen=True)
class Options:
    phase1_flags: tuple[str, ...] = ()  # phase 1 only
    # Phase 1 writes IREE's scheduling statistics (bench, the corpus: how
    # many dispatches a call issues) to statistics.json in its work directory.
    statistics: bool = False
    phase2_flags: tuple[str, ...] = ()  # phases 2 and 3 (bench: repeated dispatches)
    strict: bool = False  # a strategy or fusion failure is an error, not a fallback
    # Per iree-compile run that holds something of tilefuse's (a fusion
    # plan's regions, strategies, finished kernels); a run of IREE's alone
    # (its own formation, its codegen with every strategy withdrawn) is not
    # bounded, as plain iree-compile is not: `unbounded`.
    timeout_s: float | None = DEFAULT_PHASE_TIMEOUT_S
    # User strategies (strategies/user.py), tried before the built-ins.
    user_strategies: tuple = ()

    def unbounded(self) -> "Options":
        return replace(self, timeout_s=None)


def phase1_input(program: Program, target: Target, workdir: Path, widen: bool = True) -> Path:
    """The file phase 1 reads: the user's file, or a copy carrying a device
    target or (`widen`) bf16 products widened to f32 accumulation (as the
    fusion plan's are: hlo/wide_accumulators.py), so that IREE's own
    formation and the fallbacks compute what the plan computes. The plain
    IREE baseline of `tilefuse bench` does not widen: it is IREE as is."""
    ctx = context(unregistered=True)
    module = ir.Module.parse(program.text, ctx)
    widened = widen and wide_accumulators.rewrite_module(module)
    if target.device_target is None and not widened:
        if program.path is not None and not program.edited:
            return program.path
        path = workdir / "input.mlir"
        path.write_text(program.text)
        return path
    path = workdir / "input.mlir"
    if target.device_target is None:
        path.write_text(module.operation.get_asm(enable_debug_info=True))
        return path
    # Targets IREE does not know (sm_90) travel inside the module.
    body = ir.InsertionPoint.at_block_begin(module.body)
    device = ir.Operation.parse(
        f"util.global private @{DEVICE_GLOBAL} = {target.device_target} : !hal.device", context=ctx
    )
    body.insert(device)
    module.operation.attributes["stream.affinity.default"] = ir.Attribute.parse(
        f"#hal.device.affinity<@{DEVICE_GLOBAL}>", ctx
    )
    path.write_text(module.operation.get_asm(enable_debug_info=True))
    return path


def outline_stage(program: Program, target: Target, workdir: Path, withheld: dict[str, str]):
    """Plan fusion groups and wrap each in a flow.dispatch.region (fusion.mlir)."""
    plan = fusion_pkg.fuse(program.text, target, catalogue(), withheld)
    (workdir / "fusion.mlir").write_text(plan.text)
    outlined = Program(plan.text, program.name, None, program.functions)
    return outlined, plan


def phase1_flags(options: Options, workdir: Path) -> tuple[str, ...]:
    """Phase 1's extra flags for a compile in `workdir` (each formation has its own)."""
    if not options.statistics:
        return options.phase1_flags
    return (*options.phase1_flags, *statistics_flags(workdir / STATISTICS))


STATISTICS = "statistics.json"  # in a compile's work directory (Options.statistics)


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


def sources_rewrite_stage(sources: Path) -> list[str]:
    """Read a body's extracts of its own input at its own index as the block
    argument (own_extracts.py), fuse elementwise ops a reduction reads through a broadcast into it
    (fuse_broadcasts.py), merge adjacent reduced / kept loops of column
    reductions (collapse.py) and the elementwise roots of a dispatch into one
    op (fuse_roots.py), and fold reshapes of loads and stores into their
    bindings (fold_reshapes.py); one line per dispatch each rewrote or left,
    and why."""
    text = sources.read_text()
    # fuse_roots again after fold_reshapes: a view between a root and its
    # widening (a [2, 16, 1] mask stored as [2, 16]) hid the root the first time.
    rewritten, log = rewrite_sources(
        text,
        own_extracts_in,
        fuse_broadcasts_in,
        collapse_in,
        fuse_roots_in,
        fold_reshapes_in,
        fuse_roots_in,
    )
    if rewritten is not text:
        sources.write_text(rewritten)
    return log


def choose_strategies(
    dispatches: list[Dispatch], target: Target, fused: bool = False, user: tuple = ()
) -> list[Choice]:
    choices = [choose(d, target, user) for d in dispatches]
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
    if fused and target.is_gpu:
        _groups_for_iree_codegen(choices)
    return choices


def _groups_for_iree_codegen(choices: list[Choice]) -> None:
    """Raise GroupsLeftToIree for the fusion groups whose dispatch no
    tilefuse kernel takes: the driver leaves them to IREE's formation, so
    that IREE's codegen compiles only dispatches its own formation made, as
    plain iree-compile does. Given a dispatch IREE never forms, its codegen
    summed the squares of 3x50x7x40 over dims 0 and 2 31% wrong (the square
    unfused beside the reduction) and failed on a unit dim's view inside a
    region ('workgroup distributed contexts', a compile lost per group)."""
    reasons = {
        c.dispatch.group_name: f"no tilefuse kernel takes its dispatch {c.dispatch.name}"
        for c in choices
        if c.strategy is None and c.dispatch.group_name
    }
    if reasons:
        raise GroupsLeftToIree(
            f"{len(reasons)} fusion group(s) with no tilefuse kernel: {', '.join(reasons)}",
            list(reasons),
            reasons=reasons,
        )


def write_library(choices: list[Choice], workdir: Path) -> Path:
    path = workdir / "dispatch_table.mlir"
    path.write_text(build_library(choices))
    return path


def alias_kernels(
    choices: list[Choice], kernels: dict[str, tuple[str, list[int]]], why_not: list[str]
) -> dict[str, tuple[str, list[int]]]:
    """`kernels` (finished_kernels) with the narrow accesses of each kernel
    whose strategy declares alias_narrow_accesses moved onto aliases of
    their bindings (aliases.py); `why_not` gets a line for each such kernel
    left as it is."""
    aliased = dict(kernels)
    for c in choices:
        if not BY_NAME[c.strategy].alias_narrow_accesses:
            continue
        text, grid = kernels[c.dispatch.name]
        text, moved, why = alias_report(text)
        if moved:
            aliased[c.dispatch.name] = (text, grid)
        else:
            why_not.append(f"aliases: {c.dispatch.name} left as it is: {why}")
    return aliased


# IREE's translation of an executable up to the end of its transform strategy,
# without the SPIR-V lowering after it: phase 2 on SPIR-V (phase2_kernels).
SPIRV_STRATEGIES_ONLY = (
    "builtin.module(hal.executable(hal.executable.variant("
    "iree-codegen-create-dispatch-config, builtin.module("
    "iree-codegen-materialize-user-configs, iree-spirv-select-lowering-strategy-pass, "
    "iree-spirv-lower-executable-using-transform-dialect))))"
)


def phase2_kernels(
    sources: Path, library: Path, active: list[Choice], workdir: Path, options: Options
) -> tuple[Path, str]:
    """SPIR-V phase 2: only the strategies, run by iree-opt on the executables
    of the `active` dispatches. Returns the translated executables (their
    finished kernels, kernels.mlir) and the log (the strategies' printouts)."""
    todo = workdir / "strategy_executables.mlir"
    names = {c.dispatch.name for c in active}
    todo.write_text(strategy_executables(sources.read_text(), names))
    out = workdir / "kernels.mlir"
    run = iree_opt(
        [
            str(todo),
            f"--iree-codegen-transform-dialect-library={library}@kernel_config",
            f"--pass-pipeline={SPIRV_STRATEGIES_ONLY}",
            # One kernel printed after another (verify.py reads the printouts).
            "--mlir-disable-threading",
            "-o",
            str(out),
        ],
        "phase 2 (transform strategies)",
        options.timeout_s,
    )
    return out, run.stdout + run.stderr


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


# Phase 2 on the dispatch table written for the `active` choices: returns
# its output (a module, or SPIR-V's finished kernels), its log (the
# strategies' printouts) and the PTX files it wrote.
Phase2Run = Callable[[Path, list[Choice]], tuple[object, str, list[Path]]]


def phase2_with_fallbacks(
    choices: list[Choice],
    workdir: Path,
    options: Options,
    failures: dict[str, str],
    run: Phase2Run,
) -> tuple[object, str, list[Path], dict[str, str], Path]:
    """Phase 2 (`run`), withdrawing each strategy that fails until it
    succeeds, starting from `failures` (dispatch name -> why its strategy is
    withdrawn: the choosers' errors, or a first compile's failures): returns
    what `run` made, the log, the PTX files, the failures and the library
    used."""
    failures = dict(failures)
    while True:
        kept = [
            c if c.dispatch.name not in failures else replace(c, strategy=None) for c in choices
        ]
        active = [c for c in kept if c.strategy]
        library = write_library(kept, workdir)
        try:
            made, log, ptx_files = run(library, active)
        except PhaseFailed as e:
            if not active:
                raise
            culprits = failing_dispatches(e, active, library)
            if not culprits and _names_iree_codegen_dispatch(e, choices, failures):
                raise  # IREE's codegen failed on its own: no strategy is to blame
            why = e.reason.replace(f"{workdir}/", "")
            if not culprits and not e.timed_out and len(active) > 1:
                _fails_without_strategies(e, kept, workdir, run)
                culprits = _bisect(kept, active, workdir, run)
                why = f"{why} (the error names no dispatch: {BISECTED})"
            if not culprits:
                # Nothing names a dispatch (a timeout, a crash): withdraw every
                # strategy rather than guess.
                culprits, why = active, f"{why} (no dispatch named: every strategy withdrawn)"
            for c in culprits:
                failures[c.dispatch.name] = f"{c.strategy} failed in phase 2: {why}"
            _check_strict(options, culprits, failures)
            _builtin_instead(choices, failures)
            continue
        problems = kernel_problems(active, log, ptx_files)
        if not problems:
            return made, log, ptx_files, failures, library
        failures.update(problems)
        _check_strict(options, [c for c in active if c.dispatch.name in problems], failures)
        _builtin_instead(choices, failures)


def _names_iree_codegen_dispatch(
    failure: TilefuseError, choices: list[Choice], failures: dict[str, str]
) -> bool:
    """The error names a dispatch on IREE's codegen (no strategy, or its
    strategy withdrawn in `failures`): each dispatch is an executable of its
    own, so withdrawing strategies elsewhere, or compiling again, cannot
    mend it (IREE's sort of 2^20 keys, which wants 4 MiB of workgroup
    memory, was compiled again without strategies, 86 s apiece, before
    failing)."""
    if not isinstance(failure, PhaseFailed):
        return False
    return any(
        (c.strategy is None or c.dispatch.name in failures)
        and mentions(failure.stderr, c.dispatch.name)
        for c in choices
    )


# An error located in the user's program (an op's loc, as IREE's lowering
# after the strategies reports it: "'vector.transfer_write' op with rank > 1
# should be broken down") names no dispatch; withdrawing every strategy for
# it lost every kernel of the program (a bf16 attention decode step: one
# kernel failed, four went to IREE's codegen).
BISECTED = "found by compiling halves of the strategies"


def _fails_without_strategies(
    failure: PhaseFailed, kept: list[Choice], workdir: Path, run: Phase2Run
) -> None:
    """Raise `failure` where phase 2 fails with the same error with every
    strategy withdrawn: IREE's codegen fails so on its own and no strategy
    is to blame. Halving them would withdraw them one by one, each
    withdrawal costing a bisection (a program of 16 dispatches that plain
    iree-compile fails on in 0.5 s took 63 compiles and 20 s to fail so).
    Another error there (a dispatch of the plan that only its strategy
    compiles) leaves the bisection to find the strategy to withdraw."""
    try:
        run(write_library([replace(c, strategy=None) for c in kept], workdir), [])
    except PhaseFailed as alone:
        if _error_site(alone) == _error_site(failure):
            raise failure from None


def _error_site(failure: PhaseFailed) -> str:
    """Where the first error is (the user's file:line:col), else its text:
    the same op fails with vectors of other widths when strategies run."""
    return error_site(failure.stderr) or failure.reason


def _bisect(
    kept: list[Choice], suspects: list[Choice], workdir: Path, run: Phase2Run
) -> list[Choice]:
    """The strategy whose compile fails, found by halving: each step
    compiles the first half of the suspects alone (every other strategy
    withdrawn) and keeps the half that fails (the second when the first
    compiles). One compile per step; a failure that needs two kernels
    together still ends at one of them, whose withdrawal the next
    phase 2 run checks."""
    while len(suspects) > 1:
        half = suspects[: len(suspects) // 2]
        names = {c.dispatch.name for c in half}
        trial = [c if c.dispatch.name in names else replace(c, strategy=None) for c in kept]
        try:
            run(write_library(trial, workdir), half)
            suspects = suspects[len(half) :]
        except PhaseFailed:
            suspects = half
    return suspects


def _builtin_instead(choices: list[Choice], failures: dict[str, str]) -> None:
    """A strategy that failed gives way to the choice it carries
    (Choice.fallback: a user strategy's built-in choice, or the choice with
    a switched-on strategy's target field off), in `choices` itself (the
    compilation's list), with the failure in its reason: the dispatch is
    compiled again with it instead of going to IREE's codegen."""
    for i, c in enumerate(choices):
        name = c.dispatch.name
        if c.fallback is not None and name in failures:
            why = failures.pop(name)
            builtin = c.fallback
            note = f"{c.strategy} failed, {builtin.strategy} used instead: {why}"
            choices[i] = replace(builtin, reason=f"{note}; {builtin.reason}".rstrip("; "))


def one_compile(c: "Compilation") -> Phase2Run:
    """Phase 2 as one iree-compile: the strategies, IREE's lowering, the
    module; with no strategy left, IREE's codegen alone, unbounded."""
    return lambda library, active: phase2_executable(
        c.sources, library, c.target, c.workdir, bool(active),
        c.options if active else c.options.unbounded(),
    )  # fmt: skip


def strategies_only(c: "Compilation") -> Phase2Run:
    """SPIR-V phase 2: the strategies alone (phase2_kernels); phase 3 compiles."""

    def run(library: Path, active: list[Choice]):
        if not active:
            return None, "", []
        return (*phase2_kernels(c.sources, library, active, c.workdir, c.options), [])

    return run


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
    statistics: bool = False,
    tuning: str | Path | None = None,
    strategies_dir: str | Path | None = None,
) -> CompileResult:
    """`phase1_flags`/`phase2_flags` go to one phase only (bench asks for
    repeated dispatches). `fusion=False` leaves dispatch formation to IREE.
    `strict`: see the module docstring. `timeout_s` bounds each iree-compile
    run. `statistics`: read IREE's scheduling statistics of the formation
    compiled (CompileResult.scheduled_dispatches). `tuning`: the tuned-choice
    cache to read (strategies/tuning.py; None: its default place).
    `strategies_dir`: user strategies tried before the built-ins
    (strategies/user.py; None: $TILEFUSE_STRATEGIES, else none)."""
    target = load_target(target) if isinstance(target, str) else target
    user = load_directory(strategies_dir)
    options = Options(tuple(phase1_flags), statistics, tuple(phase2_flags), strict, timeout_s, user)
    with (
        one_context_per_compile(),
        tuning_cache(tuning),
        registered(*user),
        tempfile.TemporaryDirectory(prefix="tilefuse-") as tmp,
    ):
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
    too many retries, drops every group (IREE forms all dispatches).

    IREE's own dispatch formation is computed beside the plan (its phase 1
    runs on another thread while the plan is compiled to executable sources)
    and taken instead when it is better (formation_refusal): fusion must not
    cost dispatches that no kernel gains. A plan it cannot beat
    (formation_unneeded) is not compared."""
    own = OwnFormation(program, target, workdir / "iree-formation", options)
    with ThreadPoolExecutor(max_workers=1) as pool:
        withheld: dict[str, str] = {}
        no_kernel: set[str] = set()  # of those, the groups no kernel takes
        for retry in range(MAX_GROUP_RETRIES + 1):
            attempt = FusedAttempt(dict(withheld))
            attempt_dir = workdir / f"retry-{retry}" if retry else workdir
            try:
                attempt_dir.mkdir(parents=True, exist_ok=True)
                c = Compilation(program, target, attempt_dir, options, attempt)
                advance(c, "fusion", "fusion")
                if c.plan is not None and c.plan.corrected_text:
                    # Dropped groups leave IREE the corrected program.
                    own.program = replace(program, text=c.plan.corrected_text, path=None)
                if own.future is None and own.unneeded is None:
                    own.unneeded = formation_unneeded(c.plan)
                    if own.unneeded is None:
                        own.start(pool)
                advance(c, "phase1", "strategies")
                result = _own_formation_if_better(c, own)
                if result is not None:
                    return _ptx_at_top(result, workdir)
                result = run_stages(c, "phase2")
            except Exception as e:
                if options.strict and not isinstance(e, GroupsLeftToIree):
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
                if isinstance(e, GroupsLeftToIree):
                    no_kernel.update(blamed)
                continue
            # A group no kernel takes is no failure: its dispatch's own report
            # says it is on IREE's codegen, and why.
            result.notes[:0] = [
                f"fusion group {name} left to IREE's formation: {reason}"
                if name in no_kernel
                else f"FALLBACK: fusion group {name} left to IREE: {reason}"
                for name, reason in withheld.items()
            ]
            return _ptx_at_top(result, workdir)
        # The fusion groups cost the compile: IREE forms the dispatches.
        mine = own.compilation()
        if mine is None:  # IREE's own phase 1 failed: say so, as IREE would
            result = compile_dispatches(own.program, target, workdir / "no-fusion", options)
        else:
            result = run_stages(mine, "phase2")
    result.notes.insert(0, f"FALLBACK: fusion groups dropped, IREE formed the dispatches: {why}")
    return _ptx_at_top(result, workdir)


def _ptx_at_top(result: CompileResult, workdir: Path) -> CompileResult:
    """`result` with its PTX copied to workdir/binaries (where --dump-dir
    documents it and bench reads it) when a retry or IREE's own formation
    compiled it in a folder below; PTX of an earlier attempt there goes."""
    c = result.compilation
    if c is None or c.workdir == workdir or not c.ptx_files:
        return result
    top = workdir / "binaries"
    top.mkdir(exist_ok=True)
    for stale in top.glob("*.ptx"):
        stale.unlink()
    for file in c.ptx_files:
        shutil.copy2(file, top / file.name)
    return result


def _own_formation_if_better(c: "Compilation", own: "OwnFormation") -> CompileResult | None:
    """IREE's own formation compiled, when formation_refusal prefers it to the
    plan in `c` (run to its strategies); None to go on with the plan, also
    when IREE's formation fails to compile (the plan may avoid what fails)."""
    if own.unneeded:
        c.stage_log.append(f"formation: not compared with IREE's: {own.unneeded}")
        return None
    mine = own.compilation()
    if mine is None:
        c.stage_log.append(f"formation: not compared with IREE's: {own.failed}")
        return None
    why = formation_refusal(c, mine)
    if not why:
        return None
    try:
        result = run_stages(mine, "phase2")
    except TilefuseError as e:
        error = str(e).replace(f"{mine.workdir}/", "")
        c.stage_log.append(f"formation: the plan kept: {why}, but IREE's fails: {error}")
        return None
    result.notes.insert(0, f"fusion plan not used, IREE's dispatches kept: {why}")
    return result


@dataclass
class OwnFormation:
    """IREE's own dispatch formation of a program: phase 1 without fusion
    groups, started on a thread of `pool` (the subprocess runs there; the MLIR
    work stays on the caller's thread) once the plan is known to need the
    comparison, then read and given strategies on demand (`compilation`),
    once; computed then if it was never started (all groups dropped)."""

    program: Program
    target: Target
    workdir: Path
    options: Options
    future: Future | None = None
    done: "Compilation | None" = None
    failed: str | None = None  # why there is no `done`
    unneeded: str | None = None  # why the plan is not compared with it

    def _phase1_args(self) -> tuple:
        self.workdir.mkdir(parents=True, exist_ok=True)
        return phase1_args(self.program, self.target, self.workdir, self.options)

    def start(self, pool: ThreadPoolExecutor) -> None:
        self.future = pool.submit(phase1_executable_sources, *self._phase1_args())

    def compilation(self) -> "Compilation | None":
        """Its stages run to the strategies; None if they failed (`failed`
        says why: IREE cannot compile the program itself, or reading its
        dispatches failed), and the plan goes on without the comparison."""
        if self.done is None and self.failed is None:
            try:
                if self.future is None:
                    sources = phase1_executable_sources(*self._phase1_args())
                else:
                    sources = self.future.result()
                c = Compilation(self.program, self.target, self.workdir, self.options)
                c.phase1_program = self.program
                set_sources(c, sources)
                advance(c, "dispatches", "strategies")
                self.done = c
            # Whatever fails here (IREE's phase 1, a reader's internal error)
            # costs only the comparison: the caller logs why and goes on.
            except Exception as e:  # noqa: BLE001
                self.failed = _describe(e).replace(f"{self.workdir}/", "")
        return self.done


def formation_unneeded(plan: "fusion_pkg.FusionPlan | None") -> str | None:
    """Why IREE's own formation cannot beat this plan, or None: a plan with
    at most one region and no StableHLO op outside it issues at most one
    dispatch, and IREE's formation issues no fewer for a program that
    computes anything. (Most programs a test or a user compiles while
    working on one kernel are such programs: this saves the second phase 1.)
    Where the hlo rewrites corrected what IREE gets wrong or cannot compile,
    the formation compared is IREE's of the corrected program
    (`OwnFormation.program`), never of the program as written."""
    if plan is None or plan.calls_defined_functions or plan.left_to_iree:
        return None
    if len(plan.outlined()) > 1:
        return None
    return "the plan has one region and no op outside it: IREE's formation cannot have fewer"


def formation_refusal(fused: "Compilation", own: "Compilation") -> str | None:
    """Why IREE's own formation (`own`) beats the fusion plan's (`fused`), or
    None: it issues fewer dispatches and leaves no more of them to IREE's
    codegen (so the launches it saves cost no tilefuse kernel; a plan that
    splits work IREE's codegen gets wrong, such as a reduction to a scalar
    on two row kernels, is kept). The steps of a reduction the rewrites
    split on purpose (a tall column reduction over the grid) are not counted
    against the plan."""
    plan_sites, own_sites = (
        dispatch_sites(fused.sources.read_text()),
        dispatch_sites(own.sources.read_text()),
    )
    if own_sites >= plan_sites - (fused.plan.split_steps if fused.plan else 0):
        return None
    # IREE's formation put a reduction and an op reading its result across
    # rows in one dispatch, which IREE's SPIR-V codegen computes wrong and no
    # tilefuse kernel is checked on (row_warp took one, failed in phase 3,
    # and IREE's codegen ran it: x.sum(1)[None, :] + y came out wrong). The
    # plan keeps them apart; on CUDA too, where nothing has measured it.
    if any(d.transposed_reduction_read for d in own.dispatches):
        return None
    plan_default, own_default = _on_iree_codegen(fused), _on_iree_codegen(own)
    if own_default > plan_default:
        return None
    return (
        f"the plan issues {plan_sites} dispatches, IREE {own_sites}, and IREE's leave "
        f"{own_default} to its codegen against the plan's {plan_default}"
    )


def _on_iree_codegen(c: "Compilation") -> int:
    return sum(1 for d in c.choices if not d.strategy or d.dispatch.name in c.failures)


def known_wrong_on_iree_codegen(c: "Compilation") -> list[str]:
    """A WARNING per dispatch left to IREE's codegen that IREE 3.13 is known
    to compute wrong there: on SPIR-V, a reduction's result read transposed
    in the same dispatch (docs/findings.md, 'A reduction read transposed in
    its own dispatch'). tilefuse's own plan never forms one (a transpose is
    a group of its own); IREE's formation does, under --no-fusion or for
    what the plan leaves to it."""
    if c.target.backend != "spirv":
        return []
    return [
        f"WARNING: {d.dispatch.name} is on IREE's default codegen, which computes it wrong "
        f"on SPIR-V ({d.dispatch.transposed_reduction_read}; docs/findings.md, "
        "'A reduction read transposed in its own dispatch')"
        for d in c.choices
        if (not d.strategy or d.dispatch.name in c.failures)
        and d.dispatch.transposed_reduction_read
    ]


def _describe(error: Exception) -> str:
    if isinstance(error, TilefuseError):
        return str(error)
    return f"internal error {type(error).__name__}: {error}"


@dataclass
class Compilation:
    """What the stages hand each other (STAGES, in order), for one compile
    attempt. Each stage reads what the stages before it wrote here."""

    program: Program
    target: Target
    workdir: Path
    options: Options
    fused: FusedAttempt | None = None  # None: IREE forms the dispatches
    plan: "fusion_pkg.FusionPlan | None" = None
    phase1_program: Program | None = None  # the program with groups outlined
    sources: Path | None = None  # phase 1's executable sources
    scheduled_dispatches: int | None = None  # per call, IREE's statistics (Options.statistics)
    stage_log: list[str] = field(default_factory=list)
    dispatches: list[Dispatch] = field(default_factory=list)
    choices: list[Choice] = field(default_factory=list)
    # dispatch name -> why its strategy was withdrawn (a chooser error, a
    # phase 2 failure); phase 2 starts from it, so a recompile skips failures.
    failures: dict[str, str] = field(default_factory=dict)
    library: Path | None = None
    kernels: Path | None = None  # SPIR-V: phase 2's finished kernels (phase 3 compiles)
    vmfb: bytes = b""
    kernel_log: str = ""  # phase 2's stdout + stderr: the printed kernels
    ptx_files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def fusion_stage(c: Compilation) -> None:
    c.phase1_program = c.program
    if c.fused is not None:
        c.phase1_program, c.plan = outline_stage(c.program, c.target, c.workdir, c.fused.withheld)
        c.fused.plan = c.plan


def phase1_stage(c: Compilation) -> None:
    # Bounded only with a plan's outlined regions in the program: IREE's
    # formation of the user's program is what plain iree-compile runs.
    options = c.options if c.plan is not None else c.options.unbounded()
    set_sources(
        c, phase1_executable_sources(*phase1_args(c.phase1_program, c.target, c.workdir, options))
    )


def phase1_args(program: Program, target: Target, workdir: Path, options: Options) -> tuple:
    """phase1_executable_sources' arguments for `program` in `workdir` (its
    input file is written here, on the caller's thread)."""
    source = phase1_input(program, target, workdir)
    return source, target, workdir, phase1_flags(options, workdir), options.timeout_s


def set_sources(c: Compilation, sources: Path) -> None:
    """Phase 1's output, and the statistics it wrote beside it."""
    c.sources = sources
    if c.options.statistics:
        c.scheduled_dispatches = scheduled_dispatches(c.workdir / STATISTICS)


def dispatch_stage(c: Compilation) -> None:
    """Rewrite (collapse, fuse roots, fold reshapes) and read the dispatches; tie them to their groups."""
    c.stage_log = sources_rewrite_stage(c.sources) if c.target.is_gpu else []
    c.dispatches, sites = read_sources(c.sources.read_text())
    if c.plan is not None:
        c.fused.dispatches = c.dispatches
        fusion_pkg.attach_groups(c.plan, c.dispatches, sites)


def strategy_stage(c: Compilation) -> None:
    c.choices = choose_strategies(
        c.dispatches, c.target, c.plan is not None, c.options.user_strategies
    )
    c.failures = {d.dispatch.name: d.failure for d in c.choices if d.failure}


def phase2_stage(c: Compilation) -> None:
    """The strategies. CUDA: one iree-compile, the module. SPIR-V: only the
    strategies (their finished kernels, c.kernels); phase 3 compiles."""
    run = strategies_only(c) if c.target.backend == "spirv" else one_compile(c)
    made, c.kernel_log, c.ptx_files, c.failures, c.library = phase2_with_fallbacks(
        c.choices, c.workdir, c.options, c.failures, run
    )
    if c.target.backend == "spirv":
        c.kernels = made
    else:
        c.vmfb = made
    (c.workdir / "phase2.log").write_text(c.kernel_log)


def phase3_stage(c: Compilation) -> None:
    """SPIR-V: compile the executable sources with phase 2's finished kernels
    spliced in (kernel/splice.py), their narrow accesses aliased
    (alias_kernels). If that fails, phase 2 runs again as one compile with
    the library (no aliases), and a note says why."""
    if c.target.backend != "spirv":
        return
    sources = c.sources
    options = c.options.unbounded()  # IREE's codegen alone, unless kernels are spliced in
    try:
        if c.kernels is not None:
            kernels = finished_kernels(c.kernels.read_text())
            applied = [d for d in c.choices if d.strategy and d.dispatch.name not in c.failures]
            missing = sorted({d.dispatch.name for d in applied} - set(kernels))
            if missing:
                raise TilefuseError(f"phase 2 finished no kernel for {', '.join(missing)}")
            kernels = alias_kernels(applied, kernels, c.stage_log)
            sources = c.workdir / "executable_sources_spliced.mlir"
            sources.write_text(splice(c.sources.read_text(), kernels))
            options = c.options if kernels else options
        c.vmfb, log3, _ = phase2_executable(
            sources,
            c.library,
            c.target,
            c.workdir,
            False,
            options,
            "phase 3 (finished kernels to SPIR-V)",
        )
        (c.workdir / "phase3.log").write_text(log3)
    except TilefuseError as e:
        if _names_iree_codegen_dispatch(e, c.choices, c.failures):
            raise  # IREE's codegen failed on its own: phase 2 again would too
        why = str(e).replace(f"{c.workdir}/", "")
        if c.options.strict:
            # The error's location is in the spliced kernels' text, not the
            # user's program: phase 2 as one compile names the dispatch and
            # its line, and --strict stops there (_check_strict).
            phase2_with_fallbacks(c.choices, c.workdir, c.options, c.failures, one_compile(c))
            raise TilefuseError(f"{why} (--strict: no fallback)") from None
        c.notes.append(
            f"FALLBACK: phase 3 failed, phase 2 compiled again in one run "
            f"(no aliased accesses): {why}"
        )
        c.vmfb, c.kernel_log, c.ptx_files, c.failures, c.library = phase2_with_fallbacks(
            c.choices, c.workdir, c.options, c.failures, one_compile(c)
        )


def ptxas_check(c: Compilation, result: CompileResult) -> None:
    if c.target.backend != "cuda" or not c.dispatches:
        return  # a program with no dispatch (it returns its arguments) has no PTX
    if not c.ptx_files:
        raise TilefuseError("phase 2 wrote no PTX to check")
    attach_ptxas(result.reports, c.ptx_files, c.target.ptxas_arch)


# The compile, in order; `recompile` runs the stages from phase 2 on.
STAGES = (
    ("fusion", fusion_stage),  # plan and outline fusion groups (fusion.mlir)
    ("phase1", phase1_stage),  # iree-compile to executable sources
    ("dispatches", dispatch_stage),  # rewrite the sources, read dispatches, attach groups
    ("strategies", strategy_stage),  # a strategy and parameters per dispatch
    ("phase2", phase2_stage),  # transform library: the strategies' kernels, verified
    ("phase3", phase3_stage),  # SPIR-V: finished kernels (aliased) to a vmfb
)


def advance(c: Compilation, first: str, last: str) -> None:
    """Run the stages from `first` to `last`, both included."""
    names = [name for name, _ in STAGES]
    for _, stage in STAGES[names.index(first) : names.index(last) + 1]:
        stage(c)


def run_stages(c: Compilation, first: str = STAGES[0][0]) -> CompileResult:
    advance(c, first, STAGES[-1][0])
    c.notes += known_wrong_on_iree_codegen(c)
    result = CompileResult(
        c.vmfb,
        c.target,
        c.program,
        reports(c.choices, c.failures),
        c.library.read_text(),
        c.plan,
        notes=list(c.notes),
        sources=c.sources,
        scheduled_dispatches=c.scheduled_dispatches,
        log=c.stage_log,
        compilation=c,
    )
    ptxas_check(c, result)
    return result


def compile_dispatches(
    program: Program,
    target: Target,
    workdir: Path,
    options: Options,
    fused: FusedAttempt | None = None,
) -> CompileResult:
    """Every stage after loading; with `fused`, fusion groups are planned and
    the attempt records the plan and dispatches (for blaming a failure)."""
    workdir.mkdir(parents=True, exist_ok=True)
    return run_stages(Compilation(program, target, workdir, options, fused))


def recompile(result: CompileResult, workdir: Path, phase2_flags: tuple[str, ...]) -> bytes:
    """The module again with other phase 2 flags (bench: every dispatch
    repeated), reusing everything before phase 2: fusion plan, executable
    sources, strategies, and the strategies withdrawn the first time.
    `result` must come from a compile whose work directory still exists
    (a dump_dir)."""
    return rerun(result, workdir, phase2_flags).vmfb


def rerun(
    result: CompileResult,
    workdir: Path,
    phase2_flags: tuple[str, ...],
    choices: list[Choice] | None = None,
) -> CompileResult:
    """`recompile`, as a CompileResult; with `choices`, those strategies and
    parameters instead of the first compile's (`tilefuse tune`: one
    dispatch's candidate), which runs phase 2 again on SPIR-V too."""
    c = result.compilation
    if c is None or not c.sources.exists():
        raise TilefuseError("recompile needs a compile kept in a dump directory")
    workdir.mkdir(parents=True, exist_ok=True)
    again = replace(
        c,
        workdir=workdir,
        options=replace(c.options, phase2_flags=tuple(phase2_flags)),
        choices=list(c.choices if choices is None else choices),
        notes=[],
        stage_log=list(c.stage_log),
        failures=dict(c.failures),
    )
    # SPIR-V's phase 2 made only the kernels: phase 3 compiles them again,
    # unless the strategies changed.
    same_kernels = choices is None and c.kernels is not None
    with registered(*c.options.user_strategies):
        return run_stages(again, "phase3" if same_kernels else "phase2")
