"""Export the JAX program corpus: StableHLO text plus inputs and JAX CPU reference outputs.

Run from the repository root (needs the `jax` extra: `pip install -e ".[jax]"`):

    python tests/corpus/generate.py            # regenerate everything
    python tests/corpus/generate.py --no-parse # skip the IREE parse check

Every program below is a small function of its arguments (model weights included), lowered
with `jax.jit(f).lower(*args).as_text()`. For each program NAME it writes
`programs/NAME.mlir` and `programs/NAME.npz` (arg0.., out0..), and it rewrites
`manifest.json`. See README.md next to this file for the format.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import re
import sys
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import jaxlib
import ml_dtypes
import numpy as np
from jax import lax

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from corpus.load import MANIFEST, PROGRAM_DIR
from corpus.load import NUMPY_DTYPES as DTYPES

TAGS = {np.dtype(v).name: k for k, v in DTYPES.items()}
INT_DTYPES = ["i8", "i16", "i32", "i64"]
FLOAT_DTYPES = ["f16", "bf16", "f32", "f64"]
VARIANTS = ["f32", "f16", "bf16"]  # dtypes of the programs that come in all three

# (atol, rtol) per tolerance class and float dtype; integer and boolean outputs are exact.
# f64 gets the f32 numbers, with rtol at least 1e-7: IREE demotes f64 to f32 by default (so
# even a copy rounds to f32), and Vulkan's transcendentals are 32-bit.
TOLERANCES = {
    "exact": {"f16": (0.0, 0.0), "bf16": (0.0, 0.0), "f32": (0.0, 0.0)},
    "elementwise": {"f16": (1e-2, 1e-2), "bf16": (5e-2, 5e-2), "f32": (1e-5, 1e-5)},
    "transcendental": {"f16": (2e-2, 2e-2), "bf16": (5e-2, 5e-2), "f32": (5e-5, 5e-5)},
    "reduction": {"f16": (2e-2, 2e-2), "bf16": (1e-1, 5e-2), "f32": (1e-4, 1e-4)},
    "model": {"f16": (5e-2, 5e-2), "bf16": (1e-1, 1e-1), "f32": (2e-4, 2e-4)},
}


def tolerance(kind: str, tag: str) -> tuple[float, float]:
    if tag not in FLOAT_DTYPES:
        return (0.0, 0.0)
    if tag == "f64":
        atol, rtol = TOLERANCES[kind]["f32"]
        return atol, max(rtol, 1e-7)
    return TOLERANCES[kind][tag]


# --------------------------------------------------------------------------------------------
# Inputs: each maker takes the program's RandomState and returns one numpy array.

Input = Callable[[np.random.RandomState], np.ndarray]


def _cast(values: np.ndarray, dtype: str) -> np.ndarray:
    return np.asarray(values).astype(DTYPES[dtype])


def normal(shape, dtype="f32", scale=1.0, mean=0.0) -> Input:
    return lambda rng: _cast(rng.standard_normal(shape) * scale + mean, dtype)


def uniform(shape, dtype="f32", lo=-1.0, hi=1.0) -> Input:
    return lambda rng: _cast(rng.uniform(lo, hi, shape), dtype)


def integers(shape, dtype="i32", lo=-100, hi=100, offset=0) -> Input:
    """Uniform integers in [lo, hi], plus `offset` (to reach past 32 bits for i64)."""
    return lambda rng: _cast(rng.randint(lo, hi + 1, shape, dtype=np.int64) + offset, dtype)


def nonzero(shape, dtype="i32", bound=100) -> Input:
    """Integers in [-bound, bound] without 0 (divisors)."""

    def make(rng):
        values = rng.randint(1, bound + 1, shape, dtype=np.int64)
        return _cast(values * rng.choice([-1, 1], shape), dtype)

    return make


def grid(shape, dtype="f32", step=0.5, bound=3.0) -> Input:
    """Multiples of `step` in [-bound, bound]: ties for round, equal pairs for compares, and
    exact sums in f16/bf16 whatever the summation order."""
    n = round(bound / step)
    return lambda rng: _cast(rng.randint(-n, n + 1, shape) * step, dtype)


def signed(shape, dtype="f32", lo=0.25, hi=3.0) -> Input:
    """Random sign times uniform(lo, hi): float divisors away from zero."""
    return lambda rng: _cast(rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape), dtype)


def choice(shape, dtype, values, p=None) -> Input:
    return lambda rng: _cast(rng.choice(np.asarray(values, np.float64), shape, p=p), dtype)


def booleans(shape, p=0.5) -> Input:
    return lambda rng: rng.uniform(size=shape) < p


def half_grid(shape, dtype="f32") -> Input:
    """Half continuous uniform(-4, 4), half multiples of 0.5 (exact ties for round)."""

    def make(rng):
        cont = rng.uniform(-4.0, 4.0, shape)
        return _cast(np.where(rng.uniform(size=shape) < 0.5, cont, np.round(cont * 2) / 2), dtype)

    return make


def with_specials(shape, dtype="f32") -> Input:
    """Normal values with some inf, -inf and nan."""

    def make(rng):
        values = rng.standard_normal(shape)
        pick = rng.uniform(size=shape)
        values[pick < 0.1] = np.inf
        values[(pick >= 0.1) & (pick < 0.2)] = -np.inf
        values[(pick >= 0.2) & (pick < 0.3)] = np.nan
        return _cast(values, dtype)

    return make


def weight(shape, dtype="f32") -> Input:
    """A dense layer's weight, scaled by 1/sqrt(fan_in)."""
    return normal(shape, dtype, scale=1.0 / np.sqrt(shape[0]))


