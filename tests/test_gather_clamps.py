"""Gathers of whole rows clamp their indices, as StableHLO's gather does
(hlo/gather_clamps.py): IREE 3.13's index_select lowering reads outside the
operand. Numerics on Vulkan (lavapipe) against JAX on the CPU, exact (a
gather copies)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tilefuse
from iree.compiler import ir
from tilefuse.hlo.gather_clamps import is_row_gather, rewrite_function
from tilefuse.irutil import context, walk
from tilefuse.toolchain import iree_compile

ROWS = np.arange(1000 * 64, dtype=np.float32).reshape(1000, 64)
# Past the end, before the start (JAX adds 1000 to a negative index first, so
# -1020 is still before it) and in range.
INDICES = np.array([1005, -1020, 3, 999, 4000], np.int32)


def index(x, i):
    return x[i] * 2.0


def take_clip(x, i):
    return jnp.take(x, i, axis=0, mode="clip")


def loop_reads(x):
    """Rows k * 300 and k * 300 + 1 of x for k = 0..9 (a gather: a scalar
    index would be a dynamic_slice, which IREE clamps), past the end from
    k = 4 on, in a while body."""
    rows = jnp.arange(2)
    return jax.lax.fori_loop(
        0, 10, lambda k, acc: acc + x[k * 300 + rows], jnp.zeros((2, 64), x.dtype)
    )


def test_premise_plain_iree_reads_outside_the_rows(tmp_path):
    """What the rewrite corrects: plain iree-compile's gather of row 1005 of
    1000 is not row 999 (lavapipe reads zeros there)."""
    path = tmp_path / "index.mlir"
    path.write_text(jax.jit(index).lower(ROWS, INDICES).as_text())
    out = tmp_path / "plain.vmfb"
    iree_compile([str(path), "--iree-hal-target-backends=vulkan-spirv", "-o", str(out)], "plain")
    got = tilefuse.load(out, "vulkan").main(ROWS, INDICES)
    assert not np.array_equal(got[0], ROWS[999] * 2)


@pytest.mark.parametrize("fn", [index, take_clip], ids=["x[i]", "take_clip"])
def test_out_of_range_rows_are_clamped_as_jax_clamps_them(fn):
    f = tilefuse.jit(fn, strict=True)
    want = np.asarray(jax.jit(fn)(ROWS, INDICES))
    np.testing.assert_array_equal(f(ROWS, INDICES), want)
    np.testing.assert_array_equal(want[0] / (2 if fn is index else 1), ROWS[999])


def test_a_gather_in_a_while_body_is_clamped_too():
    f = tilefuse.jit(loop_reads)
    np.testing.assert_array_equal(f(ROWS), np.asarray(jax.jit(loop_reads)(ROWS)))


def test_the_log_names_each_clamped_gather():
    text = jax.jit(index).lower(ROWS, INDICES).as_text()
    result = tilefuse.compile_program(text, "vulkan")
    clamped = [line for line in result.fusion.log if "row gather" in line]
    assert len(clamped) == 1 and "indices clamped to [0, 999]" in clamped[0], result.fusion.log


GATHERS = {
    # rows of dim 0, one index each: IREE's index_select
    "rows": ("offset_dims = [1], collapsed_slice_dims = [0]", "1x1", "3x1", "3x64", "1, 64", True),
    # a window of 4 rows: IREE's own lowering clamps it
    "window": ("offset_dims = [1, 2]", "1x1", "3x1", "3x4x64", "4, 64", False),
    # single elements by (row, column): clamped by IREE too
    "points": ("collapsed_slice_dims = [0, 1]", "1x2", "3x2", "3", "1, 1", False),
}


@pytest.mark.parametrize("name", list(GATHERS))
def test_only_the_index_select_form_is_rewritten(name):
    dims, _, idx, out, sizes, rewritten = GATHERS[name]
    starts = "[0]" if name != "points" else "[0, 1]"
    text = f"""func.func @main(%x: tensor<1000x64xf32>, %i: tensor<{idx}xi32>) -> tensor<{out}xf32> {{
  %0 = "stablehlo.gather"(%x, %i) <{{dimension_numbers = #stablehlo.gather<{dims}, start_index_map = {starts}, index_vector_dim = 1>, slice_sizes = array<i64: {sizes}>}}> : (tensor<1000x64xf32>, tensor<{idx}xi32>) -> tensor<{out}xf32>
  return %0 : tensor<{out}xf32>
}}"""
    with context():
        module = ir.Module.parse(text)
        gather = next(op for op in walk(module.operation) if op.name == "stablehlo.gather")
        assert is_row_gather(gather) is rewritten


def test_indices_computed_from_constants_are_left_as_they_are():
    """The program fixes them (JAX's bounds arithmetic on shapes); a clamp
    would be one more initializer dispatch."""
    text = """func.func @main(%x: tensor<1000x64xf32>) -> tensor<2x64xf32> {
  %c = stablehlo.constant dense<[[3], [998]]> : tensor<2x1xi32>
  %one = stablehlo.constant dense<1> : tensor<2x1xi32>
  %i = stablehlo.add %c, %one : tensor<2x1xi32>
  %0 = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 64>}> : (tensor<1000x64xf32>, tensor<2x1xi32>) -> tensor<2x64xf32>
  return %0 : tensor<2x64xf32>
}"""
    with context():
        module = ir.Module.parse(text)
        func = next(op for op in walk(module.operation) if op.name == "func.func")
        assert rewrite_function(func) == []
        assert not any(op.name == "stablehlo.clamp" for op in walk(module.operation))


def test_a_gather_whose_index_vector_dim_is_omitted():
    """StableHLO prints no index_vector_dim when it is 0 (jnp.percentile's
    gathers): read as 0, not an error that dropped every fusion group."""
    text = """func.func @main(%x: tensor<4x100xf32>, %i: tensor<1xi32>) -> tensor<4xf32> {
  %0 = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [0], collapsed_slice_dims = [1], start_index_map = [1]>, slice_sizes = array<i64: 4, 1>}> : (tensor<4x100xf32>, tensor<1xi32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}"""
    with context():
        module = ir.Module.parse(text)
        func = next(op for op in walk(module.operation) if op.name == "func.func")
        assert rewrite_function(func) == []
