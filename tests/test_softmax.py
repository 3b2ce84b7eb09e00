"""The one-kernel row normalization (strategy "softmax") against numpy on
Vulkan (lavapipe), its IR, and the planner's decision to outline (CUDA: test_cuda_ptx.py).
lavapipe gives rows of up to 1024 to the register kernel (row_warp,
tests/test_row_warp.py); these tests turn that off (CHUNKED), so that
every row size runs the chunked kernel.

Programs are softmax, RMSNorm and layernorm over the last dim of [rows, n]
(f16 cases convert to f32 first and back at the end); they, their inputs,
the float64 references and the error bounds are in tests/rowcases.py,
shared with tests/test_row_warp.py. Every numerics case asserts that the
dispatch ran `softmax` (not IREE's default codegen).
"""

import dataclasses
import math

import ml_dtypes
import numpy as np
import pytest
import tilefuse
from conftest import cpu_hypothesis, tensor
from hypothesis import HealthCheck, assume, given
from hypothesis import strategies as st
from rowcases import (
    CHUNKED,
    NORMALIZATION_NUMPY,
    check_normalization,
    inputs,
    program,
    reference,
)
from support import filecheck, kernel_ops
from tilefuse.fusion import fuse
from tilefuse.runtime import CompiledModule
from tilefuse.strategies import catalogue, softmax
from tilefuse.targets import load_target

# Rows 1..512, rows of 3..4093: T*V dividing the row or not (1000 with
# 8 x 4-vectors: 31 chunks of 32 and a last one of 8), odd rows (V = 1),
# rows shorter than one chunk, several subgroups (2 x 4000), f16 in/out.
CASES = [
    ("softmax", 256, 1000, "f32"),
    ("softmax", 3, 7, "f32"),
    ("softmax", 7, 257, "f32"),
    ("softmax", 2, 4000, "f32"),
    ("softmax", 512, 33, "f32"),
    ("softmax", 9, 1000, "f16"),
    ("rmsnorm", 1, 4093, "f32"),
    ("rmsnorm", 128, 1024, "f32"),
    ("rmsnorm", 64, 768, "f16"),
    ("layernorm", 1, 3, "f32"),
    ("layernorm", 100, 1000, "f32"),
    ("layernorm", 4, 1004, "f32"),
    ("layernorm", 6, 130, "f16"),
    # Rows longer than lavapipe's 32 KiB of workgroup memory: the kernel
    # keeps no row on chip, so they stay one kernel.
    ("softmax", 2, 70000, "f32"),
    ("layernorm", 3, 8193, "f32"),
]


@pytest.mark.parametrize("kind,rows,n,dtype", CASES, ids=["-".join(map(str, c)) for c in CASES])
def test_softmax_kernel_vulkan(kind, rows, n, dtype):
    check_normalization(kind, rows, n, dtype)


