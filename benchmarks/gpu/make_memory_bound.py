"""Writes the memory-bound GPU benchmarks of this folder as StableHLO, from JAX.

Each moves 256 MiB or more per call (several times an H200's 60 MB of L2),
as #21 asks of bandwidth figures. Run from the repository root:

    python benchmarks/gpu/make_memory_bound.py

The matmul programs beside them are written by hand.
"""

from pathlib import Path

import jax
import jax.numpy as jnp

HERE = Path(__file__).parent
R, C = 8192, 8192  # 64 Mi elements: 256 MiB in f32
B, H, S, DH = 4, 32, 4096, 128  # decode attention: a 128 MiB bf16 cache each for k and v


def softmax(x):
    return jax.nn.softmax(x, axis=-1)


def layernorm(x, g, b):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * g + b


def rmsnorm_bf16(x, w):
    xf = x.astype(jnp.float32)
    y = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + 1e-6)
    return (y * w.astype(jnp.float32)).astype(jnp.bfloat16)


def gelu_bf16(x):
    return jax.nn.gelu(x, approximate=True)


def row_sum(x):
    return jnp.sum(x, axis=-1)


def transpose(x):
    return x.T


def decode_attention(q, k, v):
    """One decode step of attention for a batch of sequences: q [B, H, 1, D]
    against a KV cache of [B, H, S, D], as model code writes it (q @ k^T:
    JAX transposes k, and plain IREE copies the cache transposed)."""
    s = (q @ jnp.swapaxes(k, -1, -2)) / jnp.asarray(q.shape[-1] ** 0.5, q.dtype)
    return jax.nn.softmax(s.astype(jnp.float32), axis=-1).astype(q.dtype) @ v


f32 = jax.ShapeDtypeStruct((R, C), jnp.float32)
bf16 = jax.ShapeDtypeStruct((R, C), jnp.bfloat16)
row_f32 = jax.ShapeDtypeStruct((C,), jnp.float32)
row_bf16 = jax.ShapeDtypeStruct((C,), jnp.bfloat16)
query = jax.ShapeDtypeStruct((B, H, 1, DH), jnp.bfloat16)
cache = jax.ShapeDtypeStruct((B, H, S, DH), jnp.bfloat16)

PROGRAMS = {
    "softmax_8192_f32": (softmax, [f32]),
    "layernorm_8192_f32": (layernorm, [f32, row_f32, row_f32]),
    "rmsnorm_8192_bf16": (rmsnorm_bf16, [bf16, row_bf16]),
    "gelu_8192_bf16": (gelu_bf16, [bf16]),
    "row_sum_8192_f32": (row_sum, [f32]),
    "transpose_8192_f32": (transpose, [f32]),
    "decode_attention_bf16": (decode_attention, [query, cache, cache]),
}

if __name__ == "__main__":
    for name, (fn, args) in PROGRAMS.items():
        text = jax.jit(fn).lower(*args).as_text()
        (HERE / f"{name}.mlir").write_text(text)
        print(f"wrote {HERE / name}.mlir")
