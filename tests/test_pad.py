"""Pad specialization: the loop kernel reads through a stablehlo.pad with
loads masked by the source's bounds, so no padded copy exists.

Numerics on Vulkan (lavapipe) against numpy's np.pad, each case asserting
that the pad was fused into the loop kernel (one dispatch, the kernel's
reason names the pad). Tolerances: |error| <= tol * max(1, |reference|) with
tol 1e-6 for f32, 2e-3 for f16, 1.6e-2 for bf16 (two roundings of p*b + p),
exact for i32. The planner's refusals are checked on the plan and, for one
refused pad, on the numerics of IREE's path.
"""

import shutil

import ml_dtypes
import numpy as np
import pytest
import tilefuse
from conftest import NUMPY_TYPES, cpu_hypothesis, tensor
from hypothesis import given
from hypothesis import strategies as st
from support import filecheck
from support import fusion_plan as plan

TOLERANCE = {"f32": 1e-6, "f16": 2e-3, "bf16": 1.6e-2, "i32": 0}
# Padding values as StableHLO literals and as numbers, per dtype.
PAD_VALUES = {
    "f32": [("0.000000e+00", 0.0), ("-1.500000e+00", -1.5)],
    "f16": [("0.000000e+00", 0.0), ("2.500000e+00", 2.5)],
    "bf16": [("0.000000e+00", 0.0), ("-2.000000e+00", -2.0)],
    "i32": [("0", 0), ("-7", -7)],
}


def pad_program(shape, high, dtype, literal, consumer="mul_add", low=None):
    """y = p * b + p (or max(p, b)) with p = pad(x, value, high), read twice."""
    low = low or [0] * len(shape)
    padded = [s + lo + h for s, lo, h in zip(shape, low, high)]
    x, p, v = tensor(shape, dtype), tensor(padded, dtype), tensor([], dtype)
    body = (
        f"  %m = stablehlo.multiply %p, %b : {p}\n  %y = stablehlo.add %m, %p : {p}\n"
        if consumer == "mul_add"
        else f"  %y = stablehlo.maximum %p, %b : {p}\n"
    )
    return (
        f"func.func @main(%x: {x}, %b: {p}) -> {p} {{\n"
        f"  %v = stablehlo.constant dense<{literal}> : {v}\n"
        f"  %p = stablehlo.pad %x, %v, low = {low}, high = {list(high)}, "
        f"interior = {[0] * len(shape)} : ({x}, {v}) -> {p}\n"
        f"{body}"
        f"  return %y : {p}\n}}\n"
    )


def pad_inputs(shape, high, dtype, low=None, seed=0):
    rng = np.random.default_rng(seed)
    low = low or [0] * len(shape)
    padded = [s + lo + h for s, lo, h in zip(shape, low, high)]
    if dtype == "i32":
        return rng.integers(-50, 50, shape).astype(np.int32), rng.integers(-50, 50, padded).astype(
            np.int32
        )
    t = NUMPY_TYPES[dtype]
    return rng.standard_normal(shape).astype(t), rng.standard_normal(padded).astype(t)


def pad_reference(x, b, high, value, consumer="mul_add", low=None):
    low = low or [0] * x.ndim
    wide = np.int64 if x.dtype == np.int32 else np.float64
    p = np.pad(x.astype(wide), list(zip(low, high)), constant_values=value)
    return p * b.astype(wide) + p if consumer == "mul_add" else np.maximum(p, b.astype(wide))


def check(module, shape, high, dtype, value, consumer="mul_add", low=None):
    x, b = pad_inputs(shape, high, dtype, low)
    out = module.main(x, b)
    ref = pad_reference(x, b, high, value, consumer, low)
    assert out.shape == ref.shape and out.dtype == x.dtype
    err = np.abs(out.astype(np.float64) - ref) / np.maximum(1.0, np.abs(ref))
    worst = float(np.max(err))
    assert worst <= TOLERANCE[dtype], f"max scaled error {worst} on {shape}+{high} {dtype}"


def compile_fused(text):
    module = tilefuse.compile(text, target="vulkan")
    (report,) = module.reports
    assert (report.strategy, report.status) == ("loop", "applied"), report.line()
    assert "1 pad(s) read through masked loads" in report.reason, report.line()
    return module


