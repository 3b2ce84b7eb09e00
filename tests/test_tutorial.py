"""Every code block of docs/tutorial.md runs or is checked.

- `sh` blocks: each `$ tilefuse ...` line is run (the CLI's main, in a
  temporary directory where `docs` is the repository's docs/, so outputs
  land there); it must exit 0, and every piece of the output shown under it
  (its lines split at `...`) must be in what the command printed.
- `mlir` and `toml` blocks: the whole of a file the tutorial refers to
  (its model, the matcher), or lines of the tutorial's script, in order.
"""

import os
import re
import shlex
from pathlib import Path

import pytest
from tilefuse.cli import main

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial.md"
FILES = [
    ROOT / "docs" / "tutorial" / "models" / "ew.mlir",
    ROOT / "docs" / "tutorial" / "elementwise.toml",
]
SCRIPT = ROOT / "docs" / "tutorial" / "elementwise.mlir"


def blocks() -> list[tuple[str, str, int]]:
    """(language, text, line) of every fenced block."""
    found = re.finditer(r"^```(\w*)\n(.*?)^```", TUTORIAL.read_text(), re.MULTILINE | re.DOTALL)
    text = TUTORIAL.read_text()
    return [(m.group(1), m.group(2), text[: m.start()].count("\n") + 1) for m in found]


def test_every_block_has_a_language():
    assert blocks()
    assert {lang for lang, _, _ in blocks()} <= {"sh", "mlir", "toml"}


def _in_order(lines: list[str], haystack: list[str]) -> bool:
    i = 0
    for line in haystack:
        if i < len(lines) and line == lines[i]:
            i += 1
    return i == len(lines)


@pytest.mark.parametrize(
    "text,line", [(t, n) for lang, t, n in blocks() if lang in ("mlir", "toml")]
)
def test_listing_is_in_the_files(text, line):
    if any(text == f.read_text() for f in FILES):
        return
    script = [s.strip() for s in SCRIPT.read_text().splitlines() if s.strip()]
    lines = [s.strip() for s in text.splitlines() if s.strip()]
    assert _in_order(lines, script), f"docs/tutorial.md:{line}: not in {SCRIPT.name}"


def _commands(text: str) -> list[tuple[str, list[str]]]:
    """Each `$ ` command with the output lines shown under it."""
    found = []
    for line in text.splitlines():
        if line.startswith("$ "):
            found.append((line[2:], []))
        elif found:
            found[-1][1].append(line)
    return found


SHELL = [(t, n) for lang, t, n in blocks() if lang == "sh"]


def test_shell_blocks_in_order(tmp_path, capsys, monkeypatch):
    """One test for every sh block, in order: later commands read what
    earlier ones wrote (prepare, then flags --for)."""
    (tmp_path / "docs").symlink_to(ROOT / "docs")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TILEFUSE_STRATEGIES", raising=False)
    for text, line in SHELL:
        for command, shown in _commands(text):
            argv = shlex.split(command)
            assert argv[0] == "tilefuse", f"docs/tutorial.md:{line}: {command}"
            status = main(argv[1:])
            out = capsys.readouterr()
            printed = out.out + out.err
            assert status == 0, f"docs/tutorial.md:{line}: {command}\n{printed[-3000:]}"
            for expected in shown:
                for piece in expected.split("..."):
                    piece = piece.strip()
                    assert piece in printed, f"docs/tutorial.md:{line}: {command}: {piece!r}"
    assert os.path.exists(tmp_path / "ew-library.mlir")
