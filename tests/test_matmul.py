"""The matmul kernel (strategies/matmul.py, transform_scripts/matmul.mlir): a
contraction and its elementwise epilogue in one dispatch. Numerics on
lavapipe against numpy (float64 reference, |error| <= 1e-4 * sqrt(K) for f32
inputs of unit variance), the printed kernel's inner loop (FileCheck), ptxas
on CUDA, and the reasons given for the contractions it does not take."""

import dataclasses
import math
import re

import ml_dtypes
import numpy as np
import pytest
import tilefuse
from iree.compiler import ir
from support import filecheck
from tilefuse.targets import load_target


def program(m: int, k: int, n: int, epilogue: str = "bias_relu", b_layout: str = "kn") -> str:
    """A [m, k] x B ([k, n], or [n, k] when b_layout is "nk") and an epilogue."""
    b_shape = f"{k}x{n}" if b_layout == "kn" else f"{n}x{k}"
    b_dim = 0 if b_layout == "kn" else 1
    out = f"tensor<{m}x{n}xf32>"
    head = (
        f"func.func @main(%a: tensor<{m}x{k}xf32>, %b: tensor<{b_shape}xf32>, "
        f"%c: tensor<{n}xf32>, %r: {out}) -> {out} {{\n"
        f"  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [{b_dim}]"
        f" : (tensor<{m}x{k}xf32>, tensor<{b_shape}xf32>) -> {out}\n"
        f"  %bias = stablehlo.broadcast_in_dim %c, dims = [1] : (tensor<{n}xf32>) -> {out}\n"
    )
    if epilogue == "bias_relu":
        body = (
            f"  %1 = stablehlo.add %0, %bias : {out}\n"
            f"  %z = stablehlo.constant dense<0.0> : {out}\n"
            f"  %y = stablehlo.maximum %1, %z : {out}\n"
        )
    elif epilogue == "none":  # a bare contraction (attention's p @ v)
        return head + f"  return %0 : {out}\n}}\n"
    else:  # residual: (A @ B + bias) * 0.5 + r, then tanh
        body = (
            f"  %1 = stablehlo.add %0, %bias : {out}\n"
            f"  %h = stablehlo.constant dense<0.5> : {out}\n"
            f"  %2 = stablehlo.multiply %1, %h : {out}\n"
            f"  %3 = stablehlo.add %2, %r : {out}\n"
            f"  %y = stablehlo.tanh %3 : {out}\n"
        )
    return head + body + f"  return %y : {out}\n}}\n"


def reference(a, b, c, r, epilogue, b_layout="kn"):
    b = b if b_layout == "kn" else b.T
    product = a.astype(np.float64) @ b.astype(np.float64)
    if epilogue == "none":
        return product
    x = product + c
    return np.maximum(x, 0) if epilogue == "bias_relu" else np.tanh(x * 0.5 + r)


def run(m, k, n, epilogue="bias_relu", b_layout="kn", target="vulkan"):
    module = tilefuse.compile(program(m, k, n, epilogue, b_layout), target=target)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b_shape = (k, n) if b_layout == "kn" else (n, k)
    b = rng.standard_normal(b_shape).astype(np.float32)
    c = rng.standard_normal(n).astype(np.float32)
    r = rng.standard_normal((m, n)).astype(np.float32)
    got = module.main(a, b, c, r)
    err = np.max(np.abs(got - reference(a, b, c, r, epilogue, b_layout)))
    assert err <= 1e-4 * np.sqrt(k), err
    return module.reports


# Aligned, ragged (tiles that divide 50, 70, 100, 300), a tiny one, a K that
# only 2 divides, a tall-skinny one; bias + relu, a residual + tanh, and bare
# contractions (no epilogue: the kernel's other "tile" step).
SHAPES = [
    (64, 256, 128, "bias_relu"),
    (50, 100, 70, "bias_relu"),
    (100, 300, 200, "residual"),
    (6, 10, 12, "residual"),
    (256, 66, 32, "bias_relu"),
    (1024, 64, 16, "residual"),
    (128, 128, 64, "none"),
    (30, 20, 40, "none"),
]
# B as [N, K] (attention's q k^T): IREE folds the transpose into the
# contraction's map, the kernel reads B along K.
TRANSPOSED_B = [(64, 64, 64, "bias_relu"), (50, 100, 70, "residual")]


@pytest.mark.parametrize("m,k,n,epilogue", SHAPES)
def test_matmul_with_epilogue_on_vulkan(m, k, n, epilogue):
    (report,) = run(m, k, n, epilogue)
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()


@pytest.mark.parametrize("m,k,n,epilogue", [(1, 256, 128, "bias_relu"), (1, 100, 12, "residual")])
def test_one_row_decode_shapes(m, k, n, epilogue):
    """M = 1 (decode-time attention and MLPs): IREE makes it a linalg.vecmat
    with no M loop; the kernel tiles N alone (the rows steps' _1d forms).
    The planner leaves such a dot_general to IREE's formation, whose
    codegen fails on the reshape it leaves inside a region; no fallback."""
    result = tilefuse.compile_program(program(m, k, n, epilogue), "vulkan")
    assert not result.notes, result.notes
    (report,) = run(m, k, n, epilogue)
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert report.params.startswith(f"tile=[1, {n}] thread=[1, "), report.params


