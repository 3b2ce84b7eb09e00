"""Reductions to a scalar (jnp.sum(x), jnp.max(x)), rewritten by
hlo/scalars.py as row reductions of a [P, M] view and then of the P
partials, both on the row kernel.

Numerics against numpy (float64) on lavapipe, each case asserting the
rewrite, its views and that every dispatch ran the row kernel. IREE 3.13's
own codegen for a rank-1 sum on lavapipe returns the sum of the first 65536
elements only (1M elements of [0, 1): 32717 instead of 524643), so the
large cases are also what that fallback got wrong.
"""

import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tilefuse
from conftest import reduce_program, tensor
from tilefuse.hlo import scalars
from tilefuse.runtime import CompiledModule

# The two row kernels: rows that split evenly over a subgroup and have at
# most 64 chunks take row_warp, the others row_reduction.
ROW_KERNELS = ("row_reduction", "row_warp")


def compile_and_run(text, x, views=None, steps=2, last=ROW_KERNELS):
    """Compile for lavapipe, check the rewrite and the kernels (`last`: the
    last step's; a float max/min's ends with its key decode, on the softmax
    kernel's epilogue), run on x."""
    result = tilefuse.compile_program(text, "vulkan")
    lines = [line for line in result.fusion.log if "reduction to a scalar" in line]
    assert len(lines) == 1 and "reduced as rows" in lines[0], result.fusion.log
    if views:
        assert views in lines[0], lines[0]
    want = [ROW_KERNELS] * (steps - 1) + [last if isinstance(last, tuple) else (last,)]
    got = [(r.strategy, r.status) for r in result.reports]
    assert len(got) == len(want) and all(
        status == "applied" and strategy in kernels
        for (strategy, status), kernels in zip(got, want)
    ), [r.line() for r in result.reports]
    return np.asarray(CompiledModule(result.vmfb, "vulkan", result.reports).main(x)), lines[0]


def int_program(n, op, init):
    t, s = tensor([n], "i32"), "tensor<i32>"
    return (
        f"func.func @main(%x: {t}) -> {s} {{\n"
        f"  %init = stablehlo.constant dense<{init}> : {s}\n"
        f"  %r = stablehlo.reduce(%x init: %init) applies stablehlo.{op} across dimensions = [0]"
        f" : ({t}, {s}) -> {s}\n"
        f"  return %r : {s}\n}}\n"
    )


@pytest.mark.parametrize(
    "shape,dtype,views",
    [
        ((1048576,), "f32", "[512, 2048], then [1, 512]"),
        ((300, 700), "f16", "[300, 700], then [1, 300]"),  # rank 2, f16 summed in f32
        ((64, 16, 256), "f32", "[64, 4096], then [1, 64]"),
        ((4099,), "f32", "[1, 4099]"),  # short: one row
    ],
)
def test_sum(shape, dtype, views):
    rng = np.random.default_rng(0)
    x = rng.random(shape, dtype=np.float32).astype(dtype.replace("f", "float"))
    steps = 1 if views.count("[") == 1 else 2
    out, _ = compile_and_run(
        reduce_program(shape, range(len(shape)), dtype, "add"), x, views, steps
    )
    ref = x.astype(np.float64).sum()
    # f32 partial sums of at most a few thousand terms each: relative error
    # well below 1e-6 per term.
    assert out.shape == () and abs(float(out) - ref) <= 1e-6 * x.size, (float(out), ref)


def test_sum_of_squares_fuses_the_square_into_step_one():
    n = 100000
    t = tensor([n], "f32")
    text = (
        f"func.func @main(%x: {t}) -> tensor<f32> {{\n"
        "  %zero = stablehlo.constant dense<0.0> : tensor<f32>\n"
        f"  %sq = stablehlo.multiply %x, %x : {t}\n"
        "  %s = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [0]"
        f" : ({t}, tensor<f32>) -> tensor<f32>\n"
        "  return %s : tensor<f32>\n}\n"
    )
    result = tilefuse.compile_program(text, "vulkan")
    first, second = result.fusion.outlined()
    assert first.kind == second.kind == "row-reduction"
    assert "multiply" in first.signature and "multiply" not in second.signature
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    out, _ = compile_and_run(text, x, "[50, 2000], then [1, 50]")
    ref = (x.astype(np.float64) ** 2).sum()
    assert abs(float(out) - ref) <= 1e-6 * ref


