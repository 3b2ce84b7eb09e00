"""A concatenate of equal pieces the program computes (RoPE's rotated
halves, a jnp.stack of computed values) is stacked on a new axis and
selected (hlo/stacked_concats.py): one loop kernel instead of IREE's
formation, which computes each piece in a dispatch and copies it into place
in another (`slow_memcpy`). Checked on Vulkan against jax.jit on the CPU
(f32: 2e-5 relative to the largest magnitude; bf16: 1e-2; integers exact)."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import tilefuse
from iree.compiler import ir
from test_attention_layouts import iree_dispatches
from tilefuse.hlo import stacked_concats
from tilefuse.runtime import CompiledModule

STACKED = "computed pieces stacked on a new axis"


def rope_after_projection(h, w, c, s):
    q = (h @ w).reshape(16, 4, 16)
    q1, q2 = q[..., :8], q[..., 8:]
    return jnp.concatenate([q1 * c - q2 * s, q2 * c + q1 * s], -1)


def three_features(x):
    return jnp.stack([jnp.sin(x), jnp.cos(x), x * x], axis=-1)


def unequal_pieces(x):
    return jnp.concatenate([jnp.exp(x[:, :3]), x], axis=1)


def integer_pieces(a, b):
    return jnp.concatenate([a + b, a * b], axis=0)


def _args(shapes, dtype, rng):
    if np.dtype(dtype).kind == "i":
        return [rng.integers(-50, 50, s).astype(dtype) for s in shapes]
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _run(fn, shapes, dtype=np.float32):
    args = _args(shapes, dtype, np.random.default_rng(0))
    result = tilefuse.compile_program(jax.jit(fn).lower(*args).as_text(), "vulkan")
    got = np.asarray(CompiledModule(result.vmfb, "vulkan").main(*args)).astype(np.float64)
    ref = np.asarray(jax.jit(fn)(*args)).astype(np.float64)
    tolerance = {np.float32: 2e-5, ml_dtypes.bfloat16: 1e-2}.get(dtype, 0.0)
    assert np.abs(got - ref).max() <= tolerance * max(1.0, np.abs(ref).max())
    return result


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
def test_rope_is_one_loop_kernel_after_the_projection(dtype):
    result = _run(rope_after_projection, [(16, 64), (64, 64), (16, 1, 8), (16, 1, 8)], dtype)
    assert any(STACKED in line for line in result.fusion.log), result.fusion.log
    lines = [r.line() for r in result.reports]
    assert [(r.strategy, r.status) for r in result.reports] == [
        ("matmul", "applied"),
        ("loop", "applied"),
    ], lines
    assert not any("slow_memcpy" in line for line in lines), lines


def test_a_stack_of_three_computed_values():
    result = _run(three_features, [(32, 24)])
    assert any(f"of 3 equal {STACKED}" in line for line in result.fusion.log), result.fusion.log
    assert all(r.status == "applied" for r in result.reports), [r.line() for r in result.reports]


def test_integer_pieces_are_exact():
    result = _run(integer_pieces, [(8, 16), (8, 16)], np.int32)
    assert any(STACKED in line for line in result.fusion.log), result.fusion.log


def test_pieces_of_different_extents_are_left_as_written():
    result = _run(unequal_pieces, [(8, 16)])
    said = [line for line in result.fusion.log if "concatenate" in line]
    assert said and "left as written: pieces of different extents" in said[0], said


def rope_rotate_half(x, c, s):
    x1, x2 = x[..., :8], x[..., 8:]
    return x * c + jnp.concatenate([-x2, x1], -1) * s


def test_a_concatenate_an_elementwise_op_reads_is_left_to_iree():
    """RoPE written with rotate_half: IREE's formation fuses the concatenate
    into the op that reads it; stacked, a reshape would stand between them."""
    result = _run(rope_rotate_half, [(2, 16, 4, 16), (16, 1, 16), (16, 1, 16)])
    said = [line for line in result.fusion.log if "concatenate" in line]
    assert said and "left as written: an elementwise op reads it" in said[0], said


def grid_sample(img, grid):
    """Bilinear sampling of img [B, C, H, W] at grid [B, Ho, Wo, 2]: four
    gathers whose index vectors (batch, row, column) are concatenates JAX
    builds of computed values."""
    x = (grid[..., 0] + 1) * 9.5
    y = (grid[..., 1] + 1) * 7.5
    x0, y0 = jnp.floor(x), jnp.floor(y)
    wx, wy = (x - x0)[..., None], (y - y0)[..., None]
    x0, y0 = jnp.clip(x0.astype(jnp.int32), 0, 19), jnp.clip(y0.astype(jnp.int32), 0, 15)
    x1, y1 = jnp.minimum(x0 + 1, 19), jnp.minimum(y0 + 1, 15)
    b = jnp.arange(img.shape[0])[:, None, None]
    top = img[b, :, y0, x0] * (1 - wx) + img[b, :, y0, x1] * wx
    bottom = img[b, :, y1, x0] * (1 - wx) + img[b, :, y1, x1] * wx
    return top * (1 - wy) + bottom * wy


def test_a_gathers_index_concatenate_is_left_to_iree(tmp_path):
    """IREE fuses a gather's index concatenate into the gather's dispatch;
    stacked, the select was formed apart from it: this sampler issued 18
    dispatches against IREE's 11 (found by an unseen-program sweep)."""
    rng = np.random.default_rng(0)
    img = rng.standard_normal((2, 8, 16, 20)).astype(np.float32)
    grid = rng.uniform(-1, 1, (2, 12, 12, 2)).astype(np.float32)
    text = jax.jit(grid_sample).lower(img, grid).as_text()
    module = ir.Module.parse(text, ir.Context())
    main = next(
        op.operation for op in module.body.operations if "main" in str(op.attributes["sym_name"])
    )
    said = stacked_concats.rewrite_function(main)
    assert len(said) == 4, said
    assert all("left as written: a gather or scatter reads it" in s for s in said), said
    result = tilefuse.compile_program(text, "vulkan", statistics=True)
    assert result.scheduled_dispatches <= iree_dispatches(text, tmp_path)
    got = CompiledModule(result.vmfb, "vulkan").main(img, grid)
    np.testing.assert_allclose(
        got, np.asarray(jax.jit(grid_sample)(img, grid)), rtol=1e-5, atol=1e-6
    )
