"""The programs of this folder in PyTorch, for the bundle runner's
torch.compile (Inductor) peer (python/tilefuse/bench/gpu.py): PROGRAMS maps
a program's name to a function of its inputs, in the program's order, that
returns what its @main returns, with its element types.

The matmuls are torch.matmul (cuBLAS, accumulating bf16 and f16 in f32 as
XLA does) with the epilogue as make_matmuls.py writes it, op by op in the
operands' type; MATMULS repeats make_matmuls.py's table because the bundle
carries this file alone (tests/test_benchmarks.py checks that they agree).
The memory-bound programs are make_memory_bound.py's JAX functions.
"""

import torch

MATMULS = {
    "matmul_bias_1024_bf16": (1024, 1024, 1024, ("bias",), "bf16"),
    "matmul_bias_4096_bf16": (4096, 4096, 4096, ("bias",), "bf16"),
    "matmul_8192_bf16": (8192, 8192, 8192, (), "bf16"),
    "matmul_4096_f16": (4096, 4096, 4096, (), "f16"),
    "matmul_8192_f16": (8192, 8192, 8192, (), "f16"),
    "mlp_up_gelu_bf16": (2048, 768, 3072, ("bias", "gelu"), "bf16"),
    "mlp_up_gelu_f16": (2048, 768, 3072, ("bias", "gelu"), "f16"),
    "mlp_down_residual_bf16": (2048, 3072, 768, ("bias", "residual"), "bf16"),
    "decode_m1_bf16": (1, 4096, 4096, (), "bf16"),
    "decode_m1_nk_bf16": (1, 4096, 4096, ("b_nk",), "bf16"),
    "decode_m16_bf16": (16, 4096, 4096, (), "bf16"),
    "decode_m16_f16": (16, 4096, 4096, (), "f16"),
    "llama_up_bf16": (4096, 4096, 11008, (), "bf16"),
    "decode_m16_gelu_f16": (16, 4096, 4096, ("bias", "gelu"), "f16"),
    "matmul_ragged_1000_f16": (1000, 1000, 1000, ("bias",), "f16"),
    "mlp_up_gelu_ragged_bf16": (154, 768, 3072, ("bias", "gelu"), "bf16"),
}
GELU = (4.467770e-02, 7.978850e-01, 1.0, 0.5)  # k0, k1, one, half, as in the .mlir


def _matmul(epilogue: tuple):
    def fn(a, b, *rest):
        rest = list(rest)
        y = torch.matmul(a, b.T if "b_nk" in epilogue else b)
        if "bias" in epilogue:
            y = y + rest.pop(0)
        if "gelu" in epilogue:
            k0, k1, one, half = (torch.tensor(v, dtype=y.dtype, device=y.device) for v in GELU)
            y = y * (half * (one + torch.tanh(k1 * (y + k0 * (y * y * y)))))
        if "residual" in epilogue:
            y = y + rest.pop(0)
        return y

    return fn


def softmax(x):
    m = torch.amax(x, dim=-1, keepdim=True)
    e = torch.exp(x - m)
    return e / torch.sum(e, dim=-1, keepdim=True)


def layernorm(x, g, b):
    mean = torch.mean(x, dim=-1, keepdim=True)
    var = torch.mean(torch.square(x - mean), dim=-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + 1e-5) * g + b


def rmsnorm_bf16(x, w):
    xf = x.float()
    y = xf * torch.rsqrt(torch.mean(xf * xf, dim=-1, keepdim=True) + 1e-6)
    return (y * w.float()).to(torch.bfloat16)


def gelu_bf16(x):
    # jax.nn.gelu(approximate=True): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    c = torch.tensor(0.7978845608028654, dtype=x.dtype, device=x.device)
    k = torch.tensor(0.044715, dtype=x.dtype, device=x.device)
    return 0.5 * x * (1.0 + torch.tanh(c * (x + k * (x * x * x))))


def decode_attention(q, k, v):
    s = (q @ k.transpose(-1, -2)) / torch.tensor(q.shape[-1] ** 0.5, dtype=q.dtype)
    return torch.softmax(s.float(), dim=-1).to(q.dtype) @ v


PROGRAMS = {
    **{name: _matmul(spec[3]) for name, spec in MATMULS.items()},
    "softmax_8192_f32": softmax,
    "layernorm_8192_f32": layernorm,
    "rmsnorm_8192_bf16": rmsnorm_bf16,
    "gelu_8192_bf16": gelu_bf16,
    "row_sum_8192_f32": lambda x: torch.sum(x, dim=-1),
    "transpose_8192_f32": lambda x: x.t().contiguous(),
    "decode_attention_bf16": decode_attention,
}
