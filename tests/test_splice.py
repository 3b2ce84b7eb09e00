"""kernel/splice.py: what SPIR-V's phase 2 translates, and its finished
kernels put back into the sources phase 3 compiles."""

import pytest
from tilefuse.errors import TilefuseError
from tilefuse.kernel.splice import finished_kernels, splice, strategy_executables


def test_strategy_executables_keep_only_the_named_dispatches():
    """Phase 2's input on SPIR-V: the named dispatch's executable, without
    the host code, the other executables, or another export of its own."""
    sources = """
hal.executable private @ex0 {
  hal.executable.variant public @v target(#hal.executable.target<"vulkan-spirv", "vulkan-spirv-fb">) {
    hal.executable.export public @d0 ordinal(0) layout(#hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer>]>) count(%arg0: !hal.device) -> (index, index, index) {
      %c1 = arith.constant 1 : index
      hal.return %c1, %c1, %c1 : index, index, index
    }
    hal.executable.export public @d1 ordinal(1) layout(#hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer>]>) count(%arg0: !hal.device) -> (index, index, index) {
      %c1 = arith.constant 1 : index
      hal.return %c1, %c1, %c1 : index, index, index
    }
    builtin.module {
      func.func @d0() { return }
      func.func @d1() { return }
    }
  }
}
hal.executable private @ex1 {
  hal.executable.variant public @v target(#hal.executable.target<"vulkan-spirv", "vulkan-spirv-fb">) {
    hal.executable.export public @d2 ordinal(0) layout(#hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer>]>) count(%arg0: !hal.device) -> (index, index, index) {
      %c1 = arith.constant 1 : index
      hal.return %c1, %c1, %c1 : index, index, index
    }
    builtin.module {
      func.func @d2() { return }
    }
  }
}
util.func public @main() { util.return }
"""
    text = strategy_executables(sources, {"d0"})
    assert "@ex0" in text and "@d0" in text
    for gone in ("@ex1", "@d1", "@d2", "@main"):
        assert gone not in text, gone


def _translated(count: str) -> str:
    """An executable as phase 2 leaves it: a finished kernel and its
    dispatch_config yielding `count`."""
    return f"""
hal.executable private @ex0 {{
  hal.executable.variant public @v target(#hal.executable.target<"vulkan-spirv", "vulkan-spirv-fb">) {{
    hal.executable.export public @d0 ordinal(0) layout(#hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer>]>) count(%arg0: !hal.device) -> (index, index, index) {{
      %c1 = arith.constant 1 : index
      hal.return %c1, %c1, %c1 : index, index, index
    }}
    builtin.module {{
      func.func @d0() attributes {{translation_info = #iree_codegen.translation_info<pipeline = #iree_codegen.no_pipeline workgroup_size = [8, 1, 1]>}} {{ return }}
      iree_codegen.dispatch_config @d0 {{
      ^bb0(%arg0: !hal.device):
        {count}
      }}
    }}
  }}
}}
"""


def test_finished_kernels_carry_the_count_the_strategy_set():
    count = """%c4 = arith.constant 4 : index
        %c1 = arith.constant 1 : index
        iree_codegen.yield %c4, %c1, %c1 : index, index, index"""
    ((name, (text, grid)),) = finished_kernels(_translated(count)).items()
    assert name == "d0" and grid == [4, 1, 1] and "no_pipeline" in text
    # Put back in place of the dispatch, the export's count is constant.
    spliced = splice(_translated(count), {"d0": (text, grid)})
    assert "arith.constant 4 : index" in spliced.split("builtin.module")[0]


def test_a_kernel_without_a_constant_count_is_an_error():
    count = """%n = arith.index_cast %c : i32 to index
        iree_codegen.yield %n, %n, %n : index, index, index"""
    count = "%c = arith.constant 3 : i32\n        " + count
    with pytest.raises(TilefuseError, match="no constant workgroup count"):
        finished_kernels(_translated(count))
