"""Norms whose statistics are column reductions (a batch norm over the batch,
an instance norm over H and W of NHWC), as JAX writes them: three
dispatches, each on a tilefuse kernel (the mean, the variance, the output),
right on Vulkan against jax.jit on the CPU (2e-5 relative to the largest
output magnitude).

The centred value `c = x - mean` feeds the variance and the output. The
planner's cut computes it again in both (planner.column_stages moves it to
the output's stage; fusion/recompute.py clones it for the variance where
the program shares one `c`) instead of a loop dispatch that stores it.
Plain iree-compile forms two dispatches for the shared forms, whose values
on lavapipe are wrong (batch norm 1.4, instance norm 291 relative error,
in the session that wrote this)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tilefuse
from tilefuse.runtime import CompiledModule


def batch_norm_var(x, g, b):
    return (x - x.mean(0)) / jnp.sqrt(x.var(0) + 1e-5) * g + b


def batch_norm_shared(x, g, b):
    c = x - x.mean(0)
    return c * jax.lax.rsqrt((c * c).mean(0) + 1e-5) * g + b


def instance_norm_var(x):
    m, v = x.mean((1, 2), keepdims=True), x.var((1, 2), keepdims=True)
    return (x - m) / jnp.sqrt(v + 1e-5)


def instance_norm_shared(x):
    c = x - x.mean((1, 2), keepdims=True)
    return c / jnp.sqrt((c * c).mean((1, 2), keepdims=True) + 1e-5)


def batch_norm_returning_c(x):
    c = x - x.mean(0)
    return c * jax.lax.rsqrt((c * c).mean(0) + 1e-5), c


CASES = {
    "batch_norm_var": (batch_norm_var, [(32, 24), (24,), (24,)]),
    "batch_norm_shared": (batch_norm_shared, [(64, 48), (48,), (48,)]),
    "instance_norm_var": (instance_norm_var, [(2, 10, 10, 4)]),
    "instance_norm_shared": (instance_norm_shared, [(2, 12, 12, 16)]),
}


def _compile_and_check(fn, shapes):
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    result = tilefuse.compile_program(jax.jit(fn).lower(*args).as_text(), "vulkan")
    outs = CompiledModule(result.vmfb, "vulkan").main(*args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    for out, ref in zip(outs, jax.tree_util.tree_leaves(jax.jit(fn)(*args)), strict=True):
        ref = np.asarray(ref)
        assert float(np.abs(out - ref).max()) <= 2e-5 * max(1.0, float(np.abs(ref).max()))
    return result


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_norm_over_columns_is_three_kernels(name):
    result = _compile_and_check(*CASES[name])
    kinds = [(r.strategy, r.status) for r in result.reports]
    assert kinds == [
        ("column_reduction", "applied"),
        ("column_reduction", "applied"),
        ("loop", "applied"),
    ], [r.line() for r in result.reports]
    recomputed = [n for n in result.fusion.log if "computed again" in n]
    assert bool(recomputed) == name.endswith("_shared"), result.fusion.log


def test_a_returned_centred_value_is_stored_once():
    """The function returns `c`: a dispatch writes it anyway, so the
    variance reads it back rather than compute it again, and the log says
    why."""
    result = _compile_and_check(batch_norm_returning_c, [(64, 48)])
    log = result.fusion.log
    assert [n for n in log if "not recomputed: the function returns it" in n], log
    assert not [n for n in log if "computed again" in n], log
