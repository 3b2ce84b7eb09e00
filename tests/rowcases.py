"""Row cases the row-kernel tests share: programs, inputs, references and
numerics checks for lone row reductions (tests/test_row_reduction.py) and
row normalizations (tests/test_softmax.py), both also run on the
one-subgroup-per-row kernel (tests/test_row_warp.py). Test modules import
from here and from support.py, never from each other.

Row reductions: error against a float64 numpy reduction of the same
(rounded) inputs, relative to max(1, largest |reference|). f16/bf16 inputs
accumulate in f32 as the programs say (convert then reduce), so all cases
share one f32 bound: 1e-6 + 2e-7 * sqrt(n) for a row of n (f32 rounding of a
reordered n-term sum or product grows like sqrt(n) * 6e-8; 1e-5 at n = 2000,
5e-5 at n = 70000). Products are of numbers near 1 so they stay in range;
max/min are exact.

Normalizations: softmax, RMSNorm and layernorm over the last dim of
[rows, n], written as the samples are (StableHLO reduce + broadcast_in_dim);
f16 cases convert to f32 first and back at the end (f32 math, as
mixed-precision models do). Error against a float64 numpy reference of the
same (rounded) inputs: f32 outputs within 2e-6 + 2e-7 * sqrt(n) (max abs:
softmax outputs are <= 1, normalized rows are O(1) with scale/shift of
O(1)); f16 outputs within one f16 rounding of the result (2^-11 relative)
plus the same.
"""

import dataclasses
import math

import ml_dtypes
import numpy as np
import tilefuse
from conftest import REDUCE_OPS, reduce_program, tensor
from tilefuse.runtime import CompiledModule
from tilefuse.targets import load_target

# Lone row reductions.

REDUCTION_NUMPY = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
# lavapipe with float max/min left as float reductions and without the
# one-subgroup row kernel: the row-reduction tests exercise the row kernel
# itself (with its scalar reads for max/min, see
# test_row_reduction.test_nan_propagates_through_min_max); on the default
# target hlo/minmax.py moves float row max/min onto integer keys and the
# softmax kernel (tests/test_minmax_keys.py), and rows of up to 64 chunks
# that split evenly over a subgroup take row_warp (tests/test_row_warp.py).
ROW_KERNEL_VULKAN = dataclasses.replace(
    load_target("vulkan"), float_minmax_as_keys=False, row_register_elements=0
)


def row_reduce(shape, dtype, op, reduced=1):
    """StableHLO: reduce the innermost `reduced` dims of x with `op`."""
    return reduce_program(shape, range(len(shape) - reduced, len(shape)), dtype, op)


def reduction_inputs(shape, dtype, op, seed=0):
    rng = np.random.default_rng(seed)
    if op == "mul":  # near 1, so long products neither vanish nor overflow
        x = rng.uniform(0.999, 1.001, shape)
    else:
        x = rng.standard_normal(shape)
    return x.astype(REDUCTION_NUMPY[dtype])


def check_reduction(
    shape, dtype, op, reduced=1, params="", target=ROW_KERNEL_VULKAN, strategy="row_reduction"
):
    """Numerics of one row reduction; `params` must occur in the strategy's
    parameters."""
    module = tilefuse.compile(row_reduce(shape, dtype, op, reduced), target=target)
    assert [(r.strategy, r.status) for r in module.reports] == [(strategy, "applied")], [
        r.line() for r in module.reports
    ]
    assert params in module.reports[0].params, module.reports[0].line()
    x = reduction_inputs(shape, dtype, op)
    axes = tuple(range(len(shape) - reduced, len(shape)))
    ref = REDUCE_OPS[op][2](x.astype(np.float64), axis=axes)
    out = module.main(x)
    assert out.shape == ref.shape
    err = np.max(np.abs(out - ref)) / max(1.0, np.max(np.abs(ref)))
    n = math.prod(shape[len(shape) - reduced :])
    assert err <= 1e-6 + 2e-7 * math.sqrt(n), f"relative error {err} on {shape} {dtype} {op}"
    return err


# Row normalizations (softmax, RMSNorm, layernorm).


def _wrap(lead, n, dtype, body, extra_args):
    """Lines `body` compute %y (f32) from %x (f32); an f16 program converts
    its argument to %x and %y back to f16."""
    t_in, t32 = tensor([*lead, n], dtype), tensor([*lead, n], "f32")
    x = "%x" if dtype == "f32" else "%xin"
    args = [f"{x}: {t_in}"] + [f"%{a}: {tensor([n], 'f32')}" for a in extra_args]
    lines = [f"func.func @main({', '.join(args)}) -> {t_in} {{"]
    if dtype != "f32":
        lines.append(f"  %x = stablehlo.convert %xin : ({t_in}) -> {t32}")
    lines += body
    out = "%y"
    if dtype != "f32":
        lines.append(f"  %yout = stablehlo.convert %y : ({t32}) -> {t_in}")
        out = "%yout"
    lines += [f"  return {out} : {t_in}", "}"]
    return "\n".join(lines) + "\n"