def scale_param(shape, dtype="f32") -> Input:
    """A normalization's gain: around 1."""
    return normal(shape, dtype, scale=0.1, mean=1.0)


def bias(shape, dtype="f32") -> Input:
    return normal(shape, dtype, scale=0.1)


def scalar(value, dtype="i32") -> Input:
    return lambda rng: np.asarray(value, DTYPES[dtype])


# --------------------------------------------------------------------------------------------
# Program registry.


@dataclass(frozen=True)
class Program:
    name: str
    category: str
    dtype: str  # the program's main dtype tag, or "bool" or "mixed"
    fn: Callable
    inputs: tuple[Input, ...]
    kind: str  # tolerance class, a key of TOLERANCES
    x64: bool  # lowered and run with jax_enable_x64


PROGRAMS: list[Program] = []


def add(category, name, fn, inputs, kind="elementwise", *, dtype=None, x64=None):
    """Register a program; its dtype defaults to the name's suffix (`gelu_erf_f16`: f16)."""
    assert kind in TOLERANCES, kind
    assert all(p.name != name for p in PROGRAMS), f"duplicate program {name}"
    dtype = dtype or name.rsplit("_", 1)[-1]
    assert dtype in DTYPES or dtype == "mixed", f"{name}: name it with a dtype suffix"
    x64 = dtype in ("i64", "f64") if x64 is None else x64
    PROGRAMS.append(Program(name, category, dtype, fn, tuple(inputs), kind, x64))


activation = partial(add, "activation")
normalization = partial(add, "normalization")
model = partial(add, "model")
training = partial(add, "training")
ops = partial(add, "ops")
lax_sweep = partial(add, "lax_sweep")


# --------------------------------------------------------------------------------------------
# 1. jax.nn activations, on [16, 128] (f16 and bf16 too for gelu and softmax).

ACT = (16, 128)
# name, function, tolerance class, dtypes
ACTIVATIONS = [
    ("relu", jax.nn.relu, "elementwise", ["f32"]),
    ("relu6", jax.nn.relu6, "elementwise", ["f32"]),
    ("sigmoid", jax.nn.sigmoid, "transcendental", ["f32"]),
    ("silu", jax.nn.silu, "transcendental", ["f32"]),  # jax.nn.swish is the same function
    ("gelu_tanh", partial(jax.nn.gelu, approximate=True), "transcendental", VARIANTS),
    ("gelu_erf", partial(jax.nn.gelu, approximate=False), "transcendental", VARIANTS),
    ("elu", jax.nn.elu, "transcendental", ["f32"]),
    ("selu", jax.nn.selu, "transcendental", ["f32"]),
    ("celu", jax.nn.celu, "transcendental", ["f32"]),
    ("leaky_relu", jax.nn.leaky_relu, "elementwise", ["f32"]),
    ("softplus", jax.nn.softplus, "transcendental", ["f32"]),
    ("soft_sign", jax.nn.soft_sign, "elementwise", ["f32"]),
    ("hard_tanh", jax.nn.hard_tanh, "elementwise", ["f32"]),
    ("hard_sigmoid", jax.nn.hard_sigmoid, "elementwise", ["f32"]),
    ("hard_swish", jax.nn.hard_swish, "elementwise", ["f32"]),  # same as jax.nn.hard_silu
    ("glu", jax.nn.glu, "transcendental", ["f32"]),
    ("log_sigmoid", jax.nn.log_sigmoid, "transcendental", ["f32"]),
    ("mish", jax.nn.mish, "transcendental", ["f32"]),
    ("tanh", jax.nn.tanh, "transcendental", ["f32"]),
    ("squareplus", jax.nn.squareplus, "elementwise", ["f32"]),
    ("sparse_plus", jax.nn.sparse_plus, "elementwise", ["f32"]),
    ("sparse_sigmoid", jax.nn.sparse_sigmoid, "elementwise", ["f32"]),
    ("identity", jax.nn.identity, "elementwise", ["f32"]),  # returns its argument
    ("standardize", partial(jax.nn.standardize, axis=-1), "reduction", ["f32"]),
    ("softmax", partial(jax.nn.softmax, axis=-1), "reduction", VARIANTS),
    ("log_softmax", partial(jax.nn.log_softmax, axis=-1), "reduction", ["f32"]),
    ("logsumexp", partial(jax.nn.logsumexp, axis=-1), "reduction", ["f32"]),
    ("logmeanexp", partial(jax.nn.logmeanexp, axis=-1), "reduction", ["f32"]),
]
for _name, _fn, _kind, _dtypes in ACTIVATIONS:
    for _dt in _dtypes:
        activation(f"{_name}_{_dt}", _fn, [normal(ACT, _dt, scale=3.0)], _kind)

