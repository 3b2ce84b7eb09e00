"""Unit tests of the loop chooser: sizes that divide get exact tiles, others masks."""

import tilefuse
from tilefuse.dispatch.read import Dispatch, Operand
from tilefuse.strategies import choose
from tilefuse.strategies.loop import plan
from tilefuse.targets import load_target


def elementwise(shape, dtype="f32", bits=32):
    op = Operand(list(shape), dtype, bits)
    return Dispatch(
        name="d",
        executable="e",
        location="",
        ops=["linalg.generic"],
        root_op="linalg.generic",
        iterator_types=["parallel"] * len(shape),
        loop_ranges=list(shape),
        inputs=[op],
        outputs=[op],
        output_maps_identity=True,
        input_producers=["load"],
    )


def test_divisible_row_uses_full_vectors():
    p, _ = plan(elementwise((33, 4096)), load_target("vulkan"))
    assert p.vector_sizes == (1, 4) and p.workgroup_tile == (1, 512) and p.exact


def test_threads_follow_target_subgroup_and_preference():
    p, _ = plan(elementwise((33, 4096)), load_target("cuda"))
    assert p.launch.workgroup == (256, 1, 1) and p.launch.subgroup == 32
    assert plan(elementwise((33, 4096)), load_target("vulkan"))[0].launch.subgroup == 8


def test_prime_row_is_masked():
    p, why = plan(elementwise((50257,)), load_target("vulkan"))
    assert not p.exact and "masked" in why and p.vector_sizes == (1,)


def test_short_rows_share_a_workgroup():
    p, _ = plan(elementwise((64, 7)), load_target("vulkan"))
    assert p.launch.workgroup[0] == 7 and p.launch.workgroup[1] > 1


def test_bf16_vector_capped_on_spirv_not_cuda():
    d = elementwise((4096,), "bf16", 16)
    assert plan(d, load_target("vulkan"))[0].vector_sizes == (4,)
    assert plan(d, load_target("cuda"))[0].vector_sizes == (8,)


def test_reduction_root_is_not_a_loop_kernel():
    d = elementwise((8, 8))
    d.iterator_types = ["parallel", "reduction"]
    choice = choose(d, load_target("vulkan"))
    assert choice.strategy is None and "reduction" in choice.reason


def test_grid_limit_is_respected():
    p, why = plan(elementwise((9_000_000, 1)), load_target("vulkan"))
    assert p is None and "grid y" in why


# A softmax left to IREE's formation ahead of a transposed write (a Llama
# block's attention): IREE keeps it as one linalg.softmax producing the
# transpose's input. The loop kernel would fuse it as if elementwise (the
# build left linalg.softmax whole and the kernel check refused it).
SOFTMAX_THEN_TRANSPOSE = """#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, d3, d1, d2)>
func.func @main(%arg0: tensor<2x4x16x16xf32>) -> tensor<2x16x4x16xf32> {
  %0 = flow.dispatch.region -> (tensor<2x16x4x16xf32>) {
    %1 = tensor.empty() : tensor<2x16x4x16xf32>
    %2 = tensor.empty() : tensor<2x4x16x16xf32>
    %3 = linalg.softmax dimension(3) ins(%arg0 : tensor<2x4x16x16xf32>)
        outs(%2 : tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
    %4 = linalg.generic {indexing_maps = [#map, #map1],
        iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
        ins(%3 : tensor<2x4x16x16xf32>) outs(%1 : tensor<2x16x4x16xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<2x16x4x16xf32>
    flow.return %4 : tensor<2x16x4x16xf32>
  }
  return %0 : tensor<2x16x4x16xf32>
}
"""


def test_a_reducing_producer_is_refused_before_a_build():
    (report,) = tilefuse.compile_program(SOFTMAX_THEN_TRANSPOSE, "vulkan").reports
    assert report.strategy is None and "FALLBACK" not in report.line(), report.line()
    assert "loop: a producer reduces (linalg.softmax)" in report.line(), report.line()
