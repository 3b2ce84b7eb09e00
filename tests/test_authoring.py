"""Authoring tools: `tilefuse dispatches --extract` and `tilefuse try`.

The extracted dispatch compiles (tilefuse and plain iree-compile), runs on
lavapipe against numpy and gets the strategy it gets in the whole model.
`try` runs the tutorial's script (docs/tutorial/elementwise.mlir) and
variants of it that are broken, do nothing, or compute a wrong result.
"""

import re
from pathlib import Path

import numpy as np
import pytest
import tilefuse
from tilefuse.cli import main
from tilefuse.targets import load_target
from tilefuse.toolchain import iree_compile

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial" / "elementwise.mlir"

# Two dispatches: a row sum (row kernels) and exp(x) + b written transposed (loop).
TWO = """
func.func @main(%x: tensor<16x64xf32>, %b: tensor<64xf32>) -> (tensor<16xf32>, tensor<64x16xf32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<16x64xf32>, tensor<f32>) -> tensor<16xf32>
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<64xf32>) -> tensor<16x64xf32>
  %e = stablehlo.exponential %x : tensor<16x64xf32>
  %y = stablehlo.add %e, %bb : tensor<16x64xf32>
  %t = stablehlo.transpose %y, dims = [1, 0] : (tensor<16x64xf32>) -> tensor<64x16xf32>
  return %sum, %t : tensor<16xf32>, tensor<64x16xf32>
}
"""

# What the tutorial's script takes: a rank-2 elementwise root that 8 x 64 tiles divide.
ELEMENTWISE = """
func.func @main(%x: tensor<64x256xf32>, %b: tensor<256xf32>) -> tensor<64x256xf32> {
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<256xf32>) -> tensor<64x256xf32>
  %e = stablehlo.multiply %x, %bb : tensor<64x256xf32>
  %y = stablehlo.add %e, %x : tensor<64x256xf32>
  return %y : tensor<64x256xf32>
}
"""


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def _variant(folder: Path, name: str, old: str, new: str) -> tuple[Path, int]:
    """The tutorial's script with `old` replaced (once), and the line it is on."""
    text = TUTORIAL.read_text()
    assert text.count(old) == 1, old
    line = text[: text.index(old)].count("\n") + 1
    return _write(folder, name, text.replace(old, new)), line


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("tilefuse: error:")]
    assert len(errors) == 1, err
    assert "Traceback" not in "\n".join(err)
    assert "tilefuse-try-" not in errors[0]  # no temporary paths
    return errors[0]


