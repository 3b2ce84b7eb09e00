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
