"""The IREE tensor-core configuration (strategies/matmul_mma_iree.py,
transform_scripts/matmul_mma_iree.mlir): f16 and bf16 x bf16 -> f32
contractions with their epilogue on mma.sync through IREE's TileAndFuse
pipeline, on CUDA targets with `iree_mma` (on in the CUDA targets' files).
These kernels ran on an H100 (docs/gpu-results.md); here the checks are
that the PTX holds mma.sync of the operands' type in the one kernel of the
dispatch, and that ptxas assembles it with 0 spills. Their numerics on a
GPU are the bench runner's."""

import re
from dataclasses import replace

import pytest
import tilefuse
from test_matmul import program
from tilefuse.strategies import BY_NAME, matmul_mma_iree
from tilefuse.targets import load_target


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
    "f16: bias + relu, convert to f16": bf16_program(256, 256, 256).replace("bf16", "f16"),
    "f16: batched, exp": BATCHED.replace("bf16", "f16"),
    "B as [N, K], residual + tanh": bf16_program(128, 128, 64, "residual", b_layout="nk"),
    "batched, exp": BATCHED,
    "f32 result, bare": F32_RESULT,
}


@pytest.mark.parametrize("target", ["cuda", "cuda-sm90"])
@pytest.mark.parametrize("form", list(FORMS))
def test_bf16_tensor_core_kernel_builds(form, target, tmp_path):
    result = tilefuse.compile_program(FORMS[form], target, dump_dir=tmp_path)
    # One dispatch: the epilogue is in the contraction's kernel.
    (report,) = result.reports
    assert (report.strategy, report.status) == ("matmul_mma_iree", "applied"), report.line()
    assert report.registers and report.spill_bytes == 0, report.line()
    element = "f16" if form.startswith("f16") else "bf16"
    ptx = "".join(p.read_text() for p in tmp_path.rglob("binaries/*.ptx"))
    mma = re.findall(re.escape(matmul_mma_iree.mma_ptx(element)), ptx)
    assert len(mma) >= 2, f"no {element} mma.sync in the PTX"


def test_large_product_takes_the_128x128_tile(tmp_path):
    result = tilefuse.compile_program(
        bf16_program(2048, 1024, 2048), "cuda-sm90", dump_dir=tmp_path
    )
    (report,) = result.reports
    assert report.status == "applied", report.line()
    assert "tile=[128, 128] warp=[64, 32] k_tile=64" in report.params
    assert "wg=[256, 1, 1]" in report.params
    assert report.spill_bytes == 0, report.line()


def test_off_the_fma_kernel_says_why():
    """With `iree_mma` off the FMA kernel takes bf16 on CUDA, and its reason
    names the configuration's refusal; the CUDA targets turn it on."""
    assert load_target("cuda").iree_mma and load_target("cuda-sm90").iree_mma
    (report,) = tilefuse.compile_program(bf16_program(64, 64, 64), "cuda,iree_mma=false").reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert "matmul_mma_iree: off on cuda,iree_mma=false (target field iree_mma)" in report.reason


def test_f16_takes_the_configuration_before_the_own_kernel():
    """f16 products (f32 accumulators after hlo/wide_accumulators.py) take
    IREE's pipeline where it applies; with iree_mma off, tilefuse's own
    mma.sync kernel (matmul_mma)."""
    text = bf16_program(256, 256, 256).replace("bf16", "f16")
    (on,) = tilefuse.compile_program(text, "cuda").reports
    assert (on.strategy, on.status) == ("matmul_mma_iree", "applied"), on.line()
    assert "f16 -> f32 with its epilogue" in on.line() and "_F16)" in on.line(), on.line()
    (off,) = tilefuse.compile_program(text, "cuda,iree_mma=false").reports
    assert (off.strategy, off.status) == ("matmul_mma", "applied"), off.line()


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
    fitting = list(matmul_mma_iree._configs(m, n, k, padding=False))
    first = matmul_mma_iree.filling_tile(fitting, m, n, 1, 132)
    if tile is None:
        assert first is None
        return
    assert ((first.tm, first.tn), first.kt) == (tile, k_tile)
    assert not first.padded
    assert first.tm % first.wm == 0 and first.tn % first.wn == 0
    assert first.wm % 16 == 0 and first.wn % 8 == 0


