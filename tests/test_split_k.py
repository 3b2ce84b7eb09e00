"""Split-K for matmuls too small for the grid (hlo/split_k.py).

The decision per target (the rewrite's log and the dispatches reported),
and numerics on lavapipe with the split forced: a copy of the vulkan target
that claims 64 multiprocessors (lavapipe's own target names none, so it
never splits). Tolerance: 1e-5 relative to the largest |output| (f32, K up
to 2048: the split only regroups the sum).
"""

import dataclasses

import ml_dtypes
import numpy as np
import pytest
import tilefuse
from support import run_cli
from tilefuse.runtime import CompiledModule
from tilefuse.targets import load_target

GPU_LIKE = dataclasses.replace(load_target("vulkan"), multiprocessors=64)


def _dot(
    m, k, n, lhs_k_first=False, rhs_n_first=False, dtype="f32", epilogue=False, mixed=False
) -> str:
    """A [m, k] (or [k, m]) x B [k, n] (or [n, k]) dot in `dtype`, an f32
    result when `mixed`, and + bias, relu when `epilogue`."""
    a = f"tensor<{k}x{m}x{dtype}>" if lhs_k_first else f"tensor<{m}x{k}x{dtype}>"
    b = f"tensor<{n}x{k}x{dtype}>" if rhs_n_first else f"tensor<{k}x{n}x{dtype}>"
    r = f"tensor<{m}x{n}x{'f32' if mixed else dtype}>"
    dims = f"contracting_dims = [{0 if lhs_k_first else 1}] x [{1 if rhs_n_first else 0}]"
    lines = [f"  %r = stablehlo.dot_general %a, %b, {dims} : ({a}, {b}) -> {r}"]
    args, out = f"%a: {a}, %b: {b}", "%r"
    if epilogue:  # + bias, relu
        args += f", %bias: tensor<{n}x{dtype}>"
        lines += [
            f"  %bb = stablehlo.broadcast_in_dim %bias, dims = [1] : (tensor<{n}x{dtype}>) -> {r}",
            f"  %s = stablehlo.add %r, %bb : {r}",
            f"  %z = stablehlo.constant dense<0.0> : {r}",
            f"  %y = stablehlo.maximum %s, %z : {r}",
        ]
        out = "%y"
    body = "\n".join(lines)
    return f"func.func @main({args}) -> {r} {{\n{body}\n  return {out} : {r}\n}}\n"


def _split_lines(result) -> list[str]:
    return [line for line in result.fusion.splits if "in K" in line]


@pytest.mark.parametrize(
    "m,k,n,lhs_k_first,epilogue,parts",
    [
        (1, 2048, 1024, False, False, 8),  # a vecmat: batch of 8 products of K=256
        (4, 2048, 512, False, True, 8),  # bias + relu fused into the sum
        (8, 1024, 256, True, True, 4),  # A as [K, M]: its view needs no copy
    ],
)
def test_split_k_numerics_on_lavapipe(m, k, n, lhs_k_first, epilogue, parts):
    text = _dot(m, k, n, lhs_k_first=lhs_k_first, epilogue=epilogue)
    result = tilefuse.compile_program(text, GPU_LIKE)
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    (line,) = _split_lines(result)
    assert f"as {parts} products" in line, line
    assert all(r.status == "applied" for r in module.reports), [r.line() for r in module.reports]
    matmuls = [r for r in module.reports if r.strategy == "matmul"]
    assert len(matmuls) == 1 and matmuls[0].shapes.startswith(f"{parts}x"), matmuls[0].line()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((k, m) if lhs_k_first else (m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    args = [a, b]
    want = (a.T if lhs_k_first else a).astype(np.float64) @ b.astype(np.float64)
    if epilogue:
        bias = rng.standard_normal(n).astype(np.float32)
        args.append(bias)
        want = np.maximum(want + bias, 0.0)
    got = module.main(*args)
    assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_f16_and_bf16_splits_are_no_less_accurate_than_the_whole(dtype):
    """In f16 the kernel accumulates in the result's type, as the program
    asks: the split only shortens each chain of roundings; bf16 products
    accumulate in f32 (hlo/wide_accumulators.py), split or not. Both modules
    on lavapipe, against numpy in float64: the split one's error is at most
    the unsplit one's (plus a little slack), and within 2% of the largest
    output (bf16: within 2 bf16 ulps of it, one rounding of an f32 sum)."""
    text = _dot(2, 2048, 512, dtype=dtype)
    split = tilefuse.compile_program(text, GPU_LIKE)
    (line,) = _split_lines(split)
    assert "as 8 products" in line, line
    whole = tilefuse.compile_program(text, "vulkan")
    assert not _split_lines(whole)
    np_type = ml_dtypes.bfloat16 if dtype == "bf16" else np.float16
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (2, 2048)).astype(np_type)
    b = rng.uniform(-1, 1, (2048, 512)).astype(np_type)
    want = a.astype(np.float64) @ b.astype(np.float64)
    errors = []
    for result in (split, whole):
        module = CompiledModule(result.vmfb, "vulkan", result.reports)
        assert all(r.status == "applied" for r in result.reports), [
            r.line() for r in result.reports
        ]
        errors.append(np.max(np.abs(module.main(a, b).astype(np.float64) - want)))
    scale = np.max(np.abs(want))
    assert errors[0] <= 1.1 * errors[1] + 1e-3 * scale and errors[0] <= 2e-2 * scale, errors
    if dtype == "bf16":
        assert max(errors) <= 2 * 2**-8 * scale, errors


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_epilogue_after_a_converted_sum_is_fused_into_the_sum(dtype):
    """A decode product with bias + relu after it, where the f32 sum is
    converted back to the operands' type (bf16 always, f16 on lavapipe's
    FMA kernel too): the epilogue goes into the sum's dispatch, so the
    split program has as many dispatches as the bare split (A's view
    copied, the products, the sum), not one more. Numerics against numpy in float64: within 2% of
    the largest output (one rounding of the f32 sum to 8 or 11 bits, then
    the bias added in that type)."""
    result = tilefuse.compile_program(_dot(2, 2048, 512, dtype=dtype, epilogue=True), GPU_LIKE)
    (line,) = _split_lines(result)
    assert "as 8 products" in line, line
    assert [r.strategy for r in result.reports] == ["loop", "matmul", "loop"], [
        r.line() for r in result.reports
    ]
    np_type = ml_dtypes.bfloat16 if dtype == "bf16" else np.float16
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (2, 2048)).astype(np_type)
    b = rng.uniform(-1, 1, (2048, 512)).astype(np_type)
    bias = rng.uniform(-1, 1, 512).astype(np_type)
    want = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64), 0)
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    got = module.main(a, b, bias).astype(np.float64)
    assert np.max(np.abs(got - want)) <= 2e-2 * np.max(np.abs(want))


