"""Exact library mode: `tilefuse prepare` + `tilefuse flags --for` + a plain
iree-compile, against `tilefuse compile` of the same sample.

For each sample: the same dispatches (names), the same strategy on each
(printed by the strategies in the plain iree-compile's stdout, and the
library's @kernel_config), and both modules on lavapipe agree with numpy.
Dispatches the library leaves out (collapsed column reductions) are listed
by `flags --for` and checked to be IREE's in the plain compile.
"""

import re
import subprocess
import sys

import numpy as np
import pytest
import references
import tilefuse
from conftest import ROOT
from iree.compiler.tools.binaries import find_tool
from tilefuse.cli import main
from tilefuse.kernel.verify import printed_kernels

# (sample, small variant): one per strategy family the samples reach.
SAMPLES = [
    ("gelu_bf16", True),  # loop, bf16
    ("bias_scale_chain", False),  # loop, ragged
    ("softmax_f32", False),  # row_warp (aliased on SPIR-V by tilefuse compile)
    ("layernorm_f32", False),  # row_warp
    ("column_sum_small", False),  # column_reduction (collapsed: left out)
    ("mlp_block_f32", False),  # matmul with epilogues, several dispatches
    ("log_transpose_add_f32", False),  # loop on a transposed read
    ("pad_relu_f32", False),  # loop reading through a pad (IREE alone cannot compile it)
    ("argmax_f32", False),  # rewritten before planning (hlo/argminmax.py): softmax kernel
    ("sum_of_squares_f32", False),  # a scalar reduction split into two row kernels
    ("attention_f32", False),  # matmuls and a softmax
]


def _path(name: str, small: bool):
    small_path = ROOT / "samples" / "small" / f"{name}.mlir"
    return small_path if small and small_path.exists() else ROOT / "samples" / f"{name}.mlir"


def _check(reference, got, tolerance):
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(reference)
    for g, r in zip(got, reference):
        r = np.asarray(r, np.float64)
        err = np.max(np.abs(np.asarray(g, np.float64) - r)) / max(1.0, np.max(np.abs(r)))
        assert err < max(tolerance, 1e-5), err


@pytest.mark.parametrize("name,small", SAMPLES, ids=[s for s, _ in SAMPLES])
def test_plain_iree_compile_with_prepare_and_flags_for(name, small, tmp_path, capsys):
    model = _path(name, small)
    fused, library = tmp_path / "fused.mlir", tmp_path / "library.mlir"

    # tilefuse compile: the reference compile.
    compiled = tilefuse.compile_program(str(model), "vulkan")
    applied = {r.name: r.strategy for r in compiled.reports if r.status == "applied"}

    assert main(["prepare", str(model), "-o", str(fused)]) == 0
    argv = ["flags", "--target", "vulkan", "--for", str(fused), "--library-out", str(library)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    flags = captured.out.split()
    left_out = set(re.findall(r"flags: (\S+): IREE's codegen \(left out", captured.err))

    vmfb = tmp_path / "plain.vmfb"
    proc = subprocess.run(
        [find_tool("iree-compile"), str(fused), *flags, "-o", str(vmfb)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]

    # The same dispatches, by name, as tilefuse compile formed.
    table = library.read_text()
    # dispatch -> strategy, from each case's codegen_spec (@tilefuse_<strategy>__<dispatch>)
    in_table = {d: s for s, d in re.findall(r"codegen_spec = @tilefuse_(\w+?)__(\w+)>", table)}
    assert set(re.findall(r'sym_name = "(\w+)"', table)) == set(in_table)
    ran = set(printed_kernels(proc.stdout))
    assert {r.name for r in compiled.reports} >= set(in_table) | left_out
    # Every strategy tilefuse applied runs in the plain compile, on the same
    # dispatch, but for the ones `flags --for` says it leaves out.
    assert ran == set(applied) - left_out, (ran, applied, left_out)
    assert in_table == {k: v for k, v in applied.items() if k not in left_out}
    print(
        f"{name}: {len(compiled.reports)} dispatches, {len(ran)} with the same strategy in "
        f"plain iree-compile, {len(left_out)} left out"
    )

    # Both modules agree with numpy on lavapipe.
    inputs, expected, tolerance = getattr(references, name)(np.random.default_rng(0), small=small)
    plain = tilefuse.load(str(vmfb), "vulkan")
    ours = tilefuse.CompiledModule(compiled.vmfb, "vulkan")
    _check(expected, plain.main(*inputs), tolerance)
    _check(expected, ours.main(*inputs), tolerance)


# A column reduction over two outer dims: tilefuse collapses them (one
# reduced loop) before phase 2; a plain iree-compile cannot, so `flags --for`
# leaves it out, says so, and IREE's codegen compiles it.
COLLAPSED = """
func.func @main(%x: tensor<8x64x96xf32>) -> tensor<96xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0, 1]
      : (tensor<8x64x96xf32>, tensor<f32>) -> tensor<96xf32>
  return %s : tensor<96xf32>
}
"""


def test_flags_for_leaves_out_a_collapsed_column_reduction(tmp_path, capsys):
    model, fused, library = tmp_path / "m.mlir", tmp_path / "f.mlir", tmp_path / "l.mlir"
    model.write_text(COLLAPSED)
    assert main(["prepare", str(model), "-o", str(fused)]) == 0
    argv = ["flags", "--for", str(fused), "--library-out", str(library)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "IREE's codegen (left out: column_reduction: tilefuse collapses" in captured.err
    vmfb = tmp_path / "plain.vmfb"
    proc = subprocess.run(
        [find_tool("iree-compile"), str(fused), *captured.out.split(), "-o", str(vmfb)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and not printed_kernels(proc.stdout)
    x = np.random.default_rng(0).random((8, 64, 96), np.float32)
    got = tilefuse.load(str(vmfb), "vulkan").main(x)
    np.testing.assert_allclose(got, x.sum(axis=(0, 1)), rtol=1e-5)


def test_flags_for_without_strategies_on_cpu_is_an_error(tmp_path, capsys):
    model = ROOT / "samples" / "small" / "gelu_bf16.mlir"
    assert main(["flags", "--target", "cpu", "--for", str(model)]) == 1
    assert "has no tilefuse strategies" in capsys.readouterr().err


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-s"]))