# log(1 - exp(-x)) is defined for x > 0.
activation("log1mexp_f32", jax.nn.log1mexp, [uniform(ACT, lo=0.05, hi=5.0)], "transcendental")
activation("one_hot_f32", partial(jax.nn.one_hot, num_classes=16), [integers((256,), lo=0, hi=15)])


# --------------------------------------------------------------------------------------------
# Model pieces. Weights are arguments; constants stay scalars (weakly typed Python floats, so
# f16 and bf16 programs compute in their own dtype).


def layernorm(x, gamma, beta, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.var(x, axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps) * gamma + beta


def rmsnorm(x, gamma, eps=1e-6):
    return x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * gamma


def batchnorm(x, mean, var, gamma, beta, eps=1e-5):
    """Inference form: the running statistics are arguments."""
    return (x - mean) * lax.rsqrt(var + eps) * gamma + beta


def causal_attention(q, k, v):
    """q, k, v: [batch, heads, seq, head_dim]."""
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    seq = q.shape[-2]
    mask = jnp.tril(jnp.ones((seq, seq), dtype=bool))
    scores = jnp.where(mask, scores, jnp.finfo(scores.dtype).min)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)


def split_heads(x, n_heads):
    b, s, c = x.shape
    return x.reshape(b, s, n_heads, c // n_heads).transpose(0, 2, 1, 3)


def merge_heads(x):
    b, h, s, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, h * d)


def mlp_block(x, w1, b1, w2, b2):
    return jax.nn.gelu(x @ w1 + b1) @ w2 + b2


def gpt2_block(x, ln1_g, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_g, ln2_b, w_fc, b_fc, w_proj, b_proj):
    q, k, v = jnp.split(layernorm(x, ln1_g, ln1_b) @ w_qkv + b_qkv, 3, axis=-1)
    attn = causal_attention(*(split_heads(t, n_heads=2) for t in (q, k, v)))
    x = x + merge_heads(attn) @ w_o + b_o
    return x + mlp_block(layernorm(x, ln2_g, ln2_b), w_fc, b_fc, w_proj, b_proj)


def rope(x):
    """Rotary position embedding of x: [batch, heads, seq, head_dim] (rotate-half form)."""
    seq, dim = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / (10000.0 ** (jnp.arange(0, dim, 2, dtype=jnp.float32) / dim))
    angles = jnp.arange(seq, dtype=jnp.float32)[:, None] * inv_freq[None, :]
    sin = jnp.concatenate([jnp.sin(angles)] * 2, axis=-1).astype(x.dtype)
    cos = jnp.concatenate([jnp.cos(angles)] * 2, axis=-1).astype(x.dtype)
    x1, x2 = jnp.split(x, 2, axis=-1)
    return x * cos + jnp.concatenate([-x2, x1], axis=-1) * sin


def llama_block(x, attn_norm, wq, wk, wv, wo, mlp_norm, w_gate, w_up, w_down):
    h = rmsnorm(x, attn_norm)
    q, k, v = (split_heads(h @ w, n_heads=2) for w in (wq, wk, wv))
    x = x + merge_heads(causal_attention(rope(q), rope(k), v)) @ wo
    h = rmsnorm(x, mlp_norm)
    return x + (jax.nn.silu(h @ w_gate) * (h @ w_up)) @ w_down


def cross_entropy(logits, labels):
    one_hot = jax.nn.one_hot(labels, logits.shape[-1], dtype=logits.dtype)
    return -jnp.mean(jnp.sum(one_hot * jax.nn.log_softmax(logits, axis=-1), axis=-1))


def mlp_loss(params, x, labels):
    w1, b1, w2, b2 = params
    return cross_entropy(jnp.tanh(x @ w1 + b1) @ w2 + b2, labels)


def mlp_grad(w1, b1, w2, b2, x, labels):
    """The loss, and its gradients with respect to the weights."""
    return jax.value_and_grad(mlp_loss)((w1, b1, w2, b2), x, labels)


