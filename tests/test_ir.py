"""FileCheck-style checks of the generated dispatch table and of the kernel
the loop strategy produces."""

import pytest
import tilefuse
from support import filecheck

TEXT = """func.func @main(%a: tensor<33x4096xf32>, %b: tensor<4096xf32>) -> tensor<33x4096xf32> {
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<4096xf32>) -> tensor<33x4096xf32>
  %0 = stablehlo.add %a, %bb : tensor<33x4096xf32>
  return %0 : tensor<33x4096xf32>
}
"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    dump = tmp_path_factory.mktemp("dump")
    return tilefuse.compile_program(TEXT, "vulkan", dump_dir=dump), dump


def test_dispatch_table(compiled, tmp_path):
    result, _ = compiled
    filecheck(
        result.library,
        """
CHECK: codegen_spec = @tilefuse_loop__[[D:main_dispatch_0[a-z0-9_]*]]>
CHECK: transform.named_sequence @tilefuse_loop__[[D]](
CHECK: tile_using_forall {{.*}} tile_sizes [1, 512](mapping = [#gpu.block<y>, #gpu.block<x>])
CHECK: tile_using_forall {{.*}} num_threads [1, 128](mapping = [#gpu.thread<y>, #gpu.thread<x>])
CHECK: transform.structured.vectorize {{.*}} vector_sizes [1, 4]
CHECK: map_nested_forall_to_gpu_threads {{.*}} workgroup_dims = [128, 1, 1] subgroup_size = 8
CHECK: transform.named_sequence @kernel_config
CHECK: attributes {sym_name = "[[D]]"}
CHECK: transform.annotate
""",
        tmp_path,
    )


def test_shared_steps_are_defined_once_and_included(tmp_path):
    """Two dispatches, two specialized sequences: each reaches the shared
    root-finding step by transform.include, defined once in the library
    (transform_scripts/common.mlir)."""
    two = TEXT.replace(
        "  return %0 : tensor<33x4096xf32>",
        "  %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
        "  %s = stablehlo.reduce(%0 init: %z) applies stablehlo.add across dimensions = [1]"
        " : (tensor<33x4096xf32>, tensor<f32>) -> tensor<33xf32>\n"
        "  return %0, %s : tensor<33x4096xf32>, tensor<33xf32>",
    ).replace("-> tensor<33x4096xf32> {", "-> (tensor<33x4096xf32>, tensor<33xf32>) {")
    result = tilefuse.compile_program(two, "vulkan", strict=True, fusion=False)
    assert len([r for r in result.reports if r.status == "applied"]) == 2
    filecheck(
        result.library,
        """
CHECK-COUNT-1: transform.named_sequence @tilefuse_find_root(
CHECK-NOT: transform.named_sequence @tilefuse_find_root(
CHECK: transform.named_sequence @tilefuse_{{[a-z_]+}}__main_dispatch
CHECK: transform.include @tilefuse_find_root failures(propagate)
CHECK: transform.named_sequence @tilefuse_{{[a-z_]+}}__main_dispatch
CHECK: transform.include @tilefuse_find_root failures(propagate)
""",
        tmp_path,
    )


def test_kernel_after_strategy(compiled, tmp_path):
    _, dump = compiled
    kernels = tilefuse.verify.printed_kernels((dump / "phase2.log").read_text())
    (kernel,) = kernels.values()
    # 33x4096 divides the 512-wide tile: full 128-bit vectors, no masks, and
    # every thread does one coalesced load per input and one store.
    filecheck(
        kernel,
        """
CHECK: func.func @main_dispatch_0
CHECK-SAME: translation_info = #iree_codegen.translation_info<pipeline = #iree_codegen.no_pipeline workgroup_size = [128, 1, 1] subgroup_size = 8>
CHECK-DAG: hal.interface.workgroup.id[0]
CHECK-DAG: hal.interface.workgroup.id[1]
CHECK-DAG: gpu.thread_id x
CHECK-NOT: vector.create_mask
CHECK: vector.transfer_read {{.*}} vector<4xf32>
CHECK: vector.transfer_read {{.*}} vector<4xf32>
CHECK: arith.addf {{.*}} : vector<4xf32>
CHECK: vector.transfer_write {{.*}} vector<4xf32>
CHECK-NOT: linalg.
CHECK: return
""",
        tmp_path,
    )


def test_ragged_kernel_is_masked_not_padded(tmp_path):
    text = TEXT.replace("4096", "50257").replace("33x", "3x")
    dump = tmp_path / "d"
    result = tilefuse.compile_program(text, "vulkan", dump_dir=dump)
    assert "masked" in result.reports[0].params
    (kernel,) = tilefuse.verify.printed_kernels((dump / "phase2.log").read_text()).values()
    filecheck(
        kernel,
        """
CHECK: func.func @main_dispatch_0
CHECK-NOT: memref.alloc
CHECK: %[[MASK:.*]] = arith.cmpi sgt, {{.*}} : vector<1xi64>
CHECK: vector.transfer_read {{.*}}, %[[MASK]] {in_bounds = [true]}
CHECK: vector.transfer_read {{.*}}, %[[MASK]] {in_bounds = [true]}
CHECK: vector.transfer_write {{.*}}, %[[MASK]] {in_bounds = [true]}
CHECK-NOT: memref.alloc
""",
        tmp_path,
    )


SOFTMAX_ROWS = """func.func @main(%x: tensor<4xNxf32>) -> tensor<4xNxf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1]
    : (tensor<4xNxf32>, tensor<f32>) -> tensor<4xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<4xf32>) -> tensor<4xNxf32>
  %e = stablehlo.exponential %x : tensor<4xNxf32>
  %d = stablehlo.subtract %e, %mb : tensor<4xNxf32>
  %s = stablehlo.reduce(%d init: %zero) applies stablehlo.add across dimensions = [1]
    : (tensor<4xNxf32>, tensor<f32>) -> tensor<4xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<4xf32>) -> tensor<4xNxf32>
  %y = stablehlo.divide %d, %sb : tensor<4xNxf32>
  return %y : tensor<4xNxf32>
}
"""


@pytest.mark.parametrize(
    "n, checks",
    [
        # Ragged rows of 520 (8 chunks of 64, a tail of 8): every optional
        # step runs, each a copy carrying the dispatch's name.
        (
            520,
            """
CHECK: transform.named_sequence @tilefuse_row_warp__[[D:main_dispatch_0[a-z0-9_]*]](
CHECK: transform.include @row_warp_split_rows__[[D]] failures(propagate)
CHECK: transform.include @row_warp_chunk_root__[[D]] failures(propagate)
CHECK: transform.include @row_warp_peel_root__[[D]] failures(propagate)
CHECK: transform.include @row_warp_unroll__[[D]] failures(propagate)
CHECK: transform.include @row_warp_unroll__[[D]] failures(propagate)
CHECK-DAG: transform.named_sequence @row_warp_split_rows__[[D]](
CHECK-DAG: transform.structured.split {{.*}} after 512
CHECK-DAG: transform.named_sequence @row_warp_unroll__[[D]](
CHECK-DAG: factor = 8
""",
        ),
        # Rows of 64 the 32-element chunk divides: no tail, so the split and
        # the peel are the shared no-op, and no copy of them is made.
        (
            64,
            """
CHECK: transform.named_sequence @tilefuse_row_warp__[[D:main_dispatch_0[a-z0-9_]*]](
CHECK: transform.include @tilefuse_pass failures(propagate)
CHECK: transform.include @row_warp_chunk_root__[[D]] failures(propagate)
CHECK: transform.include @tilefuse_pass failures(propagate)
CHECK: transform.include @row_warp_unroll__[[D]] failures(propagate)
CHECK-NOT: @row_warp_split_rows
CHECK-NOT: @row_warp_peel_root
""",
        ),
    ],
)
def test_optional_steps_are_included_not_cut(n, checks, tmp_path):
    """The row_warp script's optional steps are named sequences; the library
    points each tilefuse.step include at the chosen one (row_warp.steps)."""
    result = tilefuse.compile_program(SOFTMAX_ROWS.replace("N", str(n)), "vulkan", strict=True)
    assert [r.strategy for r in result.reports] == ["row_warp"], result.reports[0].line()
    filecheck(result.library, checks, tmp_path)