@pytest.mark.parametrize(
    "m,k,n,tile,k_tile,padded",
    [
        (1024, 1024, 1024, (64, 64), 64, False),  # a tile divides: no padding
        (1000, 1000, 1000, (64, 64), 16, True),  # IREE's own choice for this shape
        (50, 64, 64, (16, 16), 64, True),  # only M ragged: K keeps its step
        (154, 768, 3072, (64, 64), 64, True),  # 2x77 tokens
        (8, 64, 64, None, None, None),  # M below 16: a decode shape (split-K's)
    ],
)
def test_padded_tile_choice(m, k, n, tile, k_tile, padded):
    """With iree_mma_padding, a shape no tile divides gets the same tiles
    (the first that fills 132 multiprocessors, counting partial tiles), K
    step 16 where K is ragged."""
    fitting = list(matmul_mma_iree._configs(m, n, k, padding=True))
    first = matmul_mma_iree.filling_tile(fitting, m, n, 1, 132)
    if tile is None:
        assert first is None
        return
    assert ((first.tm, first.tn), first.kt, first.padded) == (tile, k_tile, padded)


RAGGED = {
    "f16 1000^3-like: bias + relu": bf16_program(200, 136, 120).replace("bf16", "f16"),
    "bf16, B as [N, K], residual + tanh": bf16_program(100, 72, 50, "residual", b_layout="nk"),
    "bf16 batched 4 x 100x300 @ 300x200": """func.func @main(%a: tensor<4x100x300xbf16>,
      %b: tensor<4x300x200xbf16>) -> tensor<4x100x200xf32> {
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1]
      : (tensor<4x100x300xbf16>, tensor<4x300x200xbf16>) -> tensor<4x100x200xf32>
  return %0 : tensor<4x100x200xf32>
}""",
}


@pytest.mark.parametrize("target", ["cuda", "cuda-sm90"])
@pytest.mark.parametrize("form", list(RAGGED))
def test_ragged_shapes_take_padded_tiles_with_the_switch(form, target, tmp_path):
    """Ragged M, N and K on the configuration with IREE's padding: one
    kernel, mma.sync of the operands' type in its PTX, 0 spills. (Numerics:
    not checked on a GPU yet, which is why iree_mma_padding is off.)"""
    result = tilefuse.compile_program(
        RAGGED[form], f"{target},iree_mma_padding=true", dump_dir=tmp_path
    )
    (report,) = result.reports
    assert (report.strategy, report.status) == ("matmul_mma_iree", "applied"), report.line()
    assert " padded " in report.params and "tiles padded" in report.reason, report.line()
    assert report.spill_bytes == 0, report.line()
    element = "f16" if form.startswith("f16") else "bf16"
    ptx = "".join(p.read_text() for p in tmp_path.rglob("binaries/*.ptx"))
    assert matmul_mma_iree.mma_ptx(element) in ptx


def test_ragged_shapes_take_the_fma_kernel_by_default():
    assert not load_target("cuda").iree_mma_padding
    (report,) = tilefuse.compile_program(
        RAGGED["bf16, B as [N, K], residual + tanh"], "cuda"
    ).reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert "padding ragged shapes is off: target field iree_mma_padding" in report.reason


def test_padded_lowering_config_pads_to_the_tiles():
    params, _ = _plan(RAGGED["f16 1000^3-like: bias + relu"], "cuda,iree_mma_padding=true")
    config = matmul_mma_iree.lowering_config(params)
    tm, tn = params.workgroup_tile
    assert f"padding = [{tm}, {tn}, 16]" in config, config
    assert f"workgroup = [{tm}, {tn}, 0]" in config and "reduction = [0, 0, 1]" in config
    aligned, _ = _plan(bf16_program(256, 256, 256))
    assert "padding" not in matmul_mma_iree.lowering_config(aligned)