# One-row products whose N no exact tiling fits (GPT-2's LM head is
# 1x768x50257, 50257 = 29 x 1733), scaled down: N odd or prime, K ragged
# (99), and N = 4 x 251 (an exact tiling of one thread per workgroup).
ONE_ROW_RAGGED = [
    (1, 256, 1001, "none"),
    (1, 512, 3001, "bias_relu"),
    (1, 99, 257, "residual"),
    (1, 64, 1004, "bias_relu"),
]


# lavapipe keeps one-row products off masked tiles (measured slower than
# IREE's kernel there: pipelines/vulkan.toml); the numerics run with them on.
ONE_ROW_MASKED = dataclasses.replace(load_target("vulkan"), one_row_masked_tiles=True)


@pytest.mark.parametrize("m,k,n,epilogue", ONE_ROW_RAGGED)
def test_one_row_ragged_on_vulkan(m, k, n, epilogue):
    """M = 1 with a ragged N (and K): the ragged kernel's form with no M
    loop, a vector of 4 outputs per thread, 64 threads along N, the last
    workgroup's columns (and K's tail) masked inside the one dispatch."""
    (report,) = run(m, k, n, epilogue, target=ONE_ROW_MASKED)
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert "tile=[1, 256] thread=[1, 4] ragged" in report.params, report.line()


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_one_row_ragged_f16_and_bf16(dtype):
    """The same kernel on 16-bit operands: f16 accumulated in f16, as the
    program asks; bf16 in f32 registers (hlo/wide_accumulators.py), the
    convert to bf16 before the epilogue's bf16 residual and the store."""
    m, k, n, epilogue = 1, 99, 257, "residual"
    text = program(m, k, n, epilogue).replace("f32", dtype)
    module = tilefuse.compile(text, target=ONE_ROW_MASKED)
    (report,) = module.reports
    assert report.status == "applied" and " ragged " in report.params, report.line()
    check_low_precision(module, dtype, m, k, n, epilogue)


def test_one_row_ragged_is_off_on_lavapipe():
    """The vulkan target says why a one-row product with no exact tiling
    stays on IREE's kernel, and the result is right."""
    (report,) = run(1, 99, 257, "bias_relu")
    assert report.strategy != "matmul" or " ragged " not in report.params, report.line()
    assert "one_row_masked_tiles = false" in report.reason, report.line()


@pytest.mark.parametrize("target", ["cuda", "cuda-sm90"])
def test_one_row_ragged_assembles_without_spills(target):
    """GPT-2's LM head at decode, 1x768x50257: 197 workgroups of 64 threads
    (no split in K: no exact tiling gives split-K a grid to weigh)."""
    text = program(1, 768, 50257, epilogue="none")
    result = tilefuse.compile_program(text, target)
    (report,) = result.reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert " ragged " in report.params and "grid=[197, 1, 1]" in report.params, report.line()
    assert report.registers and report.spill_bytes == 0, report.line()


@pytest.mark.parametrize("m,k,n,epilogue", TRANSPOSED_B)
def test_transposed_b_on_vulkan(m, k, n, epilogue):
    (report,) = run(m, k, n, epilogue, b_layout="nk")
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()


def test_inner_loop_is_vector_fma_with_accumulators_in_registers(tmp_path):
    """The K loop carries the accumulators as vectors (no load or store of
    them inside), reads a row piece of A and a 4x4 block of B per step, and
    does one vector<4xf32> FMA per row piece and K; the epilogue follows the
    loop, then the one store."""
    result = tilefuse.compile_program(program(64, 256, 128), "vulkan", dump_dir=tmp_path)
    (kernel,) = tilefuse.verify.printed_kernels((tmp_path / "phase2.log").read_text()).values()
    filecheck(
        kernel,
        """
CHECK-NOT: memref.alloc
CHECK: scf.for {{.*}} step %c4 iter_args({{.*}}) -> (vector<1x4xf32>
CHECK-NOT: vector.transfer_write
CHECK: vector.transfer_read {{.*}} memref<64x256xf32{{.*}} vector<4xf32>
CHECK: vector.transfer_read {{.*}} memref<256x128xf32{{.*}} vector<4x4xf32>
CHECK: vector.fma {{.*}} : vector<4xf32>
CHECK-NOT: vector.transfer_write
CHECK: scf.yield
CHECK: arith.maximumf
CHECK: vector.transfer_write
""",
        tmp_path,
    )
    assert kernel.count("vector.fma") == 16 * 4  # 8x8 per thread: 16 pieces of 4, K step 4
    (report,) = result.reports
    assert "thread=[8, 8] k_step=4" in report.params


