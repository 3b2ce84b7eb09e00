"""Gradients of model blocks (sweep 14, docs/findings.md) on Vulkan against
jax.grad on the CPU (f32: 1e-5 of each result's largest magnitude).

Plain iree-compile 3.13 fails on both for Vulkan, in the session that wrote
this: the ALiBi attention gradient with "failed to legalize operation
'memref.alloc'" (workgroup memory of index type), the ConvNeXt block's
gradient with "Failed to get an identity value for the reduction
operation". tilefuse's plan forms other dispatches, which it compiles."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tilefuse
from jax import lax
from tilefuse.runtime import CompiledModule


def alibi_attention(q, k, v):
    h, s, d = q.shape
    slopes = 2.0 ** (-8.0 * jnp.arange(1, h + 1) / h)
    bias = slopes[:, None, None] * (jnp.arange(s)[None, :] - jnp.arange(s)[:, None])[None]
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(d) + bias
    scores = jnp.where(jnp.arange(s)[:, None] >= jnp.arange(s)[None], scores, -1e30)
    return jax.nn.softmax(scores, -1) @ v


def convnext_block(x, wd, g, b, w1, w2, gamma):
    h = lax.conv_general_dilated(
        x, wd, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=32
    )
    mean = h.mean(-1, keepdims=True)
    h = (h - mean) * lax.rsqrt(((h - mean) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b
    return x + gamma * (jax.nn.gelu(h @ w1) @ w2)


CASES = {
    "alibi_attention": (alibi_attention, [(4, 32, 16)] * 3, (0, 1, 2)),
    "convnext_block": (
        convnext_block,
        [(1, 14, 14, 32), (7, 7, 1, 32), (32,), (32,), (32, 128), (128, 32), (32,)],
        (0, 1, 4),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_block_gradient_is_right_on_vulkan(name):
    fn, shapes, wrt = CASES[name]
    grad = jax.grad(lambda *a: jnp.sum(fn(*a) ** 2), argnums=wrt)
    rng = np.random.default_rng(0)
    args = [
        (rng.standard_normal(s) * (0.2 if len(s) > 1 else 1)).astype(np.float32) for s in shapes
    ]
    result = tilefuse.compile_program(jax.jit(grad).lower(*args).as_text(), "vulkan")
    got = CompiledModule(result.vmfb, "vulkan").main(*args)
    for out, ref in zip(got, jax.jit(grad)(*args), strict=True):
        ref = np.asarray(ref, np.float64)
        assert np.abs(out - ref).max() <= 1e-5 * np.abs(ref).max()
