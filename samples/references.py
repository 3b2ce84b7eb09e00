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


SAMPLES = {"gelu_bf16": gelu_bf16, "gelu_f32": gelu_f32, "bias_scale_chain": bias_scale_chain}