PRODUCERS = [
    # (ops on %x, %y into %a, numpy, dispatches): the view moves above a cone
    # with a binary op; a cone of unary ops only, or an expensive op reading
    # an input, keeps its own loop dispatch (IREE would collapse it back to
    # [N] inside the reduction's dispatch).
    (["%a = stablehlo.multiply %x, %x"], lambda x, y: x * x, 2),
    (["%a = stablehlo.add %x, %y"], lambda x, y: x + y, 2),
    (
        ["%m = stablehlo.multiply %x, %y", "%a = stablehlo.maximum %m, %y"],
        lambda x, y: np.maximum(x * y, y),
        2,
    ),
    (["%a = stablehlo.abs %x"], lambda x, y: np.abs(x), 3),
    (
        ["%e = stablehlo.exponential %x", "%a = stablehlo.multiply %e, %y"],
        lambda x, y: np.exp(x) * y,
        3,
    ),
    (
        ["%m = stablehlo.multiply %x, %y", "%a = stablehlo.exponential %m"],
        lambda x, y: np.exp(x * y),
        2,
    ),
    (["%n = stablehlo.negate %x", "%a = stablehlo.abs %n"], lambda x, y: np.abs(-x), 3),
]


@pytest.mark.parametrize(
    "ops,ref,dispatches", PRODUCERS, ids=[p[0][-1].split()[2] + str(len(p[0])) for p in PRODUCERS]
)
def test_elementwise_producers(ops, ref, dispatches):
    n = 60000
    t = tensor([n], "f32")
    text = "\n".join(
        [
            f"func.func @main(%x: {t}, %y: {t}) -> tensor<f32> {{",
            "  %zero = stablehlo.constant dense<0.0> : tensor<f32>",
            *(f"  {op} : {t}" for op in ops),
            (
                "  %s = stablehlo.reduce(%a init: %zero) applies stablehlo.add across dimensions = [0]"
                f" : ({t}, tensor<f32>) -> tensor<f32>"
            ),
            "  return %s : tensor<f32>",
            "}",
        ]
    )
    result = tilefuse.compile_program(text, "vulkan")
    assert len(result.reports) == dispatches
    assert all(r.status == "applied" for r in result.reports), [r.line() for r in result.reports]
    rng = np.random.default_rng(8)
    x, y = (rng.uniform(-1, 1, n).astype(np.float32) for _ in range(2))
    out = CompiledModule(result.vmfb, "vulkan", result.reports).main(x, y)
    want = ref(x.astype(np.float64), y.astype(np.float64)).sum()
    assert abs(float(np.asarray(out)) - want) <= 1e-5 * max(1.0, abs(want)) * 10


def test_view_of_a_value_defined_inside_the_cone():
    """sum(exp(x) + reverse(y)): the reverse (no elementwise op) sits between
    the cone's ops, so its view must come after it."""
    n = 40000
    t = tensor([n], "f32")
    text = (
        f"func.func @main(%x: {t}, %y: {t}) -> tensor<f32> {{\n"
        "  %zero = stablehlo.constant dense<0.0> : tensor<f32>\n"
        f"  %e = stablehlo.exponential %x : {t}\n"
        f"  %r = stablehlo.reverse %y, dims = [0] : {t}\n"
        f"  %a = stablehlo.add %e, %r : {t}\n"
        "  %s = stablehlo.reduce(%a init: %zero) applies stablehlo.add across dimensions = [0]"
        f" : ({t}, tensor<f32>) -> tensor<f32>\n"
        "  return %s : tensor<f32>\n}\n"
    )
    result = tilefuse.compile_program(text, "vulkan")
    groups = [g.signature for g in result.fusion.outlined()]
    assert any("reverse" in g and "exponential" not in g for g in groups), groups
    assert any("would reshape a value it computes" in line for line in result.fusion.log)
    rng = np.random.default_rng(7)
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    out = CompiledModule(result.vmfb, "vulkan", result.reports).main(x, y)
    ref = np.exp(x.astype(np.float64)).sum() + y.astype(np.float64).sum()
    assert abs(float(np.asarray(out)) - ref) <= 1e-6 * abs(ref) * 10