def adam(step, p0, p1, p2, g0, g1, g2, m0, m1, m2, v0, v1, v2):
    """One Adam step over three parameters: new params, first and second moments."""
    lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-8
    t = step.astype(jnp.float32) + 1.0
    params, moments1, moments2 = [], [], []
    for p, g, m, v in zip((p0, p1, p2), (g0, g1, g2), (m0, m1, m2), (v0, v1, v2)):
        m = b1 * m + (1.0 - b1) * g
        v = b2 * v + (1.0 - b2) * g * g
        m_hat, v_hat = m / (1.0 - b1**t), v / (1.0 - b2**t)
        params.append(p - lr * m_hat / (jnp.sqrt(v_hat) + eps))
        moments1.append(m)
        moments2.append(v)
    return params, moments1, moments2


def conv_bn_relu(x, kernel, mean, var, gamma, beta):
    dims = ("NHWC", "HWIO", "NHWC")
    y = lax.conv_general_dilated(x, kernel, (1, 1), "SAME", dimension_numbers=dims)
    return jax.nn.relu(batchnorm(y, mean, var, gamma, beta))


def dense(n_in, n_out, dt="f32") -> list[Input]:
    """Inputs of a dense layer: weight [n_in, n_out], bias [n_out]."""
    return [weight((n_in, n_out), dt), bias((n_out,), dt)]


def norm(n, dt="f32") -> list[Input]:
    """Inputs of a layernorm: gain and bias [n]."""
    return [scale_param((n,), dt), bias((n,), dt)]


def bn_stats(n) -> list[Input]:
    """Running mean and variance [n] of a batchnorm."""
    return [normal((n,), scale=0.5), uniform((n,), lo=0.5, hi=4.0)]


# --------------------------------------------------------------------------------------------
# 2. Normalizations over the last axis of [B, S, H]; 3. attention and transformer blocks;
# 6. their f16 and bf16 variants.

B, S, H = 4, 32, 64
QKV = (2, 4, 32, 16)  # [batch, heads, seq, head_dim]
C = 32  # width of the transformer blocks, on x: [2, 16, C]

for _dt in VARIANTS:
    _x = normal((B, S, H), _dt, scale=2.0, mean=0.5)
    normalization(f"layernorm_{_dt}", layernorm, [_x, *norm(H, _dt)], "reduction")
    normalization(f"rmsnorm_{_dt}", rmsnorm, [_x, scale_param((H,), _dt)], "reduction")
    model(f"attention_causal_{_dt}", causal_attention, [normal(QKV, _dt)] * 3, "model")
    _mlp = [normal((64, 64), _dt), *dense(64, 128, _dt), *dense(128, 64, _dt)]
    model(f"mlp_{_dt}", mlp_block, _mlp, "model")

normalization("batchnorm_f32", batchnorm, [normal((B, S, H), scale=2.0), *bn_stats(H), *norm(H)])
model(
    "sdpa_causal_f32",
    partial(jax.nn.dot_product_attention, is_causal=True),
    [normal((2, 32, 4, 16))] * 3,  # [batch, seq, heads, head_dim]
    "model",
)
model(
    "gpt2_block_f32",
    gpt2_block,
    [normal((2, 16, C)), *norm(C), *dense(C, 3 * C), *dense(C, C), *norm(C)]
    + [*dense(C, 4 * C), *dense(4 * C, C)],
    "model",
)
model(
    "llama_block_f32",
    llama_block,
    [normal((2, 16, C)), scale_param((C,)), *[weight((C, C))] * 4, scale_param((C,))]
    + [weight((C, 3 * C)), weight((C, 3 * C)), weight((3 * C, C))],
    "model",
)


# --------------------------------------------------------------------------------------------
# 4. Training.

ADAM_SHAPES = [(64, 64), (64,), (64, 32)]
training(
    "mlp_grad_f32",
    mlp_grad,
    [*dense(64, 64), *dense(64, 10), normal((32, 64)), integers((32,), lo=0, hi=9)],
    "model",
)
training(
    "adam_f32",
    adam,
    [scalar(9)]  # step
    + [normal(s) for s in ADAM_SHAPES]  # params
    + [normal(s, scale=0.1) for s in ADAM_SHAPES]  # gradients
    + [normal(s, scale=0.01) for s in ADAM_SHAPES]  # first moments
    + [uniform(s, lo=1e-4, hi=1e-2) for s in ADAM_SHAPES],  # second moments
    "model",
)
training(
    "cross_entropy_f32",
    cross_entropy,
    [normal((64, 100), scale=2.0), integers((64,), lo=0, hi=99)],
    "reduction",
)


# --------------------------------------------------------------------------------------------
# 5. Assorted ops.


def argminmax(x):
    return {
        f"{name}{axis}": fn(x, axis=axis)
        for axis in range(x.ndim)
        for name, fn in (("argmax", jnp.argmax), ("argmin", jnp.argmin))
    }


