"""The driver as a table of stages: their order, and `recompile` reusing
everything before the last compile (what bench's timing modules need)."""

import numpy as np
import pytest
import tilefuse
from tilefuse import driver
from tilefuse.paths import SAMPLES


def test_stages_in_pipeline_order():
    assert [name for name, _ in driver.STAGES] == [
        "fusion",
        "phase1",
        "dispatches",
        "strategies",
        "phase2",
        "phase3",
    ]


def test_recompile_reuses_phase1_and_strategies(tmp_path, monkeypatch):
    """softmax_f32 (row_warp, its kernel aliased in phase 3): the
    repeated-dispatch module comes from phase 3 alone, from phase 2's
    finished kernels, and computes the same softmax."""
    result = tilefuse.compile_program(SAMPLES / "softmax_f32.mlir", "vulkan", dump_dir=tmp_path)

    def not_again(*_args, **_kwargs):
        raise AssertionError("recompile ran a stage before phase 3")

    monkeypatch.setattr(driver, "phase1_executable_sources", not_again)
    monkeypatch.setattr(driver.fusion_pkg, "fuse", not_again)
    monkeypatch.setattr(driver, "phase2_kernels", not_again)
    flag = "--iree-hal-benchmark-dispatch-repeat-count=3"
    timing = driver.recompile(result, tmp_path / "timing", (flag,))
    assert timing != result.vmfb
    assert (tmp_path / "timing" / "executable_sources_spliced.mlir").exists()
    assert not (tmp_path / "timing" / "executable_sources.mlir").exists()

    x = np.random.default_rng(0).standard_normal((256, 1000)).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    got = tilefuse.CompiledModule(timing, "vulkan").main(x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_recompile_needs_the_kept_work_directory():
    result = tilefuse.compile_program(SAMPLES / "gelu_f32.mlir", "vulkan")  # temporary dir
    with pytest.raises(tilefuse.TilefuseError, match="dump directory"):
        driver.recompile(result, result.sources.parent / "timing", ())


def test_cuda_recompile_reruns_phase2(tmp_path):
    """CUDA's phase 2 is the one compile: recompile runs it again, with the
    library, and not phase 1."""
    result = tilefuse.compile_program(SAMPLES / "gelu_f32.mlir", "cuda", dump_dir=tmp_path)
    driver.recompile(result, tmp_path / "timing", ("--iree-hal-benchmark-dispatch-repeat-count=3",))
    assert (tmp_path / "timing" / "dispatch_table.mlir").exists()
    assert not (tmp_path / "timing" / "executable_sources.mlir").exists()