@pytest.mark.parametrize("target", ["cuda", "cuda-sm90"])
def test_cuda_ptx_assembles_without_spills(target):
    (report,) = tilefuse.compile_program(program(512, 512, 512), target).reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert report.registers and report.spill_bytes == 0, report.line()


def test_prime_m_fills_whole_warps_on_cuda(monkeypatch):
    """M = 197 (ViT's tokens) has no divisor for rows of threads: with exact
    tiles (forced: the ragged kernel takes this shape) the threads go along
    N, in whole 32-wide warps, not 16 (half of each warp idle, as the
    chooser gave before)."""
    from tilefuse.strategies import matmul

    monkeypatch.setattr(matmul, "degenerate", lambda p: False)
    text = program(197, 768, 768).replace("f32", "bf16")
    (report,) = tilefuse.compile_program(text, "cuda").reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert "wg=[32, 1, 1]" in report.params, report.line()
    assert report.spill_bytes == 0, report.line()


def test_dims_without_small_divisors_are_reported():
    """No exact tiling (one row of 3) and no ragged one (one thread's
    tile): IREE's, with both reasons, and the right result."""
    (report,) = [r for r in run(1, 64, 3, target=ONE_ROW_MASKED) if "vecmat" in r.name]
    assert report.status == "fallback" and "matmul: thread tile 1x1" in report.reason
    assert "no ragged tiles: 1x3 is one thread's tile" in report.reason


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize(
    "m,k,n,epilogue",
    [(197, 768, 768, "bias_relu"), (100, 99, 101, "none"), (77, 130, 96, "residual")],
)
def test_ragged_f16_and_bf16_on_vulkan(dtype, m, k, n, epilogue):
    """f16 throughout, accumulated in f16 as the program asks, or bf16
    operands accumulated in f32 (hlo/wide_accumulators.py) with a bf16
    epilogue: the bounds of check_low_precision. (bf16: 197x768x768's bias
    is read unmasked, cut into 4-wide reads; an 8-wide one failed SPIR-V's
    bf16 emulation, 'vector.bitcast'. 77x130x96's bf16 residual pad is
    matched by its bf16 type, not the f32 accumulator's.)"""
    module = tilefuse.compile(program(m, k, n, epilogue).replace("f32", dtype), target="vulkan")
    (report,) = module.reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert " ragged " in report.params, report.line()
    check_low_precision(module, dtype, m, k, n, epilogue)


# Ragged tiles (the script's @tilefuse_matmul_ragged): shapes whose exact
# tiling is degenerate. M alone (197 = ViT's tokens, prime), N alone (6,
# last), M, N and K
# (100x101x99, bare), no exact tiling at all (7x64x13), M and K (77x96x130,
# a residual), B as [N, K], a tile larger than M and N (6x13), K under one
# step of 4 (K step 1), rows that fill no thread's tile but are the same for
# all (42: 7 of 8 rows each, a static pad).
RAGGED = [
    (197, 768, 768, "bias_relu", "kn"),
    (100, 99, 101, "none", "kn"),
    (7, 64, 13, "bias_relu", "kn"),
    (77, 130, 96, "residual", "kn"),
    (50, 100, 70, "residual", "nk"),
    (6, 10, 13, "residual", "kn"),
    (140, 3, 99, "residual", "kn"),
    (42, 48, 135, "residual", "kn"),
    (64, 64, 6, "bias_relu", "kn"),
]


@pytest.mark.parametrize("m,k,n,epilogue,b_layout", RAGGED)
def test_ragged_tiles_on_vulkan(m, k, n, epilogue, b_layout):
    (report,) = run(m, k, n, epilogue, b_layout)
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert " ragged " in report.params and "ragged tiles" in report.reason, report.line()
    t = 8 if min(m, n) >= 16 else 4
    assert f"thread=[{t}, {t}]" in report.params and "vector=4" in report.params


@pytest.mark.parametrize(
    "m,k,n,epilogue,b_layout", [(64, 99, 64, "residual", "kn"), (32, 7, 64, "none", "nk")]
)
def test_ragged_k_alone(monkeypatch, m, k, n, epilogue, b_layout):
    """K alone ragged: the chooser keeps exact tiles with a K step of 1
    there (faster on lavapipe: docs/findings.md, 'Ragged tiles for the FMA
    matmul, third attempt'), so the ragged kernel is forced: A's and B's
    reads masked along K, M and N unpadded."""
    from tilefuse.strategies import matmul

    monkeypatch.setattr(matmul, "degenerate", lambda p: True)
    (report,) = run(m, k, n, epilogue, b_layout)
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert " ragged " in report.params, report.line()


@pytest.mark.parametrize("m,k,n,epilogue", [(197, 768, 768, "bias_relu"), (100, 99, 101, "none")])
@pytest.mark.parametrize("target", ["cuda", "cuda-sm90"])
def test_ragged_tiles_assemble_without_spills(target, m, k, n, epilogue):
    (report,) = tilefuse.compile_program(program(m, k, n, epilogue), target).reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert " ragged " in report.params, report.line()
    assert report.registers and report.spill_bytes == 0, report.line()


