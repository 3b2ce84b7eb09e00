"""JAX programs with Shardy sharding annotations (`sdy`), which plain
iree-compile cannot parse: on one device tilefuse drops them
(python/tilefuse/shardings.py). Numerics on Vulkan (lavapipe) against JAX on
the CPU, 2e-5 relative to the largest output magnitude."""

import jax
import numpy as np
import pytest
import tilefuse
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from support import run_cli
from tilefuse import TilefuseError
from tilefuse.toolchain import iree_compile

MESH = Mesh(np.array(jax.devices()[:1]), ("data",))


def close(got, want, tolerance=2e-5):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    assert got.shape == want.shape
    scale = max(1.0, float(np.abs(want).max()))
    assert float(np.abs(got - want).max()) <= tolerance * scale


def constrained_layer(x, w):
    """A layer as sharded models write it: constraints on activations, and a
    nested jit that names its argument and result shardings."""
    h = jax.lax.with_sharding_constraint(x @ w, NamedSharding(MESH, P("data", None)))
    inner = jax.jit(
        lambda h: jax.nn.gelu(h).sum(-1),
        in_shardings=NamedSharding(MESH, P("data", None)),
        out_shardings=NamedSharding(MESH, P("data")),
    )
    return inner(h)


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((16, 64), np.float32), rng.standard_normal((64, 32), np.float32) / 8


def test_the_lowering_has_shardy_ops_that_plain_iree_cannot_parse(inputs, tmp_path):
    """The premise: the program as JAX writes it holds `sdy` ops, and plain
    iree-compile fails on them."""
    text = jax.jit(constrained_layer).lower(*inputs).as_text()
    assert "sdy.sharding_constraint" in text and "sdy.mesh" in text
    path = tmp_path / "layer.mlir"
    path.write_text(text)
    flags = ["--iree-hal-target-backends=vulkan-spirv", "-o", str(tmp_path / "x.vmfb")]
    with pytest.raises(TilefuseError, match="Dialect `sdy' not found"):
        iree_compile([str(path), *flags], "iree-compile")


def test_tilefuse_jit_drops_the_annotations(inputs):
    f = tilefuse.jit(constrained_layer, strict=True)
    close(f(*inputs), jax.jit(constrained_layer)(*inputs))
    assert all(r.status == "applied" for r in f.reports(*inputs))


@pytest.mark.parametrize("form", ["text", "serialized", "portable_artifact"])
def test_compile_drops_the_annotations_of_each_form(form, inputs, tmp_path):
    from jax import export

    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in inputs]
    exported = export.export(jax.jit(constrained_layer))(*specs)
    data = {
        "text": exported.mlir_module().encode(),
        "serialized": exported.serialize(),
        "portable_artifact": exported.mlir_module_serialized,
    }[form]
    path = tmp_path / "layer.bin"
    path.write_bytes(bytes(data))
    out = tmp_path / "layer.vmfb"
    proc = run_cli("compile", str(path), "-o", str(out), "--target", "vulkan")
    assert proc.returncode == 0, proc.stderr
    close(tilefuse.load(out, "vulkan").main(*inputs), jax.jit(constrained_layer)(*inputs))


def manual_computation(devices: int) -> str:
    """A shard_map over a mesh axis of `devices`, as Shardy writes it; each
    device's piece of the 8x4 input is (8 / devices)x4."""
    rows = 8 // devices
    piece = f"tensor<{rows}x4xf32>"
    return f"""module @m attributes {{mhlo.num_partitions = 1 : i32}} {{
  sdy.mesh @mesh = <["a"={devices}]>
  func.func public @main(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {{
    %0 = sdy.manual_computation(%x) in_shardings=[<@mesh, [{{"a"}}, {{}}]>] out_shardings=[<@mesh, [{{"a"}}, {{}}]>] manual_axes={{"a"}} (%p: {piece}) {{
      %1 = stablehlo.tanh %p : {piece}
      %2 = sdy.sharding_constraint %1 <@mesh, [{{}}, {{}}]> : {piece}
      sdy.return %2 : {piece}
    }} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }}
}}
"""