def test_dispatches_lists_and_extracts_a_runnable_dispatch(tmp_path, capsys):
    model = _write(tmp_path, "two.mlir", TWO)
    assert main(["dispatches", str(model)]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert len(listing) == 2 and listing[1].startswith("1: main_dispatch_1_")
    whole_strategy = re.search(r"strategy=(\w+)", listing[1]).group(1)

    out = tmp_path / "d1.mlir"
    assert main(["dispatches", str(model), "--extract", "1", "-o", str(out)]) == 0
    text = out.read_text()
    assert "flow.dispatch.region" in text and "tensor<64x16xf32>" in text

    # Plain iree-compile takes it.
    vulkan = load_target("vulkan")
    iree_compile([str(out), *vulkan.compile_flags, "-o", str(tmp_path / "plain.vmfb")], "plain")
    # tilefuse gives it the strategy the dispatch had in the whole model.
    module = tilefuse.compile(str(out), target="vulkan")
    assert [r.strategy for r in module.reports] == [whole_strategy]
    assert module.reports[0].status == "applied"
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 64)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    got = module.main(x, b)
    want = (np.exp(x.astype(np.float64)) + b).T
    # f32 exp on lavapipe against float64 numpy: a few ulps of the largest value.
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_extract_names_a_dispatch_by_name(tmp_path, capsys):
    model = _write(tmp_path, "two.mlir", TWO)
    out = tmp_path / "d0.mlir"
    name = "main_dispatch_0_reduction_16x64_f32"
    assert main(["dispatches", str(model), "--extract", name, "-o", str(out)]) == 0
    assert name in out.read_text()
    module = tilefuse.compile(str(out), target="vulkan")
    x = np.random.default_rng(1).standard_normal((16, 64)).astype(np.float32)
    np.testing.assert_allclose(module.main(x), x.sum(axis=1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("wanted", ["2", "main_dispatch_7_nothing"])
def test_extract_of_an_unknown_dispatch_is_one_error_and_no_file(tmp_path, capsys, wanted):
    model = _write(tmp_path, "two.mlir", TWO)
    out = tmp_path / "d.mlir"
    assert main(["dispatches", str(model), "--extract", wanted, "-o", str(out)]) == 1
    line = _error_line(capsys)
    assert str(model) in line and "no dispatch" in line
    assert not out.exists()


def test_try_the_tutorial_script(tmp_path, capsys):
    model = _write(tmp_path, "ew.mlir", ELEMENTWISE)
    steps = tmp_path / "steps"
    argv = ["try", str(TUTORIAL), str(model), "--dispatch", "0", "--print-after-all", str(steps)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "strategy=elementwise.mlir" in out and "applied" in out
    assert "built-in: main_dispatch_0_" in out and "strategy=loop" in out
    assert re.search(r"numerics: max error \S+ against the CPU reference", out)
    assert re.search(
        r"lavapipe: \S+ ms per call with elementwise.mlir, \S+ ms with the built-in", out
    )
    files = sorted(p.name for p in steps.iterdir())
    steps_in_script = int(re.search(r"\((\d+) top-level steps\)", out).group(1))
    assert len(files) == steps_in_script + 1 and files[0] == "00-input.mlir"
    assert files[3] == "03-structured.tile_using_forall.mlir"
    assert "scf.forall" in (steps / files[3]).read_text()


def test_try_locates_a_failing_transform_op_in_the_script(tmp_path, capsys):
    model = _write(tmp_path, "ew.mlir", ELEMENTWISE)
    script, line = _variant(tmp_path, "broken.mlir", "vector_sizes [1, 4]", "vector_sizes [1]")
    assert main(["try", str(script), str(model)]) == 1
    assert f"tilefuse: error: {script}:{line}:" in _error_line(capsys)


def test_try_locates_a_parse_error_in_the_script(tmp_path, capsys):
    model = _write(tmp_path, "ew.mlir", ELEMENTWISE)
    script, line = _variant(
        tmp_path, "typo.mlir", "tile_using_forall %root", "tile_using_foral %root"
    )
    assert main(["try", str(script), str(model)]) == 1
    error = _error_line(capsys)
    assert f"{script}:{line}:" in error and "unknown" in error


NOTHING = """module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%func: !transform.any_op {transform.readonly}) {
    transform.yield
  }
}
"""
# Says the kernel is finished, but never touched it.
ANNOTATE_ONLY = """module attributes {transform.with_named_sequence} {
  transform.named_sequence @mine(%func: !transform.any_op {transform.readonly}) {
    %done = transform.param.constant #iree_codegen.translation_info<
        pipeline = #iree_codegen.no_pipeline workgroup_size = [64, 1, 1]
        subgroup_size = 8> -> !transform.any_param
    transform.annotate %func "translation_info" = %done : !transform.any_op, !transform.any_param
    transform.yield
  }
}
"""


@pytest.mark.parametrize("text", [NOTHING, ANNOTATE_ONLY], ids=["yield-only", "annotate-only"])
def test_try_refuses_a_script_that_does_nothing(tmp_path, capsys, text):
    # A small payload: IREE unrolls an untouched dispatch to scalars before it
    # fails, which takes 40 s at 64x256.
    model = _write(tmp_path, "ew.mlir", ELEMENTWISE.replace("64x", "4x").replace("256", "16"))
    script = _write(tmp_path, "noop.mlir", text)
    assert main(["try", str(script), str(model), "--dispatch", "0"]) == 1
    error = _error_line(capsys)
    assert error.startswith(f"tilefuse: error: {script}: refused:")
    assert "main_dispatch_0_elementwise_4x16_f32" in error


def test_try_catches_a_wrong_result(tmp_path, capsys):
    """Threads mapped onto a 16 x 8 workgroup, launched as 16 x 4: half the
    rows of every tile are never written. The kernel passes every check;
    the numerics do not."""
    model = _write(tmp_path, "ew.mlir", ELEMENTWISE)
    script, _ = _variant(
        tmp_path,
        "wrong.mlir",
        "no_pipeline workgroup_size = [16, 8, 1]",
        "no_pipeline workgroup_size = [16, 4, 1]",
    )
    assert main(["try", str(script), str(model), "--print-after", "3"]) == 1
    captured = capsys.readouterr()
    assert "after step 3: transform.structured.tile_using_forall" in captured.out
    errors = [line for line in captured.err.splitlines() if "error" in line]
    assert len(errors) == 1
    assert errors[0].startswith(f"tilefuse: error: {script}: wrong result")
    assert "main_dispatch_0_elementwise_64x256_f32" in errors[0]
    assert re.search(r"differs from the CPU reference by \d", errors[0])


def test_try_on_cuda_reports_registers_and_spills(root):
    """On CUDA the script's kernel is compiled and checked, and the report
    carries ptxas's registers and spills; nothing runs (no GPU here)."""
    from tilefuse.authoring.try_script import summary, try_script

    result = try_script(
        str(root / "docs/tutorial/elementwise.mlir"),
        str(root / "docs/tutorial/models/ew.mlir"),
        target="cuda",
    )
    (report,) = result.reports
    assert report.strategy == "elementwise.mlir" and report.status == "applied", report.line()
    assert report.registers and report.spill_bytes == 0, report.line()
    assert result.max_error is None and result.seconds is None
    assert any("not run" in line for line in summary(result))
