"""tilefuse.jit: a JAX function in, arrays out, on Vulkan (lavapipe), against jax.jit
on the CPU. Tolerances: f32 2e-5 relative to the largest output magnitude
(sums of 64 products reassociate), bf16 2e-2."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import tilefuse
from support import run_cli
from tilefuse import TilefuseError


def close(got, want, tolerance):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    assert got.shape == want.shape
    scale = max(1.0, float(np.abs(want).max()))
    assert float(np.abs(got - want).max()) <= tolerance * scale


def layer(params, x, *, activation):
    h = x @ params["w"] + params["b"]
    y = jax.nn.gelu(h) if activation == "gelu" else jax.nn.relu(h)
    return {"y": y, "norm": jnp.sum(h * h, axis=-1)}


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(0)
    params = {
        "w": rng.standard_normal((64, 32), np.float32) / 8,
        "b": rng.standard_normal(32, np.float32),
    }
    return params, rng.standard_normal((8, 64), np.float32)


def test_pytrees_and_static_args_match_jax(inputs):
    params, x = inputs
    f = tilefuse.jit(layer, static_argnames="activation")
    for activation in ("gelu", "relu"):
        got = f(params, x, activation=activation)
        want = jax.jit(layer, static_argnames="activation")(params, x, activation=activation)
        assert set(got) == {"y", "norm"}
        for key in got:
            close(got[key], want[key], 2e-5)
    assert f.compiles == 2  # one program per static value


def test_second_call_hits_the_cache(inputs):
    params, x = inputs
    f = tilefuse.jit(layer, static_argnames="activation")
    first = f(params, x, activation="gelu")
    second = f(params, x + 1, activation="gelu")
    assert f.compiles == 1
    close(
        second["y"],
        jax.jit(layer, static_argnames="activation")(params, x + 1, activation="gelu")["y"],
        2e-5,
    )
    assert not np.allclose(first["y"], second["y"])
    f(params, x[:4], activation="gelu")  # a new shape is a new program
    assert f.compiles == 2


def test_static_argnums_and_python_scalars():
    def scale(x, factor, power):
        return (x * factor) ** power

    f = tilefuse.jit(scale, static_argnums=2)
    x = np.linspace(-1, 1, 256, dtype=np.float32).reshape(16, 16)
    close(f(x, 0.5, 3), (x * 0.5) ** 3, 1e-6)  # 0.5: a float32 scalar, as in JAX
    close(f(x, 2.0, 2), (x * 2.0) ** 2, 1e-6)
    assert f.compiles == 2


def test_bf16_softmax():
    x = (np.random.default_rng(1).standard_normal((16, 256)) * 3).astype(ml_dtypes.bfloat16)
    f = tilefuse.jit(lambda x: jax.nn.softmax(x, axis=-1))
    got = f(x)
    assert got.dtype == ml_dtypes.bfloat16
    close(got, jax.nn.softmax(jnp.asarray(x, jnp.float32), axis=-1), 2e-2)


def test_decorator_form_and_jax_arrays():
    @tilefuse.jit(target="vulkan")
    def rms(x):
        return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)

    x = jnp.asarray(np.random.default_rng(2).standard_normal((32, 128), np.float32))
    close(rms(x), rms.__wrapped__(x), 2e-5)
    assert rms.__name__ == "rms"


def test_unsupported_argument_is_a_clear_error():
    f = tilefuse.jit(lambda x, name: x * 2)
    with pytest.raises(TilefuseError, match="not str .*static_argnums"):
        f(np.ones(4, np.float32), "twice")


def test_untraceable_function_is_a_tilefuse_error():
    def branchy(x):
        return x if x.sum() > 0 else -x  # Python control flow on a traced value

    with pytest.raises(TilefuseError, match="JAX could not trace branchy"):
        tilefuse.jit(branchy)(np.ones(4, np.float32))


@pytest.mark.parametrize("form", ["serialized", "portable_artifact"])
def test_compile_reads_jax_export(form, tmp_path):
    """`tilefuse compile` takes what jax.export writes: a serialized Exported
    and its StableHLO portable artifact (VHLO bytecode), as plain
    iree-compile takes the latter."""
    from jax import export

    def softmax(x):
        return jax.nn.softmax(x, axis=-1)

    exported = export.export(jax.jit(softmax))(jax.ShapeDtypeStruct((64, 128), jnp.float32))
    data = exported.serialize() if form == "serialized" else exported.mlir_module_serialized
    path = tmp_path / "softmax.bin"
    path.write_bytes(bytes(data))
    out = tmp_path / "softmax.vmfb"
    proc = run_cli("compile", str(path), "-o", str(out), "--target", "vulkan", "--strict")
    assert proc.returncode == 0, proc.stderr
    x = np.random.default_rng(3).standard_normal((64, 128), np.float32)
    module = tilefuse.load(out, "vulkan")
    close(module.main(x), softmax(x), 2e-5)
    reports = tilefuse.compile(path).reports
    assert all(r.status == "applied" for r in reports), [r.line() for r in reports]


def test_unreadable_export_is_one_error_line(tmp_path):
    path = tmp_path / "broken.bin"
    path.write_bytes(b"ML\xefR\rStableHLO_v1.15.0\x00garbage")
    proc = run_cli("compile", str(path), "-o", str(tmp_path / "x.vmfb"))
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"tilefuse: error: {path}: a StableHLO portable artifact")
    assert not (tmp_path / "x.vmfb").exists()


def test_reports_are_those_of_the_arguments_program(inputs):
    params, x = inputs
    f = tilefuse.jit(layer, static_argnames="activation")
    f(params, x, activation="gelu")
    f(params, x[:4], activation="gelu")
    shapes = [r.line() for r in f.reports(params, x, activation="gelu")]
    assert f.compiles == 2 and any("8x32" in line for line in shapes), shapes


def test_position_embeddings_keep_the_plan():
    """Flax's nn.Embed is jnp.take, whose bounds checks on position ids
    built from an iota are computed from constants alone. Outlined, IREE
    hoisted that region and failed on it ("'stream.async.dispatch' op has
    invalid Read access range ... of resource %__hoisted_tensor"; in larger
    models its CPU codegen failed on the hoisted region instead), and the
    whole plan was dropped (every Hugging Face Flax model, found by a sweep
    of them). The planner leaves such groups to IREE."""

    def embed(tokens, positions, ids):
        batch, length = ids.shape
        pos = jnp.broadcast_to(jnp.arange(length), (batch, length))
        return jnp.take(tokens, ids, axis=0) + jnp.take(positions, pos, axis=0)

    rng = np.random.default_rng(3)
    tokens = rng.standard_normal((96, 48)).astype(np.float32)
    positions = rng.standard_normal((32, 48)).astype(np.float32)
    ids = rng.integers(0, 96, (2, 16)).astype(np.int32)
    text = jax.jit(embed).lower(tokens, positions, ids).as_text()
    result = tilefuse.compile_program(text, "vulkan")
    assert not [n for n in result.notes if "FALLBACK" in n], result.notes
    got = tilefuse.CompiledModule(result.vmfb, "vulkan").main(tokens, positions, ids)
    np.testing.assert_array_equal(got, np.asarray(jax.jit(embed)(tokens, positions, ids)))
