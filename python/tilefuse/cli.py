"""`tilefuse` command line: compile, run, explain, dispatches, try, bench, tune, flags.

Errors print as one line (`tilefuse: error: <location>: <message>`) and exit
with status 1; output files are written only when everything succeeded.
"""

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from .errors import TilefuseError
from .targets import target_names
from .toolchain import DEFAULT_PHASE_TIMEOUT_S


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _compile(args):
    """compile_program with the options compile and explain share."""
    from .driver import compile_program

    return compile_program(
        args.input,
        args.target,
        dump_dir=args.dump_dir,
        fusion=not args.no_fusion,
        strict=args.strict,
        timeout_s=args.phase_timeout,
        tuning=args.tuning,
        strategies_dir=args.strategies,
    )


def cmd_compile(args) -> None:
    result = _compile(args)
    _fusion_views(args, result)
    _write_atomically(Path(args.output), result.vmfb)
    for note in result.notes:
        print(note, file=sys.stderr)
    for report in result.reports:
        print(report.line(), file=sys.stderr)
    print(f"wrote {args.output} ({len(result.vmfb)} bytes, target {args.target})", file=sys.stderr)


def cmd_explain(args) -> None:
    result = _compile(args)
    _fusion_views(args, result)
    for note in result.notes:
        print(note)
    for line in result.fusion.splits if result.fusion else []:
        print(f"note: split: {line}")
    for line in result.log:
        print(f"note: {line}")
    for report in result.reports:
        print(report.line())
    applied = sum(r.status == "applied" for r in result.reports)
    failed = sum(r.status == "failed" for r in result.reports)
    print(
        f"{len(result.reports)} dispatches, {applied} with a tilefuse strategy, "
        f"{len(result.reports) - applied} on IREE's default codegen"
        + (f" ({failed} after their strategy failed)" if failed else "")
    )


def cmd_dispatches(args) -> None:
    """List the dispatches (explain's lines, numbered), or write one of them
    as a standalone module (--extract)."""
    from .authoring.extract import extract_dispatch, pick_dispatch

    if args.extract is None and args.output:
        raise TilefuseError("-o needs --extract N (which dispatch to write)")
    if args.extract is not None and not args.output:
        raise TilefuseError("--extract needs -o FILE (where to write the dispatch)")
    with tempfile.TemporaryDirectory(prefix="tilefuse-dispatches-") as tmp:
        dump = args.dump_dir
        args.dump_dir = dump or tmp  # the executable sources must outlive the compile
        result = _compile(args)
        args.dump_dir = dump
        if args.extract is None:
            for i, report in enumerate(result.reports):
                print(f"{i}: {report.line()}")
            return
        index = pick_dispatch([r.name for r in result.reports], args.extract, args.input)
        report = result.reports[index]
        header = (
            f"// Dispatch {index} of {args.input} (target {args.target}): {report.name}\n"
            f"// {report.kind} {report.shapes}; written by `tilefuse dispatches --extract`.\n"
            "// Arguments: the tensors the dispatch loads; results: the tensors it stores.\n"
        )
        extracted = extract_dispatch(result.sources.read_text(), report.name, header)
    _write_atomically(Path(args.output), extracted.text.encode())
    print(
        f"wrote {args.output}: dispatch {index} {report.name}, "
        f"({', '.join(extracted.inputs)}) -> ({', '.join(extracted.results)})",
        file=sys.stderr,
    )


def cmd_try(args) -> None:
    """A user's transform script on dispatches of a model (authoring/try_script.py)."""
    from .authoring.try_script import step_text, summary, try_script, write_steps

    if args.print_after is not None and args.print_after_all:
        raise TilefuseError("give --print-after N or --print-after-all DIR, not both")

    def show_steps(script, applied) -> None:
        if args.print_after is not None:
            print(step_text(script, applied, args.print_after))
        if args.print_after_all:
            folder = Path(args.print_after_all)
            if args.dispatch is None:  # possibly several dispatches: one folder each
                folder = folder / applied.dispatch
            written = write_steps(script, applied, folder)
            print(f"wrote {len(written)} files to {folder}", file=sys.stderr)

    result = try_script(
        args.script,
        args.model,
        dispatch=args.dispatch,
        target=args.target,
        workdir=Path(args.work_dir) if args.work_dir else None,
        repeats=args.repeats,
        strategies_dir=args.strategies,
        progress=lambda line: print(f"try: {line}", file=sys.stderr),
        show_steps=show_steps,
    )
    for line in summary(result):
        print(line)


