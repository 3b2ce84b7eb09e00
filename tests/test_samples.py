"""The README's first command: every sample compiles, runs on Vulkan, matches numpy.

The test runs the samples' small variants (samples/small/) where there are
any: the full sizes take most of a minute on lavapipe, and the strategies they
reach are the same."""

import subprocess
import sys


def test_run_samples_script(root):
    proc = subprocess.run(
        [sys.executable, str(root / "samples/run_samples.py"), "--small"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from references import SAMPLES

    assert proc.stdout.count(" OK ") == len(SAMPLES) and "strategy=loop" in proc.stdout
