"""Programs that return a reduction together with another op's result, on
Vulkan against numpy. Such a group would be a dispatch with two root ops,
which no kernel stores and IREE's default codegen fails on (sum and mean) or
compiles for over ten minutes (exp and its column sums); the planner keeps
the two apart and every dispatch gets a tilefuse kernel. Tolerance: 1e-5
relative to max(1, |reference|)."""

import numpy as np
import pytest
import tilefuse

ROWS = "tensor<64x1000xf32>"
COLS = "tensor<1000x64xf32>"
VEC = "tensor<64xf32>"
ZERO = "  %z = stablehlo.constant dense<0.0> : tensor<f32>\n"


def _sum(x, dim, shape):
    return (
        f"stablehlo.reduce({x} init: %z) applies stablehlo.add across dimensions = [{dim}]"
        f" : ({shape}, tensor<f32>) -> {VEC}"
    )


CASES = {
    # x * 2 returned and its row sums.
    "producer_and_row_sum": (
        ROWS,
        ZERO + "  %two = stablehlo.constant dense<2.0> : tensor<64x1000xf32>\n"
        f"  %y = stablehlo.multiply %x, %two : {ROWS}\n"
        f"  %s = {_sum('%y', 1, ROWS)}\n"
        f"  return %y, %s : {ROWS}, {VEC}",
        f"{ROWS}, {VEC}",
        lambda x: (x * 2, (x * 2).sum(1)),
    ),
    # exp(x) returned and its column sums.
    "producer_and_column_sum": (
        COLS,
        ZERO + f"  %y = stablehlo.exponential %x : {COLS}\n"
        f"  %s = {_sum('%y', 0, COLS)}\n"
        f"  return %y, %s : {COLS}, {VEC}",
        f"{COLS}, {VEC}",
        lambda x: (np.exp(x), np.exp(x).sum(0)),
    ),
    # A sum and its mean.
    "sum_and_mean": (
        ROWS,
        ZERO + f"  %n = stablehlo.constant dense<1000.0> : {VEC}\n"
        f"  %s = {_sum('%x', 1, ROWS)}\n"
        f"  %m = stablehlo.divide %s, %n : {VEC}\n"
        f"  return %s, %m : {VEC}, {VEC}",
        f"{VEC}, {VEC}",
        lambda x: (x.sum(1), x.mean(1)),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_reduction_with_another_result(name):
    arg, body, results, reference = CASES[name]
    text = f"func.func @main(%x: {arg}) -> ({results}) {{\n{body}\n}}\n"
    result = tilefuse.compile_program(text, "vulkan")
    assert any("would return a reduction and another op's result" in x for x in result.fusion.log)
    assert all(r.status == "applied" for r in result.reports), [r.line() for r in result.reports]
    module = tilefuse.CompiledModule(result.vmfb, "vulkan", result.reports)
    shape = (64, 1000) if arg == ROWS else (1000, 64)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    for out, ref in zip(module.main(x), reference(x.astype(np.float64))):
        assert np.max(np.abs(out - ref) / np.maximum(1, np.abs(ref))) <= 1e-5
