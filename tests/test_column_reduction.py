"""The column-reduction strategy: numerics on Vulkan (lavapipe) and its IR (CUDA: test_cuda_ptx.py).

Every numerics case asserts that the dispatch ran `column_reduction` (no
fallback) and compares with numpy in float64. Tolerances per output element:
add: 1e-6 * sum(|x|) over the reduced elements (f32 accumulation; a lost or
doubled chunk of rows is off by far more); max/min: exact; mul (inputs in
[0.99, 1.01]): 1e-7 * reduced length * |result|. f16/bf16 inputs are converted
to f32 by the program, so numpy sees the same values the kernel adds.
"""

import dataclasses
import math

import ml_dtypes
import numpy as np
import pytest
import tilefuse
from conftest import REDUCE_OPS, cpu_hypothesis, reduce_program
from hypothesis import HealthCheck, assume, given
from hypothesis import strategies as st
from references import SAMPLES
from support import filecheck
from tilefuse.dispatch.read import read_dispatches
from tilefuse.runtime import CompiledModule
from tilefuse.strategies import column_reduction
from tilefuse.targets import load_target

NUMPY = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
# Inputs of at most this many elements keep a hypothesis example near 1 s.
MAX_ELEMENTS = 1 << 21


def _inputs(shape, dtype, op, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.99, 1.01, shape) if op == "mul" else rng.standard_normal(shape)
    return x.astype(NUMPY[dtype])


def check_numerics(module, shape, dims, dtype, op) -> float:
    x = _inputs(shape, dtype, op)
    out = module.main(x)
    x64 = x.astype(np.float64)
    ref = REDUCE_OPS[op][2](x64, axis=tuple(dims))
    reduced = math.prod(shape[d] for d in dims)
    if op == "add":
        tol = 1e-6 * np.sum(np.abs(x64), axis=tuple(dims)) + 1e-6
    elif op == "mul":
        tol = 1e-7 * reduced * np.abs(ref) + 1e-30
    else:
        tol = 0.0
    err = np.abs(out.astype(np.float64) - ref)
    assert out.shape == ref.shape and np.all(err <= tol), (
        f"{shape} {dims} {dtype} {op}: max error {err.max()} (tolerance {np.min(tol)}..)"
    )
    return float(err.max())


def compile_column(text):
    """On the column kernel: one dispatch, or two where the target splits a
    tall reduction over the grid (test_column_splits.py)."""
    module = tilefuse.compile(text, target="vulkan")
    kernels = [(r.strategy, r.status) for r in module.reports]
    assert kernels in ([("column_reduction", "applied")] * n for n in (1, 2)), [
        r.line() for r in module.reports
    ]
    return module


def _smallest_factor(n):
    return next((d for d in range(2, math.isqrt(n) + 1) if n % d == 0), n)