def _fusion_views(args, result) -> None:
    """--dump-fusion (ByteIR-style outlined functions) and explain --fusion
    (groups, and a Graphviz picture of them)."""
    from .fusion import dump
    from .strategies import catalogue

    if args.no_fusion and (args.dump_fusion or getattr(args, "fusion", False)):
        raise TilefuseError("--dump-fusion and --fusion need fusion (drop --no-fusion)")
    if args.dump_fusion:
        text = dump.outlined_functions(result.program.text, result.target, catalogue())
        _write_atomically(Path(args.dump_fusion), text.encode())
    if getattr(args, "fusion", False) and result.fusion is None:
        print("fusion: none (the fusion groups were dropped, see the FALLBACK note)")
    elif getattr(args, "fusion", False):
        for line in dump.describe(result.fusion):
            print(line)
        for line in result.fusion.log:
            print(f"  note: {line}")
        stem = Path(args.graph) if args.graph else None
        if stem is None:
            # The working directory, never the input's (often a source tree).
            folder = Path(args.dump_dir) if args.dump_dir else Path.cwd()
            stem = folder / f"{Path(args.input).stem}.fusion"
        written = dump.render(result.fusion, stem.with_suffix(""))
        print(f"wrote {', '.join(str(p) for p in written)}")


def parse_input(text: str) -> np.ndarray:
    """A .npy file, or an IREE-style literal such as `2x3xf32=1 2 3 4 5 6`."""
    from .runtime import DTYPES

    text = text.removeprefix("@")
    if text.endswith(".npy"):
        if not Path(text).is_file():
            raise TilefuseError(f"no such file: {text}")
        return np.load(text)
    spec, sep, values = text.partition("=")
    *dims, dtype = spec.split("x")
    if dtype not in DTYPES or not all(d.isdigit() for d in dims):
        raise TilefuseError(
            f"cannot read input '{text}': expected e.g. 2x3xf32=1 2 3 4 5 6 or a .npy"
        )
    shape = tuple(int(d) for d in dims)
    count = int(np.prod(shape)) if shape else 1
    items = values.replace(",", " ").split() if sep else ["0"]
    try:
        flat = np.array([float(v) for v in items], dtype=np.float64)
    except ValueError:
        raise TilefuseError(f"cannot read input '{text}': values must be numbers") from None
    if flat.size == 1:
        flat = np.full(count, flat[0])
    if flat.size != count:
        raise TilefuseError(f"input '{spec}' needs {count} values, got {flat.size}")
    return flat.astype(DTYPES[dtype]).reshape(shape)


def cmd_run(args) -> None:
    from .runtime import load

    module = load(args.module, args.device)
    function = module[args.function]
    inputs = [parse_input(t) for t in args.input]
    results = function(*inputs)
    results = results if isinstance(results, tuple) else (results,)
    np.set_printoptions(threshold=20, edgeitems=3)
    for i, r in enumerate(results):
        print(f"result[{i}]: {'x'.join(map(str, r.shape))}x{r.dtype}")
        print(r)
        if args.save:
            np.save(f"{args.save}{i}.npy", r)


