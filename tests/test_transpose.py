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


def _transpose(shape, perm, dtype="f32", epilogue=""):
    out = [shape[d] for d in perm]
    t = lambda dims: f"tensor<{'x'.join(map(str, dims))}x{dtype}>"
    body = f"%t = stablehlo.transpose %x, dims = {list(perm)} : ({t(shape)}) -> {t(out)}"
    result = "%t"
    if epilogue:
        body += f"\n  %e = stablehlo.{epilogue} %t : {t(out)}"
        result = "%e"
    return f"func.func @main(%x: {t(shape)}) -> {t(out)} {{\n  {body}\n  return {result} : {t(out)}\n}}"


# Swapped dims with no divisor in [8, 64] (primes, 2 x a prime): tiles of 32
# with a partial last tile, its transfers masked. Each case: shape,
# permutation, element type, an elementwise op after the transpose.
RAGGED_CASES = {
    "2d_both_ragged": ((97, 89), (1, 0), "f32", ""),
    "2d_one_ragged": ((96, 89), (1, 0), "f32", "exponential"),
    "3d_201": ((3, 37, 41), (2, 0, 1), "f32", "abs"),
    "4d_0312": ((2, 37, 3, 43), (0, 3, 1, 2), "f32", ""),
    "f16": ((61, 67), (1, 0), "f16", "negate"),
    "i8": ((59, 71), (1, 0), "i8", ""),
    # Smaller than one tile in both dims: one workgroup, one partial tile.
    "smaller_than_a_tile": ((5, 7), (1, 0), "f32", ""),
}
NUMPY = {"f32": np.float32, "f16": np.float16, "i8": np.int8}
EPILOGUE = {"": lambda x: x, "exponential": np.exp, "abs": np.abs, "negate": np.negative}


@pytest.mark.parametrize("case", list(RAGGED_CASES))
def test_ragged_tiles_on_lavapipe(case):
    """Ragged edge tiles, masked, against numpy: a transpose moves values,
    so the result is exact (up to the epilogue's rounding)."""
    shape, perm, dtype, epilogue = RAGGED_CASES[case]
    module = tilefuse.compile(_transpose(shape, perm, dtype, epilogue), GPU_LIKE, device="vulkan")
    (report,) = module.reports
    assert (report.strategy, report.status) == ("transpose", "applied"), report.line()
    ragged = any(shape[d] % t for d, t in _swapped_tiles(report.params, len(shape)))
    assert (" ragged" in report.params) == ragged, report.line()
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * (20 if dtype == "i8" else 1)).astype(NUMPY[dtype])
    want = EPILOGUE[epilogue](np.transpose(x, perm))
    got = module.main(x)
    assert got.shape == want.shape
    if epilogue == "exponential":
        np.testing.assert_allclose(got, want, rtol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)


def _swapped_tiles(params: str, rank: int) -> list[tuple[int, int]]:
    """(loop dim, tile) of the two swapped dims, from `describe`'s
    tile=TAxTB swap=dA,dB."""
    ta, tb = map(int, re.search(r"tile=(\d+)x(\d+)", params).groups())
    a, b = map(int, re.search(r"swap=d(\d+),d(\d+)", params).groups())
    return [(a, ta), (b, tb)]


def test_ragged_tiles_on_cuda_are_padded(tmp_path):
    """On CUDA a ragged tile's staging buffer is made static, so its rows
    are padded (33 floats: the shared stores of one thread are 132 bytes
    apart); ptxas 0 spills, one barrier between the phases."""
    text = _transpose((97, 89), (1, 0))
    (report,) = tilefuse.compile_program(text, "cuda", dump_dir=tmp_path).reports
    assert (report.strategy, report.status) == ("transpose", "applied"), report.line()
    assert "ragged" in report.params and "unpadded" not in report.params, report.line()
    assert report.registers and report.spill_bytes == 0, report.line()
    (ptx,) = (tmp_path / "binaries").glob("*.ptx")
    ptx_text = ptx.read_text()
    assert re.search(r"st\.shared\.b32\s+\[%rd\d+\+132\]", ptx_text), "rows not padded to 33"
    # Between the phases, and one before returning that the static buffer's
    # dealloc keeps (the script's step "static_tile").
    assert len(re.findall(r"bar\.sync", ptx_text)) == 2


# Rank 5: two dims beyond the three block ids stay whole in each workgroup.
RANK5_CASES = {
    "last_two": ((2, 3, 8, 40, 48), (0, 1, 2, 4, 3)),
    "non_adjacent": ((3, 4, 16, 8, 32), (0, 4, 1, 3, 2)),
}


@pytest.mark.parametrize("case", list(RANK5_CASES))
def test_rank5_on_lavapipe_and_sm90(case):
    shape, perm = RANK5_CASES[case]
    text = _transpose(shape, perm)
    module = tilefuse.compile(text, GPU_LIKE, device="vulkan")
    (report,) = module.reports
    assert (report.strategy, report.status) == ("transpose", "applied"), report.line()
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(module.main(x), np.transpose(x, perm))
    (cuda,) = tilefuse.compile_program(text, "cuda-sm90").reports
    assert (cuda.strategy, cuda.status) == ("transpose", "applied"), cuda.line()
    assert cuda.spill_bytes == 0, cuda.line()