@st.composite
def pad_cases(draw):
    rank = draw(st.integers(1, 4))
    # Keep the padded tensor under ~300k elements (lavapipe runs on the CPU).
    limits = {1: 70000, 2: 600, 3: 70, 4: 24}[rank]
    shape = [draw(st.integers(1, limits)) for _ in range(rank)]
    high = [draw(st.sampled_from([0, 0, 1, 3, 6, 24])) for _ in range(rank)]
    if rank == 4:
        # The loop kernel keeps a rank-4 root's dim 0 in each thread's
        # vector; with a pad it must be 1 (see the test below).
        shape[0], high[0] = 1, 0
    if not any(high):
        high[-1] = 1
    dtype = draw(st.sampled_from(["f32", "f16", "bf16", "i32"]))
    literal, value = draw(st.sampled_from(PAD_VALUES[dtype]))
    return shape, high, dtype, literal, value


@cpu_hypothesis(14)
@given(pad_cases())
def test_pad_matrix(case):
    shape, high, dtype, literal, value = case
    text = pad_program(shape, high, dtype, literal)
    result = tilefuse.compile_program(text, "vulkan")
    module = tilefuse.CompiledModule(result.vmfb, "vulkan", result.reports)
    if any("the loop kernel would refuse the group" in x for x in result.fusion.log):
        # Tiny shapes: no exact tiling fills a subgroup; IREE copies the pad.
        assert any(x.endswith(" pad") for x in result.fusion.left_to_iree)
    else:
        (report,) = result.reports
        assert (report.strategy, report.status) == ("loop", "applied"), report.line()
        assert "1 pad(s) read through masked loads" in report.reason, report.line()
    check(module, shape, high, dtype, value)


EDGES = [
    # (shape, high): pad to a 4-vector and to a tile, ragged padded sizes,
    # padding of an outer dim only, a 50257 vocabulary row.
    ([1023], [1]),
    ([250, 1000], [6, 24]),
    ([250, 1000], [1, 3]),
    ([7, 5], [9, 0]),
    ([3, 5, 7], [1, 3, 1]),
    ([1, 3, 5, 7], [0, 1, 2, 1]),
    ([4, 50257], [0, 47]),
]


@pytest.mark.parametrize("shape,high", EDGES, ids=[f"{s}+{h}" for s, h in EDGES])
def test_pad_edges(shape, high):
    module = compile_fused(pad_program(shape, high, "f32", "-1.500000e+00"))
    check(module, shape, high, "f32", -1.5)


def test_minus_infinity_padding_for_a_max():
    # A max-pool style pad: -inf in the padding, a max consumer.
    shape, high = [33, 100], [3, 28]
    module = compile_fused(pad_program(shape, high, "f32", "0xFF800000", consumer="max"))
    check(module, shape, high, "f32", -np.inf, consumer="max")


def test_bf16_values_survive_the_mask():
    # bf16 lanes come from 16-bit loads; a wrong mask or lane shows as a
    # nonzero odd element.
    shape, high = [64, 130], [0, 6]
    module = compile_fused(pad_program(shape, high, "bf16", "0.000000e+00"))
    x = (np.arange(64 * 130) % 251).reshape(shape).astype(ml_dtypes.bfloat16)
    b = np.ones([64, 136], ml_dtypes.bfloat16)
    out = module.main(x, b).astype(np.float64)
    ref = np.pad(x.astype(np.float64), [(0, 0), (0, 6)]) * 2
    assert np.array_equal(out, ref)


def test_kernel_masks_the_load_and_copies_nothing(root, tmp_path):
    """pad_relu_f32 (250x1000 padded to 256x1024): one dispatch; each thread
    loads x with a mask built from x's bounds (rows past 250 are all-false),
    multiplies and stores. No tensor.pad, no allocation, no copy."""
    dump = tmp_path / "d"
    result = tilefuse.compile_program(root / "samples/pad_relu_f32.mlir", "vulkan", dump_dir=dump)
    assert len(result.reports) == 1
    (kernel,) = tilefuse.verify.printed_kernels((dump / "phase2.log").read_text()).values()
    filecheck(
        kernel,
        """
CHECK: func.func @main_dispatch_0
CHECK-NOT: tensor.pad
CHECK-NOT: memref.alloc
CHECK: affine.min {{.*}}(250, s0)
CHECK: gpu.thread_id x
CHECK: %[[LANES:.*]] = arith.cmpi sgt, {{.*}} : vector<4xi64>
CHECK: %[[ROW:.*]] = arith.cmpi sgt, {{.*}} : index
CHECK: %[[MASK:.*]] = arith.select %[[ROW]], %[[LANES]], {{.*}} : vector<4xi1>
CHECK: vector.transfer_read {{.*}}, %[[MASK]] {in_bounds = [true]} : memref<?x?xf32, {{.*}}#hal.descriptor_type<storage_buffer>>, vector<4xf32>
CHECK: vector.transfer_read {{.*}} : memref<4xf32, {{.*}}, vector<4xf32>
CHECK: arith.mulf
CHECK: arith.maximumf
CHECK: vector.transfer_write {{.*}}#hal.descriptor_type<storage_buffer>>
CHECK-NOT: memref.alloc
CHECK-NOT: memref.copy
CHECK: return
""",
        tmp_path,
    )


