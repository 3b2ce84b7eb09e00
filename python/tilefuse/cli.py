"""`tilefuse` command line: compile, run, explain, flags.

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


def cmd_compile(args) -> None:
    from .driver import compile_program

    result = compile_program(args.input, args.target, dump_dir=args.dump_dir)
    _write_atomically(Path(args.output), result.vmfb)
    for report in result.reports:
        print(report.line(), file=sys.stderr)
    print(f"wrote {args.output} ({len(result.vmfb)} bytes, target {args.target})", file=sys.stderr)


def cmd_explain(args) -> None:
    from .driver import compile_program

    result = compile_program(args.input, args.target, dump_dir=args.dump_dir)
    for report in result.reports:
        print(report.line())
    applied = sum(r.status == "applied" for r in result.reports)
    print(
        f"{len(result.reports)} dispatches, {applied} with a tilefuse strategy, "
        f"{len(result.reports) - applied} on IREE's default codegen"
    )


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
    from .flags import flag_bundle

    print(" ".join(flag_bundle(args.target, Path(args.library_dir) if args.library_dir else None)))


def build_parser() -> argparse.ArgumentParser:
    targets = ", ".join(target_names())
    p = argparse.ArgumentParser(prog="tilefuse", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("compile", help="compile StableHLO to an IREE module (.vmfb)")
    c.add_argument("input", help="StableHLO .mlir text or bytecode")
    c.add_argument("-o", "--output", required=True, help="the .vmfb to write")
    c.add_argument("--target", default="vulkan", help=f"one of: {targets}")
    c.add_argument("--dump-dir", help="keep executable sources, dispatch table, logs here")
    c.set_defaults(func=cmd_compile)

    e = sub.add_parser("explain", help="one line per dispatch: kind, shapes, strategy, outcome")
    e.add_argument("input")
    e.add_argument("--target", default="vulkan", help=f"one of: {targets}")
    e.add_argument("--dump-dir")
    e.set_defaults(func=cmd_explain)

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

    f = sub.add_parser("flags", help="flags that make a plain iree-compile use tilefuse's library")
    f.add_argument("--target", default="vulkan", help=f"one of: {targets}")
    f.add_argument("--library-dir", help="where to write the library (default: a cache dir)")
    f.set_defaults(func=cmd_flags)
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