@pytest.mark.parametrize("op", ["max", "min"])
def test_float_max_min_exact_with_nan(op):
    n = 200000
    x = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    text = reduce_program((n,), [0], "f32", op)
    out, _ = compile_and_run(text, x, "[100, 2000], then [1, 100]", last="softmax")
    assert float(out) == (x.max() if op == "max" else x.min())
    x[123457] = np.nan  # StableHLO's maximum/minimum propagate NaN
    out, _ = compile_and_run(text, x, last="softmax")
    assert np.isnan(out)


def test_product_single_row():
    x = np.random.default_rng(3).uniform(0.99, 1.01, 1000).astype(np.float32)
    out, _ = compile_and_run(reduce_program((1000,), [0], "f32", "mul"), x, "[1, 1000]", 1)
    ref = np.prod(x.astype(np.float64))
    assert abs(float(out) - ref) <= 1e-5 * ref


@pytest.mark.parametrize(
    "n,op,init,ref",
    [
        (70000, "maximum", -2147483648, np.max),
        (70001, "minimum", 2147483647, np.min),  # prime: one row
        (4096, "and", -1, np.bitwise_and.reduce),
        (4096, "or", 0, np.bitwise_or.reduce),
        (50000, "add", 0, np.sum),
    ],
)
def test_integers_exact(n, op, init, ref):
    x = np.random.default_rng(4).integers(-(2**30), 2**30, n, dtype=np.int32)
    if op == "add":
        x //= 2**16  # no overflow
    steps = len(scalars.steps([n]))
    out, _ = compile_and_run(int_program(n, op, init), x, steps=steps)
    assert int(out) == int(ref(x))


def test_prime_count_is_one_row_and_says_so():
    n = 100003  # prime: no divisor gives rows of 512 to 16384
    x = np.random.default_rng(5).random(n, dtype=np.float32)
    out, line = compile_and_run(reduce_program((n,), [0], "f32", "add"), x, "[1, 100003]", 1)
    assert "one workgroup" in line
    assert abs(float(out) - x.astype(np.float64).sum()) <= 1e-6 * n


def test_non_identity_init_is_left_to_iree_with_the_reason():
    n = 1000  # small: IREE's own codegen is right below 65536 elements
    t = tensor([n], "f32")
    text = (
        f"func.func @main(%x: {t}) -> tensor<f32> {{\n"
        "  %one = stablehlo.constant dense<1.0> : tensor<f32>\n"
        "  %s = stablehlo.reduce(%x init: %one) applies stablehlo.add across dimensions = [0]"
        f" : ({t}, tensor<f32>) -> tensor<f32>\n"
        "  return %s : tensor<f32>\n}\n"
    )
    result = tilefuse.compile_program(text, "vulkan")
    assert any(
        "left to IREE: its init is not the identity of stablehlo.add" in line
        for line in result.fusion.log
    ), result.fusion.log
    (report,) = result.reports
    assert report.status == "fallback"
    x = np.random.default_rng(6).random(n, dtype=np.float32)
    out = CompiledModule(result.vmfb, "vulkan", result.reports).main(x)
    assert abs(float(np.asarray(out)) - (1.0 + x.astype(np.float64).sum())) <= 1e-3


@pytest.mark.parametrize(
    "shape,views",
    [
        ([16384], [(1, 16384)]),
        ([16385], [(5, 3277), (1, 5)]),
        ([1 << 20], [(512, 2048), (1, 512)]),
        ([1 << 26], [(32768, 2048), (16, 2048), (1, 16)]),  # step two split again
        ([8192, 50257], [(8192, 50257), (1, 8192)]),  # long rows, one per workgroup
        ([8192, 4, 1000], [(8192, 4000), (1, 8192)]),
        ([300, 700], [(300, 700), (1, 300)]),
        ([100, 10], [(1, 1000)]),  # small: one row
        ([100000, 3], None),  # rows of 3: refused (IREE's reduce stays)
        ([200, 200], [(200, 200), (1, 200)]),  # short rows, many of them
        ([1000, 100], None),  # rows shorter than ROW_SHORTEST: refused
        ([3, 100000], [(3, 100000), (1, 3)]),
    ],
)
def test_steps(shape, views):
    assert scalars.steps(shape) == views
    if views:
        total = int(np.prod(shape))
        for rows, length in views:
            assert rows * length == total
            total = rows


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
@pytest.mark.parametrize("target", ["cuda", "cuda-sm90"])
def test_assembles_for_cuda(target, tmp_path):
    text = reduce_program((1 << 20,), [0], "f32", "add")
    result = tilefuse.compile_program(text, target, dump_dir=tmp_path)
    assert len(list((tmp_path / "binaries").glob("*.ptx"))) >= 1
    assert [r.status for r in result.reports] == ["applied"] * 2
    assert all(r.strategy in ROW_KERNELS for r in result.reports), [
        r.line() for r in result.reports
    ]
    assert all(r.spill_bytes == 0 for r in result.reports)