def test_a_shard_map_over_one_device_is_inlined(tmp_path):
    path = tmp_path / "smap.mlir"
    path.write_text(manual_computation(1))
    module = tilefuse.compile(path, target="vulkan", strict=True)
    x = np.random.default_rng(1).standard_normal((8, 4), np.float32)
    close(module.main(x), np.tanh(x))


def test_a_shard_map_that_splits_its_arrays_is_one_error_at_its_line(tmp_path):
    path = tmp_path / "smap.mlir"
    path.write_text(manual_computation(2))
    out = tmp_path / "smap.vmfb"
    proc = run_cli("compile", str(path), "-o", str(out), "--target", "vulkan")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"tilefuse: error: {path}:4:10: sdy.manual_computation splits")
    assert "tensor<4x4xf32> pieces" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_a_program_without_shardy_is_read_as_it_is():
    """`sdy.` in a name is not Shardy: the program is left alone."""
    text = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> attributes {note = "sdy.none"} {
  %0 = stablehlo.negate %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""
    module = tilefuse.compile(text, target="vulkan")
    x = np.arange(4, dtype=np.float32)
    close(module.main(x), -x)


def gspmd_lowering(x, w) -> str:
    """The constrained layer as JAX lowers it with the GSPMD partitioner:
    `custom_call @Sharding` and `mhlo.sharding` attributes, no `sdy`."""
    jax.config.update("jax_use_shardy_partitioner", False)
    try:
        return jax.jit(constrained_layer).lower(x, w).as_text()
    finally:
        jax.config.update("jax_use_shardy_partitioner", True)


@pytest.mark.parametrize("fusion", [True, False], ids=["planned", "no-fusion"])
def test_gspmd_sharding_calls_are_dropped(fusion, inputs, tmp_path):
    """Plain iree-compile parses `custom_call @Sharding` but fails to lower
    it; tilefuse drops it, also where IREE forms the dispatches (phase 1 then
    reads the edited program, not the user's file)."""
    text = gspmd_lowering(*inputs)
    assert "custom_call @Sharding" in text and "sdy." not in text
    path = tmp_path / "gspmd.mlir"
    path.write_text(text)
    flags = ["--iree-hal-target-backends=vulkan-spirv", "-o", str(tmp_path / "x.vmfb")]
    with pytest.raises(TilefuseError, match="custom_call"):
        iree_compile([str(path), *flags], "iree-compile")
    module = tilefuse.compile(path, target="vulkan", fusion=fusion)
    close(module.main(*inputs), constrained_layer(*inputs))


def test_shardy_annotations_are_dropped_where_iree_forms_the_dispatches(inputs, tmp_path):
    path = tmp_path / "layer.mlir"
    path.write_text(jax.jit(constrained_layer).lower(*inputs).as_text())
    module = tilefuse.compile(path, target="vulkan", fusion=False)
    close(module.main(*inputs), constrained_layer(*inputs))


def test_a_gspmd_shard_map_that_splits_its_arrays_is_one_error_at_its_line(tmp_path):
    path = tmp_path / "smap.mlir"
    path.write_text("""func.func @main(%x: tensor<8x4xf32>) -> tensor<4x4xf32> {
  %0 = stablehlo.custom_call @Sharding(%x) {mhlo.sharding = "{devices=[2,1]<=[2]}"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %1 = stablehlo.custom_call @SPMDFullToShardShape(%0) {mhlo.sharding = "{manual}"} : (tensor<8x4xf32>) -> tensor<4x4xf32>
  return %1 : tensor<4x4xf32>
}
""")
    out = tmp_path / "smap.vmfb"
    proc = run_cli("compile", str(path), "-o", str(out), "--target", "vulkan")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"tilefuse: error: {path}:3:8: custom_call @SPMDFullToShardShape")
    assert "tensor<4x4xf32>" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()
