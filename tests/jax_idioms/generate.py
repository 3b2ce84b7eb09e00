"""Export the JAX counterparts of the hand-written samples (same math, same
shapes) as StableHLO text, for tests/test_jax_idioms.py:

    python tests/jax_idioms/generate.py     # needs the jax extra

Committed, so the test needs no JAX to read them (it does need it for the
reference outputs). Each file is `jax.jit(f).lower(...).as_text()`."""

from pathlib import Path

import jax
import jax.numpy as jnp

HERE = Path(__file__).parent
f32 = jnp.float32


def layernorm(x, gamma, beta):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * gamma + beta


def rmsnorm(x, w):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w


def mlp_block(x, w1, b1, w2, b2):
    return jax.nn.gelu(x @ w1 + b1, approximate=True) @ w2 + b2


# name -> (function, argument shapes, the sample with the same math)
IDIOMS = {
    "softmax": (lambda x: jax.nn.softmax(x, axis=-1), [(256, 1000)], "softmax_f32"),
    "layernorm": (layernorm, [(128, 768), (768,), (768,)], "layernorm_f32"),
    "rmsnorm": (rmsnorm, [(128, 1024), (1024,)], "rmsnorm_f32"),
    "argmax": (lambda x: jnp.argmax(x, axis=-1).astype(jnp.int32), [(4096, 1000)], "argmax_f32"),
    "gelu": (lambda x: jax.nn.gelu(x, approximate=True), [(6, 512, 4096)], "gelu_f32"),
    "mlp_block": (
        mlp_block,
        [(64, 256), (256, 1024), (1024,), (1024, 256), (256,)],
        "mlp_block_f32",
    ),
}


def main():
    for name, (fn, shapes, _sample) in IDIOMS.items():
        specs = [jax.ShapeDtypeStruct(s, f32) for s in shapes]
        text = jax.jit(fn).lower(*specs).as_text()
        (HERE / f"{name}.mlir").write_text(text)
        print(f"wrote {name}.mlir")


if __name__ == "__main__":
    main()
