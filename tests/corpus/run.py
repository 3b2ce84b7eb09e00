"""Run the corpus: every program through plain iree-compile and through tilefuse
(the same Vulkan target), each on lavapipe, each output against JAX's.

    python tests/corpus/run.py [NAME ...]            # print the table
    python tests/corpus/run.py --write               # regenerate docs/corpus.md and
                                                     # the README's corpus summary
    python tests/corpus/run.py --write --from DIR    # the same from the outcomes the
                                                     # tests saved (TILEFUSE_CORPUS_OUT=DIR)

tests/test_corpus.py runs the same functions, one program per test.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

from corpus.load import entries, load, names

TARGET = "vulkan"
PHASE_TIMEOUT_S = 120
DOC = ROOT / "docs" / "corpus.md"
BASELINE = HERE / "iree_baseline.json"  # plain iree-compile's outcomes, for the tests
README = ROOT / "README.md"
BEGIN, END = "<!-- corpus summary: begin -->", "<!-- corpus summary: end -->"


@dataclass
class Outcome:
    compiler: str  # "iree" or "tilefuse"
    status: str  # "pass", "compile error", "run error", "wrong"
    detail: str = ""  # the error, or the worst output mismatch
    dispatches: int | None = None  # dispatches per call, from IREE's statistics
    strategies: list[str] = field(default_factory=list)  # tilefuse: one per dispatch
    notes: list[str] = field(default_factory=list)  # tilefuse: program-level fallbacks
    seconds: float = 0.0  # compile time

    @property
    def passed(self) -> bool:
        return self.status == "pass"


def _device():
    from tilefuse.runtime import open_device

    global _CONFIG
    if _CONFIG is None:
        _CONFIG = open_device(TARGET)
    return _CONFIG


_CONFIG = None


def compile_iree(mlir: Path, workdir: Path) -> tuple[bytes, int]:
    from tilefuse.targets import load_target
    from tilefuse.toolchain import iree_compile, scheduled_dispatches, statistics_flags

    target = load_target(TARGET)
    out, stats = workdir / "iree.vmfb", workdir / "iree-statistics.json"
    args = [str(mlir), *target.compile_flags, *statistics_flags(stats), "-o", str(out)]
    iree_compile(args, "iree-compile", PHASE_TIMEOUT_S)
    return out.read_bytes(), scheduled_dispatches(stats)


def compile_tilefuse(mlir: Path, workdir: Path):
    from tilefuse import compile_program

    result = compile_program(mlir, TARGET, timeout_s=PHASE_TIMEOUT_S, statistics=True)
    return result, result.scheduled_dispatches


def call(vmfb: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    from tilefuse.runtime import DTYPES, CompiledModule

    module = CompiledModule(vmfb, TARGET, config=_device())
    function = module["main"]
    args = []
    for arr, spec in zip(inputs, function.arg_specs):
        want = DTYPES.get(spec.dtype)
        # IREE demotes f64 to f32 by default (the function takes f32 then).
        if arr.dtype == np.float64 and want == np.float32:
            arr = arr.astype(np.float32)
        args.append(arr)
    results = function(*args)
    return list(results) if isinstance(results, tuple) else [results]


def mismatch(got: list[np.ndarray], want: list[np.ndarray], entry: dict) -> str | None:
    """None when every output matches JAX's within the manifest's tolerance."""
    if len(got) != len(want):
        return f"{len(got)} outputs, JAX has {len(want)}"
    for i, (g, w, spec) in enumerate(zip(got, want, entry["outputs"])):
        if g.shape != w.shape:
            return f"output {i}: shape {g.shape}, JAX {w.shape}"
        exact = w.dtype.kind in "biu"
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        atol, rtol = (0.0, 0.0) if exact else (spec["atol"], spec["rtol"])
        close = np.isclose(g64, w64, atol=atol, rtol=rtol, equal_nan=True)
        if not close.all():
            bad = np.argwhere(~close)[0]
            at = tuple(int(b) for b in bad)
            return (
                f"output {i}: {int((~close).sum())} of {close.size} elements off, "
                f"e.g. at {at}: {g64[at]!r} vs JAX {w64[at]!r} (atol {atol}, rtol {rtol})"
            )
    return None


def run(name: str, compiler: str) -> Outcome:
    from tilefuse.errors import TilefuseError

    mlir, inputs, outputs, entry = load(name)
    outcome = Outcome(compiler, "pass")
    with tempfile.TemporaryDirectory(prefix=f"corpus-{name}-") as tmp:
        start = time.perf_counter()
        try:
            if compiler == "iree":
                vmfb, outcome.dispatches = compile_iree(mlir, Path(tmp))
            else:
                result, outcome.dispatches = compile_tilefuse(mlir, Path(tmp))
                vmfb = result.vmfb
                outcome.notes = list(result.notes)
                outcome.strategies = [
                    r.strategy if r.status == "applied" else f"IREE ({r.status})"
                    for r in result.reports
                ]
        except TilefuseError as e:
            message = str(e).splitlines()[0].replace(f"{ROOT}/", "")
            outcome.status, outcome.detail = "compile error", message
            return outcome
        finally:
            outcome.seconds = time.perf_counter() - start
    try:
        got = call(vmfb, inputs)
    except (TilefuseError, RuntimeError, ValueError) as e:
        outcome.status, outcome.detail = "run error", str(e).splitlines()[0]
        return outcome
    wrong = mismatch(got, outputs, entry)
    if wrong:
        outcome.status, outcome.detail = "wrong", wrong
    return outcome


def baseline() -> dict[str, dict]:
    """Plain IREE's outcome per program, as the last --write recorded it."""
    return json.loads(BASELINE.read_text())