def int_ops(x, y, d, s):
    """x, y: operands, d: nonzero divisor, s: shift amount in [0, bits)."""
    return {
        "add": x + y,
        "mul": x * y,
        "and": x & y,
        "or": x | y,
        "xor": x ^ y,
        "not": ~x,
        "shl": x << s,
        "shr_arith": x >> s,
        "shr_logical": lax.shift_right_logical(x, s),
        "floordiv": x // d,
        "mod": x % d,
        "div": lax.div(x, d),
        "rem": lax.rem(x, d),
        "eq": x == y,
        "lt": x < y,
        "ge": x >= y,
        "min": jnp.minimum(x, y),
        "max": jnp.maximum(x, y),
        "abs": jnp.abs(x),
    }


def bool_ops(a, b, x, y):
    return {
        "and": a & b,
        "or": a | b,
        "not": ~a,
        "xor": a ^ b,
        "where": jnp.where(a, x, y),
        "where_and_not": jnp.where(a & ~b, x, 0.0),
        "any": jnp.any(a, axis=1),
        "all": jnp.all(b, axis=0),
    }


@jax.jit
def _crop_pad(x):
    """A private helper called twice: JAX emits it as a private function and `func.call`s."""
    return jnp.pad(x[1:, :], ((0, 1), (1, 0)))[:, :-1]


def concat_slice_pad(a, b):
    y = jnp.concatenate([_crop_pad(a), _crop_pad(b)], axis=1)
    y = jnp.concatenate([jnp.pad(y, ((2, 2), (0, 0)), mode="edge"), y[:4]], axis=0)
    return jnp.pad(y[::2, 1:-1], ((1, 1), (3, 3)), mode="reflect")


def var_std(x):
    return {
        "var_last": jnp.var(x, axis=-1),
        "std_last": jnp.std(x, axis=-1),
        "var_first": jnp.var(x, axis=0),
        "std_first": jnp.std(x, axis=0, ddof=1),
    }


def embedding(table, positions, ids):
    return jnp.take(table, ids, axis=0) + positions[None, : ids.shape[1]]


def reduce_scalar(x):
    return jnp.sum(x), jnp.max(x)


_INT_OPS = {"i32": (40_000, 32), "i8": (11, 8)}  # operand bound (products fit), bit width
ops(
    "conv_bn_relu_f32",
    conv_bn_relu,
    [normal((2, 16, 16, 8)), weight((3, 3, 8, 16)), *bn_stats(16), *norm(16)],
    "model",
)
ops(
    "embedding_f32",
    embedding,
    [normal((100, 32)), normal((32, 32), scale=0.1), integers((4, 16), lo=0, hi=99)],
)
ops("cumsum_f32", partial(jnp.cumsum, axis=1), [normal((16, 128))], "reduction")
ops("cumsum_i32", partial(jnp.cumsum, axis=0), [integers((64, 32))])
ops("top_k_f32", partial(lax.top_k, k=8), [normal((16, 128))])
ops("sort_f32", partial(jnp.sort, axis=-1), [normal((16, 128))])
ops("sort_i32", partial(jnp.sort, axis=0), [integers((64, 32), lo=-20, hi=20)])
ops("argsort_f32", partial(jnp.argsort, axis=-1), [normal((16, 128))])
ops("argminmax_2d_f32", argminmax, [normal((32, 64))])
ops("argminmax_3d_f32", argminmax, [normal((8, 16, 32))])
# Many ties: argmax and argmin return the first index.
ops("argminmax_2d_i32", argminmax, [integers((32, 64), lo=-20, hi=20)])
ops("argminmax_3d_i32", argminmax, [integers((8, 16, 32), lo=-20, hi=20)])
for _dt, (_bound, _bits) in _INT_OPS.items():
    _x = integers((32, 64), _dt, -_bound, _bound)
    _shift = integers((32, 64), _dt, 0, _bits - 1)
    ops(f"int_ops_{_dt}", int_ops, [_x, _x, nonzero((32, 64), _dt, _bound), _shift])
ops(
    "bool_ops_bool",
    bool_ops,
    [booleans((32, 64)), booleans((32, 64), 0.3), normal((32, 64)), normal((32, 64))],
)
ops("concat_slice_pad_f32", concat_slice_pad, [normal((16, 24)), normal((16, 24))])
ops("var_std_f32", var_std, [normal((64, 48), scale=2.0, mean=1.0)], "reduction")
ops("reduce_scalar_f32", reduce_scalar, [uniform((64, 64), lo=0.0, hi=1.0)], "reduction")
ops("mean_axis0_f32", partial(jnp.mean, axis=0), [normal((256, 32))], "reduction")


# --------------------------------------------------------------------------------------------
# 7. jax.lax sweep: one program per (op family, dtype), one output per op. Outputs are dicts,
# so the MLIR's jax.result_info names each op (flattened in sorted key order).

