"""The README's first command: every sample compiles, runs on Vulkan, matches numpy."""

import subprocess
import sys


def test_run_samples_script(root):
    proc = subprocess.run(
        [sys.executable, str(root / "samples/run_samples.py")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from references import SAMPLES

    assert proc.stdout.count(" OK ") == len(SAMPLES) and "strategy=loop" in proc.stdout
