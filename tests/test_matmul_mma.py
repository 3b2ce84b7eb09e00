"""The tensor-core matmul kernel (strategies/matmul_mma.py,
transform_scripts/matmul_mma.mlir) on CUDA: which contractions it takes, and
what each build must contain. No GPU runs these kernels here, so the checks
are the ones that catch its silent degradations (shared/IREE_NOTES.md): the
PTX holds mma.sync, ldmatrix and a pipelined cp.async loop, and ptxas
assembles it for sm_80 and sm_90 with 0 spills. The CUDA targets give f16
products with f32 accumulators to IREE's pipeline (matmul_mma_iree, target
field iree_mma): the f16 tests here turn it off (OWN, OWN_SM90) to reach
this kernel."""

import re

import pytest
import tilefuse
from iree.compiler import ir
from test_matmul import program
from tilefuse.strategies import matmul_mma

OWN, OWN_SM90 = "cuda,iree_mma=false", "cuda-sm90,iree_mma=false"


def f16_program(m, k, n, epilogue="bias_relu", b_layout="kn", result="f16"):
    """test_matmul's program in f16; with result="f32" the dot_general
    accumulates (and returns) f32, the epilogue stays f32."""
    text = program(m, k, n, epilogue, b_layout).replace("f32", "f16")
    if result == "f32":
        text = text.replace(f"-> tensor<{m}x{n}xf16>\n  %bias", f"-> tensor<{m}x{n}xf32>\n  %bias")
        assert epilogue == "none"
        text = text.replace(f"-> tensor<{m}x{n}xf16> {{", f"-> tensor<{m}x{n}xf32> {{")
        text = text.replace(f"return %0 : tensor<{m}x{n}xf16>", f"return %0 : tensor<{m}x{n}xf32>")
    return text


BATCHED = """func.func @main(%a: tensor<4x64x64xf16>, %b: tensor<4x64x128xf16>) -> tensor<4x64x128xf16> {
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1]
      : (tensor<4x64x64xf16>, tensor<4x64x128xf16>) -> tensor<4x64x128xf16>
  %y = stablehlo.exponential %0 : tensor<4x64x128xf16>
  return %y : tensor<4x64x128xf16>
}"""

# Epilogues of ops the mma.sync conversion can express as fragment ops
# (maximumf, truncf) with no other input: before matmul_mma.epilogue_piece,
# the conversion took the 2-D read of the accumulator tile with them and
# failed ("unhandled vector to mma type"), and IREE's codegen took over.
RELU = """func.func @main(%a: tensor<256x256xf16>, %b: tensor<256x256xf16>) -> tensor<256x256xf16> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<256x256xf16>, tensor<256x256xf16>) -> tensor<256x256xf16>
  %z = stablehlo.constant dense<0.0> : tensor<256x256xf16>
  %y = stablehlo.maximum %0, %z : tensor<256x256xf16>
  return %y : tensor<256x256xf16>
}"""
F32_THEN_F16 = """func.func @main(%a: tensor<512x256xf16>, %b: tensor<256x512xf16>) -> tensor<512x512xf16> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<512x256xf16>, tensor<256x512xf16>) -> tensor<512x512xf32>
  %y = stablehlo.convert %0 : (tensor<512x512xf32>) -> tensor<512x512xf16>
  return %y : tensor<512x512xf16>
}"""

FORMS = {
    "f16 result, bias + relu": f16_program(256, 256, 256),
    "f16 result, relu alone": RELU,
    "f32 accumulation, convert to f16": F32_THEN_F16,
    "f32 result, bare": f16_program(128, 64, 128, "none", result="f32"),
    "B as [N, K], residual + tanh": f16_program(128, 128, 64, "residual", b_layout="nk"),
    "batched, exp": BATCHED,
}


def ptx_counts(ptx: str) -> dict[str, int]:
    return {
        "mma": len(re.findall(r"mma\.sync\.aligned\.m16n8k16", ptx)),
        "ldmatrix": len(re.findall(r"ldmatrix\.sync", ptx)),
        "cp.async": len(re.findall(r"cp\.async\.c[ga]\.shared", ptx)),
        "wait_group": len(re.findall(r"cp\.async\.wait_group", ptx)),
    }


