"""CUDA: sm_80 and sm_90 modules compile, their PTX assembles with ptxas.

There is no GPU here; ptxas -v is the evidence that the kernels are valid
for the architecture, and it gives registers and spills.
"""

import shutil
import subprocess
import sys

import pytest
import tilefuse
from support import SAMPLE_STRATEGIES

pytestmark = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")


@pytest.mark.parametrize("target,arch", [("cuda", "sm_80"), ("cuda-sm90", "sm_90")])
@pytest.mark.parametrize("sample,strategy", SAMPLE_STRATEGIES)
def test_samples_assemble_without_spills(root, target, arch, sample, strategy, tmp_path):
    result = tilefuse.compile_program(
        root / "samples" / f"{sample}.mlir", target, dump_dir=tmp_path
    )
    ptx = list((tmp_path / "binaries").glob("*.ptx"))
    assert ptx and f".target {arch}" in ptx[0].read_text()
    # One dispatch, or a reduction's steps where the target splits it over
    # the grid (column_sum_small on CUDA: hlo/column_splits.py).
    assert 1 <= len(result.reports) <= 2 and len(result.reports) == 1 + (
        result.fusion.split_steps if result.fusion else 0
    )
    for report in result.reports:
        assert (report.strategy, report.status) == (strategy, "applied"), report.line()
        assert report.registers is not None and report.registers > 0
        assert report.spill_bytes == 0


def test_explain_reports_registers(root):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tilefuse.cli",
            "explain",
            str(root / "samples/gelu_f32.mlir"),
            "--target",
            "cuda",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "strategy=loop" in proc.stdout and "registers, 0 spill bytes" in proc.stdout


def test_a_program_with_no_dispatch_compiles_for_cuda():
    """A program that returns its argument has no kernel and no PTX; plain
    iree-compile compiles it, so must tilefuse (the ptxas check has nothing
    to check, which is no error)."""
    text = """func.func @main(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  return %x : tensor<16x128xf32>
}"""
    result = tilefuse.compile_program(text, "cuda")
    assert result.reports == [] and result.vmfb


@pytest.mark.parametrize("target", ["cuda", "cuda-sm90"])
def test_ragged_column_broadcast_takes_the_loop_kernel(target):
    """37 rows of 128 plus a per-row value: the ragged row tile reads that
    value with a masked read broadcast across the vector, which NVVM could
    not translate (the loop kernel failed in phase 2 and fell back); the
    script's CUDA step lower_transfers makes it a masked 1-element load."""
    text = """func.func @main(%x: tensor<37x128xf32>, %c: tensor<37xf32>) -> tensor<37x128xf32> {
  %b = stablehlo.broadcast_in_dim %c, dims = [0] : (tensor<37xf32>) -> tensor<37x128xf32>
  %y = stablehlo.add %x, %b : tensor<37x128xf32>
  return %y : tensor<37x128xf32>
}"""
    (report,) = tilefuse.compile_program(text, target, strict=True).reports
    assert (report.strategy, report.status) == ("loop", "applied"), report.line()
    assert "masked" in report.params and report.spill_bytes == 0, report.line()
