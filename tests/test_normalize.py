"""IREE's input conventions before planning (normalize.py): calls inlined, CHLO
expanded, f64 demoted; checked on the IR (FileCheck) and by running the
programs on Vulkan against numpy. Also: a JAX-named module (`module @jit_f`)
is called from Python under its own name."""

import math

import numpy as np
import pytest
import tilefuse
from iree.compiler import ir
from support import filecheck
from tilefuse.hlo.normalize import normalize

JAX_STYLE = """module @jit_f attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%x: tensor<64x256xf32>, %d: tensor<64x256xf64>)
      -> (tensor<64x256xf32>, tensor<64x256xf64>) {
    %0 = call @square(%x) : (tensor<64x256xf32>) -> tensor<64x256xf32>
    %1 = chlo.erfc %0 : tensor<64x256xf32> -> tensor<64x256xf32>
    %2 = call @square(%1) : (tensor<64x256xf32>) -> tensor<64x256xf32>
    %3 = stablehlo.exponential %d : tensor<64x256xf64>
    return %2, %3 : tensor<64x256xf32>, tensor<64x256xf64>
  }
  func.func private @square(%a: tensor<64x256xf32>) -> tensor<64x256xf32> {
    %0 = chlo.square %a : tensor<64x256xf32> -> tensor<64x256xf32>
    return %0 : tensor<64x256xf32>
  }
}
"""


def test_normalize_ir(tmp_path):
    ctx = ir.Context()
    module = ir.Module.parse(JAX_STYLE, ctx)
    log = normalize(module)
    assert [line.split(" ")[0] for line in log] == ["private", "CHLO", "f64"]
    filecheck(
        str(module),
        """
CHECK: module @jit_f
CHECK: func.func public @main(%{{.*}}: tensor<64x256xf32>, %{{.*}}: tensor<64x256xf32>)
CHECK-SAME: -> (tensor<64x256xf32>, tensor<64x256xf32>)
CHECK-NOT: call
CHECK-NOT: chlo.
CHECK: stablehlo.exponential
CHECK-NOT: f64
CHECK-NOT: func.func private
""",
        tmp_path,
    )


def test_normalize_leaves_plain_stablehlo_alone():
    text = (
        "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = stablehlo.exponential %a : tensor<4xf32>\n"
        "  return %0 : tensor<4xf32>\n}\n"
    )
    module = ir.Module.parse(text, ir.Context())
    before = str(module)
    assert normalize(module) == []
    assert str(module) == before


@pytest.mark.parametrize("fusion", [True, False])
def test_jax_style_module_runs(fusion):
    module = tilefuse.compile(JAX_STYLE, target="vulkan", fusion=fusion)
    assert all(r.status == "applied" for r in module.reports), [r.line() for r in module.reports]
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.5, 1.5, (64, 256)).astype(np.float32)
    d = rng.uniform(-2, 2, (64, 256))
    # IREE demotes f64 to f32: the function takes and returns f32.
    assert [str(s) for s in module.main.arg_specs] == ["tensor<64x256xf32>"] * 2
    y, e = module.main(x, d.astype(np.float32))
    erfc = np.vectorize(math.erfc)(x.astype(np.float64) ** 2)
    np.testing.assert_allclose(y, erfc**2, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(e, np.exp(d), rtol=2e-6)


def test_jax_named_module_from_the_cli(tmp_path):
    from support import run_cli

    src = tmp_path / "jit_f.mlir"
    src.write_text(JAX_STYLE)
    out = tmp_path / "f.vmfb"
    proc = run_cli("compile", str(src), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    proc = run_cli(
        "run",
        str(out),
        "--input",
        "64x256xf32=0.5",
        "--input",
        "64x256xf32=0",
        "--save",
        str(tmp_path / "r"),
    )
    assert proc.returncode == 0, proc.stderr
    assert np.allclose(np.load(tmp_path / "r1.npy"), 1.0)
    assert np.allclose(np.load(tmp_path / "r0.npy"), math.erfc(0.25) ** 2, rtol=1e-5)
