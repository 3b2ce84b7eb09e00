"""Assemble dumped PTX with ptxas and read its resource usage (-v)."""

import math
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import TilefuseError


@dataclass
class KernelResources:
    registers: int
    spill_store_bytes: int
    spill_load_bytes: int
    shared_bytes: int


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_REGS = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_SMEM = re.compile(r"(\d+) bytes smem")


def assemble(ptx_files: list[Path], arch: str) -> dict[str, KernelResources]:
    """Run `ptxas -arch=<arch> -v` on each file; kernel name -> resources."""
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        raise TilefuseError("ptxas not found on PATH (needed to check CUDA PTX)")
    found: dict[str, KernelResources] = {}
    for ptx in ptx_files:
        proc = subprocess.run(
            [ptxas, f"-arch={arch}", "-v", str(ptx), "-o", "/dev/null"],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise TilefuseError(f"ptxas rejected the PTX: {proc.stderr.strip()}", str(ptx))
        current = None
        for line in proc.stderr.splitlines():
            if m := _ENTRY.search(line):
                current = m.group(1)
                found[current] = KernelResources(0, 0, 0, 0)
            elif current is None:
                continue
            if m := _REGS.search(line):
                found[current].registers = int(m.group(1))
            if m := _SMEM.search(line):
                found[current].shared_bytes = int(m.group(1))
            if m := _SPILL.search(line):
                found[current].spill_store_bytes = int(m.group(1))
                found[current].spill_load_bytes = int(m.group(2))
    return found


_ENTRY_DECL = re.compile(r"\.entry\s+(\w+)\s*\(")
_NTID = re.compile(r"\.(?:maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")


def threads_per_block(ptx_files: list[Path]) -> dict[str, int]:
    """Kernel name -> threads per block, from the `.maxntid`/`.reqntid` directives
    IREE writes after each `.entry` (its workgroup size)."""
    found = {}
    for ptx in ptx_files:
        current = None
        for line in ptx.read_text().splitlines():
            if m := _ENTRY_DECL.search(line):
                current = m.group(1)
            elif current and (threads := ntid_of(line)) is not None:
                found[current] = threads
                current = None
    return found


def entry_text(ptx_files: list[Path], name: str) -> str | None:
    """The PTX of kernel `name`, from its `.entry` to the next one (or the
    end of its file); None when no file defines it."""
    for ptx in ptx_files:
        text = ptx.read_text()
        starts = list(_ENTRY_DECL.finditer(text))
        for i, m in enumerate(starts):
            if m.group(1) == name:
                end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
                return text[m.start() : end]
    return None


def ntid_of(entry: str) -> int | None:
    """Threads per block of one kernel's PTX (entry_text, or a line of it),
    from its `.maxntid`/`.reqntid`; None without one."""
    m = _NTID.search(entry)
    return math.prod(int(g) for g in m.groups() if g) if m else None


# IREE turns workgroup allocations into addrspace(3) globals in the LLVM IR,
# then packs them into `__dynamic_shared_memory__`, which ptxas -v does not
# count. Their sizes come from the dumped `.linked.ll` of each executable.
_SHARED_GLOBAL = re.compile(
    r"^@\S+ = (?:private |internal )?addrspace\(3\) global (.+?) "
    r"(?:undef|zeroinitializer|poison), align (\d+)",
    re.MULTILINE,
)
_LLVM_SCALAR_BYTES = {
    "i1": 1,
    "i8": 1,
    "i16": 2,
    "half": 2,
    "bfloat": 2,
    "i32": 4,
    "float": 4,
    "i64": 8,
    "double": 8,
}
_LLVM_AGGREGATE = re.compile(r"^[\[<](\d+) x (.+)[\]>]$")


def llvm_type_bytes(text: str) -> int:
    """Bytes of an LLVM array/vector/scalar type such as `[1 x [128 x float]]`."""
    text = text.strip()
    if m := _LLVM_AGGREGATE.match(text):
        return int(m.group(1)) * llvm_type_bytes(m.group(2))
    if text not in _LLVM_SCALAR_BYTES:
        raise TilefuseError(f"unknown LLVM type in shared memory: {text}")
    return _LLVM_SCALAR_BYTES[text]


def dynamic_shared_bytes(linked_ll: Path) -> int:
    """Workgroup memory of one executable: its addrspace(3) globals, each
    rounded up to its alignment (how IREE packs them)."""
    total = 0
    for m in _SHARED_GLOBAL.finditer(linked_ll.read_text()):
        align = int(m.group(2))
        total += math.ceil(llvm_type_bytes(m.group(1)) / align) * align
    return total