# -- pads the planner keeps out of groups, with the reason ------------------

X = "%x: tensor<6x10xf32>, %b: tensor<8x12xf32>"
OUT = "tensor<8x12xf32>"


def _pad(low, high, interior="[0, 0]", src="%x", value="%v"):
    return (
        f"  %v = stablehlo.constant dense<0.0> : tensor<f32>\n"
        f"  %p = stablehlo.pad {src}, {value}, low = {low}, high = {high}, "
        f"interior = {interior} : (tensor<6x10xf32>, tensor<f32>) -> tensor<8x12xf32>\n"
    )


@pytest.mark.parametrize(
    "body,args,why",
    [
        (
            _pad("[1, 1]", "[1, 1]") + "  %y = stablehlo.add %p, %b : tensor<8x12xf32>",
            X,
            "low padding",
        ),
        (
            (
                "  %v = stablehlo.constant dense<0.0> : tensor<f32>\n"
                "  %p = stablehlo.pad %x, %v, low = [0, 0], high = [-1, 3], interior = [1, 0]"
                " : (tensor<6x10xf32>, tensor<f32>) -> tensor<10x13xf32>\n"
                "  %y = stablehlo.slice %p [0:8, 0:12] : (tensor<10x13xf32>) -> tensor<8x12xf32>"
            ),
            X,
            "interior padding",
        ),
        (
            _pad("[0, 0]", "[2, 2]", value="%s") + "  %y = stablehlo.add %p, %b : tensor<8x12xf32>",
            X + ", %s: tensor<f32>",
            "padding value is not a constant",
        ),
        (
            "  %e = stablehlo.exponential %x : tensor<6x10xf32>\n"
            + _pad("[0, 0]", "[2, 2]", src="%e")
            + "  %y = stablehlo.add %p, %b : tensor<8x12xf32>",
            X,
            "pads a value computed in the group",
        ),
        (
            _pad("[0, 0]", "[2, 2]")
            + "  %t = stablehlo.transpose %p, dims = [1, 0] : (tensor<8x12xf32>) -> tensor<12x8xf32>\n"
            "  %u = stablehlo.transpose %b, dims = [1, 0] : (tensor<8x12xf32>) -> tensor<12x8xf32>\n"
            "  %w = stablehlo.add %t, %u : tensor<12x8xf32>\n"
            "  %y = stablehlo.transpose %w, dims = [1, 0] : (tensor<12x8xf32>) -> tensor<8x12xf32>",
            X,
            "a pad in a transpose group",
        ),
    ],
    ids=["low", "interior", "value-argument", "computed-source", "transposed-read"],
)
def test_planner_keeps_unreadable_pads_out(body, args, why):
    p, _ = plan(body + f"\n  return %y : {OUT}", args, OUT)
    assert any(why in line for line in p.log), p.log
    for g in p.outlined():
        if "exponential" in body:
            # The pad still joins its consumer and reads exp's result from
            # memory; only the exp stays out of its group.
            assert "stablehlo.pad" not in g.signature or "exponential" not in g.signature, g
        else:
            assert "stablehlo.pad" not in g.signature, g


def test_pad_before_a_reduction_stays_with_iree_and_is_right():
    text = (
        "func.func @main(%x: tensor<6x10xf32>) -> tensor<8xf32> {\n"
        + _pad("[0, 0]", "[2, 2]")
        + "  %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
        "  %r = stablehlo.reduce(%p init: %z) applies stablehlo.add across dimensions = [1]"
        " : (tensor<8x12xf32>, tensor<f32>) -> tensor<8xf32>\n"
        "  return %r : tensor<8xf32>\n}\n"
    )
    result = tilefuse.compile_program(text, "vulkan")
    assert any("a pad in a row-reduction group" in line for line in result.fusion.log)
    module = tilefuse.CompiledModule(result.vmfb, "vulkan", result.reports)
    x = np.random.default_rng(1).standard_normal((6, 10)).astype(np.float32)
    ref = np.pad(x.astype(np.float64), [(0, 2), (0, 2)]).sum(-1)
    assert np.max(np.abs(module.main(x) - ref)) <= 1e-5


