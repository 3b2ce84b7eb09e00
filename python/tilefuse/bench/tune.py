"""`tilefuse tune`: time the tilings a strategy would take, keep the fastest.

For each dispatch of a model whose strategy is tunable (Strategy.tunable:
the matmul kernels), the model is compiled once (phase 1 and every default
choice), then once more per candidate from phase 2 on, with that candidate
for that dispatch alone and every dispatch repeated N times per call (IREE's
dispatch repeat count). The other dispatches are the same in every module,
so the modules differ by that dispatch's time. They run alternately in one
process (bench/gpu.time_interleaved); the fastest median is recorded in the
tuning cache (strategies/tuning.py) with what it was measured against, and
every later compile for that target reads it.

Three steps, so that a device without the compiler can do the timing (the
GPU machine, as for `tilefuse bench --bundle`):

    build_candidates  compile the candidate modules (here)
    time_candidates   call them on the device, check that each computes
                      what the chooser's pick computes (bench/tune_runner.py,
                      which the tune bundle carries)
    record            pick the winner, write the cache entry (here)

`tune` does all three on one machine; `write_tune_bundle` stops after the
first, and `record_bundle_results` does the last from the runner's file.
"""

import json
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..driver import compile_program, rerun
from ..errors import TilefuseError
from ..frontend import load_program
from ..paths import shown
from ..runtime import open_device
from ..strategies import BY_NAME
from ..strategies import tuning as cache
from ..targets import load_target
from .bundle import PACKAGE, publish, source_commit, write_runner
from .costmodel import io_floor
from .gpu import random_inputs
from .measure import REPEAT_FLAG
from .run import BenchOptions, entry_function, input_signature, timing_repeat
from .tune_runner import TUNE_MANIFEST, TUNE_RESULTS, time_candidates

MAX_CANDIDATES = 6
# A candidate replaces the chooser's pick only when it is this much faster
# (timings on the 2-core VM move by a few percent between calls).
MARGIN = 0.03


@dataclass
class Candidates:
    """One tunable dispatch's candidate modules: the model compiled once per
    candidate, that dispatch's choice alone changed."""

    dispatch: str
    strategy: str
    signature: str
    choices: list[dict]  # per module, the strategy's own fields (the cache's "choice")
    vmfbs: list[bytes]  # timing modules: every dispatch repeated `repeat` times
    default_first: bool  # choices[0] is the chooser's pick (it built)
    skipped: list[str]  # candidates that did not build, and why


@dataclass
class Tuned:
    dispatch: str
    strategy: str
    signature: str
    seconds: list[float]  # per candidate that built: the model's median time per call
    choices: list[dict]
    winner: int
    skipped: list[str]


def build_candidates(
    program, target, root: Path, repeat: int, max_candidates: int, progress=None
) -> list[Candidates]:
    """Compile every tunable dispatch's candidates (at most
    `max_candidates` each, the chooser's pick first) in `root`."""
    # The defaults, with no tuned choice from any cache.
    base = compile_program(program, target, dump_dir=root / "base", tuning=root / "none.json")
    c = base.compilation
    found = []
    for i, choice in enumerate(c.choices):
        strategy = BY_NAME.get(choice.strategy) if choice.strategy else None
        if strategy is None or strategy.tunable is None or choice.dispatch.name in c.failures:
            continue
        options = strategy.tunable.candidates(choice.dispatch, target)[:max_candidates]
        if len(options) < 2:
            continue
        if progress:
            progress(f"{choice.dispatch.name}: {len(options)} candidates")
        kept, vmfbs, skipped = [], [], []
        for j, params in enumerate(options):
            choices = [
                replace(ch, params=params) if k == i else ch for k, ch in enumerate(c.choices)
            ]
            what = strategy.describe(params)
            try:
                result = rerun(base, root / f"{i}-{j}", (f"{REPEAT_FLAG}={repeat}",), choices)
            except TilefuseError as e:
                skipped.append(f"{what}: {e}")
                continue
            report = result.reports[i]
            if report.status != "applied":
                skipped.append(f"{what}: {report.reason}")
                continue
            kept.append(params)
            vmfbs.append(result.vmfb)
        if kept:
            found.append(
                Candidates(
                    dispatch=choice.dispatch.name,
                    strategy=strategy.name,
                    signature=strategy.tunable.signature(choice.dispatch),
                    choices=[strategy.tunable.choice_of(p) for p in kept],
                    vmfbs=vmfbs,
                    default_first=kept[0] == options[0],
                    skipped=skipped,
                )
            )
    return found


def winner(medians: list[float], default_first: bool, agrees: list[bool] | None = None) -> int:
    """The fastest candidate that computes what the default does; the
    default unless one is more than MARGIN faster."""
    ok = [j for j in range(len(medians)) if agrees is None or agrees[j]]
    best = min(ok, key=medians.__getitem__)
    if default_first and medians[best] > medians[0] * (1 - MARGIN):
        return 0  # within the noise of the default: keep it
    return best


def record(
    cache_path: Path,
    target_name: str,
    c: Candidates,
    medians: list[float],
    device: str,
    model: str,
    agrees: list[bool] | None = None,
) -> Tuned:
    """Write the winner of `c` (timed: `medians`) to the cache."""
    best = winner(medians, c.default_first, agrees)
    entry = {
        "choice": c.choices[best],
        "seconds": medians[best],
        "default_seconds": medians[0] if c.default_first else None,
        "candidates": [{"choice": ch, "seconds": s} for ch, s in zip(c.choices, medians)],
        "device": device,
        "date": time.strftime("%Y-%m-%d"),
        "model": model,
    }
    if agrees is not None:
        entry["disagreeing"] = [ch for ch, ok in zip(c.choices, agrees) if not ok]
    cache.record(cache_path, target_name, c.strategy, c.signature, entry)
    return Tuned(c.dispatch, c.strategy, c.signature, medians, c.choices, best, c.skipped)


