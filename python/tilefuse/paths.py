"""Where the data directories live (the repository root in a checkout)."""

import os
from pathlib import Path

ROOT = Path(os.environ.get("TILEFUSE_HOME", Path(__file__).resolve().parents[2]))
PIPELINES = ROOT / "pipelines"
TRANSFORM_SCRIPTS = ROOT / "transform_scripts"
SAMPLES = ROOT / "samples"