@cpu_hypothesis(6)
@given(
    kind=st.sampled_from(["softmax", "rmsnorm", "layernorm"]),
    rows=st.integers(1, 4096),
    n=st.one_of(st.integers(2, 2048), st.integers(2049, 70000)),
    dtype=st.sampled_from(["f32", "f16"]),
    packed=st.booleans(),
)
def test_softmax_kernel_hypothesis(kind, rows, n, dtype, packed):
    """Rows of 2..70000 (a row of one element is IREE's), 1..4096 rows, with
    lavapipe's one row per workgroup or GPU-style packed rows."""
    rows = max(1, min(rows, (1 << 21) // n))  # at most ~2M elements per case
    check_normalization(kind, rows, n, dtype, target=packed_vulkan() if packed else None)


# lavapipe keeps one row per workgroup (packed_synced_row_threads = 8);
# GPUs pack one-subgroup rows (CUDA: 8 rows of 32 lanes). The same kernel with
# rows packed, run on lavapipe: R rows per [8, R, 1] workgroup, R the largest
# power of two dividing the row count (up to 16 here).
PACKED = [
    ("softmax", 256, 1000, "f32", 16),
    ("softmax", 7, 257, "f32", 1),
    ("rmsnorm", 64, 768, "f16", 16),
    ("layernorm", 100, 1000, "f32", 4),
    ("layernorm", 6, 130, "f32", 2),
]


def packed_vulkan(threads=128):
    return dataclasses.replace(CHUNKED, packed_synced_row_threads=threads)


@pytest.mark.parametrize(
    "kind,rows,n,dtype,per_wg", PACKED, ids=["-".join(map(str, c)) for c in PACKED]
)
def test_softmax_kernel_packed_rows(kind, rows, n, dtype, per_wg):
    check_normalization(kind, rows, n, dtype, target=packed_vulkan(), params=f"wg=[8, {per_wg}, 1]")


def test_rows_of_one_element_need_no_reduction():
    """A max and a sum over rows of one element reduce nothing: both are
    reshapes before planning (hlo/unit_reduces.py), so softmax of [7, 1] is
    elementwise: one loop-kernel dispatch (the plan's two loop groups, cut
    by index safety at the reshape, give way to IREE's one), and it matches
    numpy."""
    result = tilefuse.compile_program(program("softmax", 7, 1), "vulkan")
    assert [(r.strategy, r.status) for r in result.reports] == [("loop", "applied")]
    module = tilefuse.CompiledModule(result.vmfb, "vulkan", result.reports)
    args = inputs("softmax", 7, 1, "f32")
    assert np.max(np.abs(module.main(*args) - reference("softmax", args))) == 0.0


def kernel_of(kind, rows, n, tmp_path, target=CHUNKED):
    dump = tmp_path / "dump"
    result = tilefuse.compile_program(program(kind, rows, n), target, dump_dir=dump)
    (report,) = result.reports
    assert (report.strategy, report.status) == ("softmax", "applied"), report.line()
    (kernel,) = tilefuse.verify.printed_kernels((dump / "phase2.log").read_text()).values()
    return kernel, report


def test_ir_softmax_ragged_row(tmp_path):
    """softmax 256x1000 on lavapipe, rows packed as on a GPU: one 8-lane
    subgroup per row, 16 rows per [8, 16, 1] workgroup (row on thread y), 31
    chunks of 8 x 4 and a peeled
    chunk of 8 (two threads). Each reduction loops over
    the chunks in each thread's own code, reading 4-vectors of the input in
    place with its partial in registers (no barrier in the loop), then
    combines by subgroup shuffles; exp(x - max) is recomputed in registers
    where it is read. The root is one loop per thread over the workgroup's
    16 x 250 vectors, 128 apart (all 128 threads, cyclic), with no barrier
    inside. Workgroup memory holds only each reduction's 32-wide accumulator
    and its result; nothing else is allocated (no padded copy, no row kept);
    the output is written once, by the root."""
    kernel, report = kernel_of("softmax", 256, 1000, tmp_path, target=packed_vulkan())
    assert "31 chunks of 32 and one of 8, 16 rows per workgroup" in report.reason
    filecheck(
        kernel,
        """
CHECK: func.func @main_dispatch_0
CHECK-SAME: workgroup_size = [8, 16, 1] subgroup_size = 8
CHECK: memref.alloc() {{.*}} : memref<16x32xf32, #gpu.address_space<workgroup>>
CHECK: scf.for {{.*}} to %c992 step %c32 iter_args({{.*}}) -> (vector<4xf32>)
CHECK: vector.transfer_read {{.*}}#hal.descriptor_type<storage_buffer>>, vector<4xf32>
CHECK-NEXT: arith.maximumf {{.*}} : vector<4xf32>
CHECK-NEXT: scf.yield
CHECK: vector.reduction <maximumf>
CHECK: gpu.shuffle xor
CHECK: scf.for {{.*}} to %c992 step %c32 iter_args({{.*}}) -> (vector<4xf32>)
CHECK: vector.transfer_read {{.*}}#hal.descriptor_type<storage_buffer>>, vector<4xf32>
CHECK-NEXT: arith.subf
CHECK-NEXT: math.exp
CHECK-NEXT: arith.addf {{.*}} : vector<4xf32>
CHECK-NEXT: scf.yield
CHECK: vector.reduction <add>
CHECK: gpu.shuffle xor
CHECK: scf.for {{.*}} to %c4000 step %c128 {
CHECK-NEXT: affine.delinearize_index {{.*}} into (16, 250)
CHECK: vector.transfer_read {{.*}}#hal.descriptor_type<storage_buffer>>, vector<4xf32>
CHECK: arith.subf
CHECK-NEXT: math.exp
CHECK-NEXT: arith.divf
CHECK-NEXT: vector.transfer_write {{.*}}#hal.descriptor_type<storage_buffer>>
CHECK-NEXT: }
CHECK-NEXT: return
""",
        tmp_path,
    )
    ops, _module = kernel_ops(kernel)
    allocs = [str(op.results[0].type) for op in ops if op.name == "memref.alloc"]
    # Per reduction: its accumulator and its result (one subgroup: no slots).
    assert sorted(allocs) == sorted(
        [
            "memref<16x32xf32, #gpu.address_space<workgroup>>",
            "memref<16xf32, #gpu.address_space<workgroup>>",
        ]
        * 2
    ), allocs
    assert not [op for op in ops if op.name == "vector.create_mask"]
    # No loop holds a barrier: the reductions' chunk loops (each thread loops
    # alone, partial in registers) and the root's loop.
    loops = [op for op in ops if op.name == "scf.for"]
    assert len([loop for loop in loops if loop.results]) == 2 and len(loops) == 3
    assert all("gpu.barrier" not in str(loop) for loop in loops)
    writes = [
        op
        for op in ops
        if op.name == "vector.transfer_write" and "storage_buffer" in str(op.operands[1].type)
    ]
    assert len(writes) == 1  # the root, once


def test_ir_softmax_one_row_per_workgroup(tmp_path):
    """lavapipe's default: one row per [8, 1, 1] workgroup; the root is each
    lane's loop over the row's 250 vectors, 8 apart, with no barrier inside."""
    kernel, report = kernel_of("softmax", 256, 1000, tmp_path)
    assert "rows per workgroup" not in report.reason and "wg=[8, 1, 1]" in report.params
    filecheck(
        kernel,
        """
CHECK: func.func @main_dispatch_0
CHECK-SAME: workgroup_size = [8, 1, 1] subgroup_size = 8
CHECK: scf.for {{.*}} to %c992 step %c32 iter_args
CHECK: gpu.shuffle xor
CHECK: scf.for {{.*}} to %c992 step %c32 iter_args
CHECK: gpu.shuffle xor
CHECK: scf.for %{{.*}} = %thread_id_x to %c250 step %c8 {
CHECK-NOT: gpu.barrier
CHECK: vector.transfer_write {{.*}}#hal.descriptor_type<storage_buffer>>
CHECK-NEXT: }
CHECK-NEXT: return
""",
        tmp_path,
    )


def test_group_refusal_is_explicit():
    """What the planner asks before outlining a softmax-like group."""
    vulkan = load_target("vulkan")
    plan = fuse(program("layernorm", 4, 64), vulkan, catalogue())
    (group,) = plan.all_groups()
    graph = plan.graphs[0]
    assert softmax.group_refusal(graph, group, vulkan) is None
    assert "no GPU kernel" in softmax.group_refusal(graph, group, load_target("cpu"))


def test_split_plan_runs_right():
    """Softmax returning its row sums too: the planner splits the refused
    group (tests/test_fusion_rules.py) into exp(x - max) on the softmax
    kernel, the sum on the row kernel and the divide on the loop kernel;
    both results match numpy."""
    text = program("softmax", 64, 1000).replace(
        f"-> {tensor([64, 1000], 'f32')} {{",
        f"-> ({tensor([64, 1000], 'f32')}, {tensor([64], 'f32')}) {{",
    )
    text = text.replace(
        f"  return %y : {tensor([64, 1000], 'f32')}",
        f"  return %y, %s : {tensor([64, 1000], 'f32')}, {tensor([64], 'f32')}",
    )
    result = tilefuse.compile_program(text, CHUNKED)
    assert any("split into" in line for line in result.fusion.log), result.fusion.log
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    assert [r.strategy for r in module.reports] == ["softmax", "row_reduction", "loop"], [
        r.line() for r in module.reports
    ]
    (x,) = inputs("softmax", 64, 1000, "f32")
    y, s = module.main(x)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(s, e.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), atol=1e-6)


@pytest.mark.parametrize(
    "kind,lead,n",
    [("softmax", [2, 3], 257), ("layernorm", [4, 16], 768), ("softmax", [2, 2, 8], 64)],
    ids=["softmax-2x3x257", "layernorm-4x16x768", "softmax-2x2x8x64"],
)
def test_rank_3_and_4_rows_are_one_kernel(kind, lead, n):
    """A softmax or layernorm over the innermost dim of a rank-3/4 tensor
    (transformer activations, attention scores): fusion/rows.py rewrites the
    group on [rows, n] with reshapes at its edges, and it runs as one
    softmax-kernel dispatch (before: left to IREE, which made linalg.softmax
    on its own codegen, or two dispatches for layernorm)."""
    rows = math.prod(lead)
    result = tilefuse.compile_program(program(kind, rows, n, lead=lead), CHUNKED)
    assert any(f"viewed as [{rows}, {n}]" in line for line in result.fusion.log), result.fusion.log
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    assert [(r.strategy, r.status) for r in module.reports] == [("softmax", "applied")], [
        r.line() for r in module.reports
    ]
    args = inputs(kind, rows, n, "f32")
    ref = reference(kind, args).reshape(*lead, n)
    out = module.main(args[0].reshape(*lead, n), *args[1:])
    assert out.shape == ref.shape
    err = float(np.max(np.abs(out.astype(np.float64) - ref)))
    assert err <= 2e-6 + 2e-7 * math.sqrt(n), err


def epilogue_program(kind, rows, n, dtype="f32"):
    """One value per row computed from row reductions: a mean (sum / n), an
    RMS factor rsqrt(mean(x^2) + eps), or a variance E[x^2] - E[x]^2 (two
    sibling reductions). f16 inputs convert to f32 first."""
    r, rn, t_in = tensor([rows], "f32"), tensor([rows, n], "f32"), tensor([rows, n], dtype)
    lines = [f"func.func @main(%xin: {t_in}) -> {r} {{"]
    if dtype == "f32":
        lines.append(f"  %x = stablehlo.add %xin, %xin : {rn}")  # 2x, so x is computed
    else:
        lines.append(f"  %x = stablehlo.convert %xin : ({t_in}) -> {rn}")
    lines += [
        "  %zero = stablehlo.constant dense<0.0> : tensor<f32>",
        f"  %n = stablehlo.constant dense<{float(n)}> : {r}",
        f"  %eps = stablehlo.constant dense<1.0e-5> : {r}",
    ]

    def reduce(name, src):
        return (
            f"  %{name} = stablehlo.reduce({src} init: %zero) applies stablehlo.add "
            f"across dimensions = [1] : ({rn}, tensor<f32>) -> {r}"
        )

    if kind == "mean":
        lines += [reduce("s", "%x"), f"  %y = stablehlo.divide %s, %n : {r}"]
    elif kind == "rms":
        lines += [
            f"  %sq = stablehlo.multiply %x, %x : {rn}",
            reduce("ss", "%sq"),
            f"  %ms = stablehlo.divide %ss, %n : {r}",
            f"  %mse = stablehlo.add %ms, %eps : {r}",
            f"  %y = stablehlo.rsqrt %mse : {r}",
        ]
    else:
        lines += [
            reduce("s", "%x"),
            f"  %sq = stablehlo.multiply %x, %x : {rn}",
            reduce("ss", "%sq"),
            f"  %m = stablehlo.divide %s, %n : {r}",
            f"  %m2 = stablehlo.divide %ss, %n : {r}",
            f"  %mm = stablehlo.multiply %m, %m : {r}",
            f"  %y = stablehlo.subtract %m2, %mm : {r}",
        ]
    lines += [f"  return %y : {r}", "}"]
    return "\n".join(lines) + "\n"


def epilogue_reference(kind, xin):
    x = xin.astype(np.float64) * (2 if xin.dtype == np.float32 else 1)
    if kind == "mean":
        return x.mean(axis=1)
    if kind == "rms":
        return 1 / np.sqrt((x * x).mean(axis=1) + 1e-5)
    return (x * x).mean(axis=1) - x.mean(axis=1) ** 2


EPILOGUES = [
    ("mean", 4096, 1000, "f32", None),
    ("mean", 7, 3, "f32", None),
    ("rms", 64, 768, "f16", None),
    ("variance", 33, 4000, "f32", None),
    ("mean", 256, 1000, "f32", 16),  # GPU-style packing: 16 rows per [8, 16, 1]
]


@pytest.mark.parametrize(
    "kind,rows,n,dtype,per_wg", EPILOGUES, ids=["-".join(map(str, c)) for c in EPILOGUES]
)
def test_reduction_epilogue_vulkan(kind, rows, n, dtype, per_wg):
    """A row reduction followed by ops on one value per row (jnp.mean's
    sum / n): the softmax kernel with an epilogue root, one thread per row
    reading the reductions' results from workgroup memory (before: IREE's
    default codegen, no strategy took such a root). Tolerances (f32 sums of
    up to 4000 terms): 1e-5 of the mean |term| for a mean, 1e-5 relative
    for the RMS factor, 1e-5 of E[x^2] for a variance. A lost or doubled
    chunk of a row is off by about 1e-2 of the mean |term|."""
    target = packed_vulkan() if per_wg else None
    result = tilefuse.compile_program(epilogue_program(kind, rows, n, dtype), target or "vulkan")
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    assert [(r.strategy, r.status) for r in module.reports] == [("softmax", "applied")], [
        r.line() for r in module.reports
    ]
    assert "one value per row" in module.reports[0].reason
    if per_wg:
        assert f"wg=[8, {per_wg}, 1]" in module.reports[0].params
    x = np.random.default_rng(3).standard_normal((rows, n)).astype(NORMALIZATION_NUMPY[dtype])
    out, ref = module.main(x).astype(np.float64), epilogue_reference(kind, x)
    x_eff = x.astype(np.float64) * (2 if dtype == "f32" else 1)  # what the program reduces
    bound = {
        "mean": 1e-5 * np.abs(x_eff).mean(axis=1),
        "rms": 1e-5 * np.abs(ref),
        "variance": 1e-5 * (x_eff * x_eff).mean(axis=1),  # E[x^2] - E[x]^2 cancels
    }[kind]
    assert np.all(np.abs(out - ref) <= bound), float(np.max(np.abs(out - ref) / bound))


def test_ir_reduction_epilogue(tmp_path):
    """mean over rows of 1000 on lavapipe: the sum's combine ends with lane 0
    writing the row's sum to workgroup memory, a barrier, then thread 0
    divides it and writes the mean, once per row."""
    dump = tmp_path / "dump"
    text = epilogue_program("mean", 256, 1000)
    result = tilefuse.compile_program(text, "vulkan", dump_dir=dump)
    (report,) = result.reports
    assert (report.strategy, report.status) == ("softmax", "applied"), report.line()
    (kernel,) = tilefuse.verify.printed_kernels((dump / "phase2.log").read_text()).values()
    filecheck(
        kernel,
        """
CHECK: gpu.shuffle xor
CHECK: vector.transfer_write {{.*}} memref<1xf32, #gpu.address_space<workgroup>>
CHECK: gpu.barrier
CHECK: scf.if
CHECK-NEXT: vector.transfer_read {{.*}}#gpu.address_space<workgroup>>, vector<1xf32>
CHECK-NEXT: arith.divf
CHECK-NEXT: vector.transfer_write {{.*}}#hal.descriptor_type<storage_buffer>>
CHECK-NEXT: }
CHECK-NEXT: return
""",
        tmp_path,
    )


def test_column_mean_is_not_taken_as_rows():
    """A mean over the outer dim: IREE's dispatch reduces a transposed read
    of x, which this kernel refuses (each lane's vector would stride across
    rows) with the reason; the column kernel takes it with its epilogue
    (tests/test_column_reduction.py), and the result matches numpy."""
    text = epilogue_program("mean", 64, 96).replace("dimensions = [1]", "dimensions = [0]")
    text = text.replace("tensor<64xf32>", "tensor<96xf32>").replace("dense<9.6e+01>", "dense<64.0>")
    text = text.replace("dense<96.0>", "dense<64.0>")
    result = tilefuse.compile_program(text, "vulkan")
    (report,) = result.reports
    assert report.strategy == "column_reduction" and report.status == "applied", report.line()
    (choice,) = result.compilation.choices
    _, why = softmax.plan(choice.dispatch, load_target("vulkan"))
    assert "transposed read" in why, why
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    x = np.random.default_rng(4).standard_normal((64, 96)).astype(np.float32)
    np.testing.assert_allclose(module.main(x), (2 * x.astype(np.float64)).mean(axis=0), atol=1e-5)


@pytest.mark.parametrize(
    "shape,dims", [((8, 16, 768), [2]), ((6, 32, 32), [1, 2]), ((2, 3, 5, 100), [3])]
)
def test_mean_over_innermost_dims_of_higher_rank(shape, dims):
    """jnp.mean over the innermost dim(s) of a rank-3/4 tensor: the fusion
    stage views the group as rows [prod(kept), prod(reduced)] (rows.py) and
    the softmax kernel runs it with its epilogue (before: IREE's default
    codegen). Tolerance as for a mean above: 1e-5 of the mean |x|."""
    kept = [s for i, s in enumerate(shape) if i not in dims]
    n = math.prod(shape[i] for i in dims)
    t, r = tensor(list(shape), "f32"), tensor(kept, "f32")
    text = "\n".join(
        [
            f"func.func @main(%x: {t}) -> {r} {{",
            "  %zero = stablehlo.constant dense<0.0> : tensor<f32>",
            f"  %n = stablehlo.constant dense<{float(n)}> : {r}",
            (
                f"  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across "
                f"dimensions = {dims} : ({t}, tensor<f32>) -> {r}"
            ),
            f"  %m = stablehlo.divide %s, %n : {r}",
            f"  return %m : {r}",
            "}",
        ]
    )
    result = tilefuse.compile_program(text, "vulkan")
    rows = math.prod(kept)
    assert any(f"viewed as [{rows}, {n}]" in line for line in result.fusion.log), result.fusion.log
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    assert [(r.strategy, r.status) for r in module.reports] == [("softmax", "applied")], [
        r.line() for r in module.reports
    ]
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    ref = x.astype(np.float64).mean(axis=tuple(dims))
    out = module.main(x)
    assert out.shape == ref.shape
    assert np.max(np.abs(out - ref)) <= 1e-5 * np.abs(x).mean()


@st.composite
def epilogue_cases(draw):
    """kept dims (1-3 of them, sizes 2.., at most 4096 rows), reduced
    innermost dims (1, or 2 when the tensor has rank >= 3; length 2..70000),
    at most ~2M elements; the kept and reduced shapes differ (rows.py cannot
    tell them apart otherwise)."""
    rank = draw(st.integers(2, 4))
    reduced = draw(st.integers(1, 2)) if rank >= 3 else 1
    kept_rank = rank - reduced
    n_total = draw(st.one_of(st.integers(2, 2048), st.integers(2049, 70000)))
    inner = [n_total] if reduced == 1 else [2, max(2, n_total // 2)]
    rows_cap = max(2, min(4096, (1 << 21) // math.prod(inner)))
    lead = [draw(st.integers(2, max(2, round(rows_cap ** (1 / kept_rank)))))]
    lead += [draw(st.integers(2, 8)) for _ in range(kept_rank - 1)]
    assume(math.prod(lead) <= 4096 and lead != inner)
    kind = draw(st.sampled_from(["mean", "rms"]))
    dtype = draw(st.sampled_from(["f32", "f16", "bf16"]))
    return kind, lead, inner, dtype


@cpu_hypothesis(8, HealthCheck.filter_too_much)
@given(epilogue_cases())
def test_reduction_epilogue_hypothesis(case):
    """Means and RMS factors over the innermost dim(s), ranks 2-4, f32 and
    f16/bf16 converted to f32: always one softmax-kernel dispatch, within
    2e-7 * sqrt(n) of the mean |value| reduced (f32 accumulation)."""
    kind, lead, inner, dtype = case
    shape, n = [*lead, *inner], math.prod(inner)
    t_in, t, r = tensor(shape, dtype), tensor(shape, "f32"), tensor(lead, "f32")
    dims = list(range(len(lead), len(shape)))
    lines = [f"func.func @main(%xin: {t_in}) -> {r} {{"]
    if dtype == "f32":
        lines.append(f"  %x = stablehlo.add %xin, %xin : {t}")
    else:
        lines.append(f"  %x = stablehlo.convert %xin : ({t_in}) -> {t}")
    reduced = "%x"
    if kind == "rms":
        lines.append(f"  %sq = stablehlo.multiply %x, %x : {t}")
        reduced = "%sq"
    lines += [
        "  %zero = stablehlo.constant dense<0.0> : tensor<f32>",
        f"  %n = stablehlo.constant dense<{float(n)}> : {r}",
        f"  %eps = stablehlo.constant dense<1.0e-5> : {r}",
        (
            f"  %s = stablehlo.reduce({reduced} init: %zero) applies stablehlo.add "
            f"across dimensions = {dims} : ({t}, tensor<f32>) -> {r}"
        ),
        f"  %m = stablehlo.divide %s, %n : {r}",
    ]
    out_name = "%m"
    if kind == "rms":
        lines += [f"  %me = stablehlo.add %m, %eps : {r}", f"  %y = stablehlo.rsqrt %me : {r}"]
        out_name = "%y"
    lines += [f"  return {out_name} : {r}", "}"]
    module = tilefuse.compile("\n".join(lines) + "\n", target="vulkan")
    assert [(rep.strategy, rep.status) for rep in module.reports] == [("softmax", "applied")], [
        rep.line() for rep in module.reports
    ]
    numpy_type = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}[dtype]
    x = np.random.default_rng(6).standard_normal(shape).astype(numpy_type)
    x64 = x.astype(np.float64) * (2 if dtype == "f32" else 1)
    values = x64 * x64 if kind == "rms" else x64
    mean = values.mean(axis=tuple(dims))
    ref = 1 / np.sqrt(mean + 1e-5) if kind == "rms" else mean
    err = np.abs(module.main(x).astype(np.float64) - ref)
    bound = 2e-7 * math.sqrt(n) * np.abs(values).mean(axis=tuple(dims)) + 1e-7
    if kind == "rms":  # d rsqrt(m) = -rsqrt(m)^3 / 2 dm
        bound = bound * ref**3 / 2 + 1e-6 * ref
    assert np.all(err <= bound), float(np.max(err / bound))


def _mean_read_twice(rows: int, n: int) -> str:
    """A layer norm of f16 rows with f32 statistics, as jnp.var and JAX's f16
    rules write it: the mean (one value per row) is read twice, in f32 by
    the variance's row and as f16 by the root."""
    x16, x32 = f"tensor<{rows}x{n}xf16>", f"tensor<{rows}x{n}xf32>"
    r32, r16 = f"tensor<{rows}xf32>", f"tensor<{rows}xf16>"
    lines = [
        f"func.func @main(%x: {x16}) -> {x16} {{",
        "%zero = stablehlo.constant dense<0.0> : tensor<f32>",
        f"%n = stablehlo.constant dense<{float(n)}> : {r32}",
        f"%eps = stablehlo.constant dense<1.0e-5> : {r16}",
        f"%x32 = stablehlo.convert %x : ({x16}) -> {x32}",
        (
            f"%s = stablehlo.reduce(%x32 init: %zero) applies stablehlo.add across dimensions = [1]"
            f" : ({x32}, tensor<f32>) -> {r32}"
        ),
        f"%mean = stablehlo.divide %s, %n : {r32}",
        f"%mean16 = stablehlo.convert %mean : ({r32}) -> {r16}",
        f"%mb = stablehlo.broadcast_in_dim %mean, dims = [0] : ({r32}) -> {x32}",
        f"%c = stablehlo.subtract %x32, %mb : {x32}",
        f"%sq = stablehlo.multiply %c, %c : {x32}",
        (
            f"%ss = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [1]"
            f" : ({x32}, tensor<f32>) -> {r32}"
        ),
        f"%var = stablehlo.divide %ss, %n : {r32}",
        f"%var16 = stablehlo.convert %var : ({r32}) -> {r16}",
        f"%ve = stablehlo.add %var16, %eps : {r16}",
        f"%inv = stablehlo.rsqrt %ve : {r16}",
        f"%m16b = stablehlo.broadcast_in_dim %mean16, dims = [0] : ({r16}) -> {x16}",
        f"%invb = stablehlo.broadcast_in_dim %inv, dims = [0] : ({r16}) -> {x16}",
        f"%d = stablehlo.subtract %x, %m16b : {x16}",
        f"%y = stablehlo.multiply %d, %invb : {x16}",
        f"return %y : {x16}",
    ]
    return "\n  ".join(lines) + "\n}\n"


@pytest.mark.parametrize(
    "rows,n,chunked,strategy",
    [(8, 4096, True, "softmax"), (6, 1000, True, "softmax"), (16, 256, False, "row_warp")],
)
def test_a_value_per_row_read_twice(rows, n, chunked, strategy):
    """Both row kernels recompute an op over one value per row (the mean's
    sum / N) where each reader needs it, f16 within 2 ulps of the largest
    output of a float64 reference rounded as the program rounds."""
    target = CHUNKED if chunked else load_target("vulkan")
    result = tilefuse.compile_program(_mean_read_twice(rows, n), target)
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    assert [(r.strategy, r.status) for r in module.reports] == [(strategy, "applied")], [
        r.line() for r in module.reports
    ]
    x = (np.random.default_rng(0).standard_normal((rows, n)) * 3 + 1).astype(np.float16)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=1, keepdims=True)
    mean16 = mean.astype(np.float16).astype(np.float64)
    want = (x64 - mean16) / np.sqrt(var.astype(np.float16).astype(np.float64) + 1e-5)
    err = np.max(np.abs(module.main(x).astype(np.float64) - want))
    assert err <= 2 * 2.0**-10 * np.max(np.abs(want)), err


@pytest.mark.parametrize("target", ["cuda", "cuda-sm90"])
def test_a_value_per_row_read_twice_assembles(target):
    """The same on CUDA: one row kernel, ptxas without spills."""
    (report,) = tilefuse.compile_program(_mean_read_twice(8, 4096), target, strict=True).reports
    assert report.status == "applied" and report.strategy in ("softmax", "row_warp"), report.line()
    assert report.spill_bytes == 0, report.line()
