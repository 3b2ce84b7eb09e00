"""Where the data directories live (the repository root in a checkout)."""

import os
from pathlib import Path

ROOT = Path(os.environ.get("TILEFUSE_HOME", Path(__file__).resolve().parents[2]))
PIPELINES = ROOT / "pipelines"
TRANSFORM_SCRIPTS = ROOT / "transform_scripts"
SAMPLES = ROOT / "samples"


def shown(path: str | Path) -> str:
    """A path as reports print it: relative to the repository when inside
    it (reports are committed; an absolute path names one machine), else
    the file's name."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(ROOT.resolve()))
    except ValueError:
        return path.name