@st.composite
def column_cases(draw):
    """Outer dims reduced, innermost kept: ranks 2-4, with or without a batch
    (kept outer) dim, kept sizes 1..4096 and 50257-ish, reduced 2..70000."""
    kept = draw(st.one_of(st.integers(1, 4096), st.sampled_from([50257, 1000, 4097])))
    budget = max(2, min(70000, MAX_ELEMENTS // kept))
    rank = draw(st.sampled_from([2, 3, 4]))
    batch = draw(st.sampled_from([False, True])) if rank > 2 else False
    if rank == 2:
        reduced = draw(st.one_of(st.integers(2, budget), st.just(budget)))
        shape, dims = (reduced, kept), [0]
    elif not batch:  # all outer dims reduced
        a = draw(st.integers(1, 8))
        inner = [draw(st.integers(1, max(1, budget // a // 8))) for _ in range(rank - 2)]
        shape, dims = (a, *inner, kept), list(range(rank - 1))
    else:  # the outermost dim kept too: a batch of column reductions
        b = draw(st.integers(1, 6))
        inner = [draw(st.integers(1, max(1, budget // b // 8))) for _ in range(rank - 2)]
        shape, dims = (b, *inner, kept), list(range(1, rank - 1))
    reduced = math.prod(shape[d] for d in dims)
    # A reduced length needs a small divisor to be split (see the chooser);
    # lengths without one are reported as fallbacks (tested below).
    assume(reduced >= 2 and _smallest_factor(reduced) <= 8)
    dtype = draw(st.sampled_from(["f32", "f16", "bf16"]))
    op = draw(st.sampled_from(["add", "max", "min", "mul"] if reduced <= 4096 else ["add", "max"]))
    return shape, dims, dtype, op


@cpu_hypothesis(16, HealthCheck.filter_too_much)
@given(column_cases())
def test_column_reduction_matrix(case):
    shape, dims, dtype, op = case
    module = compile_column(reduce_program(shape, dims, dtype, op))
    check_numerics(module, shape, dims, dtype, op)


@pytest.mark.parametrize(
    "shape,dims,dtype,op",
    [
        ((70000, 3), [0], "f32", "add"),  # long reduced dim, 3 columns: one workgroup
        ((8, 50257), [0], "bf16", "max"),  # short reduced dim, ragged 50257 columns
        ((1000, 1), [0], "f32", "add"),  # a single column
        ((2, 3, 5, 7), [0, 1, 2], "f16", "min"),  # rank 4, three reduced dims collapsed
        ((3, 4, 5, 6), [1, 2], "bf16", "add"),  # rank 4 with a batch dim
        ((1001, 300), [0], "f32", "mul"),  # odd reduced length: split 7
    ],
)
def test_column_reduction_edges(shape, dims, dtype, op):
    module = compile_column(reduce_program(shape, dims, dtype, op))
    check_numerics(module, shape, dims, dtype, op)


@pytest.mark.parametrize("shape,vector", [((70000, 3), 1), ((640, 6), 2), ((64, 50257), 4)])
def test_narrow_kept_dim_takes_dividing_vectors(shape, vector):
    """A kept dim narrower than a subgroup's vectors takes the widest vector
    dividing it (3 -> scalars, 6 -> pairs), else every load is masked; a wide
    ragged one keeps 4-vectors (only its last workgroup is masked)."""
    module = compile_column(reduce_program(shape, [0], "f32", "add"))
    assert f"vector={vector}" in module.reports[0].params, module.reports[0].line()
    check_numerics(module, shape, [0], "f32", "add")


@pytest.mark.parametrize("shape,dims", [((70000, 3), [0]), ((3, 4, 5, 6), [1, 2])])
def test_narrow_kept_dim_puts_row_chunks_on_x(shape, dims):
    """lavapipe forms its subgroups from x alone (`subgroups_along_x`): with
    fewer kept-column threads than a subgroup, thread x takes the row chunks
    and y the columns ([split, kept threads, 1]); CUDA, whose warps span y
    as well, keeps the columns on x (coalesced)."""
    text = reduce_program(shape, dims, "f32", "add")
    module = compile_column(text)
    report = module.reports[0]
    assert "row chunks on thread x" in report.reason, report.line()
    split = report.params.split("split=")[1].split()[0]
    assert f"wg=[{split}, " in report.params, report.line()
    check_numerics(module, shape, dims, "f32", "add")
    cuda = tilefuse.compile_program(text, "cuda").reports[0]  # step one where split
    assert cuda.strategy == "column_reduction" and "row chunks" not in cuda.reason


def _launch(params):
    grid, wg = params.launch.grid, params.launch.workgroup
    return math.prod(grid), math.prod(wg)


def test_grid_fills_the_multiprocessors(root, tmp_path):
    """8192x50257 f16 summed over rows on targets that name their
    multiprocessors: at least two workgroups per multiprocessor, resident
    in one wave, their threads at least half the GPU's resident threads
    (it took 50 workgroups of 512 threads on 132 multiprocessors: 1775 us on
    an H200 against IREE's 358), each subgroup reading a row of 4-vectors
    (coalesced). lavapipe, which names none, keeps its grid."""
    tilefuse.compile_program(root / "samples/column_sum_f16.mlir", "vulkan", dump_dir=tmp_path)
    (dispatch,) = read_dispatches((tmp_path / "executable_sources.mlir").read_text())
    for name in ("cuda-sm90", "cuda"):
        target = load_target(name)
        params, reason = column_reduction.plan(dispatch, target)
        assert params is not None, reason
        workgroups, threads = _launch(params)
        units, resident = target.multiprocessors, target.multiprocessor_threads
        assert workgroups >= 2 * units, (name, column_reduction.describe(params))
        assert workgroups <= units * (resident // threads), (
            name,
            column_reduction.describe(params),
        )
        assert workgroups * threads >= units * resident // 2, (
            name,
            column_reduction.describe(params),
        )
        assert params.launch.workgroup[0] >= target.subgroup_size and params.vector == 4
        assert column_reduction.describe(params) == (
            "tile=[0, 128] grid=[393, 1, 1] wg=[32, 16, 1] split=16 vector=4 masked"
        )
    params, _ = column_reduction.plan(dispatch, load_target("vulkan"))
    assert column_reduction.describe(params) == (
        "tile=[0, 512] grid=[99, 1, 1] wg=[128, 2, 1] split=2 vector=4 masked"
    )


# lavapipe with an H100's multiprocessors: the chooser's CUDA layouts
# (narrow workgroups, many row chunks) run where numerics can be checked;
# no reduction is split over the grid in two (test_column_splits.py).
FILLING = dataclasses.replace(
    load_target("vulkan"),
    multiprocessors=132,
    multiprocessor_threads=2048,
    column_split_bytes=1 << 40,
)


@pytest.mark.parametrize(
    "shape,dims,dtype,op",
    [
        ((64, 50257), [0], "f16", "add"),  # the sample's columns: wg [32, 16], ragged
        ((512, 4096), [0], "f32", "add"),  # exact tiles, split 16
        ((96, 1000), [0], "bf16", "max"),
        ((4, 48, 2000), [1], "f32", "add"),  # a batch of column reductions
        ((1001, 300), [0], "f32", "mul"),  # odd reduced length
    ],
)
def test_filling_layouts_on_lavapipe(shape, dims, dtype, op):
    """The layouts a target with many multiprocessors gets, checked on
    lavapipe: each case's chooser differs from plain vulkan's."""
    text = reduce_program(shape, dims, dtype, op)
    module = tilefuse.compile(text, target=FILLING)
    assert [(r.strategy, r.status) for r in module.reports] == [("column_reduction", "applied")]
    plain = tilefuse.compile_program(text, "vulkan").reports[0]
    assert module.reports[0].params != plain.params, plain.line()
    check_numerics(module, shape, dims, dtype, op)


@pytest.mark.parametrize("shape", [(8191, 256)])
def test_unsplittable_lengths_fall_back_with_a_reason(shape):
    """A prime reduced length above the workgroup's thread limit has no
    split: IREE's codegen runs it, and the report says why. (A reduced
    length of 1 is a reshape before planning: hlo/unit_reduces.py.)"""
    module = tilefuse.compile(reduce_program(shape, [0], "f32", "add"), target="vulkan")
    (report,) = module.reports
    assert report.status == "fallback" and "no divisor" in report.reason
    check_numerics(module, shape, [0], "f32", "add")


@pytest.mark.parametrize("name", ["column_sum_f16", "column_sum_small"])
def test_samples(name, root):
    small = root / "samples" / "small" / f"{name}.mlir"
    path = small if small.is_file() else root / "samples" / f"{name}.mlir"
    module = compile_column(path.read_text())
    inputs, refs, tol = SAMPLES[name](np.random.default_rng(0), small=small.is_file())
    err = np.max(np.abs(module.main(*inputs).astype(np.float64) - refs[0]))
    assert err <= tol, f"{name}: max error {err} > {tol}"


def test_kernel_reads_vectors_and_copies_nothing(root, tmp_path):
    """64x50257 f16: threads read 4-wide f16 vectors of a row (coalesced along
    the kept dim), masked at the ragged edge; the only allocation is the
    partials' buffer in workgroup memory (no padded copy of the input)."""
    dump = tmp_path / "d"
    tilefuse.compile_program(root / "samples/small/column_sum_f16.mlir", "vulkan", dump_dir=dump)
    (kernel,) = tilefuse.verify.printed_kernels((dump / "phase2.log").read_text()).values()
    filecheck(
        kernel,
        """
CHECK: func.func @main_dispatch_0
CHECK-SAME: workgroup_size = [128, 2, 1]
CHECK-NOT: tensor.pad
CHECK: memref.alloc({{.*}}) {{.*}} : memref<2x?xf32, #gpu.address_space<workgroup>>
CHECK-DAG: gpu.thread_id x
CHECK-DAG: gpu.thread_id y
CHECK: arith.cmpi sgt, {{.*}} : vector<4xi64>
CHECK: scf.for {{.*}} -> (vector<4xf32>)
CHECK: vector.transfer_read {{.*}}#hal.descriptor_type<storage_buffer>>, vector<4xf16>
CHECK: arith.extf {{.*}} to vector<4x1xf32>
CHECK: scf.yield {{.*}} : vector<4xf32>
CHECK: gpu.barrier
CHECK: scf.for
CHECK: vector.transfer_read {{.*}}#gpu.address_space<workgroup>>, vector<4xf32>
CHECK: vector.transfer_write {{.*}}#hal.descriptor_type<storage_buffer>>
CHECK-NOT: memref.alloc
CHECK-NOT: memref.copy
CHECK: return
""",
        tmp_path,
    )


INTEGER_COMBINERS = {
    "maximum": (np.max, "-2147483648"),
    "minimum": (np.min, "2147483647"),
    "multiply": (np.prod, "1"),
}


@pytest.mark.parametrize("op", list(INTEGER_COMBINERS))
@pytest.mark.parametrize("dtype", ["i32", "i16"])
def test_integer_combiners(op, dtype):
    """Integer max, min and product down the columns (lax_reduce_i* in the
    corpus): the column kernel's partial accumulators start at the
    combiner's identity; the result is exact (products wrap as numpy's)."""
    np_type = {"i32": np.int32, "i16": np.int16}[dtype]
    reduce_fn, init = INTEGER_COMBINERS[op]
    if dtype == "i16":
        init = {"maximum": "-32768", "minimum": "32767", "multiply": "1"}[op]
    shape, out = (96, 40), f"tensor<40x{dtype}>"
    text = f"""func.func @main(%x: tensor<96x40x{dtype}>) -> {out} {{
  %i = stablehlo.constant dense<{init}> : tensor<{dtype}>
  %r = stablehlo.reduce(%x init: %i) applies stablehlo.{op} across dimensions = [0] : (tensor<96x40x{dtype}>, tensor<{dtype}>) -> {out}
  return %r : {out}
}}"""
    module = compile_column(text)
    rng = np.random.default_rng(0)
    low, high = (-3, 4) if op == "multiply" else (-100, 100)
    x = rng.integers(low, high, shape).astype(np_type)
    np.testing.assert_array_equal(module.main(x), reduce_fn(x, axis=0).astype(np_type))


COLUMN_SOFTMAX = """func.func @main(%x: tensor<128x33xf32>) -> tensor<128x33xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [0]
    : (tensor<128x33xf32>, tensor<f32>) -> tensor<33xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [1] : (tensor<33xf32>) -> tensor<128x33xf32>
  %d = stablehlo.subtract %x, %mb : tensor<128x33xf32>
  %e = stablehlo.exponential %d : tensor<128x33xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [0]
    : (tensor<128x33xf32>, tensor<f32>) -> tensor<33xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [1] : (tensor<33xf32>) -> tensor<128x33xf32>
  %y = stablehlo.divide %e, %sb : tensor<128x33xf32>
  return %y : tensor<128x33xf32>
}
"""


def test_a_column_softmax_is_cut_into_kernels_it_has():
    """jax.nn.softmax(x, axis=0): chained reductions over the outer dim,
    which the softmax kernel refuses. Left to IREE's formation it was wrong
    on lavapipe (in plain iree-compile too); the planner cuts it into max,
    sum(exp(x - max)) and exp(x - max) / sum, each on a tilefuse kernel:
    exp(x - max) is computed again by the sum and the division
    (fusion/recompute.py), not stored by a loop dispatch of its own."""
    result = tilefuse.compile_program(COLUMN_SOFTMAX, "vulkan")
    strategies = [(r.strategy, r.status) for r in result.reports]
    assert strategies == [
        ("column_reduction", "applied"),
        ("column_reduction", "applied"),
        ("loop", "applied"),
    ], [r.line() for r in result.reports]
    assert [n for n in result.fusion.log if "computed again" in n], result.fusion.log
    assert not [n for n in result.notes if "FALLBACK" in n], result.notes
    x = np.random.default_rng(0).standard_normal((128, 33)).astype(np.float32) * 4
    e = np.exp(x - x.max(0))
    got = CompiledModule(result.vmfb, "vulkan", result.reports).main(x)
    np.testing.assert_allclose(got, e / e.sum(0), rtol=1e-5, atol=1e-7)


def _epilogue_program(shape, dims, dtype, epilogue):
    """A sum (max for "exp of max") of x over `dims`, f16 summed in f32, then
    the elementwise epilogue: "mean" (/ the count), "bias sqrt"
    (sqrt(sum + |b|) of squares), "exp of max", "mean to f16"."""
    kept = [n for i, n in enumerate(shape) if i not in dims]
    t_in, t_acc = f"tensor<{'x'.join(map(str, shape))}x{dtype}>", "f32"
    x_acc = f"tensor<{'x'.join(map(str, shape))}xf32>"
    r = f"tensor<{'x'.join(map(str, kept))}xf32>"
    count = math.prod(shape[d] for d in dims)
    args, lines = [f"%x: {t_in}"], []
    x = "%x"
    if dtype != "f32":
        lines.append(f"%w = stablehlo.convert %x : ({t_in}) -> {x_acc}")
        x = "%w"
    if epilogue == "bias sqrt":
        lines.append(f"%q = stablehlo.multiply {x}, {x} : {x_acc}")
        x = "%q"
    combiner, init = ("maximum", "0xFF800000") if epilogue == "exp of max" else ("add", "0.0")
    lines += [
        f"%c = stablehlo.constant dense<{init}> : tensor<{t_acc}>",
        (
            f"%s = stablehlo.reduce({x} init: %c) applies stablehlo.{combiner} across "
            f"dimensions = {list(dims)} : ({x_acc}, tensor<f32>) -> {r}"
        ),
    ]
    out, result = "%y", r
    if epilogue in ("mean", "mean to f16"):
        lines += [
            f"%n = stablehlo.constant dense<{float(count)}> : {r}",
            f"%y = stablehlo.divide %s, %n : {r}",
        ]
        if epilogue == "mean to f16":
            result = r.replace("f32", "f16")
            lines.append(f"%h = stablehlo.convert %y : ({r}) -> {result}")
            out = "%h"
    elif epilogue == "bias sqrt":
        args.append(f"%b: {r}")
        lines += [
            f"%ab = stablehlo.abs %b : {r}",
            f"%a = stablehlo.add %s, %ab : {r}",
            f"%y = stablehlo.sqrt %a : {r}",
        ]
    else:
        lines.append(f"%y = stablehlo.exponential %s : {r}")
    body = "\n".join(f"  {line}" for line in lines)
    return (
        f"func.func @main({', '.join(args)}) -> {result} {{\n{body}\n  return {out} : {result}\n}}"
    )


def _epilogue_reference(x, b, dims, epilogue):
    x = x.astype(np.float64)
    if epilogue == "exp of max":
        return np.exp(x.max(axis=dims))
    if epilogue == "bias sqrt":
        return np.sqrt((x * x).sum(axis=dims) + np.abs(b.astype(np.float64)))
    return x.mean(axis=dims)


EPILOGUES = [
    ((1000, 512), (0,), "f32", "mean"),  # batch norm's batch mean
    ((4, 300, 256), (1,), "f32", "mean"),  # a batch loop
    ((777, 1000), (0,), "f32", "bias sqrt"),  # 1000 columns: a 200-column tile divides them
    ((256, 96), (0,), "f16", "mean to f16"),
    ((5000, 3), (0,), "f32", "exp of max"),  # row chunks on thread x (lavapipe)
    ((4, 7, 7, 256), (1, 2), "f32", "mean"),  # global average pooling, NHWC (collapse.py)
    ((4, 24, 32, 40), (2,), "f32", "mean"),  # batch dims merged, the epilogue with them
    ((2, 16, 4, 8), (1,), "f32", "bias sqrt"),  # kept dims merged, and the bias's view
    ((32, 16, 24), (0,), "f32", "mean"),  # two kept dims IREE leaves apart: collapse.py merges
]


@pytest.mark.parametrize("shape,dims,dtype,epilogue", EPILOGUES)
def test_an_elementwise_epilogue_runs_in_the_column_kernel(shape, dims, dtype, epilogue):
    """The root is the epilogue of the reduction (a mean's division, a
    norm's sqrt): the kernel combines the partials into registers and
    applies it there, one store. Tolerance against numpy in float64: 1e-6
    of the largest output for f32, 1e-3 for an f16 result (one rounding)."""
    result = tilefuse.compile_program(_epilogue_program(shape, dims, dtype, epilogue), "vulkan")
    assert not [n for n in result.notes if "internal error" in n], result.notes
    (report,) = result.reports
    assert (report.strategy, report.status) == ("column_reduction", "applied"), report.line()
    assert report.params.endswith("epilogue") and "then its elementwise epilogue" in report.reason
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(NUMPY[dtype])
    kept = [n for i, n in enumerate(shape) if i not in dims]
    b = rng.standard_normal(kept).astype(np.float32)
    args = [x, b] if epilogue == "bias sqrt" else [x]
    got = CompiledModule(result.vmfb, "vulkan").main(*args).astype(np.float64)
    want = _epilogue_reference(x, b, dims, epilogue)
    tolerance = 1e-3 if epilogue == "mean to f16" else 1e-6
    assert np.max(np.abs(got - want)) <= tolerance * np.max(np.abs(want))


@pytest.mark.parametrize("target", ["cuda", "cuda-sm90"])
def test_epilogue_kernels_assemble_without_spills(target):
    for shape, dims, dtype, epilogue in EPILOGUES[2:4]:
        result = tilefuse.compile_program(_epilogue_program(shape, dims, dtype, epilogue), target)
        assert all(r.status == "applied" for r in result.reports), [
            r.line() for r in result.reports
        ]
        assert result.reports[-1].params.endswith("epilogue"), result.reports[-1].line()
        assert all(r.spill_bytes == 0 for r in result.reports)


def test_an_epilogue_needs_a_tile_that_divides_the_kept_columns():
    """997 kept columns (prime): no exact tile of a subgroup or more, so the
    column kernel leaves the dispatch to IREE's codegen and says why."""
    result = tilefuse.compile_program(_epilogue_program((64, 997), (0,), "f32", "mean"), "vulkan")
    (report,) = result.reports
    assert report.status != "applied"
    assert "997 has none of at least a subgroup" in report.reason, report.reason


@pytest.mark.parametrize("shape", [(8, 64, 48), (6, 10, 30), (4, 3, 7, 32)])
def test_a_variance_reads_its_mean_broadcast_along_the_reduced_dim(shape):
    """sum((x - m)^2) over dim 0 with m given per kept element (a
    variance's mean, broadcast along the reduced dim): collapse.py views m
    like the result, so the kept dims still merge and the column kernel takes
    it (with two kept dims it was left uncollapsed, and the kernel's build
    failed on m's mask). Within 1e-6 of the largest output, float64 numpy."""
    kept = shape[1:]
    t, r = (f"tensor<{'x'.join(map(str, s))}xf32>" for s in (shape, kept))
    dims = list(range(1, len(shape)))
    text = f"""func.func @main(%x: {t}, %m: {r}) -> {r} {{
  %b = stablehlo.broadcast_in_dim %m, dims = {dims} : ({r}) -> {t}
  %d = stablehlo.subtract %x, %b : {t}
  %q = stablehlo.multiply %d, %d : {t}
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%q init: %z) applies stablehlo.add across dimensions = [0] : ({t}, tensor<f32>) -> {r}
  return %s : {r}
}}"""
    module = tilefuse.compile(text, target="vulkan")
    (report,) = module.reports
    assert (report.strategy, report.status) == ("column_reduction", "applied"), report.line()
    assert f"{math.prod(kept)} kept x {shape[0]} reduced" in report.reason, report.line()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32) + 2
    m = rng.standard_normal(kept).astype(np.float32)
    want = ((x.astype(np.float64) - m) ** 2).sum(0)
    assert np.max(np.abs(module.main(x, m) - want)) <= 1e-6 * np.max(np.abs(want))


def test_a_loop_index_in_the_body_is_refused_and_the_result_right():
    """The second step of a column argmax: min over dim 1 of
    select(x == max, iota, big). The kernel's loop split renumbered the
    iota's linalg.index (every index came out as its column's number: 1146
    of 1200 wrong); the kernel now refuses such a dispatch, and IREE's codegen
    gets it right."""
    xs, bs = "tensor<50x7x24xi32>", "tensor<50x24xi32>"
    text = f"""func.func @main(%x: {xs}, %b: {bs}) -> {bs} {{
  %big = stablehlo.constant dense<2147483647> : tensor<i32>
  %none = stablehlo.constant dense<2147483647> : {xs}
  %iota = stablehlo.iota dim = 1 : {xs}
  %best = stablehlo.broadcast_in_dim %b, dims = [0, 2] : ({bs}) -> {xs}
  %is = stablehlo.compare EQ, %x, %best, SIGNED : ({xs}, {xs}) -> tensor<50x7x24xi1>
  %c = stablehlo.select %is, %iota, %none : tensor<50x7x24xi1>, {xs}
  %i = stablehlo.reduce(%c init: %big) applies stablehlo.minimum across dimensions = [1] : ({xs}, tensor<i32>) -> {bs}
  return %i : {bs}
}}"""
    result = tilefuse.compile_program(text, "vulkan")
    (report,) = result.reports
    assert report.strategy is None and "reads a loop index" in report.reason, report.line()
    x = np.random.default_rng(0).integers(-4, 5, (50, 7, 24)).astype(np.int32)
    got = CompiledModule(result.vmfb, "vulkan").main(x, x.max(1))
    np.testing.assert_array_equal(got, np.argmax(x, 1))