def cmd_flags(args) -> None:
    from .strategies.flags import exact_flag_bundle, flag_bundle

    if args.for_model is None:
        if args.library_out or args.strategies:
            raise TilefuseError("--library-out and --strategies go with --for MODEL")
        folder = Path(args.library_dir) if args.library_dir else None
        print(" ".join(flag_bundle(args.target, folder)))
        return
    out = Path(args.library_out) if args.library_out else None
    if out is None and args.library_dir:
        out = Path(args.library_dir) / f"library-{args.target}-{Path(args.for_model).stem}.mlir"
    flags, lib, path = exact_flag_bundle(args.for_model, args.target, out, args.strategies)
    for name in lib.dispatches:
        if name in lib.strategies:
            line = f"{name}: {lib.strategies[name]}"
            if name in lib.differs:
                line += f" (differs from tilefuse compile: {lib.differs[name]})"
        elif name in lib.left_out:
            line = f"{name}: IREE's codegen (left out: {lib.left_out[name]})"
        else:
            line = f"{name}: IREE's codegen (no tilefuse strategy)"
        print(f"flags: {line}", file=sys.stderr)
    print(
        f"flags: wrote {path}: {len(lib.strategies)} of {len(lib.dispatches)} dispatches "
        "with a tilefuse strategy",
        file=sys.stderr,
    )
    print(" ".join(flags))


def cmd_prepare(args) -> None:
    from .strategies.flags import prepare

    text, notes = prepare(args.input, args.target, args.strategies, args.phase_timeout)
    for note in notes:
        print(note, file=sys.stderr)
    _write_atomically(Path(args.output), text.encode())
    print(
        f"wrote {args.output}: the fused program for {args.target}; compile it with "
        f"`iree-compile {args.output} $(tilefuse flags --target {args.target} "
        f"--for {args.output})`",
        file=sys.stderr,
    )


