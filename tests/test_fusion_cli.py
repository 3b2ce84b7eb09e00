"""`tilefuse explain --fusion`, `--dump-fusion` and `--no-fusion` from the command line."""

from support import filecheck
from tilefuse.cli import main


def test_explain_fusion_lists_groups_and_draws_them(root, tmp_path, capsys):
    stem = tmp_path / "pics" / "rms"
    dump = tmp_path / "fusion.mlir"
    code = main(
        [
            "explain",
            str(root / "samples/rmsnorm_f32.mlir"),
            "--fusion",
            "--graph",
            str(stem),
            "--dump-fusion",
            str(dump),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "main_softmax_like_reduce_4  kind=softmax-like hero=stablehlo.reduce" in out
    assert "in=(tensor<128x1024xf32>, tensor<1024xf32>) out=(tensor<128x1024xf32>)" in out
    assert "bytes in=528384 out=524288" in out
    assert stem.with_suffix(".svg").read_text().lstrip().startswith("<?xml")
    assert stem.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    assert 'fillcolor="#d9f2d0"' in stem.with_suffix(".dot").read_text()
    filecheck(
        dump.read_text(),
        """
CHECK: func.func @main(%arg0: tensor<128x1024xf32>, %arg1: tensor<1024xf32>)
CHECK-NEXT: call @main_softmax_like_reduce_4(%arg0, %arg1)
CHECK: func.func private @main_softmax_like_reduce_4
CHECK-SAME: tilefuse.fusion_kind = "softmax-like", tilefuse.hero = "stablehlo.reduce"
CHECK: stablehlo.reduce
CHECK: stablehlo.rsqrt
CHECK: return
""",
        tmp_path,
    )


def test_no_fusion_uses_iree_dispatch_formation(root, tmp_path, capsys):
    sample = str(root / "samples/log_transpose_add_f32.mlir")
    assert main(["explain", sample, "--no-fusion", "--dump-dir", str(tmp_path / "a")]) == 0
    assert not (tmp_path / "a" / "fusion.mlir").exists()
    out = tmp_path / "m.vmfb"
    assert main(["compile", sample, "-o", str(out), "--dump-dir", str(tmp_path / "b")]) == 0
    assert "flow.dispatch.region" in (tmp_path / "b" / "fusion.mlir").read_text()
    assert main(["explain", sample, "--no-fusion", "--fusion"]) == 1
    assert "need fusion" in capsys.readouterr().err
