"""aliases.py: a finished kernel's narrow accesses move onto an alias of their
binding (FileCheck on a small kernel; the softmax case end to end is in
tests/test_row_warp.py), why it moves nothing when it moves nothing, and its
check of its own result."""

import pytest
from support import filecheck
from tilefuse.errors import TilefuseError
from tilefuse.kernel.aliases import (
    NO_ACCESS,
    NO_SUBSPAN,
    ONE_WIDTH,
    alias_report,
    rewrite_kernel,
)

LAYOUT = (
    'layout(<bindings = [#hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, '
    "#hal.pipeline.binding<storage_buffer, Indirect>], flags = Indirect>)"
)
BUFFER = "memref<4x8xf32, #hal.descriptor_type<storage_buffer>>"
ROW = "memref<1x8xf32, strided<[8, 1], offset: ?>, #hal.descriptor_type<storage_buffer>>"


def kernel(narrow_read: str) -> str:
    """Binding 0 read as a 4-vector and, through a subview, as `narrow_read`;
    binding 1 written twice as 4-vectors."""
    return f"""func.func @k() {{
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %p = ub.poison : f32
  %in = hal.interface.binding.subspan {LAYOUT} binding(0) alignment(64) offset(%c0) flags("ReadOnly|Indirect") : {BUFFER}
  %out = hal.interface.binding.subspan {LAYOUT} binding(1) alignment(64) offset(%c0) flags(Indirect) : {BUFFER}
  %row = memref.subview %in[%c4, 0] [1, 8] [1, 1] : {BUFFER} to {ROW}
  %a = vector.transfer_read %in[%c0, %c0], %p {{in_bounds = [true]}} : {BUFFER}, vector<4xf32>
  %b = vector.transfer_read %row[%c0, %c4], %p {{in_bounds = [true]}} : {ROW}, {narrow_read}
  vector.transfer_write %a, %out[%c0, %c0] {{in_bounds = [true]}} : vector<4xf32>, {BUFFER}
  vector.transfer_write %a, %out[%c0, %c4] {{in_bounds = [true]}} : vector<4xf32>, {BUFFER}
  return
}}
"""


def test_narrow_read_moves_to_an_alias_with_its_view(tmp_path):
    text, moved = rewrite_kernel(kernel("vector<1xf32>"))
    assert moved == 1
    filecheck(
        text,
        """
CHECK: %[[ALIAS:.+]] = hal.interface.binding.subspan {{.*}} binding(0) alignment(32)
CHECK: %[[IN:.+]] = hal.interface.binding.subspan {{.*}} binding(0) alignment(64)
CHECK: %[[OUT:.+]] = hal.interface.binding.subspan {{.*}} binding(1) alignment(64)
CHECK-NOT: binding.subspan
CHECK: %[[ROW:.+]] = memref.subview %[[ALIAS]]
CHECK: vector.transfer_read %[[IN]]{{.*}} vector<4xf32>
CHECK: vector.transfer_read %[[ROW]]{{.*}} vector<1xf32>
CHECK: vector.transfer_write {{.*}}, %[[OUT]]
CHECK: vector.transfer_write {{.*}}, %[[OUT]]
""",
        tmp_path,
    )


def test_accesses_of_one_width_stay():
    text, moved = rewrite_kernel(kernel("vector<4xf32>"))
    assert moved == 0 and text.count("binding.subspan") == 2
    assert alias_report(kernel("vector<4xf32>"))[1:] == (0, ONE_WIDTH)


def test_report_says_nothing_when_something_moved():
    text, moved, why_not = alias_report(kernel("vector<1xf32>"))
    assert (moved, why_not) == (1, "") and text == rewrite_kernel(kernel("vector<1xf32>"))[0]


def reads(*lines: str, alignment: int = 64) -> str:
    """Binding 0 (`%in`, [4, 8] f32, `alignment`) and the given lines."""
    body = "\n  ".join(lines)
    return f"""func.func @k() {{
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %p = ub.poison : f32
  %in = hal.interface.binding.subspan {LAYOUT} binding(0) alignment({alignment}) offset(%c0) flags("ReadOnly|Indirect") : {BUFFER}
  {body}
  return
}}
"""


def read(width: int, source: str = "%in", name: str = "") -> str:
    name = name or f"%r{width}"
    return (
        f"{name} = vector.transfer_read {source}[%c0, %c0], %p {{in_bounds = [true]}} : "
        f"{BUFFER}, vector<{width}xf32>"
    )


def test_why_nothing_moved():
    no_binding = """func.func @k() {
  %c0 = arith.constant 0 : index
  %w = memref.alloc() : memref<8xf32, #gpu.address_space<workgroup>>
  %x = memref.load %w[%c0] : memref<8xf32, #gpu.address_space<workgroup>>
  return
}
"""
    assert alias_report(no_binding)[1:] == (0, NO_SUBSPAN)
    # A subspan nothing reads; the only access is to workgroup memory.
    unused = reads(
        "%w = memref.alloc() : memref<8xf32, #gpu.address_space<workgroup>>",
        "%x = memref.load %w[%c0] : memref<8xf32, #gpu.address_space<workgroup>>",
    )
    text, moved, why_not = alias_report(unused)
    assert (moved, why_not) == (0, NO_ACCESS) and text.count("binding.subspan") == 1


def test_each_narrower_width_gets_its_own_alias(tmp_path):
    """128-, 64- and 32-bit reads of one binding: the widest stay, the 64-bit
    ones go to an alias at alignment 32, the 32-bit ones to one at 16."""
    text, moved, why_not = alias_report(reads(read(4), read(2), read(1), read(1, name="%s1")))
    assert (moved, why_not) == (3, "")
    filecheck(
        text,
        """
CHECK-DAG: %[[IN:.+]] = hal.interface.binding.subspan {{.*}} binding(0) alignment(64)
CHECK-DAG: %[[A32:.+]] = hal.interface.binding.subspan {{.*}} binding(0) alignment(32)
CHECK-DAG: %[[A16:.+]] = hal.interface.binding.subspan {{.*}} binding(0) alignment(16)
CHECK: vector.transfer_read %[[IN]]{{.*}} vector<4xf32>
CHECK: vector.transfer_read %[[A32]]{{.*}} vector<2xf32>
CHECK: vector.transfer_read %[[A16]]{{.*}} vector<1xf32>
CHECK: vector.transfer_read %[[A16]]{{.*}} vector<1xf32>
""",
        tmp_path,
    )


def test_access_the_rewrite_cannot_reach_is_an_error():
    """A narrow read through an op the rewrite does not follow
    (memref.assume_alignment) would stay on the binding's subspan and make
    IREE read the whole binding as scalars: the check names the binding and
    the op."""
    text = reads(
        read(4),
        f"%v = memref.assume_alignment %in, 64 : {BUFFER}",
        read(1, source="%v"),
    )
    with pytest.raises(TilefuseError, match="binding 0 still has 32- and 128-bit accesses") as e:
        alias_report(text)
    assert "memref.assume_alignment" in str(e.value) and str(e.value).startswith("k: ")


def test_aliases_that_cse_would_merge_are_an_error():
    """Alignment 2 leaves one halving: the 64- and 32-bit aliases would both
    be alignment 1, identical subspans that CSE merges back into one."""
    with pytest.raises(TilefuseError, match="binding 0 has two identical subspans"):
        alias_report(reads(read(4), read(2), read(1), alignment=2))