@pytest.mark.parametrize("form", list(FORMS))
def test_tensor_core_kernel_builds(form, tmp_path):
    result = tilefuse.compile_program(FORMS[form], OWN, dump_dir=tmp_path)
    (report,) = [r for r in result.reports if r.strategy == "matmul_mma"]
    assert report.status == "applied", report.line()
    assert report.registers and report.spill_bytes == 0, report.line()
    (ptx,) = (tmp_path / "binaries").glob("*.ptx")
    counts = ptx_counts(ptx.read_text())
    assert all(counts.values()), counts
    # Pipelined: copies for the first stages are issued before the loop, so
    # there are more cp.async than one step's copies, and the loop waits for
    # all but the newest group.
    assert re.search(r"cp\.async\.wait_group\s+1;", ptx.read_text()), counts
    assert counts["cp.async"] > 2 * counts["wait_group"], counts


def test_sm90_assembles_without_spills():
    (report,) = tilefuse.compile_program(f16_program(256, 256, 256), OWN_SM90).reports
    assert (report.strategy, report.status) == ("matmul_mma", "applied"), report.line()
    assert report.registers and report.spill_bytes == 0, report.line()


def test_f16_products_accumulate_in_f32_with_large_tiles(tmp_path):
    """A plain f16 product gets an f32 result and a convert
    (hlo/wide_accumulators.py): mma.sync accumulates in f32, and the f32
    tile for the convert still lets 2048^3 keep 128x128 tiles, past the 48
    KiB a launch gets without opting in (IREE's runtime opts in), on 8 warps
    of 32x64 (a 64x64 f32 piece is 128 accumulator registers per lane)."""
    text = f16_program(2048, 2048, 2048, "none")
    result = tilefuse.compile_program(text, OWN_SM90, dump_dir=tmp_path)
    (report,) = result.reports
    assert (report.strategy, report.status) == ("matmul_mma", "applied"), report.line()
    assert "f16 -> f32 with its epilogue" in report.line(), report.line()
    assert "tile=[128, 128] warp=[32, 64]" in report.line(), report.line()
    shared = int(re.search(r"shared=(\d+)B", report.line()).group(1))
    assert shared > 48 * 1024, report.line()
    assert report.spill_bytes == 0, report.line()
    (ptx,) = (tmp_path / "binaries").glob("*.ptx")
    ptx = ptx.read_text()
    assert re.search(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.f16\.f16\.f32", ptx)
    assert not re.search(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f16", ptx)


TF32_FORMS = {
    "f32 bare": f16_program(128, 64, 128, "none", result="f32").replace("f16", "f32"),
    "f32 bias + relu": f16_program(256, 256, 256).replace("f16", "f32"),
    "B as [N, K], residual + tanh": FORMS["B as [N, K], residual + tanh"].replace("f16", "f32"),
    "batched, exp": BATCHED.replace("f16", "f32"),
}


def test_f32_is_on_tensor_cores_only_where_the_target_opts_in_to_tf32():
    (report,) = tilefuse.compile_program(TF32_FORMS["f32 bias + relu"], "cuda").reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert "not on tensor cores: matmul_mma: f32 operands" in report.line(), report.line()
    assert "target field tf32, off on cuda" in report.line(), report.line()


@pytest.mark.parametrize("target", ["cuda,tf32=true", "cuda-sm90,tf32=true"])
@pytest.mark.parametrize("form", list(TF32_FORMS))
def test_tf32_kernel_builds(form, target, tmp_path):
    """mma.sync m16n8k8 on tf32, A through ldmatrix (a 32-bit element is a
    pair of the b16 ldmatrix moves), pipelined cp.async, 0 spills."""
    result = tilefuse.compile_program(TF32_FORMS[form], target, dump_dir=tmp_path)
    (report,) = result.reports
    assert (report.strategy, report.status) == ("matmul_mma", "applied"), report.line()
    assert "f32 as TF32 -> f32" in report.line() and "m16n8k8" in report.line(), report.line()
    assert report.registers and report.spill_bytes == 0, report.line()
    (ptx,) = (tmp_path / "binaries").glob("*.ptx")
    ptx = ptx.read_text()
    assert re.search(r"mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32", ptx)
    assert re.search(r"cp\.async\.wait_group\s+1;", ptx)


def test_bf16_takes_the_fma_kernel_with_the_reason():
    """IREE 3.13 reaches no tensor cores for bf16 from a script, and its own
    codegen fails on this dispatch ("failed to distribute"): with iree_mma
    off the FMA matmul kernel compiles it (its numerics are checked on
    Vulkan, test_matmul)."""
    text = program(64, 64, 64).replace("f32", "bf16")
    (report,) = tilefuse.compile_program(text, OWN).reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert report.registers and report.spill_bytes == 0, report.line()


KIB_48 = 48 * 1024  # what a launch gets without opting in
SM90 = 232448  # cuda-sm90's shared_memory_bytes (IREE's runtime opts in)


@pytest.mark.parametrize(
    "m,n,k,epilogue,accumulator,limit,tile",
    [
        (1024, 1024, 1024, False, "f16", KIB_48, (128, 128)),  # 48 KiB of operand stages
        (1024, 1024, 1024, True, "f16", KIB_48, (64, 64)),  # + a 64x64 f16 accumulator tile
        # An f32 accumulator tile (every f16 product: hlo/wide_accumulators.py)
        # is twice the bytes: 48 KiB of stages + 64 KiB fit only past 48 KiB.
        (1024, 1024, 1024, True, "f32", KIB_48, (64, 64)),
        (1024, 1024, 1024, True, "f32", SM90, (128, 128)),
        (96, 64, 64, True, "f16", KIB_48, (32, 64)),
        (50, 64, 64, False, "f16", SM90, None),  # M not a multiple of 16
        (64, 64, 40, False, "f16", SM90, None),  # K not a multiple of 32
        (64, 64, 32, False, "f16", SM90, None),  # one K step: no loop to pipeline
    ],
)
def test_tile_choice(m, n, k, epilogue, accumulator, limit, tile):
    product = matmul_mma.Product(m, n, k, epilogue, False, accumulator)
    cfg = matmul_mma._config(product, limit)
    if tile is None:
        assert cfg is None
        return
    assert (cfg.tm, cfg.tn) == tile
    assert cfg.shared <= limit
    # Each thread copies whole 16-byte pieces, all threads the same count.
    assert cfg.ra * cfg.threads * 8 == cfg.tm * cfg.kt
    assert cfg.rb * cfg.threads * 8 == cfg.tn * cfg.kt


def test_tf32_tiles_copy_four_elements_per_cp_async():
    """f32 operands: a 16-byte cp.async holds 4 elements, and the stages
    are twice the bytes: 128x128x32 x 3 stages is 96 KiB, + a 64 KiB f32
    accumulator tile with an epilogue."""
    product = matmul_mma.Product(4096, 4096, 4096, True, False, "f32", operand="f32")
    cfg = matmul_mma._config(product, SM90, 132)
    assert (cfg.tm, cfg.tn, cfg.threads) == (128, 128, 256)
    assert cfg.shared == 3 * (128 * 32 * 2) * 4 + 128 * 128 * 4
    assert cfg.ra * cfg.threads * 4 == cfg.tm * cfg.kt
    assert cfg.rb * cfg.threads * 4 == cfg.tn * cfg.kt


def test_small_products_take_smaller_tiles_to_fill_the_gpu():
    """64x1024 on 132 multiprocessors: 64x64 tiles would leave 116 idle, and
    32x32 (64 workgroups) or 16x32 (128) still some; 16x16 gives 256."""
    small = matmul_mma._config(matmul_mma.Product(64, 1024, 256, True, False, "f16"), SM90, 132)
    assert (small.tm, small.tn) == (16, 16)
    assert (small.wm, small.wn, small.threads) == (16, 8, 64)  # two warps
    big = matmul_mma._config(matmul_mma.Product(4096, 4096, 4096, False, False, "f16"), SM90, 132)
    assert (big.tm, big.tn) == (128, 128)
    # A batch of 8 heads counts: 8 x 4 x 4 workgroups of 64x64 fill 108.
    heads_product = matmul_mma.Product(256, 256, 64, True, False, "f16", batch=8)
    heads = matmul_mma._config(heads_product, SM90, 108)
    assert (heads.tm, heads.tn) == (64, 64)


def test_kernels_without_tensor_core_ops_are_refused():
    """kernel/verify.py asks the strategy after every build (an applied
    report above means it passed); a kernel without mma.sync is refused."""
    func = ir.Module.parse("func.func @k() {\n  return\n}", ir.Context()).body.operations[0]
    assert "no mma.sync" in matmul_mma.kernel_refusal(func.operation, None)
