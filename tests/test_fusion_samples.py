"""Every fusion sample compiles with fusion on, runs on Vulkan (lavapipe) and
matches numpy; with fusion, no sample has more dispatches than with IREE's own
dispatch formation (--no-fusion). Tolerances are the samples' own
(samples/references.py). Fallbacks to IREE's default codegen are allowed but
asserted to carry a reason, and the groups that still have a tilefuse kernel
(loop) are asserted to get it."""

import numpy as np
import pytest
import tilefuse
from references import SAMPLES

FUSION_SAMPLES = [
    "softmax_f32",
    "layernorm_f32",
    "rmsnorm_f32",
    "mlp_block_f32",
    "attention_f32",
    "transpose_exp_abs_f32",
    "log_transpose_add_f32",
    "pad_relu_f32",
    "bias_scale_chain",
]


def _run(module, name):
    inputs, refs, tol = SAMPLES[name](np.random.default_rng(0), small=True)
    outputs = module.main(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    return max(float(np.max(np.abs(o.astype(np.float64) - r))) for o, r in zip(outputs, refs)), tol


@pytest.mark.parametrize("name", FUSION_SAMPLES)
def test_sample_with_fusion(name, root, tmp_path):
    path = root / "samples" / f"{name}.mlir"
    fused = tilefuse.compile_program(path, "vulkan", dump_dir=tmp_path / "fused")
    plain = tilefuse.compile_program(path, "vulkan", dump_dir=tmp_path / "plain", fusion=False)
    assert len(fused.reports) <= len(plain.reports), (name, fused.fusion.log)
    for r in fused.reports:
        assert r.status == "applied" or r.reason, r.line()
    module = tilefuse.CompiledModule(fused.vmfb, "vulkan", fused.reports)
    err, tol = _run(module, name)
    assert err <= tol, f"{name}: max error {err} > {tol}"


def test_fused_elementwise_groups_still_get_the_loop_strategy(root, tmp_path):
    for name in ("transpose_exp_abs_f32", "log_transpose_add_f32", "bias_scale_chain"):
        result = tilefuse.compile_program(root / "samples" / f"{name}.mlir", "vulkan")
        assert [(r.strategy, r.status) for r in result.reports] == [("loop", "applied")], name
        (group,) = result.fusion.outlined()
        assert group.kind in ("transpose", "loop")


def test_dispatches_record_their_group(root, tmp_path):
    from tilefuse.dispatch.read import read_dispatches

    dump = tmp_path / "d"
    result = tilefuse.compile_program(root / "samples/mlp_block_f32.mlir", "vulkan", dump_dir=dump)
    dispatches = read_dispatches((dump / "executable_sources.mlir").read_text())
    tilefuse.fusion.attach_groups(result.fusion, dispatches)
    assert [(d.group_kind, d.group_hero) for d in dispatches] == [
        ("matmul", "stablehlo.dot_general"),
        ("matmul", "stablehlo.dot_general"),
    ]
    assert [d.group_name for d in dispatches] == [
        "main_matmul_dot_general_4",
        "main_matmul_dot_general_16",
    ]


def test_dispatch_count_mismatch_is_an_error(root):
    from tilefuse.fusion import attach_groups

    result = tilefuse.compile_program(root / "samples/log_transpose_add_f32.mlir", "vulkan")
    with pytest.raises(tilefuse.TilefuseError, match="1 fusion groups; none for"):
        attach_groups(result.fusion, [])


def test_initializer_and_copy_dispatches_may_share_a_group(root):
    """IREE hoists a group's constant part into an initializer (listed
    first) and may copy a region's result in a memcpy dispatch with the
    region's location: neither is a second kernel of the group. The order
    mattered: an initializer's dispatch listed first used to make the
    group's own dispatch look like a second claim (CTC loss's gradient, four
    retries). Two dispatches of the program itself still fail the group."""
    from tilefuse.dispatch.read import Dispatch
    from tilefuse.fusion import attach_groups
    from tilefuse.fusion.outline import LOC_PREFIX

    result = tilefuse.compile_program(root / "samples/log_transpose_add_f32.mlir", "vulkan")
    (group,) = result.fusion.outlined()
    loc = f'loc("{LOC_PREFIX}{group.name}"(unknown))'

    def claim(name):
        return Dispatch(name=name, executable=name, location=loc, ops=[])

    dispatches = [
        claim("_initializer_0_dispatch_0_elementwise_64_f32"),
        claim("main_dispatch_0_elementwise_64_f32"),
        claim("main_dispatch_1_slow_memcpy"),
    ]
    attach_groups(result.fusion, dispatches)
    assert [d.group_name for d in dispatches] == [group.name] * 3
    with pytest.raises(tilefuse.TilefuseError, match="claims fusion group .*, already matched"):
        attach_groups(result.fusion, [*dispatches, claim("main_dispatch_2_elementwise_64_f32")])


def test_a_group_does_not_return_a_reshape_of_its_input(tmp_path):
    """A row mean viewed as [2, 16] is read by a loop group (its double) and
    by another (a broadcast subtract). The view joined the first group, which
    returned it: IREE then tied that result to the region's operand (a
    readwrite binding loaded and stored back unchanged), no tilefuse kernel
    took the dispatch, and the group cost a retry and went to IREE's
    formation (jax.grad of a BERT: twenty such groups, until retries ran
    out and the whole plan was dropped). The readers outside get their own
    view now, and every group keeps its kernel."""
    text = """func.func @main(%x: tensor<2x16x48xf32>) -> (tensor<2x16xf32>, tensor<2x16x48xf32>) {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %x2 = stablehlo.reshape %x : (tensor<2x16x48xf32>) -> tensor<32x48xf32>
  %s = stablehlo.reduce(%x2 init: %z) applies stablehlo.add across dimensions = [1] : (tensor<32x48xf32>, tensor<f32>) -> tensor<32xf32>
  %n = stablehlo.constant dense<48.0> : tensor<32xf32>
  %m = stablehlo.divide %s, %n : tensor<32xf32>
  %e = stablehlo.exponential %x : tensor<2x16x48xf32>
  %r = stablehlo.reshape %m : (tensor<32xf32>) -> tensor<2x16xf32>
  %c = stablehlo.constant dense<2.0> : tensor<2x16xf32>
  %t = stablehlo.multiply %r, %c : tensor<2x16xf32>
  %b = stablehlo.broadcast_in_dim %r, dims = [0, 1] : (tensor<2x16xf32>) -> tensor<2x16x48xf32>
  %y = stablehlo.subtract %e, %b : tensor<2x16x48xf32>
  %y2 = stablehlo.reshape %y : (tensor<2x16x48xf32>) -> tensor<32x48xf32>
  %s2 = stablehlo.reduce(%y2 init: %z) applies stablehlo.maximum across dimensions = [1] : (tensor<32x48xf32>, tensor<f32>) -> tensor<32xf32>
  %s3 = stablehlo.reshape %s2 : (tensor<32xf32>) -> tensor<2x16xf32>
  %b2 = stablehlo.broadcast_in_dim %s3, dims = [0, 1] : (tensor<2x16xf32>) -> tensor<2x16x48xf32>
  %o = stablehlo.add %y, %b2 : tensor<2x16x48xf32>
  return %t, %o : tensor<2x16xf32>, tensor<2x16x48xf32>
}
"""
    result = tilefuse.compile_program(text, "vulkan", dump_dir=tmp_path)
    assert not [n for n in result.notes if "left to IREE" in n], result.notes
    assert [r.status for r in result.reports] == ["applied"] * len(result.reports)
    regions = (tmp_path / "input.mlir").read_text().count("flow.dispatch.region ->")
    assert regions == len(result.fusion.outlined()) == len(result.reports)
    module = tilefuse.CompiledModule(result.vmfb, "vulkan", result.reports)
    x = np.random.default_rng(3).standard_normal((2, 16, 48)).astype(np.float32)
    t, o = module.main(x)
    mean = x.mean(axis=2)
    y = np.exp(x) - mean[..., None]
    np.testing.assert_allclose(t, 2 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(o, y + np.maximum(y.max(axis=2), 0)[..., None], rtol=1e-5, atol=1e-5)


def test_a_group_sharing_another_dispatchs_executable_is_matched(root):
    """IREE gives identical dispatches one executable, which carries one of
    their locations: a gradient's attention matmul (operand transposes
    folded) equals the forward pass's, formed by IREE, and its group had no
    executable of its own ("IREE formed 31 dispatches for 92 fusion groups":
    a retry). The host program's dispatch sites keep each region's location;
    a group named there is matched. Named nowhere, it still fails."""
    from tilefuse.fusion import attach_groups
    from tilefuse.fusion.outline import LOC_PREFIX

    result = tilefuse.compile_program(root / "samples/log_transpose_add_f32.mlir", "vulkan")
    (group,) = result.fusion.outlined()
    site = f'loc(callsite("{LOC_PREFIX}{group.name}"("x.mlir":3:8) at "x.mlir":1:1))'
    attach_groups(result.fusion, [], [site, 'loc("x.mlir":7:2)'])
    with pytest.raises(
        tilefuse.TilefuseError, match="IREE formed 0 dispatches for 1 fusion groups"
    ):
        attach_groups(result.fusion, [], ['loc("x.mlir":7:2)'])
