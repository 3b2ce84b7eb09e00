"""Fusion never costs dispatches that no kernel gains: the driver compares
the fusion plan with IREE's own dispatch formation (driver.formation_refusal)
and keeps IREE's when it issues fewer dispatches and leaves no more of them to
IREE's codegen. Each case runs on Vulkan against JAX's or numpy's outputs."""

import numpy as np
import tilefuse
from corpus.load import load
from tilefuse.dispatch.read import dispatch_sites
from tilefuse.paths import SAMPLES


def _sites(result) -> int:
    return dispatch_sites(result.sources.read_text())


def _own_sites(source, dump) -> int:
    """Dispatches IREE's own formation issues (tilefuse without fusion)."""
    return _sites(tilefuse.compile_program(source, "vulkan", dump_dir=dump, fusion=False))


def test_plan_with_more_dispatches_and_no_more_kernels_gives_way(tmp_path):
    """int_ops_i32 (JAX corpus): the plan recomputes a divide and a remainder
    in the groups that read them and issues 19 dispatches; IREE issues 17,
    with as many on its own codegen. IREE's formation is kept, with a note,
    and the loop kernel takes all its dispatches (the comparisons' i1
    results widened to i8 too: the loop script's step tensor_arith)."""
    path, inputs, outputs, _entry = load("int_ops_i32")
    result = tilefuse.compile_program(path, "vulkan", dump_dir=tmp_path / "plan")
    (note,) = result.notes
    assert note.startswith("fusion plan not used, IREE's dispatches kept: the plan issues 19 "), (
        note
    )
    assert result.fusion is None
    assert _sites(result) == _own_sites(path, tmp_path / "own") == 17
    assert sum(r.strategy == "loop" and r.status == "applied" for r in result.reports) == 17
    got = tilefuse.CompiledModule(result.vmfb, "vulkan").main(*inputs)
    for g, want in zip(got, outputs, strict=True):
        np.testing.assert_array_equal(g, want)


def test_plan_that_buys_kernels_is_kept(tmp_path):
    """sum_of_squares_f32: the plan sums 512 rows and then their partials on
    two row kernels; IREE forms one dispatch, on its own codegen (which sums
    only the first 65536 elements on lavapipe). The plan stays."""
    source = SAMPLES / "sum_of_squares_f32.mlir"
    result = tilefuse.compile_program(source, "vulkan", dump_dir=tmp_path / "plan", strict=True)
    assert not result.notes
    assert _sites(result) == 2 > _own_sites(source, tmp_path / "own") == 1
    assert all(r.status == "applied" for r in result.reports), [r.line() for r in result.reports]
    x = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)
    got = tilefuse.CompiledModule(result.vmfb, "vulkan").main(x)
    np.testing.assert_allclose(got, np.sum(x.astype(np.float64) ** 2), rtol=1e-5)


def test_a_one_region_plan_is_not_compared(tmp_path):
    """softmax_f32: one region and no op outside it. IREE's formation cannot
    issue fewer than one dispatch, so its phase 1 is not run; the log says so.
    A two-region plan (sum_of_squares_f32) is compared (its phase 1 ran)."""
    one = tilefuse.compile_program(SAMPLES / "softmax_f32.mlir", "vulkan", dump_dir=tmp_path / "a")
    assert "formation: not compared with IREE's: the plan has one region" in "\n".join(one.log)
    assert not (tmp_path / "a" / "iree-formation" / "executable_sources.mlir").exists()
    two = tilefuse.compile_program(
        SAMPLES / "sum_of_squares_f32.mlir", "vulkan", dump_dir=tmp_path / "b"
    )
    assert not any("not compared" in line for line in two.log), two.log
    assert (tmp_path / "b" / "iree-formation" / "executable_sources.mlir").is_file()
