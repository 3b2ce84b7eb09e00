"""aliases.py: a finished kernel's narrow accesses move onto an alias of their
binding (FileCheck on a small kernel; the softmax case end to end is in
tests/test_row_warp.py)."""

from support import filecheck
from tilefuse.kernel.aliases import rewrite_kernel

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