@pytest.mark.parametrize("target", ["cuda", "cuda-sm90"])
def test_ragged_bf16_assembles_without_spills(target):
    """bf16 throughout on CUDA (IREE 3.13's own codegen fails on it):
    197x768x768 + bias + relu takes ragged tiles, bf16x2 FMAs, 0 spills."""
    text = program(197, 768, 768).replace("f32", "bf16")
    (report,) = tilefuse.compile_program(text, target).reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert " ragged " in report.params, report.line()
    assert report.registers and report.spill_bytes == 0, report.line()


def test_ragged_kernel_masks_every_edge(tmp_path):
    """100x101x99 + residual (M, N and K ragged): every read of A, B and
    the residual is a masked 1-D read (a row past M has an all-false mask),
    every store a masked write under a row guard; the K loop carries the
    8 x 8 accumulators as vectors; nothing is allocated (kernel_refusal
    checks the same on every build)."""
    result = tilefuse.compile_program(
        program(100, 99, 101, "residual"), "vulkan", dump_dir=tmp_path
    )
    (report,) = result.reports
    assert report.status == "applied" and " ragged " in report.params, report.line()
    (kernel,) = tilefuse.verify.printed_kernels((tmp_path / "phase2.log").read_text()).values()
    reads = [line for line in kernel.splitlines() if "vector.transfer_read" in line]
    inputs = ("memref<100x99xf32", "memref<99x101xf32", "memref<100x101xf32", "memref<101xf32")
    for name in inputs:
        mine = [line for line in reads if name in line]
        assert mine, name
        for line in mine:  # source[indices], padding, mask
            assert line.split("]")[1].count(",") == 2, line
    filecheck(
        kernel,
        """
CHECK-NOT: memref.alloc
CHECK: scf.for {{.*}} step %c4 iter_args({{.*}}) -> (vector<1x4xf32>
CHECK: vector.transfer_read {{.*}} memref<100x99xf32
CHECK: vector.fma {{.*}} : vector<4xf32>
CHECK: scf.yield
CHECK: scf.if
CHECK: vector.transfer_write {{.*}}], %{{.*}} {in_bounds = [true]} : vector<4xf32>
""",
        tmp_path,
    )
    assert kernel.count("vector.fma") == 16 * 4  # 8x8 per thread, K step 4


@pytest.mark.parametrize("epilogue", ["exp", "none"])
def test_ragged_batched_matmul(epilogue):
    """3 x 37x20 @ 20x29: a batch element per workgroup (grid z), M and N
    ragged."""
    b, m, k, n = 3, 37, 20, 29
    out = f"tensor<{b}x{m}x{n}xf32>"
    if epilogue == "exp":
        tail = f"  %y = stablehlo.exponential %0 : {out}\n  return %y : {out}\n"
    else:
        tail = f"  return %0 : {out}\n"
    text = f"""func.func @main(%a: tensor<{b}x{m}x{k}xf32>, %b: tensor<{b}x{k}x{n}xf32>) -> {out} {{
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1]
      : (tensor<{b}x{m}x{k}xf32>, tensor<{b}x{k}x{n}xf32>) -> {out}
{tail}}}"""
    module = tilefuse.compile(text, target="vulkan")
    (report,) = module.reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert " ragged " in report.params and "grid=[1, 1, 3]" in report.params, report.line()
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((b, m, k)) * 0.2).astype(np.float32)
    bb = (rng.standard_normal((b, k, n)) * 0.2).astype(np.float32)
    want = a.astype(np.float64) @ bb
    want = np.exp(want) if epilogue == "exp" else want
    np.testing.assert_allclose(module.main(a, bb), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("epilogue", ["exp", "none"])
def test_batched_matmul(epilogue):
    """A batch dim (attention's [heads, S, S] scores, then p @ v): one batch
    element per workgroup (grid z), with and without an epilogue."""
    out = "tensor<4x32x24xf32>"
    if epilogue == "exp":
        tail = f"  %y = stablehlo.exponential %0 : {out}\n  return %y : {out}\n"
    else:
        tail = f"  return %0 : {out}\n"
    text = f"""func.func @main(%a: tensor<4x32x16xf32>, %b: tensor<4x16x24xf32>) -> {out} {{
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1]
      : (tensor<4x32x16xf32>, tensor<4x16x24xf32>) -> {out}
{tail}}}"""
    module = tilefuse.compile(text, target="vulkan")
    (report,) = module.reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert "grid=[1, 1, 4]" in report.params
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((4, 32, 16)) * 0.2).astype(np.float32)
    b = (rng.standard_normal((4, 16, 24)) * 0.2).astype(np.float32)
    want = a.astype(np.float64) @ b
    want = np.exp(want) if epilogue == "exp" else want
    np.testing.assert_allclose(module.main(a, b), want, rtol=1e-5, atol=1e-6)


