"""User strategies (`--strategies DIR`, strategies/user.py): a directory of
transform scripts with TOML matchers, tried before the built-ins.

docs/tutorial/ is such a directory: the tutorial's elementwise script and
its matcher, elementwise.toml. It overrides the built-in loop strategy on
the elementwise dispatch and not on the row sum; numerics on lavapipe
against numpy; a kernel of the user's that fails gives way to the built-in
choice, reported; a bad TOML is one error line naming the file.
"""

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import tilefuse
from tilefuse.cli import main

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial"

# An elementwise dispatch the tutorial's strategy takes (64x256 f32) and a
# row sum of another input, which it does not take.
MODEL = """
func.func @main(%x: tensor<64x256xf32>, %b: tensor<256xf32>, %z: tensor<32x128xf32>)
    -> (tensor<64x256xf32>, tensor<32xf32>) {
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<256xf32>) -> tensor<64x256xf32>
  %e = stablehlo.multiply %x, %bb : tensor<64x256xf32>
  %y = stablehlo.add %e, %x : tensor<64x256xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%z init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<32x128xf32>, tensor<f32>) -> tensor<32xf32>
  return %y, %s : tensor<64x256xf32>, tensor<32xf32>
}
"""


def _strategies(folder: Path, toml_edit=None, script_edit=None) -> Path:
    """A copy of the tutorial's strategy directory, edited."""
    folder.mkdir()
    toml = (TUTORIAL / "elementwise.toml").read_text()
    script = (TUTORIAL / "elementwise.mlir").read_text()
    (folder / "elementwise.toml").write_text(toml_edit(toml) if toml_edit else toml)
    (folder / "elementwise.mlir").write_text(script_edit(script) if script_edit else script)
    return folder


def _model(tmp_path) -> Path:
    path = tmp_path / "model.mlir"
    path.write_text(MODEL)
    return path


def test_user_strategy_overrides_the_builtin_and_runs_right(tmp_path, capsys):
    model = _model(tmp_path)
    assert main(["explain", str(model), "--strategies", str(TUTORIAL)]) == 0
    lines = capsys.readouterr().out.splitlines()
    elementwise = next(line for line in lines if "_elementwise_64x256_f32" in line)
    reduction = next(line for line in lines if "reduction" in line and "strategy=" in line)
    assert "strategy=user:elementwise grid=[4, 8, 1] wg=[16, 8, 1]" in elementwise
    assert "applied (user strategy" in elementwise
    assert "strategy=user:" not in reduction and "applied" in reduction

    module = tilefuse.compile(str(model), "vulkan", strategies_dir=TUTORIAL, strict=True)
    assert [r.strategy for r in module.reports if "elementwise" in r.name] == ["user:elementwise"]
    rng = np.random.default_rng(0)
    x, b = rng.random((64, 256), np.float32), rng.random(256, np.float32)
    z = rng.random((32, 128), np.float32)
    y, s = module.main(x, b, z)
    np.testing.assert_allclose(y, x * b + x, rtol=1e-6)
    np.testing.assert_allclose(s, z.sum(axis=1), rtol=1e-5)


def test_environment_variable_names_the_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TILEFUSE_STRATEGIES", str(TUTORIAL))
    assert main(["explain", str(_model(tmp_path))]) == 0
    assert "strategy=user:elementwise" in capsys.readouterr().out


def test_a_failing_user_kernel_gives_way_to_the_builtin_choice(tmp_path, capsys):
    # 128 threads split the tile (step 3) but a workgroup of 64 is launched:
    # the thread mapping fails in phase 2.
    folder = _strategies(tmp_path / "s", toml_edit=lambda t: t.replace("[16, 8, 1]", "[16, 4, 1]"))
    assert main(["explain", str(_model(tmp_path)), "--strategies", str(folder)]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "_elementwise_64x256_f32" in line)
    assert "strategy=loop" in line and "applied (user:elementwise failed" in line
    assert "overflows the number of available resources" in line


BAD = [
    # (edit of the TOML, message, line of the TOML the error names)
    (lambda t: t.replace("kinds =", "kindz ="), "unknown key 'kindz' in [match]", True),
    (lambda t: t.replace("[launch]", "[launch"), "TOML does not parse", True),
    (lambda t: t.replace("workgroup = [16, 8, 1]", "workgroup = 128"), "must be a list", True),
    (
        lambda t: t.replace("params.workgroup_tile", "params.tiles"),
        'tagged tilefuse.param = "tiles"',
        True,
    ),
    (lambda t: t.replace("= [8, 64]\n", '= "[8, 64"\n'), "is not an MLIR attribute", True),
    (
        lambda t: t.replace("static_tile_sizes = [8, 64]", "static_tile_sizes = 8"),
        "does not verify",
        False,
    ),
]


@pytest.mark.parametrize("edit,message,has_line", BAD)
def test_a_bad_toml_is_one_error_naming_the_file(tmp_path, capsys, edit, message, has_line):
    folder = _strategies(tmp_path / "s", toml_edit=edit)
    assert main(["explain", str(_model(tmp_path)), "--strategies", str(folder)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    where = re.escape(str(folder / "elementwise.toml")) + (r":\d+(:\d+)?" if has_line else "")
    assert re.match(rf"tilefuse: error: {where}: ", err[0]), err[0]
    assert message in err[0]


def test_a_script_that_does_not_parse_is_located_in_it(tmp_path, capsys):
    folder = _strategies(
        tmp_path / "s",
        script_edit=lambda s: s.replace("tile_using_forall %root", "tile_using_foral %root"),
    )
    assert (
        main(
            [
                "compile",
                str(_model(tmp_path)),
                "-o",
                str(tmp_path / "m.vmfb"),
                "--strategies",
                str(folder),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err.strip()
    assert re.match(rf"tilefuse: error: {re.escape(str(folder))}/elementwise.mlir:\d+:\d+: ", err)
    assert not (tmp_path / "m.vmfb").exists()


def test_a_script_without_matcher_is_an_error(tmp_path, capsys):
    folder = _strategies(tmp_path / "s")
    shutil.copy(folder / "elementwise.mlir", folder / "other.mlir")
    assert main(["explain", str(_model(tmp_path)), "--strategies", str(folder)]) == 1
    assert "other.mlir has no other.toml" in capsys.readouterr().err
