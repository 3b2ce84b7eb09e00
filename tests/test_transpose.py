"""The transpose kernel (strategies/transpose.py, transform_scripts/transpose.mlir):
which roots it takes, numerics on lavapipe against numpy, and what its CUDA
build must hold (workgroup memory, one barrier, ptxas 0 spills).

On the `vulkan` target (lavapipe, the CPU) the loop kernel keeps these
roots: coalescing does not matter there (Target.coalescing_matters). The
numerics tests run the transpose kernel on lavapipe all the same, through
a copy of that target with coalescing_matters set."""

import dataclasses
import re

import ml_dtypes
import numpy as np
import pytest
import tilefuse
from iree.compiler import ir
from tilefuse.strategies import transpose
from tilefuse.targets import load_target

GPU_LIKE = dataclasses.replace(load_target("vulkan"), coalescing_matters=True)
SAMPLES = tilefuse.paths.SAMPLES

T4D = """func.func @main(%x: tensor<2x64x64x48xf32>) -> tensor<2x48x64x64xf32> {
  %t = stablehlo.transpose %x, dims = [0, 3, 1, 2] : (tensor<2x64x64x48xf32>) -> tensor<2x48x64x64xf32>
  return %t : tensor<2x48x64x64xf32>
}"""
ADD_F16 = """func.func @main(%x: tensor<256x512xf16>, %y: tensor<512x256xf16>) -> tensor<512x256xf16> {
  %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<256x512xf16>) -> tensor<512x256xf16>
  %e = stablehlo.exponential %t : tensor<512x256xf16>
  %a = stablehlo.add %e, %y : tensor<512x256xf16>
  return %a : tensor<512x256xf16>
}"""
RAGGED = """func.func @main(%x: tensor<97x89xf32>) -> tensor<89x97xf32> {
  %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<97x89xf32>) -> tensor<89x97xf32>
  return %t : tensor<89x97xf32>
}"""

CASES = {
    # The sample (dims [2, 0, 1]: 170 tiles by 17), IREE's write-permuted form.
    "transpose_exp_abs": (
        (SAMPLES / "transpose_exp_abs_f32.mlir").read_text(),
        [(20, 160, 170)],
        lambda x: np.abs(np.exp(np.transpose(x, (2, 0, 1)))),
        "tile=17x32",
    ),
    # x read directly and transposed by one add: the transposed one is staged.
    "log_transpose_add": (
        (SAMPLES / "log_transpose_add_f32.mlir").read_text(),
        [(20, 160, 160)],
        lambda x: np.log(x) + np.transpose(np.log(x), (0, 2, 1)),
        "staged=in1",
    ),
    # Rank 4, non-adjacent dims: the leading dim beyond three block ids
    # stays whole in each workgroup.
    "rank4_0312": (T4D, [(2, 64, 64, 48)], lambda x: np.transpose(x, (0, 3, 1, 2)), "tile=24x32"),
    # f16, with an input read like the output.
    "f16_exp_add": (ADD_F16, [(256, 512), (512, 256)], lambda x, y: np.exp(x.T) + y, "tile=32x32"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_transpose_kernel_on_lavapipe(case):
    text, shapes, reference, params = CASES[case]
    module = tilefuse.compile(text, target=GPU_LIKE, device="vulkan")
    (report,) = module.reports
    assert (report.strategy, report.status) == ("transpose", "applied"), report.line()
    assert params in report.params, report.line()
    rng = np.random.default_rng(0)
    dtype = np.float16 if "f16" in case else np.float32
    args = [(rng.random(s) + 0.5).astype(dtype) for s in shapes]
    want = reference(*[a.astype(np.float64) for a in args])
    got = module.main(*args).astype(np.float64)
    rel = 2e-3 if dtype == np.float16 else 1e-6  # f16 exp; f32 log/exp
    assert np.max(np.abs(got - want)) <= rel * np.max(np.abs(want))


@pytest.mark.parametrize("dtype", ["bf16", "i8", "i32"])
def test_transpose_kernel_other_element_types(dtype):
    """A pure transpose is a copy: the result must be exact (bf16 and i8
    pad the workgroup tile's rows by one 16- or 8-bit element)."""
    text = f"""func.func @main(%x: tensor<64x96x{dtype}>) -> tensor<96x64x{dtype}> {{
  %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<64x96x{dtype}>) -> tensor<96x64x{dtype}>
  return %t : tensor<96x64x{dtype}>
}}"""
    module = tilefuse.compile(text, target=GPU_LIKE, device="vulkan")
    (report,) = module.reports
    assert (report.strategy, report.status) == ("transpose", "applied"), report.line()
    np_type = {"bf16": ml_dtypes.bfloat16, "i8": np.int8, "i32": np.int32}[dtype]
    x = (np.random.default_rng(0).standard_normal((64, 96)) * 20).astype(np_type)
    np.testing.assert_array_equal(module.main(x), x.T)


def test_ragged_dims_stay_on_the_loop_kernel():
    (report,) = tilefuse.compile_program(RAGGED, GPU_LIKE).reports
    assert report.strategy == "loop" and report.status == "applied", report.line()
    assert report.coalescing == "in0 coalesced, out0 strided (97)"


def test_lavapipe_keeps_the_loop_kernel():
    text = (SAMPLES / "transpose_exp_abs_f32.mlir").read_text()
    (report,) = tilefuse.compile_program(text, "vulkan").reports
    assert report.strategy == "loop", report.line()


def test_cuda_build_stages_through_workgroup_memory(tmp_path):
    text = (SAMPLES / "transpose_exp_abs_f32.mlir").read_text()
    (report,) = tilefuse.compile_program(text, "cuda", dump_dir=tmp_path).reports
    assert (report.strategy, report.status) == ("transpose", "applied"), report.line()
    assert report.registers and report.spill_bytes == 0, report.line()
    (ptx,) = (tmp_path / "binaries").glob("*.ptx")
    text = ptx.read_text()
    assert re.search(r"st\.shared", text) and re.search(r"ld\.shared", text)
    assert len(re.findall(r"bar\.sync", text)) == 1  # between the two phases


def test_a_kernel_without_a_staged_tile_is_refused():
    func = ir.Module.parse("func.func @k() {\n  return\n}", ir.Context()).body.operations[0]
    assert "no workgroup-memory tile" in transpose.kernel_refusal(func.operation, None)
