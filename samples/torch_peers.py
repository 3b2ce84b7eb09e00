"""The samples in PyTorch, for the bundle runner's torch.compile (Inductor)
peer (python/tilefuse/bench/gpu.py).

One function per sample of references.py, under the sample's name: it takes
the sample's inputs (references.py's, as torch tensors, in the same order)
and returns what the sample's @main returns, with its element types. Each is
written op by op from the sample's .mlir: the same operations in the same
order, the constants rounded to the element type as the .mlir declares them
(a bf16 constant is a bf16 value), the f16 column sum converted to f32
before the sum, argmax's indices as int32.

Every result is a contiguous tensor: a permuted view (x.t()) would let the
peer skip the data movement that the StableHLO program does.
"""

import inspect

import torch
import torch.nn.functional as F


def _rounded(value: float, dtype) -> float:
    """`value` as the nearest `dtype` number, as a Python float: the
    constant a StableHLO `dense<value> : tensor<...xdtype>` holds."""
    return torch.tensor(value, dtype=dtype).item()


# tanh GELU's constants as written in the samples: gelu_*.mlir (7.978845e-01)
# and mlp_block_*.mlir (0.7978845608), each rounded to the sample's type.
_GELU = {
    dtype: (_rounded(7.978845e-01, dtype), _rounded(4.4715e-02, dtype))
    for dtype in (torch.float32, torch.bfloat16)
}
_MLP_GELU = {
    dtype: (_rounded(0.7978845608, dtype), _rounded(0.044715, dtype))
    for dtype in (torch.float32, torch.float16)
}


def _gelu(x, c, k):
    """0.5 x (1 + tanh(c (x + k x^3))) in x's type, in the .mlir's order:
    x2 = x*x, x3 = x2*x, k*x3, x + that, c*that, tanh, 1 + that, (0.5*x)*that."""
    return (0.5 * x) * (1.0 + torch.tanh(c * (x + k * ((x * x) * x))))


def gelu_bf16(x):
    return _gelu(x, *_GELU[torch.bfloat16])


def gelu_f32(x):
    return _gelu(x, *_GELU[torch.float32])


def bias_scale_chain(x, scale, bias):
    # relu(x * scale[col] + bias[row]) - x * 0.25
    return torch.relu(x * scale + bias[:, None]) - x * 0.25


def _softmax_rows(x):
    # max, subtract, exp, sum, divide, as the .mlir reduces and broadcasts.
    e = torch.exp(x - torch.amax(x, dim=1, keepdim=True))
    return e / torch.sum(e, dim=1, keepdim=True)


def softmax_f32(x):
    return _softmax_rows(x)


def layernorm_f32(x, gamma, beta):
    n = float(x.shape[1])
    c = x - torch.sum(x, dim=1, keepdim=True) / n
    var = torch.sum(c * c, dim=1, keepdim=True) / n
    return c * torch.rsqrt(var + 1e-5) * gamma + beta


def rmsnorm_f32(x, w):
    n = float(x.shape[1])
    r = torch.rsqrt(torch.sum(x * x, dim=1, keepdim=True) / n + 1e-6)
    return x * r * w


def _mlp_block(x, w1, b1, w2, b2):
    # Every product in the inputs' type (f16 in, f16 out for mlp_block_f16),
    # as the .mlir's dot_generals.
    h = torch.matmul(x, w1) + b1
    return torch.matmul(_gelu(h, *_MLP_GELU[x.dtype]), w2) + b2


def mlp_block_f32(x, w1, b1, w2, b2):
    return _mlp_block(x, w1, b1, w2, b2)


def mlp_block_f16(x, w1, b1, w2, b2):
    return _mlp_block(x, w1, b1, w2, b2)


def attention_f32(q, k, v):
    # softmax(q k^T * 0.125) v; k^T is the dot_general's contracting dims.
    return torch.matmul(_softmax_rows(torch.matmul(q, k.t()) * 0.125), v)


def transpose_exp_abs_f32(x):
    return torch.abs(torch.exp(x.permute(2, 0, 1))).contiguous()


def log_transpose_add_f32(x):
    lg = torch.log(x)
    return (lg + lg.transpose(1, 2)).contiguous()


def transpose_4096_f32(x):
    return x.t().contiguous()


def heads_0213_f32(x):
    return x.permute(0, 2, 1, 3).contiguous()


def pad_relu_f32(x, s):
    # Zero padding to 256x1024 (high = [6, 24]), scale by s[col], max with 0.
    return torch.relu(F.pad(x, (0, 24, 0, 6)) * s)


def row_sum_f32(x):
    return torch.sum(x, dim=1)


def column_sum_f16(x):
    return torch.sum(x.to(torch.float32), dim=0)


def column_sum_small(x):
    return torch.sum(x, dim=0)


def argmax_f32(x):
    # torch.argmax, like the .mlir's reduce, takes a NaN as the largest value
    # and the first index among ties; the .mlir returns i32 indices.
    return torch.argmax(x, dim=1).to(torch.int32)


def sum_of_squares_f32(x):
    return torch.sum(x * x)


# Every public function above is one sample's, under the sample's name.
SAMPLES = {
    name: f
    for name, f in list(globals().items())
    if inspect.isfunction(f) and f.__module__ == __name__ and not name.startswith("_")
}