def save(folder: str, name: str, iree: Outcome, ours: Outcome) -> None:
    path = Path(folder) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([dataclasses.asdict(iree), dataclasses.asdict(ours)]))


def saved(folder: str) -> dict[str, tuple[Outcome, Outcome]]:
    results = {}
    for name in names():
        path = Path(folder) / f"{name}.json"
        if not path.is_file():
            raise SystemExit(f"no saved outcome for {name} in {folder}")
        iree, ours = (Outcome(**o) for o in json.loads(path.read_text()))
        results[name] = (iree, ours)
    return results


# ---- the generated tables ---------------------------------------------------


def _fusion_dropped(outcome: Outcome) -> bool:
    return any(n.startswith("FALLBACK: fusion groups dropped") for n in outcome.notes)


def _groups_withheld(outcome: Outcome) -> int:
    return sum(n.startswith("FALLBACK: fusion group ") for n in outcome.notes)


def _strategies(outcome: Outcome) -> str:
    counts = Counter(outcome.strategies)
    text = ", ".join(f"{n}x {s}" if n > 1 else s for s, n in sorted(counts.items()))
    if _fusion_dropped(outcome):
        text += " (fusion dropped)"
    if _groups_withheld(outcome):
        text += f" ({_groups_withheld(outcome)} groups left to IREE)"
    if any(n.startswith("FALLBACK: phase 3 failed") for n in outcome.notes):
        text += " (phase 3 failed)"
    if any(n.startswith("fusion plan not used") for n in outcome.notes):
        text += " (IREE's dispatches kept)"
    return text


def _cell(outcome: Outcome) -> str:
    if outcome.passed:
        return "pass"
    detail = outcome.detail.replace("|", "/")
    return f"{outcome.status}: {detail[:120]}"


def table(results: dict[str, tuple[Outcome, Outcome]]) -> list[str]:
    lines = [
        (
            "| program | category | IREE | tilefuse | dispatches IREE / tilefuse "
            "| tilefuse strategies |"
        ),
        "|---|---|---|---|---|---|",
    ]
    for name, (iree, ours) in results.items():
        category = entries()[name]["category"]
        lines.append(
            f"| {name} | {category} | {_cell(iree)} | {_cell(ours)} "
            f"| {iree.dispatches or '-'} / {ours.dispatches or '-'} | {_strategies(ours)} |"
        )
    return lines


