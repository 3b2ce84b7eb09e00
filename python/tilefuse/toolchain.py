"""Run IREE's bundled iree-compile and iree-opt and turn their failures into TilefuseErrors."""

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from iree.compiler.tools.binaries import find_tool

from .errors import TilefuseError

# Seconds one iree-compile run that holds tilefuse's regions or strategies
# may take before tilefuse gives up on it (a strategy that sends IREE into a
# pathological case must not cost the compile: the driver falls back, see
# driver.py; IREE's own runs are not bounded, Options.timeout_s). Plain IREE
# compiles the samples in seconds (the bench report's compile column,
# docs/results/bench-vulkan.md).
DEFAULT_PHASE_TIMEOUT_S = 300


@dataclass
class ToolRun:
    returncode: int
    stdout: str  # transform.print writes here
    stderr: str


class PhaseFailed(TilefuseError):
    """iree-compile failed or ran out of time; keeps its output so that the
    driver can tell which dispatch failed."""

    def __init__(
        self, what: str, reason: str, stderr: str, timed_out: bool = False, stdout: str = ""
    ):
        super().__init__(f"{what} failed: {reason}")
        self.what = what
        self.reason = reason
        # Diagnostics only: the kernels strategies printed go to stdout, and
        # name dispatches that did not fail.
        self.stderr = stderr
        self.timed_out = timed_out
        self.stdout = stdout  # what it printed before failing (transform.print)


def iree_compile(
    args: list[str], what: str, timeout_s: float | None = DEFAULT_PHASE_TIMEOUT_S
) -> ToolRun:
    """Run iree-compile; raise PhaseFailed with IREE's first error line if it
    fails or takes longer than `timeout_s`."""
    return run_tool("iree-compile", args, what, timeout_s)


def iree_opt(
    args: list[str], what: str, timeout_s: float | None = DEFAULT_PHASE_TIMEOUT_S
) -> ToolRun:
    """Run iree-opt (a pass pipeline of IREE's), failing as iree_compile does."""
    return run_tool("iree-opt", args, what, timeout_s)


def run_tool(tool: str, args: list[str], what: str, timeout_s: float | None) -> ToolRun:
    cmd = [find_tool(tool), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        stderr = _text(e.stderr)
        raise PhaseFailed(what, f"timed out after {timeout_s:g} s", stderr, True) from None
    if proc.returncode != 0:
        raise PhaseFailed(what, first_error(proc.stderr), proc.stderr, stdout=proc.stdout)
    return ToolRun(proc.returncode, proc.stdout, proc.stderr)


def _text(data) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


# A location is file:line:col, or `<unknown>:0` (an op without one: IREE
# names it by its loc("name") in the message).
_ERROR_LINE = re.compile(
    r"^(?P<loc>[^\s:][^:\n]*:\d+:\d+|<unknown>:0): error: (?P<msg>.*)$", re.MULTILINE
)
_CRASH = "Please report issues to"
# A diagnostic that names where it is: IREE's last one before a crash that
# says nothing itself locates the op it was working on.
_DIAGNOSTIC = re.compile(
    r"^(?P<loc>[^\s:][^:\n]*:\d+:\d+): (?P<kind>warning|remark): (?P<msg>.*)$", re.MULTILINE
)


def error_site(stderr: str) -> str | None:
    """The file:line:col of IREE's first error, or None (no error line, or
    one on an op without a location)."""
    m = _ERROR_LINE.search(stderr)
    return m.group("loc") if m and m.group("loc") != "<unknown>:0" else None


def first_error(stderr: str) -> str:
    """IREE's first `file:line:col: error: message` line; for a crash, the
    line that says what failed (an assertion, a signal) instead of the last
    frame of the stack dump; else its last line."""
    m = _ERROR_LINE.search(stderr)
    if m:
        return f"{m.group('loc')}: {m.group('msg')}"
    if _CRASH in stderr:
        before = stderr.split(_CRASH, 1)[0]
        # What the crash says (an assertion, LLVM ERROR), not the source
        # lines and carets IREE prints under each diagnostic.
        said = [line.strip() for line in before.splitlines() if line.strip()]
        said = [line for line in said if _says(line)]
        if said:
            return f"iree-compile crashed: {said[-1]}"
        located = list(_DIAGNOSTIC.finditer(before))
        if located:
            last = located[-1]
            return (
                f"{last['loc']}: iree-compile crashed on this op (its last diagnostic, "
                f"a {last['kind']}: {last['msg'][:200]})"
            )
        return "iree-compile crashed"
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "iree-compile failed with no message"


def _says(line: str) -> bool:
    """A crash's own words: not a source line IREE quoted under a
    diagnostic (those follow a `file:line:col:` line) nor its caret."""
    return line.startswith(("Assertion", "LLVM ERROR", "UNREACHABLE", "terminate", "error:"))


def mentions(output: str, name: str) -> bool:
    """IREE's output names the symbol `name` (a dispatch), as a whole word."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", output) is not None


def statistics_flags(path: Path) -> tuple[str, ...]:
    """iree-compile flags that write its scheduling statistics to `path` (JSON)."""
    return (
        "--iree-scheduling-dump-statistics-format=json",
        f"--iree-scheduling-dump-statistics-file={path}",
    )


def scheduled_dispatches(path: Path) -> int:
    """Dispatches IREE scheduled per call (its own statistics, not our reading
    of the IR), from the statistics file `path` (statistics_flags)."""
    stats = json.loads(path.read_text())
    return stats["stream-aggregate"]["execution"]["dispatch-count"]
