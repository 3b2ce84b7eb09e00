"""Convolutions on Vulkan. Grouped convolutions (hlo/grouped_convs.py): IREE 3.13's
own SPIR-V codegen of them writes wrong values (relative error 1.0 on
lavapipe for 3x3 windows over 9x9 to 16x16 images), so they are rewritten as depthwise
convolutions and a sum, or one convolution per group; checked here on
Vulkan against jax.jit on the CPU (1e-5 relative to the largest output
magnitude in f32, 1e-2 in f16/bf16, whose inputs are rounded alike)."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import tilefuse
from jax import lax
from tilefuse.fusion import fuse
from tilefuse.runtime import CompiledModule
from tilefuse.strategies import catalogue
from tilefuse.targets import load_target


def grouped(groups, stride=1, dims=("NHWC", "HWIO", "NHWC"), pad="SAME"):
    def conv(x, w):
        wide = jnp.float32 if x.dtype != jnp.float32 else None
        y = lax.conv_general_dilated(
            x,
            w,
            (stride,) * (len(dims[0]) - 2),
            pad,
            dimension_numbers=dims,
            feature_group_count=groups,
            preferred_element_type=wide,
        )
        return y.astype(x.dtype)

    return conv


def weight_gradient(x, w):
    """JAX writes it as a convolution with batch_group_count = 4."""
    return jax.grad(lambda w: jnp.sum(jnp.tanh(grouped(4)(x, w))))(w)


CASES = {
    # name: (function, x shape, w shape, dtype, what the log says)
    "stride2": (grouped(4, 2), (2, 15, 15, 16), (3, 3, 4, 16), np.float32, "depthwise"),
    "nchw": (
        grouped(4, dims=("NCHW", "OIHW", "NCHW"), pad=((1, 1), (1, 1))),
        (2, 16, 9, 9),
        (8, 4, 3, 3),
        np.float32,
        "depthwise",
    ),
    "bf16": (grouped(4), (1, 8, 8, 16), (3, 3, 4, 16), ml_dtypes.bfloat16, "depthwise"),
    "conv1d": (
        grouped(4, dims=("NWC", "WIO", "NWC"), pad=((2, 0),)),
        (2, 20, 16),
        (3, 4, 8),
        np.float32,
        "depthwise",
    ),
    "wide_groups": (grouped(2), (1, 8, 8, 64), (3, 3, 32, 16), np.float32, "2 convolutions"),
    "weight_gradient": (weight_gradient, (1, 8, 8, 16), (3, 3, 4, 16), np.float32, "batch groups"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_grouped_convolution_is_right_on_vulkan(name):
    fn, x_shape, w_shape, dtype, said = CASES[name]
    rng = np.random.default_rng(1)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = (rng.standard_normal(w_shape) * 0.3).astype(dtype)
    text = jax.jit(fn).lower(x, w).as_text()
    plan = fuse(text, load_target("vulkan"), catalogue())
    lines = [line for line in plan.log if "grouped convolution" in line]
    assert lines and all(said in line for line in lines[-1:]), plan.log
    # The plan, or IREE's formation of the corrected program where that
    # issues fewer dispatches: either computes the rewritten convolutions.
    result = tilefuse.compile_program(text, "vulkan")
    ref = np.asarray(jax.jit(fn)(x, w)).astype(np.float64)
    got = np.asarray(CompiledModule(result.vmfb, "vulkan").main(x, w)).astype(np.float64)
    tolerance = 1e-5 if dtype == np.float32 else 1e-2
    assert np.abs(got - ref).max() <= tolerance * np.abs(ref).max()


def test_cuda_keeps_the_grouped_convolution():
    """The rewrite is a SPIR-V workaround: IREE's CUDA path tiles the
    convolution with another pipeline (TileAndFuse), not known wrong."""
    x = np.zeros((1, 8, 8, 16), np.float32)
    w = np.zeros((3, 3, 4, 16), np.float32)
    text = jax.jit(grouped(4)).lower(x, w).as_text()
    plan = fuse(text, load_target("cuda"), catalogue())
    assert not [line for line in plan.log if "grouped convolution" in line], plan.log
    assert "feature_group_count = 4" in plan.text
    vulkan = fuse(text, load_target("vulkan"), catalogue())
    assert "feature_group_count = 16" in vulkan.text and vulkan.corrections
    # What IREE forms if every group is dropped: corrected, not outlined.
    assert "feature_group_count = 16" in vulkan.corrected_text
    assert "flow.dispatch.region" not in vulkan.corrected_text


def depthwise_1d(x, w):
    wide = jnp.float32 if x.dtype != jnp.float32 else None
    y = lax.conv_general_dilated(
        x,
        w,
        (1,),
        ((3, 0),),
        dimension_numbers=("NWC", "WIO", "NWC"),
        feature_group_count=32,
        preferred_element_type=wide,
    )
    return y.astype(x.dtype)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_a_depthwise_convolution_over_one_axis(dtype):
    """A causal 1-D depthwise convolution (Mamba's and Hyena's short
    filters): its dispatch is x[w + kw, c] * k[kw, c] summed over kw, which
    the column-reduction kernel took and got wrong (relative error 1.1);
    now every kernel refuses an input read at a sum over a reduction loop.
    In bf16 accumulating in f32 (preferred_element_type), plain
    iree-compile fails ("'tensor.collapse_shape' op expected collapsed
    type"); hlo/mixed_convs.py converts its operands first."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 40, 32)).astype(dtype)
    w = rng.standard_normal((4, 1, 32)).astype(dtype)
    result = tilefuse.compile_program(jax.jit(depthwise_1d).lower(x, w).as_text(), "vulkan")
    conv = [r for r in result.reports if "_conv_" in r.name]
    assert conv and conv[0].strategy is None, [r.line() for r in result.reports]
    assert "a convolution's window" in conv[0].line()
    ref = np.asarray(jax.jit(depthwise_1d)(x, w)).astype(np.float64)
    got = np.asarray(CompiledModule(result.vmfb, "vulkan").main(x, w)).astype(np.float64)
    tolerance = 1e-5 if dtype == np.float32 else 1e-2
    assert np.abs(got - ref).max() <= tolerance * np.abs(ref).max()