def batched_vecmat(b: int, k: int, n: int, dtype: str, b_layout: str, epilogue: str) -> str:
    """[b, k] x B ([b, k, n], or [b, n, k]: decode attention's q k^T per
    head) -> [b, n], then the epilogue: IREE forms a batched vector-matrix
    product, a linalg.generic with loops B, N, K (no M loop)."""
    rhs = f"tensor<{b}x{n}x{k}x{dtype}>" if b_layout == "nk" else f"tensor<{b}x{k}x{n}x{dtype}>"
    out = f"tensor<{b}x{n}x{dtype}>"
    tail = {
        "scale": f"  %s = stablehlo.constant dense<0.125> : {out}\n"
        f"  %y = stablehlo.multiply %0, %s : {out}\n",
        "tanh": f"  %y = stablehlo.tanh %0 : {out}\n",
    }[epilogue]
    return (
        f"func.func @main(%q: tensor<{b}x{k}x{dtype}>, %k: {rhs}) -> {out} {{\n"
        f"  %0 = stablehlo.dot_general %q, %k, batching_dims = [0] x [0], contracting_dims = "
        f"[1] x [{2 if b_layout == 'nk' else 1}] : (tensor<{b}x{k}x{dtype}>, {rhs}) -> {out}\n"
        f"{tail}  return %y : {out}\n}}\n"
    )


BATCHED_VECMAT = [
    # b, k, n, dtype, B's layout, epilogue, ragged (N has no exact tiling)
    (8, 64, 128, "f32", "nk", "scale", False),
    (8, 64, 128, "bf16", "nk", "scale", False),
    (12, 256, 64, "f16", "kn", "tanh", False),
    (6, 100, 127, "f32", "kn", "tanh", True),
    (4, 99, 257, "bf16", "nk", "scale", True),
]


@pytest.mark.parametrize("b,k,n,dtype,b_layout,epilogue,ragged", BATCHED_VECMAT)
def test_batched_vector_matrix_product(b, k, n, dtype, b_layout, epilogue, ragged):
    """A batch loop and no M loop: one batch element per workgroup row
    (grid y), N's tiles along x; its epilogue (a generic, like the
    contraction) applied in registers. Ragged N takes the masked one-row
    tiles (on lavapipe only when switched on, as for one row). Within
    1e-5 of the largest output for f32, 2^-8 for f16/bf16 (bf16 accumulates
    in f32), against float64 numpy."""
    target = ONE_ROW_MASKED if ragged else "vulkan"
    module = tilefuse.compile(batched_vecmat(b, k, n, dtype, b_layout, epilogue), target=target)
    (report,) = module.reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    tile_n = int(re.search(r"tile=\[1, (\d+)\]", report.params)[1])
    assert f"grid=[{math.ceil(n / tile_n)}, {b}, 1]" in report.params, report.line()
    assert (" ragged " in report.params) == ragged, report.line()
    np_type = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}[dtype]
    rng = np.random.default_rng(0)
    q = rng.standard_normal((b, k)).astype(np_type)
    kv = rng.standard_normal((b, n, k) if b_layout == "nk" else (b, k, n)).astype(np_type)
    kv64 = kv.astype(np.float64)
    product = np.einsum(
        "bk,bkn->bn", q.astype(np.float64), kv64.transpose(0, 2, 1) if b_layout == "nk" else kv64
    )
    want = product * 0.125 if epilogue == "scale" else np.tanh(product)
    err = np.max(np.abs(module.main(q, kv).astype(np.float64) - want)) / np.max(np.abs(want))
    assert err <= (1e-5 if dtype == "f32" else 2.0**-8), err


@pytest.mark.parametrize("target", ["cuda", "cuda-sm90"])
def test_batched_vector_matrix_product_assembles_without_spills(target):
    """Decode attention's scores for 32 heads over 1000 keys, bf16, scaled."""
    result = tilefuse.compile_program(batched_vecmat(32, 128, 1000, "bf16", "nk", "scale"), target)
    (report,) = result.reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert "grid=[5, 32, 1]" in report.params, report.line()
    assert report.registers and report.spill_bytes == 0, report.line()


LOW_PRECISION = {"f16": (np.float16, 2.0**-11), "bf16": (ml_dtypes.bfloat16, 2.0**-8)}


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("m,k,n,epilogue", [(64, 128, 64, "bias_relu"), (50, 100, 70, "residual")])
def test_f16_and_bf16_on_vulkan(dtype, m, k, n, epilogue):
    """The program asks for a 16-bit result: f16 accumulates in 16 bits, as
    IREE's own kernel does (identical results); bf16 in f32, rounded once
    (hlo/wide_accumulators.py; plain IREE cannot compile the bf16 one for
    lavapipe). Bound: 2 eps sqrt(K) max|A @ B| (a lost K chunk or a
    misplaced row errs by about max|A @ B|; the epilogues do not magnify
    errors), and for bf16 2 ulps of the largest output."""
    module = tilefuse.compile(program(m, k, n, epilogue).replace("f32", dtype), target="vulkan")
    (report,) = module.reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    check_low_precision(module, dtype, m, k, n, epilogue)


