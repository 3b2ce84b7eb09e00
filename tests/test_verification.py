"""A strategy that does not run is an error, never a silent fallback."""

import pytest
import tilefuse
from conftest import reduce_program
from tilefuse import driver
from tilefuse.dispatch.read import read_dispatches
from tilefuse.kernel.verify import PRINT_HEADER, verify

TEXT = """func.func @main(%a: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %0 = stablehlo.exponential %a : tensor<64x64xf32>
  return %0 : tensor<64x64xf32>
}
"""


def _phase1(tmp_path, target):
    program = tilefuse.frontend.load_program(TEXT)
    src = driver.phase1_input(program, target, tmp_path)
    return driver.phase1_executable_sources(src, target, tmp_path)


@pytest.mark.parametrize("breakage", ["unparsable", "empty_table"])
def test_broken_library_is_an_error(tmp_path, breakage):
    target = tilefuse.load_target("vulkan")
    sources = _phase1(tmp_path, target)
    choices = driver.choose_strategies(read_dispatches(sources.read_text()), target)
    assert choices[0].strategy == "loop"
    library = driver.write_library(choices, tmp_path)
    if breakage == "unparsable":
        library.write_text(library.read_text().replace("transform.structured.match", "oops", 1))
    else:  # parses, but the dispatch table assigns nothing
        library.write_text(
            "module attributes {transform.with_named_sequence} {\n"
            "  transform.named_sequence @kernel_config("
            "%v: !transform.any_op {transform.readonly}) { transform.yield }\n}\n"
        )
    with pytest.raises(tilefuse.TilefuseError) as info:
        _, log, _ = driver.phase2_executable(sources, library, target, tmp_path, True)
        verify(choices, log)
    assert "main_dispatch_0" in str(info.value) or "failed" in str(info.value)


def test_fallback_is_reported_with_reason():
    result = tilefuse.compile_program(TEXT, target="cpu")
    (report,) = result.reports
    assert report.status == "fallback" and "CPU codegen" in report.reason
    assert "fallback: target cpu uses IREE's CPU codegen" in report.line()


def test_undistributed_combine_is_an_error(tmp_path):
    """The row kernel has no barrier before its combine: each lane reads back
    its own partials only once the combine is distributed over the lanes. A
    printed kernel that still holds the combine as one vector.multi_reduction
    (what a failed distribution leaves) is rejected, not run racy."""
    target = tilefuse.load_target("vulkan")
    program = tilefuse.frontend.load_program(reduce_program((64, 1000), [1], "f32", "add"))
    src = driver.phase1_input(program, target, tmp_path)
    sources = driver.phase1_executable_sources(src, target, tmp_path)
    choices = driver.choose_strategies(read_dispatches(sources.read_text()), target)
    assert choices[0].strategy in ("row_reduction", "row_warp")
    info = "#iree_codegen.translation_info<pipeline = #iree_codegen.no_pipeline workgroup_size = [8, 1, 1]>"
    kernel = f"""func.func @{choices[0].dispatch.name}() attributes {{translation_info = {info}}} {{
  %v = arith.constant dense<1.0> : vector<32xf32>
  %zero = arith.constant 0.0 : f32
  %r = vector.multi_reduction <add>, %v, %zero [0] : vector<32xf32> to f32
  return
}}
"""
    with pytest.raises(tilefuse.TilefuseError, match="combine was not distributed"):
        verify(choices, f"{PRINT_HEADER}\n{kernel}")