class ProgressBar:
    """One line on a terminal (redrawn), one line per step otherwise (logs, CI)."""

    def __init__(self, stream=sys.stderr, width: int = 24):
        self.stream, self.width = stream, width
        self.tty = stream.isatty()

    def __call__(self, done: int, total: int, model: str, step: str) -> None:
        filled = self.width * done // max(total, 1)
        bar = "#" * filled + "." * (self.width - filled)
        text = f"[{bar}] {done}/{total} {model}: {step}" if model else f"[{bar}] {step}"
        if self.tty:
            self.stream.write("\r\033[K" + text + ("\n" if step == "done" else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def cmd_bench(args) -> None:
    import json

    from .bench.gpus import load_gpu
    from .bench.report import baseline_lines, kernel_table, summary_table, to_json, write_report
    from .bench.run import BenchOptions, bench

    if args.run_bundle:
        from .bench import gpu

        bundle = Path(args.run_bundle)
        run = gpu.run_and_report(
            bundle, args.device, args.repeats, args.warmup, **gpu.run_options(args)
        )
        if gpu.failed(run):
            raise TilefuseError(f"numerics failed for {', '.join(gpu.failed(run))}")
        return
    if args.strategies:
        from .strategies.user import ENV, load_directory

        load_directory(args.strategies)  # a bad directory fails before any compile
        os.environ[ENV] = args.strategies  # every compile of this process reads it
    load_gpu(args.gpu)  # an unknown GPU fails before minutes of compiling
    options = BenchOptions(
        target=args.target,
        small=args.small,
        repeats=args.repeats,
        warmup=args.warmup,
        dispatch_repeat=args.dispatch_repeat,
        fusion=not args.no_fusion,
        device=args.device,
        workdir=Path(args.work_dir) if args.work_dir else None,
        run=not args.no_run,
        keep_going=args.keep_going,
        compile_timings=args.compile_timings,
    )
    if args.bundle:
        from .bench.bundle import write_bundle

        out = write_bundle(args.models, options, Path(args.bundle), progress=ProgressBar())
        print(
            f"wrote {out}: run it where the device is with "
            f"`cd {out} && python -m tilefuse_run.bench.gpu .`",
            file=sys.stderr,
        )
        return
    skipped: list[tuple[str, str]] = []
    results = bench(args.models, options, progress=ProgressBar(), skipped=skipped)
    for name, why in skipped:
        print(f"skipped {name}: {why}", file=sys.stderr)
    print(summary_table(results, args.gpu))
    for line in baseline_lines(results):
        print(line)
    kernels = kernel_table(results)
    if kernels:
        print()
        print(kernels)
    if args.json:
        text = json.dumps(to_json(results, args.gpu), indent=2)
        _write_atomically(Path(args.json), text.encode())
    if args.report:
        path = write_report(results, args.gpu, Path(args.report), skipped)
        print(f"wrote {path}", file=sys.stderr)
    failed = [r.name for r in results if r.numerics.startswith("FAIL")]
    if failed:
        raise TilefuseError(f"numerics failed for {', '.join(failed)}")


def _fusion_options(p) -> None:
    p.add_argument(
        "--no-fusion", action="store_true", help="let IREE form dispatches (no fusion planner)"
    )
    p.add_argument("--dump-fusion", help="write each fusion group as an outlined func here")
    p.add_argument(
        "--strict",
        action="store_true",
        help="a strategy or fusion failure is an error (default: IREE's codegen takes "
        "over, reported as FALLBACK)",
    )
    p.add_argument(
        "--phase-timeout",
        type=float,
        default=DEFAULT_PHASE_TIMEOUT_S,
        help="seconds each iree-compile run with tilefuse's regions or strategies may take "
        "before they fall back (default %(default)s; IREE's own runs are not bounded)",
    )
    _strategies_option(p)
    p.add_argument(
        "--tuning",
        metavar="FILE",
        help="tuned-choice cache to read (`tilefuse tune` writes it; default "
        "$TILEFUSE_TUNING, else ~/.cache/tilefuse/tuning.json)",
    )


def _strategies_option(p) -> None:
    p.add_argument(
        "--strategies",
        metavar="DIR",
        help="user strategies (NAME.mlir + NAME.toml each), tried before the built-ins "
        "(default $TILEFUSE_STRATEGIES; docs/authoring.md)",
    )


def cmd_tune(args) -> None:
    from .bench.tune import record_bundle_results, summary_lines, tune, write_tune_bundle
    from .strategies.tuning import default_path

    cache = Path(args.cache).expanduser() if args.cache else default_path()

    def progress(line: str) -> None:
        print(line, file=sys.stderr)

    if args.record:
        if args.model or args.bundle:
            raise TilefuseError("--record takes a results file alone (no MODEL, no --bundle)")
        found = record_bundle_results(Path(args.record), cache)
    elif not args.model:
        raise TilefuseError("tune needs a MODEL (or --record RESULTS)")
    elif args.bundle:
        out = write_tune_bundle(
            args.model, args.target, Path(args.bundle), device=args.device,
            max_candidates=args.candidates, progress=progress,
        )  # fmt: skip
        print(f"wrote {out}")
        print("on the device, in it: python -m tilefuse_run.bench.tune_runner . [--device D]")
        print(f"then here: tilefuse tune --record {out}/tune_results.json")
        return
    else:
        found = tune(
            args.model, args.target, device=args.device, cache_path=cache,
            max_candidates=args.candidates, repeats=args.repeats, progress=progress,
        )  # fmt: skip
    print("\n".join(summary_lines(found, cache)))


def build_parser() -> argparse.ArgumentParser:
    targets = ", ".join(target_names())
    p = argparse.ArgumentParser(prog="tilefuse", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("compile", help="compile StableHLO to an IREE module (.vmfb)")
    c.add_argument("input", help="StableHLO .mlir text or bytecode")
    c.add_argument("-o", "--output", required=True, help="the .vmfb to write")
    c.add_argument("--target", default="vulkan", help=f"one of: {targets}")
    c.add_argument("--dump-dir", help="keep executable sources, dispatch table, logs here")
    _fusion_options(c)
    c.set_defaults(func=cmd_compile)

    e = sub.add_parser("explain", help="one line per dispatch: kind, shapes, strategy, outcome")
    e.add_argument("input")
    e.add_argument("--target", default="vulkan", help=f"one of: {targets}")
    e.add_argument("--dump-dir")
    _fusion_options(e)
    e.add_argument("--fusion", action="store_true", help="list fusion groups, draw them (SVG+PNG)")
    e.add_argument(
        "--graph",
        help="path stem of the fusion picture (default: --dump-dir, else the working directory)",
    )
    e.set_defaults(func=cmd_explain)

    d = sub.add_parser(
        "dispatches",
        help="list the dispatches (index, name, kind, shapes, strategy), or write one "
        "as a standalone module (--extract)",
    )
    d.add_argument("input", help="StableHLO .mlir text or bytecode")
    d.add_argument("--target", default="vulkan", help=f"one of: {targets}")
    d.add_argument("--dump-dir")
    d.add_argument(
        "--extract",
        metavar="N",
        help="write dispatch N (its index in the list, or its name) as a module whose "
        "@main takes the tensors the dispatch loads and returns those it stores; "
        "`tilefuse compile`, `tilefuse try` and plain iree-compile take it",
    )
    d.add_argument("-o", "--output", help="the file --extract writes")
    _fusion_options(d)
    d.set_defaults(func=cmd_dispatches)

    y = sub.add_parser(
        "try",
        help="apply your transform script to dispatches of a model: checked kernel, "
        "numerics against the CPU, lavapipe time against the built-in strategy",
        description="Apply SCRIPT (its @__transform_main, or its only public named "
        "sequence, receives the dispatch's func.func) to a dispatch of MODEL instead "
        "of tilefuse's strategy (the other dispatches keep theirs; without --dispatch, "
        "every dispatch it applies to). The kernel must pass the checks every kernel "
        "passes (a script that leaves the dispatch unchanged or undistributed is "
        "refused); the model runs on lavapipe against the CPU reference, and is timed "
        "against the built-in strategies. Errors point into SCRIPT. See docs/authoring.md.",
    )
    y.add_argument("script", help="a transform-dialect script (.mlir)")
    y.add_argument("model", help="StableHLO .mlir text or bytecode (or an extracted dispatch)")
    y.add_argument("--dispatch", metavar="NAME|N", help="only this dispatch (name or index)")
    y.add_argument(
        "--target",
        default="vulkan",
        help="a GPU target (numerics and time: vulkan only; cuda: registers and spills)",
    )
    y.add_argument(
        "--print-after",
        type=int,
        metavar="N",
        help="print the dispatch's function after the Nth top-level op of the script",
    )
    y.add_argument(
        "--print-after-all",
        metavar="DIR",
        help="write the function after every top-level op to DIR (00-input.mlir, 01-...)",
    )
    y.add_argument("--repeats", type=int, default=7, help="timed calls per module (median)")
    y.add_argument("--work-dir", help="keep every intermediate file here")
    _strategies_option(y)
    y.set_defaults(func=cmd_try)

    r = sub.add_parser("run", help="run a function of a compiled module")
    r.add_argument("module", help="a .vmfb from `tilefuse compile`")
    r.add_argument("--function", default="main")
    r.add_argument("--device", default="vulkan", help="vulkan, cuda or local-task")
    r.add_argument(
        "--input",
        action="append",
        default=[],
        help="a .npy file or a literal like 2x3xf32=1 2 3 4 5 6 (repeat per argument)",
    )
    r.add_argument("--save", help="also save result i to <SAVE><i>.npy")
    r.set_defaults(func=cmd_run)

    b = sub.add_parser(
        "bench",
        help="tilefuse vs plain iree-compile: dispatches, bytes, modeled time, ptxas, wall time",
    )
    b.add_argument(
        "models", nargs="*", help="files, directories or sample names (default: samples/)"
    )
    b.add_argument("--target", default="vulkan", help=f"one of: {targets}")
    b.add_argument("--baseline", default="iree", choices=["iree"], help="what to compare against")
    b.add_argument("--gpu", default="H100-SXM", help="GPU of the modeled time in the table")
    b.add_argument("--json", help="write every figure as JSON here")
    b.add_argument("--report", help="write a markdown report and a PNG chart into this directory")
    b.add_argument("--small", action="store_true", help="use samples/small/ variants where present")
    b.add_argument("--repeats", type=int, default=9, help="timed calls per compiler (median)")
    b.add_argument("--warmup", type=int, default=2, help="untimed calls per compiler first")
    b.add_argument(
        "--dispatch-repeat",
        type=int,
        default=200,
        help="at most N runs of every dispatch per timed call, as many as move about "
        "1 GiB (amortizes lavapipe's ~4 ms wait granularity)",
    )
    b.add_argument(
        "--compile-timings",
        type=int,
        default=2,
        help="compiles per model and compiler; the fastest is its compile time",
    )
    b.add_argument("--no-fusion", action="store_true", help="tilefuse without its fusion planner")
    b.add_argument(
        "--no-run",
        action="store_true",
        help="compile and count only (dispatches, bytes, bytes/floor): no device runs",
    )
    b.add_argument(
        "--keep-going",
        action="store_true",
        help="skip (and list) a model tilefuse cannot compile instead of stopping (one that "
        "plain iree-compile rejects is benched for tilefuse alone either way)",
    )
    b.add_argument("--device", help="runtime device (default: the target's driver)")
    b.add_argument("--work-dir", help="keep every intermediate file here")
    _strategies_option(b)
    b.add_argument(
        "--bundle",
        metavar="DIR",
        help="compile only, and write DIR: both compilers' modules and a runner for a "
        "machine with the device and only numpy and iree.runtime (docs/gpu-results.md)",
    )
    b.add_argument(
        "--run",
        dest="run_bundle",
        metavar="DIR",
        help="run a --bundle directory on this machine's device and write DIR/results.json "
        "(with the options below, as `python -m tilefuse_run.bench.gpu DIR` takes them)",
    )
    from .bench.gpu import add_run_options

    add_run_options(b.add_argument_group("bundle runs (--run)"))
    b.set_defaults(func=cmd_bench)

    t = sub.add_parser(
        "tune",
        help="time the tilings of each tunable dispatch on a device and record the fastest",
    )
    t.add_argument("model", nargs="?", help="StableHLO .mlir text or bytecode")
    t.add_argument("--target", default="vulkan", help=f"one of: {targets}")
    t.add_argument("--device", help="runtime device (default: the target's driver)")
    t.add_argument(
        "--bundle",
        metavar="DIR",
        help="compile the candidates only, into DIR, for a machine with the device but "
        "not the compiler (its runner writes DIR/tune_results.json)",
    )
    t.add_argument(
        "--record",
        metavar="RESULTS",
        help="write the cache from a tune bundle's results (the file or its bundle directory)",
    )
    t.add_argument(
        "--cache",
        help="the tuning cache to update (default $TILEFUSE_TUNING, else "
        "~/.cache/tilefuse/tuning.json; compile reads the same)",
    )
    t.add_argument("--candidates", type=int, default=6, help="tilings timed per dispatch, at most")
    t.add_argument("--repeats", type=int, default=7, help="timed calls per candidate (median)")
    t.set_defaults(func=cmd_tune)

    f = sub.add_parser("flags", help="flags that make a plain iree-compile use tilefuse's library")
    f.add_argument("--target", default="vulkan", help=f"one of: {targets}")
    f.add_argument("--library-dir", help="where to write the library (default: a cache dir)")
    f.add_argument(
        "--for",
        dest="for_model",
        metavar="MODEL",
        help="a library with the exact strategy and parameters of each dispatch of MODEL "
        "(give it what `tilefuse prepare` wrote); lists each dispatch's strategy on stderr",
    )
    f.add_argument("--library-out", metavar="FILE", help="with --for: write the library here")
    _strategies_option(f)
    f.set_defaults(func=cmd_flags)

    pr = sub.add_parser(
        "prepare",
        help="write the fused, rewritten StableHLO tilefuse compiles (for a plain "
        "iree-compile with `flags --for`)",
    )
    pr.add_argument("input", help="StableHLO .mlir text or bytecode")
    pr.add_argument("-o", "--output", required=True, help="the .mlir to write")
    pr.add_argument("--target", default="vulkan", help=f"one of: {targets}")
    pr.add_argument(
        "--phase-timeout",
        type=float,
        default=DEFAULT_PHASE_TIMEOUT_S,
        help="seconds each iree-compile run with tilefuse's regions or strategies may take "
        "before they fall back (default %(default)s; IREE's own runs are not bounded)",
    )
    _strategies_option(pr)
    pr.set_defaults(func=cmd_prepare)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except TilefuseError as e:
        print(f"tilefuse: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