def check_low_precision(module, dtype, m, k, n, epilogue):
    """The module against float64 numpy on random 16-bit inputs, within
    2 eps sqrt(K) max|A @ B|; bf16, whose products accumulate in f32 and
    round once (hlo/wide_accumulators.py), also within 2 bf16 ulps of the
    largest output (accumulated in bf16, 197x768x768 erred by 4.19, about
    8 ulps: docs/findings.md, 'Ragged tiles for bf16')."""
    np_type, eps = LOW_PRECISION[dtype]
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(np_type) for s in ((m, k), (k, n)))
    c, r = rng.standard_normal(n).astype(np_type), rng.standard_normal((m, n)).astype(np_type)
    a64, b64, c64, r64 = (x.astype(np.float64) for x in (a, b, c, r))
    want = reference(a64, b64, c64, r64, epilogue)
    err = np.max(np.abs(module.main(a, b, c, r).astype(np.float64) - want))
    assert err <= 2 * eps * np.sqrt(k) * np.max(np.abs(a64 @ b64)), err
    if dtype == "bf16":
        largest = np.max(np.abs(want))
        ulp = 2.0 ** (np.floor(np.log2(largest)) - 7)  # 8 significant bits
        assert err <= 2 * ulp, (err, ulp)


KERNELS = {
    "a buffer is allocated": """func.func @k() {
  %0 = memref.alloc() : memref<8x8xf32>
  return
}""",
    "no vector.fma in a loop": """func.func @k(%a: vector<4xf32>) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %a) -> (vector<4xf32>) {
    %m = arith.mulf %acc, %a : vector<4xf32>
    scf.yield %m : vector<4xf32>
  }
  return
}""",
    "the K loop stores": """func.func @k(%a: vector<4xf32>, %out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %a) -> (vector<4xf32>) {
    %f = vector.fma %a, %a, %acc : vector<4xf32>
    vector.transfer_write %f, %out[%c0] {in_bounds = [true]} : vector<4xf32>, memref<4xf32>
    scf.yield %f : vector<4xf32>
  }
  return
}""",
}


def _read_loop(read: str, mask: str = "") -> str:
    """A K loop reading rows of A with `read` ("%f {in_bounds = [..]}" or,
    with `mask` defining %m, "%f, %m {..}"), one FMA each."""
    return f"""func.func @k(%a: memref<8x16xf32>, %v: vector<4xf32>) {{
  %c0 = arith.constant 0 : index{mask}
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 0.0 : f32
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %v) -> (vector<4xf32>) {{
    %x = vector.transfer_read %a[%i, %c0], {read} : memref<8x16xf32>, vector<4xf32>
    %y = vector.fma %x, %x, %acc : vector<4xf32>
    scf.yield %y : vector<4xf32>
  }}
  return
}}"""


# What the ragged kernel must never leave (the earlier prototypes did): a
# transfer out of bounds with no mask (cast_away_vector_leading_one_dim drops
# the row's flag of such a read), and a read of an operand a ragged edge
# crosses with no mask (that flag already dropped: it reads as in bounds).
UNGUARDED = {
    "out of bounds with no mask": _read_loop("%f {in_bounds = [false]}"),
    "with no mask (a ragged edge)": _read_loop("%f {in_bounds = [true]}"),
}
MASKED = _read_loop(
    "%f, %m {in_bounds = [true]}", mask="\n  %m = vector.constant_mask [2] : vector<4xi1>"
)


@pytest.mark.parametrize("why", list(UNGUARDED))
def test_unguarded_edges_are_refused(why):
    from dataclasses import replace

    from tilefuse.irutil import context
    from tilefuse.strategies import matmul

    params = matmul.MatmulParams(
        launch=None,
        matmul_operand=0,
        workgroup_tile=(8, 8),
        thread_tile=(8, 8),
        k_step=4,
        vector=4,
        epilogue=False,
        batch=False,
        m_loop=True,
        ragged=matmul.Ragged(
            k_padded=16,
            a_padded=True,
            b_padded=False,
            a_k_inner=True,
            b_k_inner=False,
            bare=True,
            root_inputs=1,
            element="f32",
            inputs_element="f32",
            masked_reads=((8, 16),),
        ),
    )
    module = ir.Module.parse(UNGUARDED[why], context(unregistered=True))
    func = module.body.operations[0].operation
    assert why in matmul.kernel_refusal(func, params)
    # The same kernel with a mask on the read passes.
    module = ir.Module.parse(MASKED, context(unregistered=True))
    func = module.body.operations[0].operation
    assert matmul.kernel_refusal(func, params) is None
    assert matmul.kernel_refusal(func, replace(params, ragged=None)) is None


@pytest.mark.parametrize("why", list(KERNELS))
def test_degraded_kernels_are_refused(why):
    """What kernel/verify.py asks the matmul strategy after every build: each
    of these degradations compiles and runs, so only the printout shows it."""
    from tilefuse.irutil import context
    from tilefuse.strategies import matmul

    module = ir.Module.parse(KERNELS[why], context(unregistered=True))
    func = module.body.operations[0].operation
    assert why in matmul.kernel_refusal(func, None)


