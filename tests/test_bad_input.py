"""Bad input: one clear message with a location, exit 1, no traceback, no output file."""

import numpy as np
import pytest
import tilefuse
from support import run_cli

GOOD = """func.func @main(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = stablehlo.exponential %a : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
"""


def compile_fails(tmp_path, text_or_path, *extra):
    src = text_or_path
    if not str(text_or_path).endswith((".mlir", ".mlirbc")) or "\n" in str(text_or_path):
        src = tmp_path / "model.mlir"
        src.write_text(text_or_path)
    out = tmp_path / "out.vmfb"
    proc = run_cli("compile", str(src), "-o", str(out), *extra)
    assert proc.returncode == 1
    assert not out.exists(), "partial output left behind"
    assert len([ln for ln in proc.stderr.splitlines() if ln.strip()]) == 1, proc.stderr
    assert list(tmp_path.glob(".out.vmfb*")) == []
    return proc.stderr


def test_malformed_mlir_names_file_and_line(tmp_path):
    err = compile_fails(
        tmp_path, GOOD.replace("stablehlo.exponential %a", "stablehlo.exponential %a,")
    )
    assert "model.mlir:2:" in err


def test_not_mlir_at_all(tmp_path):
    err = compile_fails(tmp_path, "this is a shopping list\nmilk\n")
    assert "model.mlir:1:" in err


def test_binary_garbage(tmp_path):
    src = tmp_path / "junk.mlir"
    src.write_bytes(bytes(range(256)))
    err = compile_fails(tmp_path, src)
    assert "junk.mlir" in err


def test_no_function(tmp_path):
    err = compile_fails(tmp_path, "module {\n}\n")
    assert "no public function" in err


def test_op_iree_cannot_convert(tmp_path):
    text = GOOD.replace(
        "%0 = stablehlo.exponential %a : tensor<4x8xf32>",
        "%0 = stablehlo.custom_call @no_such_kernel(%a) : (tensor<4x8xf32>) -> tensor<4x8xf32>",
    )
    err = compile_fails(tmp_path, text)
    assert "model.mlir:2:" in err and "error" in err


def test_unknown_target(tmp_path):
    err = compile_fails(tmp_path, GOOD, "--target", "tpu")
    assert "unknown target 'tpu'" in err and "vulkan" in err


def test_missing_input_file(tmp_path):
    err = compile_fails(tmp_path, str(tmp_path / "nope.mlir"))
    assert "no such file" in err


def test_a_directory_given_as_the_program(tmp_path):
    folder = tmp_path / "models.mlir"
    folder.mkdir()
    err = compile_fails(tmp_path, str(folder))
    assert f"{folder} is a directory, not a program file" in err


def test_cli_run_missing_module(tmp_path):
    proc = run_cli("run", str(tmp_path / "missing.vmfb"))
    assert proc.returncode == 1 and "no such file" in proc.stderr


def test_cli_compile_and_run_literal(tmp_path):
    src = tmp_path / "m.mlir"
    src.write_text(GOOD)
    out = tmp_path / "m.vmfb"
    assert run_cli("compile", str(src), "-o", str(out)).returncode == 0
    proc = run_cli("run", str(out), "--input", "4x8xf32=0")
    assert proc.returncode == 0 and "4x8xfloat32" in proc.stdout and "1." in proc.stdout
    bad = run_cli("run", str(out), "--input", "4x9xf32=0")
    assert bad.returncode == 1 and "expected tensor<4x8xf32>" in bad.stderr


@pytest.fixture(scope="module")
def module():
    return tilefuse.compile(GOOD, target="vulkan")


def test_wrong_argument_count(module):
    with pytest.raises(tilefuse.TilefuseError, match="takes 1 arguments"):
        module.main()


def test_wrong_shape(module):
    with pytest.raises(tilefuse.TilefuseError, match="expected tensor<4x8xf32>, got shape"):
        module.main(np.zeros((4, 9), np.float32))


def test_wrong_dtype(module):
    with pytest.raises(tilefuse.TilefuseError, match="got dtype float64"):
        module.main(np.zeros((4, 8)))


def test_unknown_function(module):
    with pytest.raises(AttributeError, match="no function 'nope'"):
        _ = module.nope


def test_load_from_disk(tmp_path):
    result = tilefuse.compile_program(GOOD, target="vulkan")
    path = tmp_path / "m.vmfb"
    path.write_bytes(result.vmfb)
    loaded = tilefuse.load(path, "vulkan")
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    assert np.allclose(loaded.main(x), np.exp(x), rtol=1e-6)
