"""A strategy that does not run is an error, never a silent fallback."""

import pytest
import tilefuse
from tilefuse import driver
from tilefuse.dispatches import read_dispatches
from tilefuse.verify import verify

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