def _row_bias_to_f16(rng):
    m, k, n = 48, 20, 36
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    r = rng.standard_normal(m)
    text = f"""func.func @main(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>,
    %r: tensor<{m}xf32>) -> tensor<{m}x{n}xf16> {{
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %1 = stablehlo.broadcast_in_dim %r, dims = [0] : (tensor<{m}xf32>) -> tensor<{m}x{n}xf32>
  %2 = stablehlo.subtract %0, %1 : tensor<{m}x{n}xf32>
  %3 = stablehlo.convert %2 : (tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf16>
  return %3 : tensor<{m}x{n}xf16>
}}"""
    args = [x.astype(np.float32) for x in (a, b, r)]
    want = (args[0].astype(np.float64) @ args[1] - args[2][:, None]).astype(np.float16)
    return text, args, want


def _causal_mask_odd_k(rng):
    m, k, n = 16, 7, 16
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n)))
    t = f"tensor<{m}x{n}"
    text = f"""func.func @main(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> {t}xf32> {{
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> {t}xf32>
  %i = stablehlo.iota dim = 0 : {t}xi32>
  %j = stablehlo.iota dim = 1 : {t}xi32>
  %c = stablehlo.compare GE, %i, %j, SIGNED : ({t}xi32>, {t}xi32>) -> {t}xi1>
  %low = stablehlo.constant dense<-1.0e9> : {t}xf32>
  %y = stablehlo.select %c, %0, %low : {t}xi1>, {t}xf32>
  return %y : {t}xf32>
}}"""
    rows, cols = np.indices((m, n))
    return text, [a, b], np.where(rows >= cols, a.astype(np.float64) @ b, -1e9)


def _narrow_n_scaled(rng):
    m, k, n = 32, 12, 6
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n)))
    t = f"tensor<{m}x{n}xf32>"
    text = f"""func.func @main(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> {t} {{
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> {t}
  %s = stablehlo.constant dense<0.125> : {t}
  %y = stablehlo.multiply %0, %s : {t}
  return %y : {t}
}}"""
    return text, [a, b], (a.astype(np.float64) @ b) * 0.125


def _transposed_write(rng):
    m, k, n = 24, 16, 40
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n)))
    text = f"""func.func @main(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> tensor<{n}x{m}xf32> {{
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<{m}x{n}xf32>) -> tensor<{n}x{m}xf32>
  %2 = stablehlo.exponential %1 : tensor<{n}x{m}xf32>
  return %2 : tensor<{n}x{m}xf32>
}}"""
    return text, [a * 0.25, b], np.exp((a.astype(np.float64) * 0.25 @ b).T)


@pytest.mark.parametrize(
    "case", [_row_bias_to_f16, _causal_mask_odd_k, _narrow_n_scaled, _transposed_write]
)
def test_epilogue_variety(case):
    """A bias along M and a convert of the result to f16; an iota compare
    and select (a causal mask) with K = 7 (K step 1); N = 6 (2-wide pieces)
    times a scale; an epilogue that writes the result transposed (a
    gradient's (A @ B)^T: each row piece is stored with a stride)."""
    text, args, want = case(np.random.default_rng(0))
    module = tilefuse.compile(text, target="vulkan")
    (report,) = module.reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    got = np.asarray(module.main(*args), np.float64)
    np.testing.assert_allclose(got, np.asarray(want, np.float64), rtol=2e-3, atol=1e-4)


@pytest.mark.parametrize("m,k,n", [(1, 4096, 4096), (4, 1024, 2048)])
def test_cuda_f16_decode_shapes_take_the_fma_kernel(m, k, n):
    """An f16 product with fewer than 16 rows has no tensor-core tile
    (matmul_mma refuses it): the FMA kernel takes it on CUDA, where IREE's
    codegen would otherwise; ptxas assembles it without spills. (Its
    numerics are the Vulkan f16 cases above: the same script.) Both shapes
    are also split in K there (hlo/split_k.py): the batched products are
    the FMA kernel's too, and the sum is the loop kernel's."""
    text = program(m, k, n, epilogue="none").replace("f32", "f16")
    for target in ("cuda", "cuda-sm90"):
        reports = tilefuse.compile_program(text, target).reports
        assert any("matmul" in r.name and r.strategy == "matmul" for r in reports), reports
        for report in reports:
            assert report.status == "applied", report.line()
            assert report.registers and report.spill_bytes == 0, report.line()


@pytest.mark.parametrize("target", ["cuda", "cuda-sm90"])
def test_small_ragged_matrices_take_the_most_workgroups_on_cuda(target):
    """No ragged tiling of 77x130x96 fills the GPU's multiprocessors: the
    chooser takes the one with the most workgroups (4x4 per thread, 18),
    which also leaves bf16 with a residual + tanh epilogue without the 4
    bytes of spills its 8x8 tiles had."""
    text = program(77, 130, 96, "residual").replace("f32", "bf16")
    (report,) = tilefuse.compile_program(text, target).reports
    assert "thread=[4, 4] ragged" in report.params and "grid=[6, 3, 1]" in report.params, (
        report.line()
    )
    assert report.spill_bytes == 0, report.line()


