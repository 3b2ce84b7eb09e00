"""Transposes around contractions as JAX's gradients write them: chains of
transposes composed (hlo/transpose_chains.py), a transpose of a
dot_general's result taken by swapping its operands and operand transposes
read through (hlo/dot_layouts.py), and a matrix-vector product whose vector
has a unit free dim viewed as rows (hlo/matrix_vectors.py, fusion/rows.py).

IR checks of each rewrite, then whole programs on Vulkan: every dispatch on
a tilefuse kernel, no more dispatches than plain iree-compile, and the
result against numpy in float64 (f32: 1e-5 of the largest |output|)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tilefuse
from iree.compiler import ir
from support import filecheck
from test_attention_layouts import iree_dispatches
from tilefuse.hlo import dot_layouts, transpose_chains
from tilefuse.runtime import CompiledModule

CHAINS = """func.func @main(%a: tensor<4x6x8xf32>, %b: tensor<4x6xf32>, %c: tensor<4x6xf32>)
    -> (tensor<4x6x8xf32>, tensor<8x4x6xf32>, tensor<4x6xf32>, tensor<6x4xf32>, tensor<4x6xf32>) {
  %0 = stablehlo.transpose %a, dims = [2, 0, 1] : (tensor<4x6x8xf32>) -> tensor<8x4x6xf32>
  %1 = stablehlo.transpose %0, dims = [1, 2, 0] : (tensor<8x4x6xf32>) -> tensor<4x6x8xf32>
  %2 = stablehlo.transpose %a, dims = [1, 0, 2] : (tensor<4x6x8xf32>) -> tensor<6x4x8xf32>
  %3 = stablehlo.transpose %2, dims = [2, 1, 0] : (tensor<6x4x8xf32>) -> tensor<8x4x6xf32>
  %4 = stablehlo.transpose %b, dims = [0, 1] : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %5 = stablehlo.transpose %c, dims = [1, 0] : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %6 = stablehlo.transpose %5, dims = [1, 0] : (tensor<6x4xf32>) -> tensor<4x6xf32>
  return %1, %3, %4, %5, %6 : tensor<4x6x8xf32>, tensor<8x4x6xf32>, tensor<4x6xf32>, tensor<6x4xf32>, tensor<4x6xf32>
}
"""


def test_chains_of_transposes_compose(tmp_path):
    """A pair that cancels goes, a pair that does not is one transpose, an
    identity goes; an inner transpose another op reads stays for it."""
    module = ir.Module.parse(CHAINS, ir.Context())
    log = transpose_chains.rewrite_function(module.body.operations[0].operation)
    assert len(log) == 4, log
    filecheck(
        str(module),
        """
CHECK: %[[T:.*]] = stablehlo.transpose %arg0, dims = [2, 0, 1] : (tensor<4x6x8xf32>) -> tensor<8x4x6xf32>
CHECK: %[[C:.*]] = stablehlo.transpose %arg2, dims = [1, 0]
CHECK-NOT: stablehlo.transpose
CHECK: return %arg0, %[[T]], %arg1, %[[C]], %arg2
""",
        tmp_path,
    )


# (a^T b^T)^T as jnp writes it, and the same with bf16 operands (the f32
# product's convert back to bf16 between the dot and the transpose), and
# (x @ w)^T with both operands as stored.
def _transposed_product(element: str, result: str) -> str:
    a, b = f"tensor<64x17x{element}>", f"tensor<33x64x{element}>"
    ta, tb = f"tensor<17x64x{element}>", f"tensor<64x33x{element}>"
    convert = (
        f"%d = stablehlo.convert %p : (tensor<17x33xf32>) -> tensor<17x33x{element}>"
        if element != "f32"
        else ""
    )
    read = "%d" if convert else "%p"
    return f"""func.func @main(%a: {a}, %b: {b}, %x: tensor<17x64xf32>, %w: tensor<64x33xf32>)
    -> (tensor<33x17x{element}>, tensor<33x17xf32>) {{
  %0 = stablehlo.transpose %a, dims = [1, 0] : ({a}) -> {ta}
  %1 = stablehlo.transpose %b, dims = [1, 0] : ({b}) -> {tb}
  %p = stablehlo.dot_general %0, %1, contracting_dims = [1] x [0] : ({ta}, {tb}) -> tensor<17x33x{result}>
  {convert}
  %r = stablehlo.transpose {read}, dims = [1, 0] : (tensor<17x33x{element}>) -> tensor<33x17x{element}>
  %q = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<17x64xf32>, tensor<64x33xf32>) -> tensor<17x33xf32>
  %s = stablehlo.transpose %q, dims = [1, 0] : (tensor<17x33xf32>) -> tensor<33x17xf32>
  return %r, %s : tensor<33x17x{element}>, tensor<33x17xf32>
}}
"""


@pytest.mark.parametrize("element", ["f32", "bf16"])
def test_a_transposed_result_swaps_the_operands(element, tmp_path):
    """(a^T b^T)^T is b a: swapped, both operands are read as stored and no
    transpose is left. (x w)^T keeps its form: swapped, both would be read
    transposed."""
    text = _transposed_product(element, "f32")
    module = ir.Module.parse(text, ir.Context())
    log = dot_layouts.rewrite_function(module.body.operations[0].operation)
    assert any("operands swapped, which puts" in line for line in log), log
    for side in ("lhs", "rhs"):
        assert any(f"{side} read through its transpose (in matmul" in line for line in log), log
    convert = "CHECK: stablehlo.convert %[[P]]" if element != "f32" else ""
    filecheck(
        str(module),
        f"""
