"""The row-reduction strategy against numpy on Vulkan (lavapipe), its IR, and CUDA.

Every numerics case asserts that the dispatch ran `row_reduction` (not IREE's
default codegen). Programs, inputs and the error bound (relative error
1e-6 + 2e-7 * sqrt(n) against a float64 numpy reduction) are in
tests/rowcases.py, shared with tests/test_row_warp.py. The cases run on
ROW_KERNEL_VULKAN: lavapipe with float max/min left as float reductions and
without the one-subgroup row kernel, so that they exercise the row kernel
itself.
"""

import shutil

import numpy as np
import pytest
import tilefuse
from conftest import REDUCE_OPS, cpu_hypothesis
from hypothesis import given
from hypothesis import strategies as st
from iree.compiler import ir
from rowcases import ROW_KERNEL_VULKAN, check_reduction, reduction_inputs, row_reduce
from support import filecheck


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("shape", [(64, 1000), (16, 256), (64, 33)], ids=str)
def test_nan_propagates_through_min_max(shape, op):
    """StableHLO's maximum/minimum propagate NaN: a row holding one (first,
    middle, last element) reduces to NaN, the other rows to their max/min.
    A lane's vector.reduction of V > 1 elements lowers to GL.FMax/FMin on
    SPIR-V, which drops NaN, so the chooser takes V = 1 for these."""
    module = tilefuse.compile(row_reduce(shape, "f32", op), target=ROW_KERNEL_VULKAN)
    assert [(r.strategy, r.status) for r in module.reports] == [("row_reduction", "applied")]
    assert "vector=1 " in module.reports[0].params, module.reports[0].line()
    x = reduction_inputs(shape, "f32", op)
    n = shape[-1]
    x[1, 0] = x[2, n // 2] = x[5, n - 1] = np.nan
    ref = REDUCE_OPS[op][2](x, axis=1)
    out = module.main(x)
    assert np.array_equal(np.isnan(out), np.isnan(ref)), (
        np.isnan(out).nonzero(),
        np.isnan(ref).nonzero(),
    )
    np.testing.assert_array_equal(out[~np.isnan(ref)], ref[~np.isnan(ref)])


# Rows of 7 to 70000 (odd, prime, the 50257 vocabulary, one under and over
# a chunk), rows 1 to 4096, ranks 2-4.
CASES = [
    ((4096, 1000), "f32", "add"),
    ((256, 1024), "f32", "add"),
    ((1, 70000), "f32", "add"),
    ((3, 50257), "f32", "max"),
    ((33, 7), "f32", "min"),
    ((5, 255), "f32", "mul"),
    ((6, 257), "f16", "add"),
    ((9, 1000), "bf16", "max"),
    ((4, 6, 33), "f32", "add"),
    ((2, 3, 5, 129), "f16", "min"),
    # T*V divides the row (no tail), with the convert fused into the chunk
    # loop; a rank-3 one; a row just over one chunk.
    ((8, 2048), "f16", "add"),
    ((3, 4, 256), "bf16", "max"),
    ((5, 33), "f32", "mul"),
]


@pytest.mark.parametrize("shape,dtype,op", CASES, ids=[f"{s}-{t}-{o}" for s, t, o in CASES])
def test_row_reduction_vulkan(shape, dtype, op):
    check_reduction(shape, dtype, op)


@cpu_hypothesis(6)
@given(
    rows=st.integers(1, 4096),
    # n = 1 reduces nothing: a reshape before planning (hlo/unit_reduces.py).
    n=st.one_of(st.integers(2, 2048), st.integers(2049, 70000)),
    dtype=st.sampled_from(["f32", "f16", "bf16"]),
    op=st.sampled_from(sorted(REDUCE_OPS)),
)
def test_row_reduction_hypothesis(rows, n, dtype, op):
    # Keep each case to at most ~4M elements: the suite runs on a CPU.
    rows = max(1, min(rows, (1 << 22) // n))
    check_reduction((rows, n), dtype, op)


def kernel_of(shape, tmp_path):
    """The finished kernel (printed by the strategy) and the dispatch's report."""
    dump = tmp_path / "dump"
    result = tilefuse.compile_program(
        row_reduce(shape, "f32", "add"), ROW_KERNEL_VULKAN, dump_dir=dump
    )
    (report,) = result.reports
    assert (report.strategy, report.status) == ("row_reduction", "applied"), report.line()
    (kernel,) = tilefuse.verify.printed_kernels((dump / "phase2.log").read_text()).values()
    return kernel, report


def barriers_in_loops(kernel: str) -> int:
    """gpu.barrier ops with an scf.for among their ancestors."""
    ctx = ir.Context()
    func = ir.Module.parse(kernel, ctx).body.operations[0].operation

    def count(op, in_loop):
        found = int(in_loop and op.name == "gpu.barrier")
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    found += count(inner.operation, in_loop or op.name == "scf.for")
        return found

    return count(func, False)


def only_workgroup_allocations(kernel: str) -> bool:
    allocs = [line for line in kernel.splitlines() if "memref.alloc" in line]
    return bool(allocs) and all("#gpu.address_space<workgroup>" in line for line in allocs)


def test_ir_ragged_row(tmp_path):
    """Rows of 1000 on lavapipe: one 8-lane subgroup, 31 chunks of 8 x 4 and a
    tail of 8. Each thread loops over the chunks reading 4-wide vectors of the
    input in place, accumulating in registers, with no barrier in the loop;
    the tail goes into a second accumulator; then subgroup shuffles, with no
    barrier anywhere. Nothing is allocated but workgroup memory (no padded
    copy of the input). 63 rows: odd, so one row per workgroup."""
    kernel, report = kernel_of((63, 1000), tmp_path)
    assert "ragged" in report.params and "31 chunks of 32, tail of 8" in report.reason
    filecheck(
        kernel,
        """
CHECK: func.func @main_dispatch_0
CHECK-SAME: workgroup_size = [8, 1, 1] subgroup_size = 8
CHECK-NOT: memref.alloc() {{.*}}memref<{{.*}}x1000xf32
CHECK: memref.alloc() {{.*}} : memref<1x32xf32, #gpu.address_space<workgroup>>
CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<4xf32>)
CHECK-NOT: gpu.barrier
CHECK: vector.transfer_read {{.*}}#hal.descriptor_type<storage_buffer>>, vector<4xf32>
CHECK-NEXT: arith.addf {{.*}} : vector<4xf32>
CHECK-NEXT: scf.yield
CHECK: scf.if
CHECK: vector.transfer_read {{.*}}#hal.descriptor_type<storage_buffer>>, vector<4xf32>
CHECK: vector.reduction <add>
CHECK: gpu.shuffle xor
CHECK-NOT: gpu.warp_execute_on_lane_0
CHECK: return
""",
        tmp_path,
    )
    assert barriers_in_loops(kernel) == 0
    # One subgroup per row: every thread reads back only its own partials,
    # so the kernel needs no barrier at all.
    assert "gpu.barrier" not in kernel
    assert only_workgroup_allocations(kernel)


def test_ir_divisible_row_two_subgroups(tmp_path):
    """Rows of 4096: 16 threads (two subgroups), 64 chunks of 16 x 4 and no
    tail. The subgroups combine through workgroup memory after a barrier,
    the kernel's only one: none in the chunk loop, none before the combine
    (each lane reads back its own partials)."""
    kernel, report = kernel_of((32, 4096), tmp_path)
    assert "ragged" not in report.params and "64 chunks of 64" in report.reason
    filecheck(
        kernel,
        """
CHECK: func.func @main_dispatch_0
CHECK-SAME: workgroup_size = [16, 1, 1] subgroup_size = 8
CHECK: memref.alloc() {{.*}} : memref<1x64xf32, #gpu.address_space<workgroup>>
CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<4xf32>)
CHECK: vector.transfer_read {{.*}}#hal.descriptor_type<storage_buffer>>, vector<4xf32>
CHECK-NOT: gpu.barrier
CHECK: gpu.shuffle xor
CHECK: memref.alloc() : memref<2xf32, #gpu.address_space<workgroup>>
CHECK: gpu.barrier
CHECK: gpu.shuffle xor
CHECK: return
""",
        tmp_path,
    )
    assert kernel.count("gpu.barrier") == 1
    assert kernel.count("scf.for") == 1 and barriers_in_loops(kernel) == 0
    # The chunk loop's read is the only read of the input: no tail.
    assert kernel.count("#hal.descriptor_type<storage_buffer>>, vector<4xf32>") == 1
    assert only_workgroup_allocations(kernel)


def test_short_rows_are_all_tail(tmp_path):
    """Rows shorter than one subgroup's chunk have no chunk loop at all."""
    kernel, report = kernel_of((16, 5), tmp_path)
    assert "no full chunk" in report.reason
    assert "scf.for" not in kernel and "gpu.shuffle" in kernel


# Rows that take one subgroup each share a workgroup, R rows on thread y
# (R*T up to lavapipe's packed_row_threads, 1024; R dividing the innermost
# row count; the R rows' accumulators within 32 KiB of workgroup memory):
# rows of 1000 f32 -> 128 rows (two 32-float accumulators each: 32768 bytes,
# exactly the limit); 64 rows of 33 f16 -> 64; a rank-3 [4, 6, 33] -> 2 (the
# largest power of two dividing 6); 12 rows of 5 -> 4.
MULTI_ROW = [
    ((4096, 1000), "f32", "add", 128),
    ((64, 33), "f16", "add", 64),
    ((4, 6, 33), "f32", "max", 2),
    ((12, 5), "bf16", "min", 4),
    ((16, 256), "f32", "mul", 16),
]


@pytest.mark.parametrize(
    "shape,dtype,op,rows", MULTI_ROW, ids=[f"{s}-{t}-{o}" for s, t, o, _ in MULTI_ROW]
)
def test_several_rows_per_workgroup(shape, dtype, op, rows):
    check_reduction(shape, dtype, op, params=f"wg=[8, {rows}, 1]")


TWO_INPUTS = [
    ("multiply", lambda x, y: x * y),  # IREE fuses it into the root: two loads
    ("exponential-add", lambda x, y: np.exp(x) + y),
]


@pytest.mark.parametrize("body,ref", TWO_INPUTS, ids=[b for b, _ in TWO_INPUTS])
def test_root_with_two_inputs(body, ref):
    """A root reading two inputs: the script fused its producers through a
    `match` that takes one payload op, and phase 2 failed ("requires exactly
    one target handle") on sum(x * y) over rows."""
    t, r = "tensor<64x1000xf32>", "tensor<64xf32>"
    ops = (
        [f"%a = stablehlo.multiply %x, %y : {t}"]
        if body == "multiply"
        else [f"%e = stablehlo.exponential %x : {t}", f"%a = stablehlo.add %e, %y : {t}"]
    )
    text = "\n".join(
        [
            f"func.func @main(%x: {t}, %y: {t}) -> {r} {{",
            "  %zero = stablehlo.constant dense<0.0> : tensor<f32>",
            *(f"  {op}" for op in ops),
            (
                "  %s = stablehlo.reduce(%a init: %zero) applies stablehlo.add across dimensions = [1]"
                f" : ({t}, tensor<f32>) -> {r}"
            ),
            f"  return %s : {r}",
            "}",
        ]
    )
    module = tilefuse.compile(text, target=ROW_KERNEL_VULKAN)
    assert [(r.strategy, r.status) for r in module.reports] == [("row_reduction", "applied")]
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((64, 1000)).astype(np.float32) for _ in range(2))
    want = ref(x.astype(np.float64), y.astype(np.float64)).sum(-1)
    np.testing.assert_allclose(module.main(x, y), want, rtol=1e-5, atol=1e-4)


def test_ir_several_rows_per_workgroup(tmp_path):
    """Rows of 1000 on lavapipe: 64 rows per [8, 64, 1] workgroup, each row on
    its own thread y with [64, 32] accumulators; every row's combine is an
    8-lane shuffle reduction (no warp op left) written by lane 0. No barrier:
    a row's subgroup shares nothing with the others."""
    kernel, report = kernel_of((64, 1000), tmp_path)
    assert "64 rows per workgroup" in report.reason
    filecheck(
        kernel,
        """
CHECK: func.func @main_dispatch_0
CHECK-SAME: workgroup_size = [8, 64, 1] subgroup_size = 8
CHECK: memref.alloc() {{.*}} : memref<64x32xf32, #gpu.address_space<workgroup>>
CHECK: gpu.thread_id y
CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<4xf32>)
CHECK: vector.transfer_read {{.*}}#hal.descriptor_type<storage_buffer>>, vector<4xf32>
CHECK: gpu.shuffle xor
CHECK-NOT: gpu.warp_execute_on_lane_0
CHECK: arith.cmpi eq, %thread_id_x
CHECK: return
""",
        tmp_path,
    )
    assert "gpu.barrier" not in kernel
    assert only_workgroup_allocations(kernel)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
@pytest.mark.parametrize("target,arch", [("cuda", "sm_80"), ("cuda-sm90", "sm_90")])
def test_cuda_assembles_without_spills(target, arch, tmp_path):
    result = tilefuse.compile_program(
        row_reduce((128, 50257), "f16", "add"), target, dump_dir=tmp_path
    )
    (report,) = result.reports
    assert (report.strategy, report.status) == ("row_reduction", "applied")
    ptx = list((tmp_path / "binaries").glob("*.ptx"))
    assert ptx and f".target {arch}" in ptx[0].read_text()
    assert "shfl.sync.bfly" in ptx[0].read_text()
    assert report.registers and report.spill_bytes == 0


@pytest.mark.parametrize("rows,n", [(8, 5000), (64, 1000), (16, 37)])
def test_a_loop_index_in_the_body_takes_the_softmax_kernel_and_the_result_right(rows, n):
    """sum(where(x > 0, iota, 0)) over rows: the row kernel's chunking of the
    reduced dim renumbered the iota's linalg.index (8x5000: every row
    wrong), the row-warp kernel failed to build; both refuse it, and the
    softmax kernel, which reads the index right (argmax's iota:
    test_argminmax.py), takes it."""
    xs, i32, ys = f"tensor<{rows}x{n}xf32>", f"tensor<{rows}x{n}xi32>", f"tensor<{rows}xi32>"
    text = f"""func.func @main(%x: {xs}) -> {ys} {{
  %z = stablehlo.constant dense<0.0> : {xs}
  %zi = stablehlo.constant dense<0> : {i32}
  %iota = stablehlo.iota dim = 1 : {i32}
  %p = stablehlo.compare GT, %x, %z : ({xs}, {xs}) -> tensor<{rows}x{n}xi1>
  %s = stablehlo.select %p, %iota, %zi : tensor<{rows}x{n}xi1>, {i32}
  %c = stablehlo.constant dense<0> : tensor<i32>
  %r = stablehlo.reduce(%s init: %c) applies stablehlo.add across dimensions = [1] : ({i32}, tensor<i32>) -> {ys}
  return %r : {ys}
}}"""
    module = tilefuse.compile(text, target="vulkan")
    (report,) = module.reports
    assert (report.strategy, report.status) == ("softmax", "applied"), report.line()
    x = np.random.default_rng(0).standard_normal((rows, n)).astype(np.float32)
    np.testing.assert_array_equal(module.main(x), np.where(x > 0, np.arange(n), 0).sum(1))