def test_what_iree_computes_right_is_left_as_it_is():
    """A 1x1 grouped convolution and a depthwise convolution's weight
    gradient (batch groups of one element) are right on IREE's SPIR-V
    codegen: they are left, and the log says why."""
    x = np.zeros((1, 6, 6, 16), np.float32)
    one_by_one = jax.jit(grouped(4, pad="VALID")).lower(x, np.zeros((1, 1, 4, 8), np.float32))
    plan = fuse(one_by_one.as_text(), load_target("vulkan"), catalogue())
    assert [line for line in plan.log if "left as it is: a 1x1 window" in line], plan.log

    def depthwise_weight_gradient(x, w):
        return jax.grad(lambda w: jnp.sum(jnp.tanh(grouped(16)(x, w))))(w)

    lowered = jax.jit(depthwise_weight_gradient).lower(x, np.zeros((3, 3, 1, 16), np.float32))
    plan = fuse(lowered.as_text(), load_target("vulkan"), catalogue())
    said = [line for line in plan.log if "grouped convolution" in line]
    assert said and all("left as it is" in line for line in said), said
    assert any("one batch element per group" in line for line in said), said


def test_a_corrected_program_is_still_compared_with_iree_s_formation():
    """Where a rewrite corrects what IREE gets wrong, the driver still
    compares the plan with IREE's formation, of the corrected program
    (OwnFormation.program), and keeps the one with fewer dispatches; the
    program as written is never the alternative."""
    from tilefuse import driver

    x = np.zeros((1, 8, 8, 16), np.float32)
    w = np.zeros((3, 3, 4, 16), np.float32)
    plan = fuse(jax.jit(grouped(4)).lower(x, w).as_text(), load_target("vulkan"), catalogue())
    assert plan.corrections and "feature_group_count = 16" in plan.corrected_text
    assert driver.formation_unneeded(plan) is None