def _int8_program(m: int, k: int, n: int, scale: bool) -> str:
    """i8 x i8 accumulated in i32 (jax.lax.dot_general with
    preferred_element_type=int32: a quantized layer), then * scale in f32."""
    a, b, acc, out = (f"tensor<{m}x{k}xi8>", f"tensor<{k}x{n}xi8>", f"tensor<{m}x{n}xi32>",
                      f"tensor<{m}x{n}xf32>")  # fmt: skip
    lines = [
        f"func.func @main(%a: {a}, %b: {b}) -> {out if scale else acc} {{",
        f"%p = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : ({a}, {b}) -> {acc}",
    ]
    if scale:
        lines += [
            f"%f = stablehlo.convert %p : ({acc}) -> {out}",
            f"%s = stablehlo.constant dense<0.01> : {out}",
            f"%y = stablehlo.multiply %f, %s : {out}",
            f"return %y : {out}",
        ]
    else:
        lines.append(f"return %p : {acc}")
    return "\n  ".join(lines) + "\n}\n"


@pytest.mark.parametrize("m,k,n,scale", [(64, 128, 96, True), (32, 256, 64, False)])
def test_int8_matmul_on_vulkan(m, k, n, scale):
    """Integer multiply-adds in registers, exact against numpy."""
    module = tilefuse.compile(_int8_program(m, k, n, scale), target="vulkan")
    (report,) = module.reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    exact = a.astype(np.int64) @ b.astype(np.int64)
    got = module.main(a, b)
    if scale:
        np.testing.assert_allclose(got, exact.astype(np.float32) * np.float32(0.01), rtol=1e-6)
    else:
        assert np.array_equal(got, exact)


@pytest.mark.parametrize("target", ["cuda", "cuda-sm90"])
def test_int8_matmul_assembles_without_spills(target):
    (report,) = tilefuse.compile_program(_int8_program(64, 128, 96, True), target).reports
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    assert report.spill_bytes == 0, report.line()


# Found by an unseen-program sweep, each a build the kernel check refused
# (IREE's codegen then ran it): an MLP weight gradient, (x^T @ g)^T with M
# = 5, on ragged tiles (IREE copies a masked tile written transposed); and
# a batch of [8, 4] @ [4, 1] (a selective scan's), whose one K step of 4
# folded the K loop away. That one is a matrix-vector product, which
# hlo/matrix_vectors.py now gives the row kernel (rows of 4); the same
# batch at N = 2 keeps the matmul kernel's one K step checked.
SWEEP_CASES = {
    "transposed write, ragged M": (
        """func.func @main(%a: tensor<16x5xf32>, %b: tensor<16x32xf32>) -> tensor<32x5xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [0] x [0]
      : (tensor<16x5xf32>, tensor<16x32xf32>) -> tensor<5x32xf32>
  %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<5x32xf32>) -> tensor<32x5xf32>
  %2 = stablehlo.exponential %1 : tensor<32x5xf32>
  return %2 : tensor<32x5xf32>
}""",
        [(16, 5), (16, 32)],
        lambda a, b: np.exp(a.T @ b).T,
    ),
    "K of 4, N of 1": (
        """func.func @main(%a: tensor<32x8x4xf32>, %b: tensor<32x4x1xf32>) -> tensor<32x8x1xf32> {
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1]
      : (tensor<32x8x4xf32>, tensor<32x4x1xf32>) -> tensor<32x8x1xf32>
  return %0 : tensor<32x8x1xf32>
}""",
        [(32, 8, 4), (32, 4, 1)],
        lambda a, b: a @ b,
    ),
    "K of 4, N of 2": (
        """func.func @main(%a: tensor<32x8x4xf32>, %b: tensor<32x4x2xf32>) -> tensor<32x8x2xf32> {
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1]
      : (tensor<32x8x4xf32>, tensor<32x4x2xf32>) -> tensor<32x8x2xf32>
  return %0 : tensor<32x8x2xf32>
}""",
        [(32, 8, 4), (32, 4, 2)],
        lambda a, b: a @ b,
    ),
}
STRATEGY = {"K of 4, N of 1": "row_reduction"}


@pytest.mark.parametrize("case", list(SWEEP_CASES))
def test_shapes_the_kernel_check_refused_take_exact_tiles(case):
    text, shapes, reference = SWEEP_CASES[case]
    module = tilefuse.compile(text, target="vulkan")
    (report,) = module.reports
    strategy = STRATEGY.get(case, "matmul")
    assert (report.strategy, report.status) == (strategy, "applied"), report.line()
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    want = reference(*(a.astype(np.float64) for a in args))
    np.testing.assert_allclose(module.main(*args), want, rtol=1e-5, atol=1e-5)