def test_rank5_ragged_is_refused_up_front():
    """Ragged tiles with two whole dims fail to lower: the choosers say so
    instead of a failed build, and the group goes to IREE's formation, whose
    dispatch merges the batch dims (rank 4) and takes the transpose kernel."""
    (report,) = tilefuse.compile_program(
        _transpose((2, 3, 5, 37, 41), (4, 0, 1, 3, 2)), GPU_LIKE
    ).reports
    assert report.status != "failed" and "failed" not in report.reason, report.line()
    assert report.strategy != "transpose" or report.shapes.count("x") == 3, report.line()


@pytest.mark.parametrize("case", list(RAGGED_CASES))
def test_ragged_tiles_build_for_sm90(case):
    shape, perm, dtype, epilogue = RAGGED_CASES[case]
    text = _transpose(shape, perm, dtype, epilogue)
    (report,) = tilefuse.compile_program(text, "cuda-sm90").reports
    assert (report.strategy, report.status) == ("transpose", "applied"), report.line()
    assert report.registers and report.spill_bytes == 0, report.line()


def test_ragged_tiles_on_spirv_say_unpadded():
    (report,) = tilefuse.compile_program(RAGGED, GPU_LIKE).reports
    assert (report.strategy, report.status) == ("transpose", "applied"), report.line()
    assert "ragged unpadded" in report.params
    assert "unpadded: SPIR-V" in report.reason


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


def test_a_reduction_read_through_a_transpose_is_coalesced():
    """sum(exp(transpose(x)), axis=1): IREE folds the transpose into the
    reduction's indexing map, so the dispatch reduces x down its columns and
    the column kernel reads it coalesced, with no transposed copy (the
    driver prefers IREE's one dispatch to the plan's two)."""
    text = """func.func @main(%x: tensor<4096x512xf32>) -> tensor<512xf32> {
  %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<4096x512xf32>) -> tensor<512x4096xf32>
  %e = stablehlo.exponential %t : tensor<512x4096xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%e init: %z) applies stablehlo.add across dimensions = [1] : (tensor<512x4096xf32>, tensor<f32>) -> tensor<512xf32>
  return %s : tensor<512xf32>
}"""
    (cuda,) = tilefuse.compile_program(text, "cuda").reports
    assert (cuda.strategy, cuda.status) == ("column_reduction", "applied"), cuda.line()
    assert cuda.coalescing == "in0 coalesced, out0 coalesced", cuda.line()
    module = tilefuse.compile(text, target="vulkan")
    x = np.random.default_rng(0).standard_normal((4096, 512)).astype(np.float32) * 0.1
    want = np.exp(x.astype(np.float64)).sum(axis=0)
    np.testing.assert_allclose(module.main(x), want, rtol=1e-5)


# MLP-Mixer's residual: x + transpose(token_mix(x)) over [batch, tokens,
# channels] with 49 tokens, so the staged input's tile is ragged along the
# dim each thread reads 4 of in phase 2.
RAGGED_RESIDUAL = """func.func @main(%a: tensor<2x49x64xf32>, %x: tensor<2x64x49xf32>) -> tensor<2x49x64xf32> {
  %t = stablehlo.transpose %x, dims = [0, 2, 1] : (tensor<2x64x49xf32>) -> tensor<2x49x64xf32>
  %r = stablehlo.add %a, %t : tensor<2x49x64xf32>
  return %r : tensor<2x49x64xf32>
}"""


@pytest.mark.parametrize("target", ["cuda", "cuda-sm90"])
def test_a_ragged_tile_read_transposed_in_phase_2_builds_on_cuda(target):
    """The shared tile's transposed read, masked on the edge tile, is first
    made a read along the tile's rows: unrolled as it was, each 1-D piece
    kept the whole mask and failed to verify (IREE's codegen ran the
    dispatch instead, reported as a FALLBACK)."""
    (report,) = tilefuse.compile_program(RAGGED_RESIDUAL, target, strict=True).reports
    assert (report.strategy, report.status) == ("transpose", "applied"), report.line()
    assert "ragged" in report.params and report.spill_bytes == 0, report.line()


def test_a_ragged_tile_read_transposed_in_phase_2_on_lavapipe():
    module = tilefuse.compile(RAGGED_RESIDUAL, GPU_LIKE, device="vulkan")
    (report,) = module.reports
    assert (report.strategy, report.status) == ("transpose", "applied"), report.line()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 49, 64)).astype(np.float32)
    x = rng.standard_normal((2, 64, 49)).astype(np.float32)
    np.testing.assert_array_equal(module.main(a, x), a + np.transpose(x, (0, 2, 1)))