@pytest.mark.parametrize(
    "shape,high", [([1, 1, 1, 1], [24, 0, 0, 0]), ([2, 3, 5, 7], [0, 1, 0, 1])]
)
def test_pad_the_loop_kernel_cannot_tile_stays_with_iree_and_is_right(shape, high):
    # Rank 4 with dim 0 > 1: the loop kernel keeps dim 0 in each thread's
    # vector, and a load masked along it does not lower; IREE cannot compile
    # a dispatch holding a pad, so the planner keeps the pad out.
    text = pad_program(shape, high, "f32", "-1.500000e+00")
    result = tilefuse.compile_program(text, "vulkan")
    assert any("the loop kernel would refuse the group" in x for x in result.fusion.log)
    check(tilefuse.CompiledModule(result.vmfb, "vulkan", result.reports), shape, high, "f32", -1.5)


def test_returned_pad_alone_is_not_outlined():
    p, _ = plan(_pad("[0, 0]", "[2, 2]") + f"  return %p : {OUT}", X, OUT)
    (group,) = p.all_groups()
    assert not group.outlined and "a pad with no consumer" in group.why_not_outlined


def test_refused_pad_numerics_on_iree_path():
    # Low padding: the pad stays with IREE (a copy), the consumer on the loop
    # kernel; together still np.pad's result.
    low, high = [1, 2], [1, 0]
    text = pad_program([6, 10], high, "f32", "-1.500000e+00", low=low)
    module = tilefuse.compile(text, target="vulkan")
    assert len(module.reports) == 2
    check(module, [6, 10], high, "f32", -1.5, low=low)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
@pytest.mark.parametrize("target", ["cuda", "cuda-sm90"])
@pytest.mark.parametrize("dtype,literal", [("bf16", "0.000000e+00"), ("f32", "-1.500000e+00")])
def test_pad_kernel_assembles_for_cuda(target, dtype, literal):
    result = tilefuse.compile_program(pad_program([250, 1000], [6, 24], dtype, literal), target)
    (report,) = result.reports
    assert (report.strategy, report.status) == ("loop", "applied"), report.line()
    assert "1 pad(s) read through masked loads" in report.reason
    assert report.registers and report.spill_bytes == 0


def test_pad_no_kernel_takes_falls_back_to_iree_dispatches(root, monkeypatch):
    # A planner bug would hand IREE a dispatch region holding a pad, which its
    # GPU codegen cannot compile: the driver names the dispatch and leaves
    # that group to IREE's own dispatches instead (an error with strict).
    import dataclasses

    from references import pad_relu_f32
    from tilefuse import strategies

    refused = dataclasses.replace(
        strategies.BY_NAME["loop"], plan=lambda d, target: (None, "refused for the test")
    )
    monkeypatch.setattr(
        strategies,
        "STRATEGIES",
        tuple(refused if s.name == "loop" else s for s in strategies.STRATEGIES),
    )
    sample = root / "samples/pad_relu_f32.mlir"
    with pytest.raises(tilefuse.TilefuseError, match="holds a pad .*refused for the test"):
        tilefuse.compile_program(sample, "vulkan", strict=True)
    result = tilefuse.compile_program(sample, "vulkan")
    (note,) = result.notes
    assert note.startswith("FALLBACK: fusion group main_loop_") and "holds a pad" in note, note
    assert not result.fusion.outlined()
    inputs, (expected,), tolerance = pad_relu_f32(np.random.default_rng(0))
    got = tilefuse.CompiledModule(result.vmfb, "vulkan").main(*inputs)
    assert np.max(np.abs(got - expected)) <= tolerance


def test_pad_in_a_multi_result_group_stays_with_iree_and_is_right():
    text = """func.func @main(%x: tensor<250x1000xf32>, %b: tensor<256x1024xf32>) -> (tensor<256x1024xf32>, tensor<256x1024xf32>) {
  %v = stablehlo.constant dense<0.0> : tensor<f32>
  %p = stablehlo.pad %x, %v, low = [0, 0], high = [6, 24], interior = [0, 0] : (tensor<250x1000xf32>, tensor<f32>) -> tensor<256x1024xf32>
  %y = stablehlo.add %p, %b : tensor<256x1024xf32>
  return %p, %y : tensor<256x1024xf32>, tensor<256x1024xf32>
}
"""
    result = tilefuse.compile_program(text, "vulkan")
    assert any("a pad in a group with several results" in x for x in result.fusion.log)
    module = tilefuse.CompiledModule(result.vmfb, "vulkan", result.reports)
    x, b = pad_inputs([250, 1000], [6, 24], "f32")
    p, y = module.main(x, b)
    ref = np.pad(x, [(0, 6), (0, 24)])
    assert np.array_equal(p, ref) and np.max(np.abs(y - (ref + b))) <= 1e-6
