"""Run IREE's bundled iree-compile and turn its failures into TilefuseErrors."""

import re
import subprocess
from dataclasses import dataclass

from iree.compiler.tools.binaries import find_tool

from .errors import TilefuseError


@dataclass
class ToolRun:
    returncode: int
    stdout: str  # transform.print writes here
    stderr: str


def iree_compile(args: list[str], what: str) -> ToolRun:
    """Run iree-compile; raise with IREE's first error line if it fails."""
    cmd = [find_tool("iree-compile"), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise TilefuseError(f"{what} failed: {first_error(proc.stderr)}")
    return ToolRun(proc.returncode, proc.stdout, proc.stderr)


_ERROR_LINE = re.compile(r"^(?P<loc>[^\s:][^:]*:\d+:\d+): error: (?P<msg>.*)$", re.MULTILINE)


def first_error(stderr: str) -> str:
    """IREE's first `file:line:col: error: message` line, or its last line."""
    m = _ERROR_LINE.search(stderr)
    if m:
        return f"{m.group('loc')}: {m.group('msg')}"
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "iree-compile failed with no message"
