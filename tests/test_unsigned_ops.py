"""Reverses and window reductions of unsigned integers, which plain
iree-compile cannot lower (python/tilefuse/hlo/unsigned_ops.py). Results
on Vulkan (lavapipe) are compared exactly with JAX on the CPU."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tilefuse
from tilefuse import TilefuseError
from tilefuse.targets import load_target
from tilefuse.toolchain import iree_compile

RNG = np.random.default_rng(0)


def image(dtype=np.uint8, shape=(33, 47, 3)):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


def flip(x):
    return jnp.flip(x, axis=(0, 1))


def max_pool(x):
    return jax.lax.reduce_window(x, np.uint8(0), jax.lax.max, (3, 3, 1), (2, 2, 1), "SAME")


CASES = [
    # (name, function, input): values above the signed range throughout,
    # so that an order taken as signed would show
    ("flip_uint8_image", flip, image()),
    ("flip_uint32_ids", lambda x: x[::-1, 2:], image(np.uint32, (40, 9))),
    ("cumsum_uint8_wraps", lambda x: jnp.cumsum(x, axis=1, dtype=jnp.uint8), image(shape=(8, 300))),
    ("cumsum_uint32", lambda x: jnp.cumsum(x, axis=0), image(np.uint32, (50, 7))),
    ("cummax_uint8", lambda x: jax.lax.cummax(x, axis=1), image(shape=(6, 200))),
    ("cummin_uint16", lambda x: jax.lax.cummin(x, axis=1), image(np.uint16, (6, 200))),
]


@pytest.mark.parametrize(("name", "fn", "x"), CASES, ids=[c[0] for c in CASES])
def test_unsigned_ops_match_jax(name, fn, x):
    f = tilefuse.jit(fn, target="vulkan", strict=True)
    got = np.asarray(f(x))
    want = np.asarray(jax.jit(fn)(x))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["flip_uint8_image", "cumsum_uint32", "cummax_uint8"])
def test_plain_iree_cannot_lower_them(name, tmp_path):
    """The premise: each fails in plain iree-compile."""
    _, fn, x = next(c for c in CASES if c[0] == name)
    path = tmp_path / f"{name}.mlir"
    path.write_text(jax.jit(fn).lower(x).as_text())
    flags = [*load_target("vulkan").compile_flags, "-o", str(tmp_path / "x.vmfb")]
    with pytest.raises(TilefuseError, match="failed to legalize"):
        iree_compile([str(path), *flags], "iree-compile")


def test_a_max_pool_of_a_uint8_image_stays_as_written():
    """IREE lowers windows other than cumulative ones on unsigned values:
    the max pool is left alone, and right."""
    x = image()
    f = tilefuse.jit(max_pool, target="vulkan", strict=True)
    np.testing.assert_array_equal(np.asarray(f(x)), np.asarray(jax.jit(max_pool)(x)))
    text = jax.jit(max_pool).lower(x).as_text()
    result = tilefuse.compile_program(text, "vulkan", strict=True)
    assert result.fusion is None or not any("ui8" in line for line in result.fusion.log)


def test_cuda_compiles_them():
    """A reverse and a scan with the sign flip (the others differ from
    these only in the body op, which the Vulkan numerics cover)."""
    for _, fn, x in [c for c in CASES if c[0] in ("flip_uint8_image", "cummax_uint8")]:
        text = jax.jit(fn).lower(x).as_text()
        result = tilefuse.compile_program(text, "cuda", strict=True)
        assert any("(IREE cannot lower it on ui" in line for line in result.fusion.log), (
            result.fusion.log
        )


def test_a_window_body_of_two_ops_is_left_and_said():
    text = """func.func @main(%x: tensor<4x16xui8>) -> tensor<4x16xui8> {
  %z = stablehlo.constant dense<0> : tensor<ui8>
  %0 = "stablehlo.reduce_window"(%x, %z) ({
  ^bb0(%a: tensor<ui8>, %b: tensor<ui8>):
    %s = stablehlo.add %a, %b : tensor<ui8>
    %t = stablehlo.multiply %s, %s : tensor<ui8>
    stablehlo.return %t : tensor<ui8>
  }) {window_dimensions = array<i64: 1, 16>, padding = dense<[[0, 0], [15, 0]]> : tensor<2x2xi64>} : (tensor<4x16xui8>, tensor<ui8>) -> tensor<4x16xui8>
  return %0 : tensor<4x16xui8>
}"""
    from tilefuse.driver import catalogue
    from tilefuse.fusion import fuse

    plan = fuse(text, load_target("vulkan"), catalogue())
    (line,) = [line for line in plan.log if "reduce_window of ui8" in line]
    assert "left as it is" in line and "not one op of its two arguments" in line, line
