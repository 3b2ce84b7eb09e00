"""A max pool's gradient (stablehlo.select_and_scatter) on Vulkan
(hlo/select_scatters.py): IREE 3.13's lowering leaves the index of its
per-window selection uninitialized and the result is wrong on lavapipe
(plain iree-compile too), so it is rewritten as strided slices, selects and
pads; checked against jax.jit on the CPU (exact up to the sum of the
gradients that land on one element: 1e-6 relative in f32, 1e-2 in f16)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tilefuse
from jax import lax
from tilefuse.fusion import fuse
from tilefuse.runtime import CompiledModule
from tilefuse.strategies import catalogue
from tilefuse.targets import load_target


def max_pool_gradient(window, stride, padding):
    def pool(x):
        dims, steps = (1, window, window, 1), (1, stride, stride, 1)
        return lax.reduce_window(x, -jnp.inf, lax.max, dims, steps, padding)

    return jax.grad(lambda x: jnp.sum(jnp.sin(pool(x).astype(jnp.float32))))


CASES = {
    # name: (window, stride, padding, x shape, dtype, window offsets)
    "2x2_stride2": (2, 2, "VALID", (2, 8, 8, 4), np.float32, 4),
    "3x3_stride2_same": (3, 2, "SAME", (1, 9, 9, 3), np.float32, 9),
    "3x3_stride1": (3, 1, "VALID", (1, 7, 7, 2), np.float32, 9),
    "2x2_f16": (2, 2, "VALID", (1, 8, 8, 4), np.float16, 4),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_max_pool_gradient_is_right_on_vulkan(name):
    window, stride, padding, shape, dtype, offsets = CASES[name]
    fn = max_pool_gradient(window, stride, padding)
    # Distinct values: no ties, whose first maximum float rounding could move.
    x = np.random.default_rng(2).permutation(np.prod(shape)).reshape(shape)
    x = (x / x.size).astype(dtype)
    text = jax.jit(fn).lower(x).as_text()
    result = tilefuse.compile_program(text, "vulkan")
    # The rewrite corrects the program either way: the plan keeps it, and
    # IREE's own formation, where it issues fewer dispatches (2x2_stride2),
    # is of the corrected program.
    log = fuse(text, load_target("vulkan"), catalogue()).log
    said = [line for line in log if "select_and_scatter" in line]
    assert said and f"as {offsets} strided slices" in said[0], log
    ref = np.asarray(jax.jit(fn)(x)).astype(np.float64)
    got = np.asarray(CompiledModule(result.vmfb, "vulkan").main(x)).astype(np.float64)
    tolerance = 1e-6 if dtype == np.float32 else 1e-2
    assert np.abs(got - ref).max() <= tolerance * np.abs(ref).max()


def test_ties_go_to_the_first_maximum():
    """A window of equal values: GE keeps the first, as XLA does."""
    x = np.ones((1, 4, 4, 1), np.float32)
    fn = max_pool_gradient(2, 2, "VALID")
    result = tilefuse.compile_program(jax.jit(fn).lower(x).as_text(), "vulkan")
    got = np.asarray(CompiledModule(result.vmfb, "vulkan").main(x))
    np.testing.assert_array_equal(got, np.asarray(jax.jit(fn)(x)))
    assert np.count_nonzero(got) == 4
