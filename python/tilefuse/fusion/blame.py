"""Which fusion groups an error is about, so that the driver can leave just
those to IREE and keep the rest fused.

An error names a group in one of three ways:
  - a GroupFailed from tilefuse itself carries the group names;
  - an error line of IREE's stderr points at a line and column of the user's
    file, and one of the group's ops was parsed from there (phase 1 keeps
    locations);
  - IREE's stderr names a dispatch, and attach_groups knows its group.
"""

import re

from ..errors import GroupFailed
from ..irutil import file_positions
from ..toolchain import mentions
from .graph import FuncGraph

# "file:line:col: error: message", as IREE prints a diagnostic.
_ERROR = re.compile(r"^([^\s:'\"]+):(\d+):(\d+): error: (.*)$", re.MULTILINE)


def blamed_groups(
    error: Exception, stderr: str, reason: str, plan, dispatches: list | None
) -> dict[str, str]:
    """The outlined groups of `plan` that `error` is about, each with the
    error line that names it (else `reason`), in program order."""
    outlined = [g.name for g in plan.outlined()]
    if isinstance(error, GroupFailed):
        return {n: error.reasons.get(n, reason) for n in outlined if n in error.groups}
    blamed: dict[str, str] = {}
    for f, line, col, message in _ERROR.findall(stderr):
        for name in _groups_at(plan, (f, line, col)):
            blamed.setdefault(name, f"{f}:{line}:{col}: {_shorten(message)}")
    for d in dispatches or []:
        if d.group_name and mentions(stderr, d.name):
            blamed.setdefault(d.group_name, reason)
    return {n: blamed[n] for n in outlined if n in blamed}


def _groups_at(plan, position: tuple[str, str, str]) -> list[str]:
    return [
        group.name
        for graph in plan.graphs
        for group in plan.groups.get(graph.name, [])
        if group.outlined and _touches(graph, group.members, position)
    ]


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _touches(graph: FuncGraph, members, position: tuple[str, str, str]) -> bool:
    f, line, col = position
    for i in members:
        for g, l2, c2 in file_positions(graph.nodes[i].op.location):
            if (str(l2), str(c2)) == (line, col) and (g == f or _base(g) == _base(f)):
                return True
    return False


def _shorten(message: str, limit: int = 200) -> str:
    return message if len(message) <= limit else message[: limit - 3] + "..."
