"""Tuned choices: the cache `tilefuse tune` writes and every compile reads.

A strategy with tunable tiles (the matmul kernels) picks its parameters from
its cost rules, unless the cache holds a choice measured for the same target,
strategy and dispatch signature (the contraction's shapes, types and
layouts, whatever program it came from): then it takes that choice if it
still fits the dispatch, and `explain` says "tuned". As Triton's autotune
and IREE's tuner do, the cache is a file:

    {"version": 1, "entries": {"<target>|<strategy>|<signature>": {
        "choice": {...the strategy's own fields...},
        "seconds": ..., "default_seconds": ..., "device": ..., "date": ...}}}

Where: `compile_program(tuning=PATH)` (`--tuning PATH` on the command line),
else $TILEFUSE_TUNING, else ~/.cache/tilefuse/tuning.json; a missing file
is an empty cache. A file is parsed again only when it changed.
"""

import json
import os
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from ..errors import TilefuseError

VERSION = 1
ENV = "TILEFUSE_TUNING"
_PATH: ContextVar[Path | None] = ContextVar("tilefuse_tuning_cache", default=None)


def default_path() -> Path:
    return Path(os.environ.get(ENV, "~/.cache/tilefuse/tuning.json")).expanduser()


def current_path() -> Path:
    return _PATH.get() or default_path()


@contextmanager
def using(path: str | Path | None):
    """Compiles in this scope read the cache at `path` (None: the default)."""
    token = _PATH.set(Path(path).expanduser() if path else None)
    try:
        yield
    finally:
        _PATH.reset(token)


def key(target: str, strategy: str, signature: str) -> str:
    return f"{target}|{strategy}|{signature}"


# path -> (mtime_ns, size, entries): every matmul dispatch of a compile
# looks its signature up, and the file changes only when `tune` writes it.
_READ: dict[Path, tuple[int, int, dict]] = {}


def load(path: Path) -> dict:
    """The cache's entries ({} when the file does not exist)."""
    if not path.is_file():
        return {}
    stat = path.stat()
    seen = _READ.get(path)
    if seen and seen[:2] == (stat.st_mtime_ns, stat.st_size):
        return seen[2]
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise TilefuseError(f"tuning cache is not readable JSON: {e}", str(path)) from None
    if data.get("version") != VERSION:
        raise TilefuseError(
            f"tuning cache version {data.get('version')} (this build reads {VERSION})", str(path)
        )
    entries = data.get("entries", {})
    _READ[path] = (stat.st_mtime_ns, stat.st_size, entries)
    return entries


def lookup(target: str, strategy: str, signature: str) -> dict | None:
    """The tuned choice for this dispatch signature, or None."""
    entry = load(current_path()).get(key(target, strategy, signature))
    return entry["choice"] if entry else None


def record(path: Path, target: str, strategy: str, signature: str, entry: dict) -> None:
    """Add or replace one entry (written whole, through a temporary file)."""
    entries = dict(load(path))  # not the memo's own dict
    entries[key(target, strategy, signature)] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"version": VERSION, "entries": entries}, indent=2, sort_keys=True))
    tmp.replace(path)


def pick(options: list, choice_of, target, strategy: str, signature: str):
    """(params, note): the option the cache names for this dispatch if it
    holds one of `options`, else the first (the chooser's); the note says
    which, for explain."""
    tuned = lookup(target.name, strategy, signature)
    if tuned is None:
        return options[0], ""
    for option in options:
        if choice_of(option) == tuned:
            return option, f" (tuned: {current_path()})"
    return options[0], f" (the tuned choice {tuned} does not fit: ignored)"