def test_kernel_check_refuses_a_build_without_iree_mma():
    params, _ = _plan(bf16_program(256, 256, 256))
    mma = matmul_mma_iree.mma_ptx("bf16")
    ok = f".entry k(\n.maxntid {params.launch.workgroup[0]}, 1, 1\n{mma} "
    assert matmul_mma_iree.ptx_refusal(ok, params) is None
    fma = ok.replace(mma, "fma.rn.f32")
    # An f16 mma.sync is not the bf16 one the configuration named.
    assert "did not reach" in matmul_mma_iree.ptx_refusal(
        ok.replace(mma, mma.replace("bf16", "f16")), params
    )
    assert "did not reach tensor cores" in matmul_mma_iree.ptx_refusal(fma, params)
    other = ok.replace(f".maxntid {params.launch.workgroup[0]}", ".maxntid 32")
    assert "configuration ignored" in matmul_mma_iree.ptx_refusal(other, params)


def test_refusals():
    assert "CUDA only" in _plan(bf16_program(256, 256, 256), "vulkan")[1]
    f32 = bf16_program(256, 256, 256).replace("bf16", "f32")
    assert "f16 or bf16 only" in _plan(f32, "cuda")[1]


def _plan(text, target="cuda"):
    """The strategy's plan for the program's one contraction dispatch."""
    from tilefuse.driver import compile_program

    result = compile_program(text, "cuda")
    (choice,) = [c for c in result.compilation.choices if c.dispatch.contractions]
    return matmul_mma_iree.plan(choice.dispatch, load_target(target))


def test_a_failed_configuration_gives_way_to_the_choice_without_it(monkeypatch):
    """If IREE's pipeline fails the configuration on a dispatch (here: the
    PTX check refuses every build), the dispatch is compiled again with the
    choice the target gives with iree_mma off, not by IREE's codegen: f16
    on tilefuse's own mma.sync kernel, bf16 on the FMA kernel, the failure
    in the reason."""
    refusing = replace(matmul_mma_iree.STRATEGY, ptx_refusal=lambda entry, p: "refused here")
    monkeypatch.setitem(BY_NAME, "matmul_mma_iree", refusing)
    for element, fallback in (("f16", "matmul_mma"), ("bf16", "matmul")):
        text = bf16_program(128, 128, 128).replace("bf16", element)
        (report,) = tilefuse.compile_program(text, "cuda").reports
        assert (report.strategy, report.status) == (fallback, "applied"), report.line()
        assert f"matmul_mma_iree failed, {fallback} used instead" in report.reason
        assert "refused here" in report.reason


def test_k_steps_are_candidates_and_a_tuned_one_is_taken(tmp_path):
    """`tilefuse tune` times each tile with every K step that divides K, the
    chooser's pick first; a cache naming a shorter K step gets it."""
    from tilefuse.strategies import tuning
    from tilefuse.strategies.matmul import contraction_signature

    text = bf16_program(256, 256, 256)
    result = tilefuse.compile_program(text, "cuda", tuning=tmp_path / "none.json")
    (choice,) = [c for c in result.compilation.choices if c.dispatch.contractions]
    options = matmul_mma_iree.candidates(choice.dispatch, load_target("cuda"))
    choices = [matmul_mma_iree.choice_of(p) for p in options]
    first = choices[0]
    assert first["k_tile"] == 64 and {**first, "k_tile": 32} == choices[1], choices
    cache = tmp_path / "tuning.json"
    signature = contraction_signature(choice.dispatch)
    entry = {"choice": {**first, "k_tile": 16}, "seconds": 1.0}
    tuning.record(cache, "cuda", "matmul_mma_iree", signature, entry)
    (report,) = tilefuse.compile_program(text, "cuda", tuning=cache).reports
    assert report.status == "applied" and "k_tile=16" in report.params, report.line()
    assert "(tuned:" in report.reason and report.spill_bytes == 0, report.line()