CHECK-NOT: stablehlo.transpose %arg
CHECK: %[[P:.*]] = stablehlo.dot_general %arg1, %arg0, contracting_dims = [1] x [0] {{{{.*}}}} -> tensor<33x17xf32>
{convert}
CHECK: %[[Q:.*]] = stablehlo.dot_general %arg2, %arg3, contracting_dims = [1] x [0]
CHECK: stablehlo.transpose %[[Q]], dims = [1, 0]
""",
        tmp_path,
    )


def _program(fn, *shapes, dtype=np.float32):
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(dtype) for s in shapes]
    return jax.jit(fn).lower(*args).as_text(), args


def _tanh_square_grad(w, x):
    """The gradient wrt w of sum(tanh(x @ w.T)^2) at one row x: a
    matrix-vector product (x [1, K]), then an outer product JAX transposes
    twice."""
    return jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w.T) ** 2))(w)


def _tanh_square_grad_numpy(w, x):
    w, x = w.astype(np.float64), x.astype(np.float64)
    t = np.tanh(x @ w.T)
    return (2 * t * (1 - t * t)).T @ x


PROGRAMS = {
    "grad of x @ w.T at one row": (
        _tanh_square_grad,
        _tanh_square_grad_numpy,
        [(64, 300), (1, 300)],
    ),
    "(a.T @ b.T).T + 1": (
        lambda a, b: (a.T @ b.T).T + 1,
        lambda a, b: (a.astype(np.float64).T @ b.astype(np.float64).T).T + 1,
        [(64, 17), (33, 64)],
    ),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_programs_on_lavapipe(name, tmp_path):
    fn, reference, shapes = PROGRAMS[name]
    text, args = _program(fn, *shapes)
    result = tilefuse.compile_program(text, "vulkan", statistics=True)
    lines = [r.line() for r in result.reports]
    assert [r.status for r in result.reports] == ["applied"] * len(lines), lines
    assert result.scheduled_dispatches <= iree_dispatches(text, tmp_path), lines
    got = np.asarray(CompiledModule(result.vmfb, "vulkan").main(*args), np.float64)
    want = reference(*args)
    assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want))


RESHAPES = """func.func @main(%a: tensor<2x3x4xf32>) -> (tensor<24xf32>, tensor<2x3x4xf32>) {
  %0 = stablehlo.reshape %a : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %1 = stablehlo.reshape %0 : (tensor<6x4xf32>) -> tensor<24xf32>
  %2 = stablehlo.reshape %a : (tensor<2x3x4xf32>) -> tensor<2x3x1x4xf32>
  %3 = stablehlo.reshape %2 : (tensor<2x3x1x4xf32>) -> tensor<2x3x4xf32>
  return %1, %3 : tensor<24xf32>, tensor<2x3x4xf32>
}
"""


def test_chains_of_reshapes_fold(tmp_path):
    """A reshape of a reshape reads the first one's operand; one back to
    that operand's shape goes."""
    module = ir.Module.parse(RESHAPES, ir.Context())
    log = transpose_chains.rewrite_function(module.body.operations[0].operation)
    assert len(log) == 2, log
    filecheck(
        str(module),
        """
CHECK: %[[R:.*]] = stablehlo.reshape %arg0 : (tensor<2x3x4xf32>) -> tensor<24xf32>
CHECK-NOT: stablehlo.reshape
CHECK: return %[[R]], %arg0
""",
        tmp_path,
    )


