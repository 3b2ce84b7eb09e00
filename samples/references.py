"""Inputs and numpy references for the samples (float64 math)."""

import ml_dtypes
import numpy as np


def _gelu(x):
    x = x.astype(np.float64)
    return 0.5 * x * (1.0 + np.tanh(0.7978845 * (x + 0.044715 * x**3)))


def gelu_bf16(rng, small=False):
    shape = (2, 16, 256) if small else (6, 512, 4096)
    x = rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
    return [x], [_gelu(x)], 2e-2  # bf16 keeps 8 bits of mantissa


def gelu_f32(rng, small=False):
    x = rng.standard_normal((6, 512, 4096)).astype(np.float32)
    return [x], [_gelu(x)], 1e-5


def bias_scale_chain(rng, small=False):
    x = rng.standard_normal((257, 1000)).astype(np.float32)
    scale = rng.standard_normal(1000).astype(np.float32)
    bias = rng.standard_normal(257).astype(np.float32)
    x64 = x.astype(np.float64)
    y = np.maximum(x64 * scale + bias[:, None], 0) - x64 / 4
    return [x, scale, bias], [y], 1e-5


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_f32(rng, small=False):
    x = rng.standard_normal((256, 1000)).astype(np.float32)
    return [x], [_softmax(x.astype(np.float64))], 1e-6  # outputs are ~1e-3


def layernorm_f32(rng, small=False):
    x = rng.standard_normal((128, 768)).astype(np.float32)
    gamma = rng.standard_normal(768).astype(np.float32)
    beta = rng.standard_normal(768).astype(np.float32)
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(-1, keepdims=True)
    return [x, gamma, beta], [(x64 - mean) / np.sqrt(var + 1e-5) * gamma + beta], 1e-4


def rmsnorm_f32(rng, small=False):
    x = rng.standard_normal((128, 1024)).astype(np.float32)
    w = rng.standard_normal(1024).astype(np.float32)
    x64 = x.astype(np.float64)
    y = x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-6) * w
    return [x, w], [y], 1e-4


def mlp_block_f32(rng, small=False):
    x = rng.standard_normal((64, 256)).astype(np.float32)
    w1 = (rng.standard_normal((256, 1024)) / 16).astype(np.float32)
    b1 = rng.standard_normal(1024).astype(np.float32)
    w2 = (rng.standard_normal((1024, 256)) / 32).astype(np.float32)
    b2 = rng.standard_normal(256).astype(np.float32)
    h = x.astype(np.float64) @ w1 + b1
    y = _gelu(h) @ w2 + b2
    return [x, w1, b1, w2, b2], [y], 1e-4  # sums of 256 and 1024 f32 products


def mlp_block_f16(rng, small=False):
    inputs, _, _ = mlp_block_f32(rng)
    x, w1, b1, w2, b2 = (a.astype(np.float16) for a in inputs)
    h = x.astype(np.float64) @ w1 + b1
    y = _gelu(h) @ w2 + b2
    # f16 sums of 256 and 1024 products, and the hidden layer rounded to f16
    # in between: a few f16 ulps of |y| (up to about 4) per term.
    return [x, w1, b1, w2, b2], [y], 5e-2


def attention_f32(rng, small=False):
    q, k, v = (rng.standard_normal((128, 64)).astype(np.float32) for _ in range(3))
    p = _softmax(q.astype(np.float64) @ k.T.astype(np.float64) * 0.125)
    return [q, k, v], [p @ v], 1e-5


def transpose_exp_abs_f32(rng, small=False):
    x = rng.standard_normal((20, 160, 170)).astype(np.float32)
    return [x], [np.abs(np.exp(x.astype(np.float64).transpose(2, 0, 1)))], 1e-5  # exp(x) < 100


def log_transpose_add_f32(rng, small=False):
    x = rng.uniform(0.5, 4.0, (20, 160, 160)).astype(np.float32)
    lg = np.log(x.astype(np.float64))
    return [x], [lg + lg.transpose(0, 2, 1)], 1e-6