ELEM = (32, 48)
REDUCE = (8, 16, 24)
INT_BOUND = {"i8": 11, "i16": 150, "i32": 40_000, "i64": 3_000_000_000}  # a*b does not overflow
I64_OFFSET = 2**33  # i64 compare operands differ only in their low 32 bits
NARROW = ["i8", "i16", "i32", "f16", "bf16", "f32"]  # the dtypes that need no x64


def lax_unary_int(x):
    return {
        "neg": lax.neg(x),
        "abs": lax.abs(x),
        "sign": lax.sign(x),
        "not": lax.bitwise_not(x),
        "popcnt": lax.population_count(x),
        "clz": lax.clz(x),
    }


def lax_unary_float(x, special):
    """special: with inf, -inf and nan."""
    return {
        "neg": lax.neg(x),
        "abs": lax.abs(x),
        "sign": lax.sign(x),
        "floor": lax.floor(x),
        "ceil": lax.ceil(x),
        "round_afz": lax.round(x),
        "round_even": lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
        "is_finite": lax.is_finite(special),
    }


def lax_math(x, p):
    """x: any sign, p: positive."""
    return {
        "exp": lax.exp(x),
        "expm1": lax.expm1(x),
        "tanh": lax.tanh(x),
        "sin": lax.sin(x),
        "cos": lax.cos(x),
        "logistic": lax.logistic(x),
        "erf": lax.erf(x),
        "log": lax.log(p),
        "log1p": lax.log1p(p),
        "sqrt": lax.sqrt(p),
        "rsqrt": lax.rsqrt(p),
    }


def lax_binary(x, y, d):
    """d: nonzero divisor."""
    return {
        "add": lax.add(x, y),
        "sub": lax.sub(x, y),
        "mul": lax.mul(x, y),
        "div": lax.div(x, d),
        "rem": lax.rem(x, d),
        "max": lax.max(x, y),
        "min": lax.min(x, y),
    }


def lax_binary_float(x, y, d, p):
    """p: positive base for pow."""
    return lax_binary(x, y, d) | {"pow": lax.pow(p, y), "atan2": lax.atan2(x, y)}


def lax_compare(x, y):
    lo, hi = np.array(-2, x.dtype), np.array(2, x.dtype)
    return {
        "eq": lax.eq(x, y),
        "ne": lax.ne(x, y),
        "lt": lax.lt(x, y),
        "le": lax.le(x, y),
        "gt": lax.gt(x, y),
        "ge": lax.ge(x, y),
        "select": lax.select(lax.lt(x, y), x, y),
        "clamp": lax.clamp(lo, x, hi),
    }


def lax_convert(targets):
    def convert(x):
        return {t: lax.convert_element_type(x, DTYPES[t]) for t in targets}

    return convert


def lax_convert_widen(*xs):
    return {
        f"{TAGS[x.dtype.name]}_to_{t}": lax.convert_element_type(x, DTYPES[t])
        for x in xs
        for t in ("i64", "f64")
    }


def lax_reduce(x, q):
    """x: summed, maxed, minned; q: multiplied."""
    out = {}
    for axis in range(x.ndim):
        out[f"sum{axis}"] = lax.reduce_sum(x, (axis,))
        out[f"max{axis}"] = lax.reduce_max(x, (axis,))
        out[f"min{axis}"] = lax.reduce_min(x, (axis,))
        out[f"prod{axis}"] = lax.reduce_prod(q, (axis,))
    out["sum01"] = lax.reduce_sum(x, (0, 1))
    out["max12"] = lax.reduce_max(x, (1, 2))
    return out


def lax_shape(x, y, r, i, j):
    """x: [6, 8, 16], y: [6, 3, 16], r: [16], i, j: int32 scalars."""
    zero = np.zeros((), i.dtype)
    return {
        "transpose": lax.transpose(x, (2, 0, 1)),
        "reshape": lax.reshape(x, (16, 48)),
        "broadcast": lax.broadcast_in_dim(r, (6, 8, 16), (2,)),
        "concatenate": lax.concatenate([x, y], 1),
        "slice": lax.slice(x, (1, 2, 0), (5, 8, 16), (2, 1, 3)),
        "dynamic_slice": lax.dynamic_slice(x, (i, j, zero), (3, 4, 16)),
        # y spans all of axis 0, so the start index i is clamped to 0.
        "dynamic_update_slice": lax.dynamic_update_slice(x, y, (i, j, zero)),
        "pad": lax.pad(x, np.array(1, x.dtype), ((1, 2, 0), (0, 1, 1), (-2, 0, 0))),
        "rev": lax.rev(x, (0, 2)),
        "iota": lax.broadcasted_iota(x.dtype, (6, 8), 1),
    }


