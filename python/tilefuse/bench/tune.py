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
"""

import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..driver import compile_program, rerun
from ..errors import TilefuseError
from ..frontend import load_program
from ..runtime import CompiledModule, open_device
from ..strategies import BY_NAME
from ..strategies import tuning as cache
from ..targets import load_target
from .costmodel import io_floor
from .gpu import random_inputs, time_interleaved
from .measure import REPEAT_FLAG
from .run import BenchOptions, entry_function, input_signature, timing_repeat

MAX_CANDIDATES = 6
# A candidate replaces the chooser's pick only when it is this much faster
# (timings on the 2-core VM move by a few percent between calls).
MARGIN = 0.03


@dataclass
class Tuned:
    dispatch: str
    strategy: str
    signature: str
    seconds: list[float]  # per candidate that built: the model's median time per call
    choices: list[dict]
    winner: int
    skipped: list[str]


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
    target = load_target(target_name)
    device = device or target.runtime_driver
    program = load_program(model)
    function = entry_function(program)
    inputs = random_inputs(input_signature(program, function), np.random.default_rng(0))
    repeat = timing_repeat(io_floor(program.text, function), BenchOptions().dispatch_repeat)
    cache_path = cache_path or cache.default_path()
    config = open_device(device)
    found = []
    with tempfile.TemporaryDirectory(prefix="tilefuse-tune-") as tmp:
        root = Path(tmp)
        # The defaults, with no tuned choice from any cache.
        base = compile_program(program, target, dump_dir=root / "base", tuning=root / "none.json")
        c = base.compilation
        for i, choice in enumerate(c.choices):
            strategy = BY_NAME.get(choice.strategy) if choice.strategy else None
            if strategy is None or strategy.tunable is None or choice.dispatch.name in c.failures:
                continue
            options = strategy.tunable.candidates(choice.dispatch, target)[:max_candidates]
            if len(options) < 2:
                continue
            if progress:
                progress(f"{choice.dispatch.name}: {len(options)} candidates")
            calls, kept, skipped = [], [], []
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
                module = CompiledModule(result.vmfb, device, config=config)
                calls.append(module[function])
                kept.append(params)
            if not calls:
                continue
            args = [f.to_device(*inputs) for f in calls]
            times = time_interleaved(calls, args, [repeat] * len(calls), repeats, warmup)
            medians = [statistics.median(t) for t in times]
            best = min(range(len(kept)), key=medians.__getitem__)
            if kept[0] == options[0] and medians[best] > medians[0] * (1 - MARGIN):
                best = 0  # within the noise of the default: keep it
            signature = strategy.tunable.signature(choice.dispatch)
            choices = [strategy.tunable.choice_of(p) for p in kept]
            default = medians[0] if kept[0] == options[0] else None
            cache.record(
                cache_path,
                target.name,
                strategy.name,
                signature,
                {
                    "choice": choices[best],
                    "seconds": medians[best],
                    "default_seconds": default,
                    "candidates": [{"choice": ch, "seconds": s} for ch, s in zip(choices, medians)],
                    "device": device,
                    "date": time.strftime("%Y-%m-%d"),
                    "model": Path(str(model)).name,
                },
            )
            found.append(
                Tuned(
                    choice.dispatch.name, strategy.name, signature, medians, choices, best, skipped
                )
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