# jax.nn.dot_product_attention's p @ v: p as [1, B, N, T, S], its leading
# unit dim a free dim beside T.
# p computed (exp here, a softmax in attention) loses its unit dim; read
# from an argument (a decode step's q as [B, G, R, 1, D]) it keeps it, and
# so does an unbatched x[1, S, D] @ w: IREE collapses it with the epilogue.
UNIT_FREE = """func.func @main(%p: tensor<1x2x4x8x8xf32>, %v: tensor<2x8x4x16xf32>, %x: tensor<1x8x16xf32>, %w: tensor<16x32xf32>)
    -> (tensor<2x4x16x1x8xf32>, tensor<2x4x1x8x16xf32>, tensor<1x8x32xf32>) {
  %e = stablehlo.exponential %p : tensor<1x2x4x8x8xf32>
  %0 = stablehlo.dot_general %v, %e, batching_dims = [0, 2] x [1, 2], contracting_dims = [1] x [4] : (tensor<2x8x4x16xf32>, tensor<1x2x4x8x8xf32>) -> tensor<2x4x16x1x8xf32>
  %u = stablehlo.dot_general %p, %v, batching_dims = [1, 2] x [0, 2], contracting_dims = [4] x [1] : (tensor<1x2x4x8x8xf32>, tensor<2x8x4x16xf32>) -> tensor<2x4x1x8x16xf32>
  %1 = stablehlo.dot_general %x, %w, contracting_dims = [2] x [0] : (tensor<1x8x16xf32>, tensor<16x32xf32>) -> tensor<1x8x32xf32>
  return %0, %u, %1 : tensor<2x4x16x1x8xf32>, tensor<2x4x1x8x16xf32>, tensor<1x8x32xf32>
}
"""


def test_unit_free_dims_beside_others_are_viewed_away(tmp_path):
    module = ir.Module.parse(UNIT_FREE, ir.Context())
    log = dot_layouts.rewrite_function(module.body.operations[0].operation)
    dropped = [line for line in log if "free dims of extent 1 beside others dropped" in line]
    assert len(dropped) == 1, log
    filecheck(
        str(module),
        """
CHECK: %[[E:.*]] = stablehlo.exponential %arg0
CHECK: %[[P:.*]] = stablehlo.reshape %[[E]] : (tensor<1x2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
CHECK: stablehlo.dot_general {{.*}}%[[P]]
CHECK-SAME: tensor<2x4x
CHECK: stablehlo.reshape {{.*}} -> tensor<2x4x16x1x8xf32>
CHECK: stablehlo.dot_general %arg0, %arg1, batching_dims = [1, 2] x [0, 2]
CHECK: stablehlo.dot_general %arg2, %arg3, contracting_dims = [2] x [0]
""",
        tmp_path,
    )


# jax.nn.dot_product_attention's scores: [B, N, T, 1, S] scaled, then viewed
# as [1, B, N, T, S]; the scale between two unit-dim reshapes.
UNIT_VIEWS = """func.func @main(%s: tensor<2x4x8x8xf32>) -> tensor<1x2x4x8x8xf32> {
  %0 = stablehlo.reshape %s : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x1x8xf32>
  %c = stablehlo.constant dense<0.25> : tensor<f32>
  %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<2x4x8x1x8xf32>
  %1 = stablehlo.multiply %0, %b : tensor<2x4x8x1x8xf32>
  %2 = stablehlo.reshape %1 : (tensor<2x4x8x1x8xf32>) -> tensor<1x2x4x8x8xf32>
  return %2 : tensor<1x2x4x8x8xf32>
}
"""


def test_unit_dim_reshapes_sink_below_elementwise_ops_and_fold(tmp_path):
    module = ir.Module.parse(UNIT_VIEWS, ir.Context())
    log = transpose_chains.rewrite_function(module.body.operations[0].operation)
    assert any("computed before the unit-dim reshape" in line for line in log), log
    filecheck(
        str(module),
        """
CHECK: %[[M:.*]] = stablehlo.multiply %arg0, %{{.*}} : tensor<2x4x8x8xf32>
CHECK-NEXT: %[[R:.*]] = stablehlo.reshape %[[M]] : (tensor<2x4x8x8xf32>) -> tensor<1x2x4x8x8xf32>
CHECK-NEXT: return %[[R]]
""",
        tmp_path,
    )
