"""The bf16 tensor-core configuration (strategies/matmul_mma_bf16.py,
transform_scripts/matmul_mma_bf16.mlir): bf16 x bf16 -> f32 contractions
with their epilogue on mma.sync through IREE's TileAndFuse pipeline, on
CUDA targets that enable it (`bf16_mma`, off by default). No GPU runs these
kernels here: the checks are that the PTX holds bf16 mma.sync in the one
kernel of the dispatch, and that ptxas assembles it with 0 spills."""

import re
from dataclasses import replace

import pytest
import tilefuse
from test_matmul import program
from tilefuse.strategies import matmul_mma_bf16
from tilefuse.targets import load_target

MMA = re.escape(matmul_mma_bf16.MMA_PTX)


def bf16_program(m, k, n, epilogue="bias_relu", b_layout="kn"):
    """test_matmul's program in bf16, as JAX writes it (bf16 result: the
    compile widens the accumulator to f32, hlo/wide_accumulators.py)."""
    return program(m, k, n, epilogue, b_layout).replace("f32", "bf16")


BATCHED = """func.func @main(%a: tensor<4x64x64xbf16>, %b: tensor<4x64x128xbf16>) -> tensor<4x64x128xbf16> {
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1]
      : (tensor<4x64x64xbf16>, tensor<4x64x128xbf16>) -> tensor<4x64x128xbf16>
  %y = stablehlo.exponential %0 : tensor<4x64x128xbf16>
  return %y : tensor<4x64x128xbf16>
}"""
F32_RESULT = """func.func @main(%a: tensor<256x512xbf16>, %b: tensor<512x256xbf16>) -> tensor<256x256xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<256x512xbf16>, tensor<512x256xbf16>) -> tensor<256x256xf32>
  return %0 : tensor<256x256xf32>
}"""

FORMS = {
    "bias + relu, convert to bf16": bf16_program(256, 256, 256),
    "B as [N, K], residual + tanh": bf16_program(128, 128, 64, "residual", b_layout="nk"),
    "batched, exp": BATCHED,
    "f32 result, bare": F32_RESULT,
}


def enabled(name: str):
    return replace(load_target(name), bf16_mma=True)


@pytest.mark.parametrize("target", ["cuda", "cuda-sm90"])
@pytest.mark.parametrize("form", list(FORMS))
def test_bf16_tensor_core_kernel_builds(form, target, tmp_path):
    result = tilefuse.compile_program(FORMS[form], enabled(target), dump_dir=tmp_path)
    # One dispatch: the epilogue is in the contraction's kernel.
    (report,) = result.reports
    assert (report.strategy, report.status) == ("matmul_mma_bf16", "applied"), report.line()
    assert report.registers and report.spill_bytes == 0, report.line()
    ptx = "".join(p.read_text() for p in tmp_path.rglob("binaries/*.ptx"))
    assert len(re.findall(MMA, ptx)) >= 2, "no bf16 mma.sync in the PTX"


def test_large_product_takes_the_128x128_tile(tmp_path):
    result = tilefuse.compile_program(
        bf16_program(2048, 1024, 2048), enabled("cuda-sm90"), dump_dir=tmp_path
    )
    (report,) = result.reports
    assert report.status == "applied", report.line()
    assert "tile=[128, 128] warp=[64, 32] k_tile=64" in report.params
    assert "wg=[256, 1, 1]" in report.params
    assert report.spill_bytes == 0, report.line()


def test_off_by_default_the_fma_kernel_says_why():
    """Without `bf16_mma` the FMA kernel takes bf16 on CUDA, and its reason
    names the tensor-core configuration's refusal."""
    assert not load_target("cuda").bf16_mma and not load_target("cuda-sm90").bf16_mma
    (report,) = tilefuse.compile_program(bf16_program(64, 64, 64), "cuda").reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert "matmul_mma_bf16: off on cuda (target field bf16_mma" in report.reason


@pytest.mark.parametrize(
    "m,k,n,tile,k_tile",
    [
        (4096, 4096, 4096, (128, 128), 64),
        (1024, 1024, 1024, (64, 64), 64),  # 128x128 would give 64 workgroups < 132
        (64, 48, 1024, (16, 16), 16),
        (50, 64, 64, None, None),  # M not a multiple of 16
        (64, 40, 64, None, None),  # K not a multiple of 16
    ],
)
def test_tile_choice(m, k, n, tile, k_tile):
    fitting = list(matmul_mma_bf16._configs(m, n, k))
    first = matmul_mma_bf16.filling_tile(fitting, m, n, 1, 132)
    if tile is None:
        assert first is None
        return
    assert ((first.tm, first.tn), first.kt) == (tile, k_tile)
    assert first.tm % first.wm == 0 and first.tn % first.wn == 0
    assert first.wm % 16 == 0 and first.wn % 8 == 0


def test_kernel_check_refuses_a_build_without_bf16_mma():
    params, _ = _plan(bf16_program(256, 256, 256))
    ok = f".entry k(\n.maxntid {params.launch.workgroup[0]}, 1, 1\n{matmul_mma_bf16.MMA_PTX} "
    assert matmul_mma_bf16.ptx_refusal(ok, params) is None
    fma = ok.replace(matmul_mma_bf16.MMA_PTX, "fma.rn.f32")
    assert "did not reach tensor cores" in matmul_mma_bf16.ptx_refusal(fma, params)
    other = ok.replace(f".maxntid {params.launch.workgroup[0]}", ".maxntid 32")
    assert "configuration ignored" in matmul_mma_bf16.ptx_refusal(other, params)


def test_refusals():
    assert "CUDA only" in _plan(bf16_program(256, 256, 256), "vulkan")[1]
    f16 = bf16_program(256, 256, 256).replace("bf16", "f16")
    assert "bf16 only" in _plan(f16, "cuda")[1]


def _plan(text, target="cuda"):
    """The strategy's plan for the program's one contraction dispatch."""
    from tilefuse.driver import compile_program

    result = compile_program(text, "cuda")
    (choice,) = [c for c in result.compilation.choices if c.dispatch.contractions]
    t = load_target(target)
    t = replace(t, bf16_mma=True) if t.backend == "cuda" else t
    return matmul_mma_bf16.plan(choice.dispatch, t)
