"""Compile every sample with tilefuse, run it, and print max error vs numpy.

    python samples/run_samples.py [--target vulkan] [--device vulkan] [--small]
Exit status 1 if any sample is off by more than its tolerance. `--small` runs
a sample's variant in samples/small/ where it has one (the test suite does).
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import tilefuse
from references import SAMPLES
from tilefuse.bench.run import resolve_models


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--target", default="vulkan")
    p.add_argument("--device", default=None)
    p.add_argument("--small", action="store_true", help="use samples/small/ variants where present")
    p.add_argument("names", nargs="*", default=list(SAMPLES))
    args = p.parse_args()
    failed = 0
    for name in args.names:
        (path,) = resolve_models([name], args.small)  # as `tilefuse bench --small` picks
        small = path.parent.name == "small"
        start = time.time()
        module = tilefuse.compile(path, target=args.target, device=args.device)
        for report in module.reports:
            print(f"  {report.line()}")
        inputs, refs, tol = SAMPLES[name](np.random.default_rng(0), small=small)
        outputs = module.main(*inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        err = max(float(np.max(np.abs(o.astype(np.float64) - r))) for o, r in zip(outputs, refs))
        ok = err <= tol
        failed += not ok
        print(
            f"{name + (' (small)' if small else ''):26s} max |error| = {err:.3g} (tolerance {tol:g}) "
            f"{'OK' if ok else 'FAIL'}  [{time.time() - start:.1f} s]"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