def values(shape, dt) -> Input:
    """Operands for arithmetic: uniform(-3, 3) floats, or ints whose products fit."""
    if dt in FLOAT_DTYPES:
        return uniform(shape, dt, -3.0, 3.0)
    return integers(shape, dt, -INT_BOUND[dt], INT_BOUND[dt])


# Each family maps a dtype to (function, inputs).


def unary_family(dt):
    if dt in FLOAT_DTYPES:
        return lax_unary_float, [half_grid(ELEM, dt), with_specials(ELEM, dt)]
    return lax_unary_int, [values(ELEM, dt)]


def math_family(dt):
    return lax_math, [uniform(ELEM, dt, -3.0, 3.0), uniform(ELEM, dt, 0.05, 5.0)]


def binary_family(dt):
    if dt in FLOAT_DTYPES:
        positive = uniform(ELEM, dt, 0.1, 3.0)
        return lax_binary_float, [values(ELEM, dt), values(ELEM, dt), signed(ELEM, dt), positive]
    return lax_binary, [values(ELEM, dt), values(ELEM, dt), nonzero(ELEM, dt, INT_BOUND[dt])]


def compare_family(dt):
    """Operands from a small set of values, so that some pairs are equal."""
    if dt in FLOAT_DTYPES:
        operand = grid(ELEM, dt)
    else:
        operand = integers(ELEM, dt, -5, 5, offset=I64_OFFSET if dt == "i64" else 0)
    return lax_compare, [operand, operand]


def reduce_family(dt):
    if dt in ("f16", "bf16"):  # sums and products exact in any order
        powers = choice(REDUCE, dt, [-2, -1, -0.5, 0.5, 1, 2], [0.05, 0.4, 0.05, 0.05, 0.4, 0.05])
        return lax_reduce, [grid(REDUCE, dt, step=0.25, bound=1.0), powers]
    if dt in FLOAT_DTYPES:
        return lax_reduce, [uniform(REDUCE, dt, -3.0, 3.0), signed(REDUCE, dt, 0.9, 1.1)]
    return lax_reduce, [integers(REDUCE, dt, -2, 2), choice(REDUCE, dt, [-1, 1])]


def shape_family(dt):
    shape_inputs = [values(s, dt) for s in [(6, 8, 16), (6, 3, 16), (16,)]]
    return lax_shape, [*shape_inputs, scalar(2), scalar(3)]


def convert_family(dt):
    """To every other dtype (x64 ones from x64 sources only) and bool; values fit all."""
    targets = [t for t in (NARROW if dt in NARROW else DTYPES) if t not in (dt, "bool")]
    return lax_convert([*targets, "bool"]), [convert_input(dt)]


def convert_input(dt) -> Input:
    return uniform(ELEM, dt, -100.0, 100.0) if dt in FLOAT_DTYPES else integers(ELEM, dt)


ALL = INT_DTYPES + FLOAT_DTYPES
# family, dtypes, dtype -> (function, inputs), tolerance class
SWEEP = [
    ("unary", ALL, unary_family, "elementwise"),
    ("math", FLOAT_DTYPES, math_family, "transcendental"),
    ("binary", ALL, binary_family, "transcendental"),  # pow and atan2
    ("compare", ALL, compare_family, "exact"),
    ("reduce", ALL, reduce_family, "reduction"),
    ("shape", ALL, shape_family, "exact"),
    ("convert", ALL, convert_family, "elementwise"),
]
for _family, _dtypes, _make, _kind in SWEEP:
    for _dt in _dtypes:
        lax_sweep(f"lax_{_family}_{_dt}", *_make(_dt), _kind)
lax_sweep(
    "lax_convert_widen_x64",
    lax_convert_widen,
    [convert_input(dt) for dt in NARROW],
    dtype="mixed",
    x64=True,
)


# --------------------------------------------------------------------------------------------
# Export.


def named(fn: Callable, name: str) -> Callable:
    """fn under the program's name, so the module is `@jit_<name>`."""

    def program(*args):
        return fn(*args)

    program.__name__ = program.__qualname__ = name
    return program


def encode(array: np.ndarray) -> np.ndarray:
    """bf16 is stored as its uint16 bit pattern (numpy's npz cannot hold it)."""
    return array.view(np.uint16) if array.dtype == ml_dtypes.bfloat16 else array


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """Like np.savez_compressed, with fixed timestamps so that regenerating is byte-stable."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for key, array in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, encode(array), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buf.getvalue())
    return out.getvalue()


def write_atomically(path: Path, data: bytes) -> None:
    """Readers of the corpus never see a half-written or missing file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


_ATTRIBUTE_TENSOR = re.compile(r"dense<[^>]*> : tensor<[^>]*>")
_WIDE_TENSOR = re.compile(r"tensor<(?:\d+x)*([if]64)>")