def test_a_broadcast_scalar_joins_the_cone():
    """sum(1 / (1 + exp(x * y))), as JAX writes a sigmoid's 1 - ...: the
    ones are broadcast_in_dim of a scalar, which the view's move recreates
    on [P, M] with the ops that read them, so the expensive divide reads
    nothing from outside and step one computes the whole cone (it had a
    loop dispatch of its own: three dispatches)."""
    n = 60000
    t = tensor([n], "f32")
    text = (
        f"func.func @main(%x: {t}, %y: {t}) -> tensor<f32> {{\n"
        "  %zero = stablehlo.constant dense<0.0> : tensor<f32>\n"
        "  %c1 = stablehlo.constant dense<1.0> : tensor<f32>\n"
        f"  %one = stablehlo.broadcast_in_dim %c1, dims = [] : (tensor<f32>) -> {t}\n"
        f"  %m = stablehlo.multiply %x, %y : {t}\n"
        f"  %e = stablehlo.exponential %m : {t}\n"
        f"  %d = stablehlo.add %one, %e : {t}\n"
        f"  %a = stablehlo.divide %one, %d : {t}\n"
        "  %s = stablehlo.reduce(%a init: %zero) applies stablehlo.add across dimensions = [0]"
        f" : ({t}, tensor<f32>) -> tensor<f32>\n"
        "  return %s : tensor<f32>\n}\n"
    )
    result = tilefuse.compile_program(text, "vulkan")
    assert len(result.reports) == 2, [r.line() for r in result.reports]
    assert all(r.status == "applied" for r in result.reports), [r.line() for r in result.reports]
    rng = np.random.default_rng(9)
    x, y = (rng.uniform(-1, 1, n).astype(np.float32) for _ in range(2))
    out = CompiledModule(result.vmfb, "vulkan", result.reports).main(x, y)
    want = (1 / (1 + np.exp(x.astype(np.float64) * y))).sum()
    assert abs(float(np.asarray(out)) - want) <= 1e-5 * abs(want)


MASKED = [
    ("trace", lambda x: jnp.trace(x)),
    ("tril_sum", lambda x: jnp.tril(x).sum()),
    ("triu_mean", lambda x: jnp.triu(x, 1).mean()),
]


@pytest.mark.parametrize("n", [200, 512])
@pytest.mark.parametrize(("name", "fn"), MASKED, ids=[m[0] for m in MASKED])
def test_sums_under_an_iota_mask(n, name, fn):
    """jnp.trace and triangle sums: a reduce to a scalar whose body reads a
    loop index. Plain IREE on lavapipe fails to compile it at 200 x 200
    (a workgroup buffer of index) and sums a part of it at 512 x 512 (8.08
    for a trace of 26.50). Short rows (200) are split too, and the first
    step, a lone row reduction reading the index, takes the softmax kernel
    (the row kernels' chunks renumber the index)."""
    x = np.random.default_rng(n).standard_normal((n, n)).astype(np.float32)
    text = jax.jit(fn).lower(x).as_text()
    result = tilefuse.compile_program(text, "vulkan", strict=True)
    assert result.reports[0].strategy == "softmax", [r.line() for r in result.reports]
    assert all(r.status == "applied" for r in result.reports)
    got = CompiledModule(result.vmfb, "vulkan", result.reports).main(x)
    want = float(np.asarray(jax.jit(fn)(x)))
    assert abs(float(np.asarray(got)) - want) <= 1e-4 * max(1.0, abs(want))