def test_cuda_f16_decode_with_its_epilogue_is_split():
    """16x4096 @ 4096x4096 f16 + bias, relu on cuda-sm90: the split plan
    (A's view copied, 8 products on tensor cores, the sum with the epilogue)
    is kept, not IREE's one unsplit dispatch (32 workgroups for 132
    multiprocessors)."""
    result = tilefuse.compile_program(_dot(16, 4096, 4096, dtype="f16", epilogue=True), "cuda-sm90")
    (line,) = _split_lines(result)
    assert "as 8 products of K=512" in line, line
    assert [r.strategy for r in result.reports] == ["loop", "matmul_mma_iree", "loop"], [
        r.line() for r in result.reports
    ]
    assert not any("fusion plan not used" in n for n in result.notes), result.notes


def test_bf16_split_sums_f32_partials_and_converts_once():
    """A bf16 decode product (f32 accumulation) is split into f32 partials
    whose sum is converted to bf16 in the same dispatch: two dispatches,
    both on tilefuse kernels, at most 8 partials (MAX_SPLIT_CONVERTED)."""
    result = tilefuse.compile_program(_dot(1, 4096, 4096, dtype="bf16"), "cuda")
    (line,) = _split_lines(result)
    assert "as 8 products of K=512" in line, line
    assert [r.strategy for r in result.reports] == ["matmul", "loop"], [
        r.line() for r in result.reports
    ]
    assert "bf16 -> f32" in result.reports[0].line(), result.reports[0].line()


def test_cuda_splits_decode_matmuls_and_ptxas_accepts_them():
    """1x4096 @ 4096x4096 on CUDA: 8 workgroups unsplit for 108
    multiprocessors; split in 16 products of K=256 (128 workgroups), and
    every kernel assembles for sm_80 without spills."""
    result = tilefuse.compile_program(_dot(1, 4096, 4096), "cuda")
    (line,) = _split_lines(result)
    assert "as 16 products of K=256" in line and "8 workgroups for 108" in line, line
    assert [r.strategy for r in result.reports] == ["matmul", "loop"]
    assert result.reports[0].params.split("grid=")[1].startswith("[8, 1, 16]")
    assert all(r.spill_bytes == 0 for r in result.reports), [r.line() for r in result.reports]


def test_lavapipe_and_full_grids_are_not_split():
    """The vulkan target names no multiprocessors: nothing is split there;
    on CUDA a 5x1024 @ 1024x16384 already has 160 workgroups (of 64
    threads: M = 5 puts every thread along N)."""
    assert not _split_lines(tilefuse.compile_program(_dot(1, 4096, 4096), "vulkan"))
    assert not _split_lines(tilefuse.compile_program(_dot(5, 1024, 16384), "cuda"))


@pytest.mark.parametrize(
    "kwargs,why",
    [
        ({"rhs_n_first": True}, "B is [N, K]"),
        ({"dtype": "f16", "mixed": True, "rhs_n_first": True}, "B is [N, K]"),
    ],
)
def test_refusals_are_logged(kwargs, why):
    """M = 2: at M = 1 a B stored as [N, K] makes a matrix-vector product,
    which hlo/matrix_vectors.py rewrites as a row reduction first."""
    result = tilefuse.compile_program(_dot(2, 4096, 4096, **kwargs), "cuda")
    (line,) = _split_lines(result)
    assert "not split in K" in line and why in line, line


def test_explain_prints_the_split(tmp_path):
    path = tmp_path / "decode.mlir"
    path.write_text(_dot(4, 4096, 4096, epilogue=True))
    proc = run_cli("explain", str(path), "--target", "cuda")
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stdout.splitlines() if line.startswith("note: split:")]
    assert len(notes) == 1 and "split in K" in notes[0] and f"{path}:" in notes[0], notes
