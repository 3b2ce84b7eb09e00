import os
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "samples"))
# No tuned choices from the machine's cache (~/.cache/tilefuse/tuning.json)
# in the tests: each test that wants one names its own file.
os.environ["TILEFUSE_TUNING"] = str(ROOT / "tests" / "no-tuning-cache.json")

NUMPY_TYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "i32": np.int32}


def tensor(shape, dtype):
    """`tensor<2x3xf32>`; a rank-0 shape gives `tensor<f32>`."""
    return f"tensor<{''.join(f'{s}x' for s in shape)}{dtype}>"


# Reductions the tests build: StableHLO body op, init value (the identity),
# numpy reference.
REDUCE_OPS = {
    "add": ("add", "0.000000e+00", np.sum),
    "max": ("maximum", "0xFF800000", np.max),
    "min": ("minimum", "0x7F800000", np.min),
    "mul": ("multiply", "1.000000e+00", np.prod),
}


def reduce_program(shape, dims, dtype, op):
    """StableHLO: x converted to f32 (for f16/bf16, so it accumulates in f32),
    then reduced over `dims` with `op`."""
    out = [s for i, s in enumerate(shape) if i not in dims]
    x32, r32 = tensor(shape, "f32"), tensor(out, "f32")
    body, init, _ = REDUCE_OPS[op]
    lines = [f"func.func @main(%x: {tensor(shape, dtype)}) -> {r32} {{"]
    value = "%x"
    if dtype != "f32":
        lines.append(f"  %c = stablehlo.convert %x : ({tensor(shape, dtype)}) -> {x32}")
        value = "%c"
    lines += [
        f"  %init = stablehlo.constant dense<{init}> : tensor<f32>",
        (
            f"  %r = stablehlo.reduce({value} init: %init) applies stablehlo.{body} across "
            f"dimensions = {list(dims)} : ({x32}, tensor<f32>) -> {r32}"
        ),
        f"  return %r : {r32}",
        "}",
    ]
    return "\n".join(lines) + "\n"


def broadcast_chain(shape, bshape, dtype):
    """x * broadcast(b) -> tanh (floats) or max (ints) -> + x, as StableHLO text."""
    t, bt = tensor(shape, dtype), tensor(bshape, dtype)
    dims = list(range(len(shape) - len(bshape), len(shape)))
    mid = (
        f"%1 = stablehlo.maximum %0, %bb : {t}"
        if dtype == "i32"
        else f"%1 = stablehlo.tanh %0 : {t}"
    )
    return (
        f"func.func @main(%a: {t}, %b: {bt}) -> {t} {{\n"
        f"  %bb = stablehlo.broadcast_in_dim %b, dims = {dims} : ({bt}) -> {t}\n"
        f"  %0 = stablehlo.multiply %a, %bb : {t}\n"
        f"  {mid}\n"
        f"  %2 = stablehlo.add %1, %a : {t}\n"
        f"  return %2 : {t}\n}}\n"
    )


def broadcast_chain_reference(a, b, dtype):
    if dtype == "i32":
        return np.maximum(a.astype(np.int64) * b, b) + a
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return np.tanh(a64 * b64) + a64


def random_inputs(shape, bshape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "i32":
        return (
            rng.integers(-100, 100, shape).astype(np.int32),
            rng.integers(-100, 100, bshape).astype(np.int32),
        )
    t = NUMPY_TYPES[dtype]
    return rng.standard_normal(shape).astype(t), rng.standard_normal(bshape).astype(t)


@pytest.fixture(scope="session")
def root():
    return ROOT


def cpu_hypothesis(max_examples: int, *health_checks: HealthCheck):
    """Hypothesis settings for numerics on lavapipe: few, fixed examples (the
    suite runs on a CPU), no deadline, no .hypothesis directory in the
    checkout."""
    return settings(
        max_examples=max_examples,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, *health_checks],
    )
