"""Library mode: `tilefuse flags` + a plain iree-compile, no Python in between."""

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import tilefuse
from iree.compiler.tools.binaries import find_tool


def test_plain_iree_compile_with_flags_runs_loop_strategy(root, tmp_path):
    flags = subprocess.run(
        [
            sys.executable,
            "-m",
            "tilefuse.cli",
            "flags",
            "--target",
            "vulkan",
            "--library-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "--iree-vulkan-target=llvmpipe" in flags
    assert any(f.startswith("--iree-codegen-transform-dialect-library=") for f in flags)
    out = tmp_path / "gelu.vmfb"
    proc = subprocess.run(
        [find_tool("iree-compile"), str(root / "samples/gelu_bf16.mlir"), *flags, "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    # The strategy prints the kernel it finished: the dispatch really ran it.
    kernels = tilefuse.verify.printed_kernels(proc.stdout)
    assert list(kernels) == ["main_dispatch_0_elementwise_12582912_bf16"]
    assert tilefuse.verify._check_kernel(*next(iter(kernels.items()))) is None

    module = tilefuse.load(out, "vulkan")
    x = np.random.default_rng(0).standard_normal((6, 512, 4096)).astype(ml_dtypes.bfloat16)
    xf = x.astype(np.float64)
    ref = 0.5 * xf * (1 + np.tanh(0.7978845 * (xf + 0.044715 * xf**3)))
    assert np.max(np.abs(module.main(x).astype(np.float64) - ref)) < 2e-2


# --- The generic library's other strategies (strategies/flags.py) ------------
# Each case: a program, a plain iree-compile with the generic flags, the
# strategy each dispatch must get (by the kernel the strategy prints; None:
# the matchers must leave it to IREE's codegen), and numpy on lavapipe.

from conftest import reduce_program
from references import SAMPLES

ROOT_SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def _generic_flags(tmp_path):
    from tilefuse.strategies.flags import flag_bundle

    return flag_bundle("vulkan", tmp_path)


def _compile_plain(src, tmp_path, name):
    path = tmp_path / f"{name}.mlir"
    if not isinstance(src, Path):
        path.write_text(src)
        src = path
    out = tmp_path / f"{name}.vmfb"
    proc = subprocess.run(
        [find_tool("iree-compile"), str(src), *_generic_flags(tmp_path), "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    kernels = tilefuse.verify.printed_kernels(proc.stdout)
    for name_, text in kernels.items():
        assert tilefuse.verify._check_kernel(name_, text) is None, name_
    return out, kernels, proc.stdout


def _row_sum(rows, n):
    return reduce_program([rows, n], [1], "f32", "add")


def test_generic_row_sum_takes_row_warp(tmp_path):
    out, kernels, _ = _compile_plain(_row_sum(256, 512), tmp_path, "row_sum")
    ((name, text),) = kernels.items()
    assert "reduction" in name
    # row_warp: one subgroup per row, 128 rows per workgroup, shuffles, no
    # workgroup memory.
    assert "workgroup_size = [8, 128, 1]" in text
    assert "gpu.shuffle" in text and "workgroup" not in text.split("workgroup_size")[0]
    x = np.random.default_rng(1).standard_normal((256, 512)).astype(np.float32)
    y = tilefuse.load(out, "vulkan").main(x)
    assert np.max(np.abs(y - x.astype(np.float64).sum(1))) < 1e-3


def test_generic_row_sum_short_rows_vector_1(tmp_path):
    # 40 = 5 x 8: not a multiple of 32, so lanes take scalars (the c8 bucket),
    # and 7 rows: one row per workgroup.
    out, kernels, _ = _compile_plain(_row_sum(7, 40), tmp_path, "row_sum_short")
    (text,) = kernels.values()
    assert "workgroup_size = [8, 1, 1]" in text
    x = np.random.default_rng(2).standard_normal((7, 40)).astype(np.float32)
    y = tilefuse.load(out, "vulkan").main(x)
    assert np.max(np.abs(y - x.astype(np.float64).sum(1))) < 1e-4


def test_generic_refuses_what_its_parameters_cannot_take(tmp_path):
    """Left to IREE's codegen, and still right: a row sum of 1000 (neither a
    multiple of 32 nor at most 512: its tail split needs the exact length),
    a row max (another body than the row-sum template), a ragged transposed
    elementwise root (3200x170: a masked transposed write does not lower)."""
    rng = np.random.default_rng(3)
    cases = [
        (_row_sum(64, 1000), "sum1000", (64, 1000), lambda x: x.sum(1), 1e-3),
        (
            reduce_program([64, 256], [1], "f32", "max"),
            "max",
            (64, 256),
            lambda x: x.max(1),
            0,
        ),
    ]
    for src, name, shape, ref, tol in cases:
        out, kernels, _ = _compile_plain(src, tmp_path, name)
        assert kernels == {}, name
        x = rng.standard_normal(shape).astype(np.float32)
        y = tilefuse.load(out, "vulkan").main(x)
        assert np.max(np.abs(y - ref(x.astype(np.float64)))) <= tol + 1e-6, name
    assert _sample_case("transpose_exp_abs_f32", tmp_path, rng) == {}


def _sample_case(sample, tmp_path, rng):
    out, kernels, _ = _compile_plain(ROOT_SAMPLES / f"{sample}.mlir", tmp_path, sample)
    inputs, refs, tol = SAMPLES[sample](rng)
    ys = tilefuse.load(out, "vulkan").main(*inputs)
    ys = ys if isinstance(ys, (list, tuple)) else [ys]
    for y, ref in zip(ys, refs):
        err = np.max(np.abs(np.asarray(y, np.float64) - ref))
        assert err <= max(tol, 1e-6) * max(1.0, np.max(np.abs(ref))), (sample, err)
    return kernels


def test_generic_softmax_samples(tmp_path):
    rng = np.random.default_rng(4)
    # softmax_f32: rows of 1000 (chunks of 32, the last peeled).
    kernels = _sample_case("softmax_f32", tmp_path, rng)
    assert list(kernels) == ["main_dispatch_0_softmax_256x1000xf32_dispatch_tensor_store"]
    # attention_f32: the softmax between the two matmuls (rows of 128, no
    # peel); the matmuls stay IREE's.
    kernels = _sample_case("attention_f32", tmp_path, rng)
    assert list(kernels) == ["main_dispatch_1_softmax_128x128xf32_dispatch_tensor_store"]


def test_generic_library_leaves_normalizations_and_matmuls_to_iree(tmp_path):
    """The old generic matcher sent any all-parallel root to the loop kernel,
    a layernorm's or a matmul epilogue's too, and the plain compile failed.
    Now only roots reading loaded inputs are the loop kernel's."""
    rng = np.random.default_rng(5)
    for sample in ("layernorm_f32", "rmsnorm_f32", "mlp_block_f32"):
        assert _sample_case(sample, tmp_path, rng) == {}, sample
    # pad_relu: IREE's copy dispatch, then the elementwise root (256x1024,
    # dims divisible by 128: exact tiles).
    kernels = _sample_case("pad_relu_f32", tmp_path, rng)
    assert list(kernels) == ["main_dispatch_1_elementwise_256x1024_f32"]
