"""The compile pipeline, top to bottom.

    load -> phase 1 (executable sources) -> read dispatches -> choose
    strategies -> write the transform library -> phase 2 (vmfb) -> verify
    [-> SPIR-V only: splice kernels with narrow accesses aliased -> phase 3]

Every stage is one small function; `compile_program` reads like the diagram
in DESIGN.md.
"""

import tempfile
from dataclasses import dataclass
from pathlib import Path

from iree.compiler import ir

from . import fusion as fusion_pkg
from . import ptx
from .aliases import rewrite_kernel, splice
from .collapse import collapse_column_reductions
from .dispatches import Dispatch, read_dispatches
from .errors import TilefuseError
from .frontend import Program, load_program
from .library import build_library
from .strategies import STRATEGIES, Choice, choose
from .targets import Target, load_target
from .toolchain import iree_compile
from .verify import DispatchReport, printed_kernels, verify

DEVICE_GLOBAL = "__tilefuse_device"


@dataclass
class CompileResult:
    vmfb: bytes
    target: Target
    program: Program
    reports: list[DispatchReport]
    library: str
    fusion: "fusion_pkg.FusionPlan | None" = None  # None: IREE's own dispatch formation


def phase1_input(program: Program, target: Target, workdir: Path) -> Path:
    """The file phase 1 reads: the user's file, or a copy carrying a device target."""
    if target.device_target is None:
        if program.path is not None:
            return program.path
        path = workdir / "input.mlir"
        path.write_text(program.text)
        return path
    # Targets IREE does not know (sm_90) travel inside the module.
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
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


def outline_stage(program: Program, target: Target, workdir: Path):
    """Plan fusion groups and wrap each in a flow.dispatch.region (fusion.mlir)."""
    plan = fusion_pkg.fuse(program.text, target)
    (workdir / "fusion.mlir").write_text(plan.text)
    outlined = Program(plan.text, program.name, None, program.functions)
    return outlined, plan


def phase1_executable_sources(
    source: Path, target: Target, workdir: Path, extra_flags: tuple[str, ...] = ()
) -> Path:
    out = workdir / "executable_sources.mlir"
    iree_compile(
        [
            str(source),
            *target.compile_flags,
            *extra_flags,
            "--compile-to=executable-sources",
            "-o",
            str(out),
        ],
        "phase 1 (StableHLO to executable sources)",
    )
    return out


def collapse_stage(sources: Path) -> None:
    """Merge adjacent reduced / kept loops of column reductions (collapse.py)."""
    text = sources.read_text()
    collapsed = collapse_column_reductions(text)
    if collapsed is not text:
        sources.write_text(collapsed)


def choose_strategies(dispatches: list[Dispatch], target: Target) -> list[Choice]:
    choices = [choose(d, target) for d in dispatches]
    for c in choices:
        # IREE 3.13's GPU codegen fails on a pad inside a dispatch (a
        # memref.store outside any distributed context); the planner lets a
        # pad in only where the loop kernel reads through it, so this is a
        # planner bug. Say so instead of failing in phase 2.
        if target.is_gpu and c.strategy is None and "tensor.pad" in c.dispatch.ops:
            raise TilefuseError(
                f"dispatch {c.dispatch.name} holds a pad that no tilefuse kernel reads "
                f"through ({c.reason}), and IREE cannot compile it; compile with "
                "--no-fusion to work around, and please report it",
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
    ALIAS_NARROW_ACCESSES are spliced (their printout compiles as is)."""
    if target.backend != "spirv":
        return None
    kernels = printed_kernels(log)
    spliced = {}
    for c in choices:
        module = dict(STRATEGIES).get(c.strategy)
        if not getattr(module, "ALIAS_NARROW_ACCESSES", False):
            continue
        text, moved = rewrite_kernel(kernels[c.dispatch.name])
        if moved:
            spliced[c.dispatch.name] = (text, c.params["grid"])
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
    extra_flags: tuple[str, ...] = (),
    what: str = "phase 2 (executable sources to GPU code)",
) -> tuple[bytes, str, list[Path]]:
    out = workdir / "module.vmfb"
    binaries = workdir / "binaries"
    args = [
        str(sources),
        *target.compile_flags,
        *extra_flags,
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
    run = iree_compile(args, what)
    return out.read_bytes(), run.stdout + run.stderr, sorted(binaries.glob("*.ptx"))


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
) -> CompileResult:
    """`phase1_flags`/`phase2_flags` go to one phase only (bench asks for
    scheduling statistics and repeated dispatches). `fusion=False` leaves
    dispatch formation to IREE."""
    target = load_target(target) if isinstance(target, str) else target
    program = source if isinstance(source, Program) else load_program(source)
    with tempfile.TemporaryDirectory(prefix="tilefuse-") as tmp:
        workdir = Path(dump_dir) if dump_dir else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        phase1_program, plan = (
            outline_stage(program, target, workdir) if fusion else (program, None)
        )
        # Locations tie each dispatch to its fusion group (fusion.attach_groups).
        debuginfo = ("--mlir-print-debuginfo",) if plan is not None else ()
        sources = phase1_executable_sources(
            phase1_input(phase1_program, target, workdir),
            target,
            workdir,
            tuple(phase1_flags) + debuginfo,
        )
        if target.is_gpu:
            collapse_stage(sources)
        dispatches = read_dispatches(sources.read_text())
        if plan is not None:
            fusion_pkg.attach_groups(plan, dispatches)
        choices = choose_strategies(dispatches, target)
        library = write_library(choices, workdir)
        use_library = any(c.strategy for c in choices)
        vmfb, log, ptx_files = phase2_executable(
            sources, library, target, workdir, use_library, phase2_flags
        )
        (workdir / "phase2.log").write_text(log)
        reports = verify(choices, log)
        aliased = alias_stage(choices, log, sources, target, workdir)
        if aliased is not None:
            spliced_sources, names = aliased
            rest = [c for c in choices if c.dispatch.name not in names]
            library3 = write_library(rest, workdir, "dispatch_table_phase3")
            vmfb, log3, ptx_files = phase2_executable(
                spliced_sources,
                library3,
                target,
                workdir,
                any(c.strategy for c in rest),
                phase2_flags,
                "phase 3 (kernels with aliased bindings to GPU code)",
            )
            (workdir / "phase3.log").write_text(log3)
            verify(rest, log3)
        if target.backend == "cuda":
            if not ptx_files:
                raise TilefuseError("phase 2 wrote no PTX to check")
            attach_ptxas(reports, ptx_files, target.ptxas_arch)
        return CompileResult(vmfb, target, program, reports, library.read_text(), plan)