def summary(results: dict[str, tuple[Outcome, Outcome]]) -> list[str]:
    rows: dict[str, list[int]] = {}
    for name, (iree, ours) in results.items():
        row = rows.setdefault(entries()[name]["category"], [0] * 11)
        row[0] += 1
        row[1] += iree.passed
        row[2] += ours.passed
        row[3] += iree.passed and not ours.passed
        row[4] += sum(s == "IREE (failed)" for s in ours.strategies)
        row[5] += _groups_withheld(ours)
        row[6] += _fusion_dropped(ours)
        # Dispatches, over the programs both compilers compile.
        if iree.dispatches and ours.dispatches:
            row[7] += iree.dispatches
            row[8] += ours.dispatches
            row[9] += ours.dispatches > iree.dispatches
            row[10] += ours.dispatches < iree.dispatches
    total = [sum(col) for col in zip(*rows.values())]
    lines = [
        (
            "| category | programs | IREE passes | tilefuse passes | IREE-only passes "
            "| strategies that failed (fell back) | groups left to IREE "
            "| programs with fusion dropped | dispatches IREE | dispatches tilefuse "
            "| programs with more dispatches than IREE | with fewer |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for category, row in sorted(rows.items()) + [("**all**", total)]:
        lines.append(f"| {category} | " + " | ".join(map(str, row)) + " |")
    return lines


def write(results: dict[str, tuple[Outcome, Outcome]]) -> None:
    from tilefuse.targets import load_target

    flags = " ".join(load_target(TARGET).compile_flags)
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(
        "# The JAX corpus on Vulkan (lavapipe): tilefuse against plain iree-compile\n\n"
        "Generated by `python tests/corpus/run.py --write`; do not edit. Each program "
        "(`tests/corpus/programs/`, exported by `tests/corpus/generate.py`) is compiled by "
        f"plain `iree-compile {flags}` and by `tilefuse compile --target {TARGET}`, run on "
        "Mesa lavapipe, and every output is compared with JAX's CPU output within the "
        "manifest's tolerance. Dispatches are per call, from IREE's scheduling "
        "statistics. A strategy that failed is listed as `IREE (failed)`: IREE's codegen "
        "compiled that dispatch (see `tilefuse explain` for the error).\n\n"
        + "\n".join(summary(results))
        + "\n\n"
        + "\n".join(table(results))
        + "\n"
    )
    BASELINE.write_text(
        json.dumps({n: dataclasses.asdict(i) for n, (i, _) in results.items()}, indent=1) + "\n"
    )
    text = README.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    README.write_text(head + BEGIN + "\n" + "\n".join(summary(results)) + "\n" + END + tail)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="programs (default: all)")
    parser.add_argument("--write", action="store_true", help="regenerate docs/corpus.md")
    parser.add_argument("--from", dest="source", help="outcomes saved by the tests, not a run")
    args = parser.parse_args()
    results = saved(args.source) if args.source else {}
    for name in [] if args.source else args.names or names():
        results[name] = (run(name, "iree"), run(name, "tilefuse"))
        iree, ours = results[name]
        print(f"{name:40s} iree={_cell(iree)[:60]:60s} tilefuse={_cell(ours)[:80]}", flush=True)
    print("\n".join(summary(results)))
    if args.write:
        if args.names:
            raise SystemExit("--write needs the whole corpus (no names)")
        write(results)
        print(f"wrote {DOC.relative_to(ROOT)}, {BASELINE.name} and the summary in README.md")
    worse = [n for n, (i, t) in results.items() if i.passed and not t.passed]
    wrong = [n for n, (_, t) in results.items() if t.status == "wrong"]
    if worse or wrong:
        print(f"worse than IREE: {worse}; wrong results: {wrong}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
