"""Time a tune bundle's candidates where the device is (`tilefuse tune --bundle`).

Like bench/gpu.py this imports only numpy, the IREE runtime and the
runner's own package, and the bundle carries it as `tilefuse_run`:

    cd BUNDLE && python -m tilefuse_run.bench.tune_runner . --device cuda

For each tunable dispatch of the manifest: its candidate modules (the model
compiled once per tiling of that dispatch, every dispatch repeated N times
per call) run on the same inputs; a candidate whose outputs differ from the
first's (the chooser's pick) by more than bench/gpu.py's AGREEMENT is
marked and never recorded as the winner; then all are called alternately
(time_interleaved) and each one's median time per model call is written to
BUNDLE/tune_results.json, which `tilefuse tune --record` turns into the
tuning cache's entries.
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

from ..errors import TilefuseError
from ..runtime import CompiledModule, open_device
from .gpu import agreement_tolerance, max_abs_error, random_inputs, time_interleaved

TUNE_MANIFEST = "tune.json"
TUNE_RESULTS = "tune_results.json"


def _outputs(result) -> list[np.ndarray]:
    return list(result) if isinstance(result, tuple) else [result]


def time_candidates(
    vmfbs: list[bytes], function: str, inputs, repeat: int, device: str, config,
    repeats: int, warmup: int,
) -> dict:  # fmt: skip
    """Per candidate module: `seconds` (median per model call), `agrees`
    (its outputs against the first module's, within AGREEMENT) and the
    largest `difference`."""
    calls = [CompiledModule(v, device, config=config)[function] for v in vmfbs]
    outs = [_outputs(f(*inputs)) for f in calls]
    agrees, differences = [], []
    for o in outs:
        diff = max((max_abs_error(a, b) for a, b in zip(o, outs[0])), default=0.0)
        differences.append(diff)
        agrees.append(diff <= agreement_tolerance(outs[0], o))
    args = [f.to_device(*inputs) for f in calls]
    times = time_interleaved(calls, args, [repeat] * len(calls), repeats, warmup)
    return {
        "seconds": [statistics.median(t) for t in times],
        "agrees": agrees,
        "difference": differences,
    }


def gpu_name() -> str | None:
    """The GPU's name as nvidia-smi reports it (None where there is none)."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None


def run_tune_bundle(bundle: Path, device: str | None, repeats: int, warmup: int) -> dict:
    try:
        manifest = json.loads((bundle / TUNE_MANIFEST).read_text())
    except (OSError, ValueError) as e:
        raise TilefuseError(f"{bundle}: not a tune bundle ({e})") from None
    device = device or manifest["device"]
    config = open_device(device)
    signature = [(tuple(s), d) for s, d in manifest["signature"]]
    inputs = random_inputs(signature, np.random.default_rng(0))
    dispatches = []
    for d in manifest["dispatches"]:
        vmfbs = [(bundle / f).read_bytes() for f in d["files"]]
        timed = time_candidates(
            vmfbs, manifest["function"], inputs, manifest["repeat"], device, config,
            repeats, warmup,
        )  # fmt: skip
        dispatches.append({**{k: v for k, v in d.items() if k != "files"}, **timed})
        for choice, s, ok in zip(d["choices"], timed["seconds"], timed["agrees"]):
            mark = "" if ok else "  DISAGREES with the default"
            print(f"{d['dispatch']}: {choice}  {s * 1e6:.1f} us{mark}", flush=True)
    name = gpu_name()
    return {
        "target": manifest["target"],
        "model": manifest["model"],
        "commit": manifest.get("commit"),
        "device": f"{device}: {name}" if name else device,
        "repeats": repeats,
        "dispatches": dispatches,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tilefuse_run.bench.tune_runner",
        description="time a `tilefuse tune --bundle` directory's candidates on this machine",
    )
    p.add_argument("bundle", help=f"the tune bundle directory (holds {TUNE_MANIFEST})")
    p.add_argument("--device", help="IREE runtime device (default: the manifest's)")
    p.add_argument("--repeats", type=int, default=10, help="timed calls per candidate (median)")
    p.add_argument("--warmup", type=int, default=2, help="untimed calls per candidate first")
    p.add_argument("--out", help=f"results file (default: BUNDLE/{TUNE_RESULTS})")
    args = p.parse_args(argv)
    bundle = Path(args.bundle)
    try:
        results = run_tune_bundle(bundle, args.device, args.repeats, args.warmup)
    except TilefuseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    out = Path(args.out) if args.out else bundle / TUNE_RESULTS
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