def _load(model: str | Path):
    """The model, its entry function, and the dispatch repeat count of its
    timing modules (as `tilefuse bench` picks it)."""
    program = load_program(model)
    function = entry_function(program)
    repeat = timing_repeat(io_floor(program.text, function), BenchOptions().dispatch_repeat)
    return program, function, repeat


def tune(
    model: str | Path,
    target_name: str,
    device: str | None = None,
    cache_path: Path | None = None,
    max_candidates: int = MAX_CANDIDATES,
    repeats: int = 7,
    warmup: int = 2,
    progress=None,
) -> list[Tuned]:
    """Build, time and record on this machine (the device beside the compiler)."""
    target = load_target(target_name)
    device = device or target.runtime_driver
    program, function, repeat = _load(model)
    inputs = random_inputs(input_signature(program, function), np.random.default_rng(0))
    cache_path = cache_path or cache.default_path()
    config = open_device(device)
    found = []
    with tempfile.TemporaryDirectory(prefix="tilefuse-tune-") as tmp:
        for c in build_candidates(program, target, Path(tmp), repeat, max_candidates, progress):
            timed = time_candidates(
                c.vmfbs, function, inputs, repeat, device, config, repeats, warmup
            )
            name = Path(str(model)).name
            found.append(
                record(cache_path, target.name, c, timed["seconds"], device, name, timed["agrees"])
            )
    return found


def write_tune_bundle(
    model: str | Path,
    target_name: str,
    out: Path,
    device: str | None = None,
    max_candidates: int = MAX_CANDIDATES,
    progress=None,
) -> Path:
    """Build the candidates here and write them to `out` (which must not
    exist or be empty) with the runner, for a device without the compiler:

        cd OUT && python -m tilefuse_run.bench.tune_runner . [--device D]

    writes OUT/tune_results.json, which `tilefuse tune --record` reads."""
    if out.exists() and any(out.iterdir()):
        raise TilefuseError(f"{out} exists and is not empty")
    target = load_target(target_name)
    program, function, repeat = _load(model)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Built beside `out` and moved into place at the end: a failed bundle
    # leaves nothing behind.
    with tempfile.TemporaryDirectory(prefix=".tune-bundle-", dir=out.parent) as tmp:
        staging, work = Path(tmp) / "bundle", Path(tmp) / "work"
        staging.mkdir()
        found = build_candidates(program, target, work, repeat, max_candidates, progress)
        if not found:
            raise TilefuseError(f"{shown(Path(str(model)))}: no dispatch has tilings to tune")
        dispatches = []
        for i, c in enumerate(found):
            files = []
            for j, data in enumerate(c.vmfbs):
                name = f"candidates/{i}-{j}.vmfb"
                (staging / name).parent.mkdir(exist_ok=True)
                (staging / name).write_bytes(data)
                files.append(name)
            dispatches.append(
                {
                    "dispatch": c.dispatch,
                    "strategy": c.strategy,
                    "signature": c.signature,
                    "choices": c.choices,
                    "default_first": c.default_first,
                    "skipped": c.skipped,
                    "files": files,
                }
            )
        write_runner(staging)
        manifest = {
            "target": target.name,
            "device": device or target.runtime_driver,
            "commit": source_commit(),
            "model": Path(str(model)).name,
            "function": function,
            "signature": [[list(s), d] for s, d in input_signature(program, function)],
            "repeat": repeat,
            "run": f"cd BUNDLE && python -m {PACKAGE}.bench.tune_runner . [--device D]",
            "dispatches": dispatches,
        }
        publish(staging, out, TUNE_MANIFEST, manifest, "the tune bundle", "fewer --candidates")
    return out


def record_bundle_results(results_path: Path, cache_path: Path | None = None) -> list[Tuned]:
    """Write the cache entries from a tune bundle's results file (the
    runner's `tune_results.json`, or the bundle directory holding it)."""
    path = results_path / TUNE_RESULTS if results_path.is_dir() else results_path
    try:
        results = json.loads(path.read_text())
        target, model, dispatches = results["target"], results["model"], results["dispatches"]
    except (OSError, ValueError, KeyError) as e:
        raise TilefuseError(f"{path}: not a tune bundle's results file ({e})") from None
    cache_path = cache_path or cache.default_path()
    found = []
    for d in dispatches:
        c = Candidates(
            d["dispatch"], d["strategy"], d["signature"], d["choices"], [],
            d["default_first"], d["skipped"],
        )  # fmt: skip
        if not any(d["agrees"]):
            raise TilefuseError(f"{path}: no candidate of {c.dispatch} agrees with the default")
        found.append(
            record(cache_path, target, c, d["seconds"], results["device"], model, d["agrees"])
        )
    return found


def summary_lines(found: list[Tuned], cache_path: Path) -> list[str]:
    lines = []
    for t in found:
        lines.append(f"{t.dispatch} ({t.strategy}, {t.signature}):")
        for j, (choice, s) in enumerate(zip(t.choices, t.seconds)):
            mark = "  <- tuned" if j == t.winner else ("  (default)" if j == 0 else "")
            lines.append(f"  {choice}  {s * 1e6:.1f} us per model call{mark}")
        lines += [f"  skipped {why}" for why in t.skipped]
    lines.append(f"wrote {len(found)} entries to {cache_path}" if found else "nothing to tune")
    return lines