def features(text: str) -> list[str]:
    """What a test may want to select on: `func.call`, chlo ops, 64-bit tensor values."""
    found = {"func.call"} if re.search(r"\bcall @", text) else set()
    found |= {f"chlo.{op}" for op in re.findall(r"\bchlo\.(\w+)", text)}
    found |= set(_WIDE_TENSOR.findall(_ATTRIBUTE_TENSOR.sub("", text)))
    return sorted(found)


def describe(array: np.ndarray, kind: str | None = None) -> dict:
    tag = TAGS[array.dtype.name]
    entry = {"dtype": tag, "shape": list(array.shape)}
    if kind is not None:
        entry["atol"], entry["rtol"] = tolerance(kind, tag)
    return entry


def export(program: Program) -> dict:
    rng = np.random.RandomState(zlib.crc32(program.name.encode()))
    args = [make(rng) for make in program.inputs]
    if not program.x64:
        assert not any(a.dtype.itemsize == 8 for a in args), f"{program.name}: 64-bit input"
    with jax.enable_x64(program.x64):
        jitted = jax.jit(named(program.fn, program.name))
        text = jitted.lower(*args).as_text()
        leaves = jax.tree_util.tree_flatten_with_path(jitted(*args))[0]
    outputs = [np.asarray(leaf) for _, leaf in leaves]
    if program.category != "lax_sweep" and program.dtype in FLOAT_DTYPES:
        promoted = {TAGS[o.dtype.name] for o in outputs} & set(FLOAT_DTYPES) - {program.dtype}
        assert not promoted, f"{program.name}: outputs promoted to {promoted}"

    write_atomically(PROGRAM_DIR / f"{program.name}.mlir", text.encode())
    arrays = {f"arg{i}": a for i, a in enumerate(args)}
    arrays |= {f"out{i}": o for i, o in enumerate(outputs)}
    write_atomically(PROGRAM_DIR / f"{program.name}.npz", npz_bytes(arrays))

    float_tags = [TAGS[o.dtype.name] for o in outputs if TAGS[o.dtype.name] in FLOAT_DTYPES]
    atol, rtol = max((tolerance(program.kind, t) for t in float_tags), default=(0.0, 0.0))
    return {
        "name": program.name,
        "category": program.category,
        "dtype": program.dtype,
        "x64": program.x64,
        "tolerance_class": program.kind,
        "atol": atol,
        "rtol": rtol,
        "features": features(text),
        "inputs": [describe(a) for a in args],
        "outputs": [
            {"path": jax.tree_util.keystr(path), **describe(o, program.kind)}
            for (path, _), o in zip(leaves, outputs)
        ],
    }


def to_json(value, indent: int = 0) -> str:
    """JSON with each list or object on one line when it fits in 100 columns."""
    flat = json.dumps(value)
    if len(flat) + indent <= 100 or not isinstance(value, (list, dict)):
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k)}: {to_json(v, indent + 2)}" for k, v in value.items()]
        open_, close = "{", "}"
    else:
        items = [pad + to_json(v, indent + 2) for v in value]
        open_, close = "[", "]"
    return open_ + "\n" + ",\n".join(items) + "\n" + " " * indent + close


def parse_failures(names: list[str]) -> list[str]:
    """Parse every written module with IREE's MLIR bindings; returns the failures."""
    from iree.compiler import ir

    failures = []
    for name in names:
        try:
            ir.Module.parse((PROGRAM_DIR / f"{name}.mlir").read_text(), ir.Context())
        except Exception as e:  # noqa: BLE001 - report every kind of parse error
            failures.append(f"{name}: {e}")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-parse", action="store_true", help="skip the IREE parse check")
    args = parser.parse_args()

    print(f"exporting {len(PROGRAMS)} programs with jax {jax.__version__}")
    PROGRAM_DIR.mkdir(parents=True, exist_ok=True)
    entries = [export(p) for p in PROGRAMS]
    written = {f"{e['name']}{ext}" for e in entries for ext in (".mlir", ".npz")}
    for stale in PROGRAM_DIR.iterdir():
        if stale.name not in written:
            stale.unlink()
    manifest = {
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "generator": "tests/corpus/generate.py",
        "bf16_storage": "bf16 arrays are stored in the .npz as their uint16 bit patterns",
        "programs": entries,
    }
    write_atomically(MANIFEST, (to_json(manifest) + "\n").encode())

    size = sum(f.stat().st_size for f in PROGRAM_DIR.iterdir())
    for category, count in Counter(e["category"] for e in entries).items():
        print(f"  {category}: {count}")
    print(f"wrote {len(entries)} programs, {size / 1e6:.2f} MB in {PROGRAM_DIR}")
    if args.no_parse:
        return 0
    failures = parse_failures([e["name"] for e in entries])
    for failure in failures:
        print(f"PARSE FAILURE {failure}")
    print(f"parsed with iree.compiler: {len(entries) - len(failures)}/{len(entries)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