def program(kind, rows, n, dtype="f32", lead=None):
    """StableHLO text of a softmax / rmsnorm / layernorm over rows of n: x is
    [rows, n], or [*lead, n] when `lead` is given (rank 3, 4 activations)."""
    lead = [rows] if lead is None else lead
    r, rn = tensor(lead, "f32"), tensor([*lead, n], "f32")
    wb = tensor([n], "f32")
    axis, kept = len(lead), list(range(len(lead)))

    def reduce(name, src, op, init):
        return (
            f"  %{name} = stablehlo.reduce({src} init: %{init}) applies stablehlo.{op} "
            f"across dimensions = [{axis}] : ({rn}, tensor<f32>) -> {r}"
        )

    def back(name, src):
        return f"  %{name} = stablehlo.broadcast_in_dim %{src}, dims = {kept} : ({r}) -> {rn}"

    def row(name, src):
        return f"  %{name} = stablehlo.broadcast_in_dim %{src}, dims = [{axis}] : ({wb}) -> {rn}"

    consts = [
        "  %zero = stablehlo.constant dense<0.0> : tensor<f32>",
        "  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>",
        f"  %n = stablehlo.constant dense<{float(n)}> : {r}",
        f"  %eps = stablehlo.constant dense<1.0e-5> : {r}",
    ]
    if kind == "softmax":
        body = [
            reduce("m", "%x", "maximum", "ninf"),
            back("mb", "m"),
            f"  %d = stablehlo.subtract %x, %mb : {rn}",
            f"  %e = stablehlo.exponential %d : {rn}",
            reduce("s", "%e", "add", "zero"),
            back("sb", "s"),
            f"  %y = stablehlo.divide %e, %sb : {rn}",
        ]
        extra = []
    elif kind == "rmsnorm":
        body = [
            f"  %sq = stablehlo.multiply %x, %x : {rn}",
            reduce("ss", "%sq", "add", "zero"),
            f"  %ms = stablehlo.divide %ss, %n : {r}",
            f"  %mse = stablehlo.add %ms, %eps : {r}",
            f"  %rs = stablehlo.rsqrt %mse : {r}",
            back("rb", "rs"),
            row("wb", "w"),
            f"  %xn = stablehlo.multiply %x, %rb : {rn}",
            f"  %y = stablehlo.multiply %xn, %wb : {rn}",
        ]
        extra = ["w"]
    else:
        body = [
            reduce("sum", "%x", "add", "zero"),
            f"  %mean = stablehlo.divide %sum, %n : {r}",
            back("mb", "mean"),
            f"  %c = stablehlo.subtract %x, %mb : {rn}",
            f"  %sq = stablehlo.multiply %c, %c : {rn}",
            reduce("vs", "%sq", "add", "zero"),
            f"  %var = stablehlo.divide %vs, %n : {r}",
            f"  %ve = stablehlo.add %var, %eps : {r}",
            f"  %rstd = stablehlo.rsqrt %ve : {r}",
            back("rb", "rstd"),
            f"  %norm = stablehlo.multiply %c, %rb : {rn}",
            row("gb", "g"),
            row("bb", "b"),
            f"  %scaled = stablehlo.multiply %norm, %gb : {rn}",
            f"  %y = stablehlo.add %scaled, %bb : {rn}",
        ]
        extra = ["g", "b"]
    return _wrap(lead, n, dtype, consts + body, extra)


NORMALIZATION_NUMPY = {"f32": np.float32, "f16": np.float16}


def inputs(kind, rows, n, dtype, seed=0):
    """The arguments of `program(kind, rows, n, dtype)`."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, n)) * 3).astype(NORMALIZATION_NUMPY[dtype])
    extra = {"softmax": 0, "rmsnorm": 1, "layernorm": 2}[kind]
    return [x] + [rng.standard_normal(n).astype(np.float32) for _ in range(extra)]


def reference(kind, args):
    x = args[0].astype(np.float64)
    if kind == "softmax":
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if kind == "rmsnorm":
        return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5) * args[1]
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * args[1] + args[2]


# lavapipe with the register kernel off: every softmax-like row takes the
# chunked softmax kernel.
CHUNKED = dataclasses.replace(load_target("vulkan"), row_register_elements=0)


def check_normalization(kind, rows, n, dtype="f32", target=None, params="", strategy="softmax"):
    """Numerics of one normalization on lavapipe; `target` may be a changed
    vulkan Target (to pack rows; CHUNKED when not given), `params` must occur
    in the strategy's parameters."""
    result = tilefuse.compile_program(program(kind, rows, n, dtype), target or CHUNKED)
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    assert [(r.strategy, r.status) for r in module.reports] == [(strategy, "applied")], [
        r.line() for r in module.reports
    ]
    assert params in module.reports[0].params, module.reports[0].line()
    args = inputs(kind, rows, n, dtype)
    ref = reference(kind, args)
    out = module.main(*args)
    assert out.shape == ref.shape and out.dtype == NORMALIZATION_NUMPY[dtype]
    err = float(np.max(np.abs(out.astype(np.float64) - ref)))
    bound = 2e-6 + 2e-7 * math.sqrt(n)
    if dtype == "f16":
        bound += 2.0**-11 * float(np.max(np.abs(ref)))
    assert err <= bound, f"max error {err} > {bound} on {kind} {rows}x{n} {dtype}"
    return err