def transpose_4096_f32(rng, small=False):
    x = rng.standard_normal((4096, 4096)).astype(np.float32)
    return [x], [x.T.astype(np.float64)], 0.0  # a copy: exact


def heads_0213_f32(rng, small=False):
    x = rng.standard_normal((8, 2048, 16, 64)).astype(np.float32)
    return [x], [x.transpose(0, 2, 1, 3).astype(np.float64)], 0.0


def pad_relu_f32(rng, small=False):
    x = rng.standard_normal((250, 1000)).astype(np.float32)
    s = rng.standard_normal(1024).astype(np.float32)
    p = np.pad(x.astype(np.float64), ((0, 6), (0, 24)))
    return [x, s], [np.maximum(p * s, 0)], 1e-6


def row_sum_f32(rng, small=False):
    x = rng.standard_normal((4096, 1000)).astype(np.float32)
    # |sums| reach ~130; f32 rounding of 1000 terms in any order is ~1e-4
    # there (IREE's own kernel is off by up to ~1.5e-4).
    return [x], [x.astype(np.float64).sum(-1)], 5e-4


def column_sum_f16(rng, small=False):
    # The seed: 8192 rows of a 50257 vocabulary (small: 64 rows, as in
    # samples/small/column_sum_f16.mlir), f16 summed in f32.
    if small:
        x = rng.standard_normal((64, 50257), dtype=np.float32).astype(np.float16)
        return [x], [np.add.reduce(x, axis=0, dtype=np.float64)], 1e-4  # f32 rounding
    # Full size: 411M values. Small integers generate fast and every partial
    # sum (|s| <= 4 * 8192) is exact in f32, so any summation order must give
    # numpy's result exactly.
    x = rng.integers(-4, 5, (8192, 50257), dtype=np.int8).astype(np.float16)
    return [x], [np.add.reduce(x, axis=0, dtype=np.float64)], 0.0


def column_sum_small(rng, small=False):
    x = rng.standard_normal((512, 1000)).astype(np.float32)
    return [x], [x.astype(np.float64).sum(0)], 1e-4  # f32 sums of 512 values


def argmax_f32(rng, small=False):
    # Rounded to a tenth, so rows have ties; every 50th row gets a NaN (numpy
    # and tilefuse both return the first NaN's index).
    x = np.round(rng.standard_normal((4096, 1000)), 1).astype(np.float32)
    x[::50, 321] = np.nan
    return [x], [np.argmax(x, axis=1)], 0  # indices: exact


def sum_of_squares_f32(rng, small=False):
    x = rng.standard_normal(1 << 20).astype(np.float32)
    # ~1M: f32 partial sums of 2048 squares (rows) then of 512 partials.
    return [x], [(x.astype(np.float64) ** 2).sum()], 1.0


SAMPLES = {
    "gelu_bf16": gelu_bf16,
    "gelu_f32": gelu_f32,
    "bias_scale_chain": bias_scale_chain,
    "softmax_f32": softmax_f32,
    "layernorm_f32": layernorm_f32,
    "rmsnorm_f32": rmsnorm_f32,
    "mlp_block_f32": mlp_block_f32,
    "mlp_block_f16": mlp_block_f16,
    "attention_f32": attention_f32,
    "transpose_exp_abs_f32": transpose_exp_abs_f32,
    "log_transpose_add_f32": log_transpose_add_f32,
    "transpose_4096_f32": transpose_4096_f32,
    "heads_0213_f32": heads_0213_f32,
    "pad_relu_f32": pad_relu_f32,
    "row_sum_f32": row_sum_f32,
    "column_sum_f16": column_sum_f16,
    "column_sum_small": column_sum_small,
    "argmax_f32": argmax_f32,
    "sum_of_squares_f32": sum_of_squares_f32,
}
