"""The one-subgroup-per-row kernel (strategy "row_warp") against numpy on
Vulkan (lavapipe), its IR, and when it applies.

Normalizations: the programs, inputs and error bounds of tests/rowcases.py
that tests/test_softmax.py uses too (softmax, RMSNorm, layernorm over
[rows, n]; f32 outputs within 2e-6 + 2e-7 * sqrt(n) of a float64 reference,
f16 ones within one f16 rounding more); on lavapipe (8-lane subgroups,
row_register_elements = 128) rows whose length is a multiple of 8, up to
1024. Lone row reductions: the programs, inputs and bound of
tests/rowcases.py that tests/test_row_reduction.py uses too (relative error
1e-6 + 2e-7 * sqrt(n)); rows that are a multiple of 8 with at most 64
chunks of 32 (2048 f32). Every numerics case asserts the kernel ran.
"""

import dataclasses

import numpy as np
import pytest
import tilefuse
from conftest import cpu_hypothesis
from hypothesis import given
from hypothesis import strategies as st
from iree.compiler import ir
from rowcases import check_normalization, check_reduction, inputs, program, reference, row_reduce
from support import filecheck, kernel_ops
from tilefuse.runtime import CompiledModule
from tilefuse.targets import load_target


def check_case(kind, rows, n, dtype="f32", target="vulkan", params=""):
    return check_normalization(kind, rows, n, dtype, target, params, strategy="row_warp")


# Rows with a tail after the last full chunk (1000 = 31 x 32 + 8; 1016 = 31 x
# 32 + 24, 3 per lane) and without (768, 1024), one chunk (32), rows shorter
# than a chunk (8: one element per lane, 24: 3 x 8 with V = 1... halved to
# fit), one row, odd row counts (no packing), f16.
CASES = [
    ("softmax", 256, 1000, "f32"),
    ("softmax", 3, 1016, "f32"),
    ("softmax", 1, 8, "f32"),
    ("softmax", 7, 24, "f32"),
    ("softmax", 64, 32, "f16"),
    ("rmsnorm", 128, 1024, "f32"),
    ("rmsnorm", 5, 40, "f32"),
    ("rmsnorm", 64, 768, "f16"),
    ("layernorm", 128, 768, "f32"),
    ("layernorm", 100, 1000, "f32"),
    ("layernorm", 6, 136, "f16"),
]


@pytest.mark.parametrize("kind,rows,n,dtype", CASES, ids=["-".join(map(str, c)) for c in CASES])
def test_row_warp_vulkan(kind, rows, n, dtype):
    check_case(kind, rows, n, dtype)


@cpu_hypothesis(8)
@given(
    kind=st.sampled_from(["softmax", "rmsnorm", "layernorm"]),
    rows=st.integers(1, 4096),
    lanes=st.integers(1, 128),  # n = 8 * lanes: 8..1024
    dtype=st.sampled_from(["f32", "f16"]),
)
def test_row_warp_hypothesis(kind, rows, lanes, dtype):
    n = 8 * lanes
    check_case(kind, max(1, min(rows, (1 << 20) // n)), n, dtype)


def test_rows_share_workgroups_as_far_as_they_divide():
    """[8, R, 1] workgroups, R the largest power of two up to lavapipe's
    packed_row_threads / 8 = 128 dividing the row count: 256 rows -> 128,
    100 -> 4, 7 -> 1."""
    for rows, per_wg in [(256, 128), (100, 4), (7, 1)]:
        check_case("softmax", rows, 64, params=f"wg=[8, {per_wg}, 1]")


def test_more_rows_than_a_grid_has_workgroups_are_packed():
    """lavapipe launches at most 65535 workgroups along x: 300000 softmax
    rows are too many for the chunked kernel's one row per workgroup, and
    the planner used to leave the group to IREE's formation; packed 32 per
    workgroup they are 9375 (softmax.group_refusal asks what row_warp packs).
    300001 rows pack one per workgroup and stay IREE's, with the reason."""
    check_case("softmax", 300000, 8, params="grid=[9375, 1, 1]")
    result = tilefuse.compile_program(program("softmax", 300001, 8), "vulkan")
    assert any("300001 rows > 65535 workgroups" in line for line in result.fusion.log)


@pytest.mark.parametrize(
    "n,why",
    [
        (1004, "rows of 1004 do not split evenly over the 8 lanes"),
        (1032, "129 elements per lane > the target's 128"),
    ],
)
def test_other_rows_take_the_chunked_kernel(n, why, tmp_path):
    """Rows that are not a multiple of the subgroup, or too long for the
    register budget, run the chunked kernel; the register kernel's planner
    says which limit refused them."""
    from tilefuse.dispatch.read import read_dispatches
    from tilefuse.strategies import row_warp

    result = tilefuse.compile_program(program("softmax", 4, n), "vulkan", dump_dir=tmp_path)
    (report,) = result.reports
    assert (report.strategy, report.status) == ("softmax", "applied"), report.line()
    (dispatch,) = read_dispatches((tmp_path / "executable_sources.mlir").read_text())
    params, reason = row_warp.plan(dispatch, load_target("vulkan"))
    assert params is None and why in reason, reason


def test_targets_without_a_register_budget_keep_the_chunked_kernel():
    off = dataclasses.replace(load_target("vulkan"), row_register_elements=0)
    result = tilefuse.compile_program(program("rmsnorm", 4, 64), off)
    assert [r.strategy for r in result.reports] == ["softmax"]


def kernel_of(kind, rows, n, tmp_path):
    dump = tmp_path / "dump"
    result = tilefuse.compile_program(program(kind, rows, n), "vulkan", dump_dir=dump)
    (report,) = result.reports
    assert (report.strategy, report.status) == ("row_warp", "applied"), report.line()
    (kernel,) = tilefuse.verify.printed_kernels((dump / "phase2.log").read_text()).values()
    return kernel, report


def _elements(ops, name, operand=None) -> int:
    """Elements per lane that the `name` ops (vector.transfer_read: results;
    else the operand at `operand`) move, over all of them."""
    total = 0
    for op in ops:
        if op.name == name:
            value = op.results[0] if operand is None else op.operands[operand]
            total += ir.VectorType(value.type).shape[0]
    return total


def test_ir_softmax_row_in_registers(tmp_path):
    """softmax 256x1000 on lavapipe: 128 rows per [8, 128, 1] workgroup, each
    row one 8-lane subgroup. 31 chunks of 8 lanes x 4 would unroll past
    MAX_UNROLLED_CHUNKS, so each lane takes 31 4-vectors in one chunk of 992
    (124 elements, contiguous) and one element of the tail. The row is read
    once; the max, then exp(x - max) and its sum, fold it in registers and end
    in xor-shuffle butterflies (two per reduction: the chunk's, then the
    tail's, whose result every lane holds); the root divides the exp values it
    already has and writes each element once. No loop, no barrier, no
    workgroup memory."""
    kernel, report = kernel_of("softmax", 256, 1000, tmp_path)
    assert "one chunk of 992 and a tail of 8 (1 per lane)" in report.reason, report.reason
    assert "vector=124 chunk=992 chunks=1 tail=8" in report.params, report.params
    filecheck(
        kernel,
        """
CHECK: func.func @main_dispatch_0
CHECK-SAME: workgroup_size = [8, 128, 1] subgroup_size = 8
CHECK-NOT: memref.alloc
CHECK-NOT: gpu.barrier
CHECK: vector.transfer_read {{.*}}#hal.descriptor_type<storage_buffer>>, vector<124xf32>
CHECK: vector.reduction <maximumf>, {{.*}} : vector<124xf32> into f32
CHECK: gpu.shuffle xor
CHECK: gpu.shuffle xor
CHECK: gpu.shuffle xor
CHECK: math.exp {{.*}} : vector<124xf32>
CHECK: vector.reduction <add>, {{.*}} : vector<124xf32> into f32
CHECK: gpu.shuffle xor
CHECK: arith.divf {{.*}} : vector<124xf32>
CHECK: vector.transfer_write {{.*}} : vector<124xf32>, {{.*}}#hal.descriptor_type<storage_buffer>>
CHECK-NOT: gpu.barrier
CHECK: return
""",
        tmp_path,
    )
    ops, _module = kernel_ops(kernel)
    names = [op.name for op in ops]
    for absent in ("memref.alloc", "gpu.barrier", "scf.for", "vector.create_mask"):
        assert absent not in names, absent
    # Two butterflies of 3 steps for each of the two reductions.
    assert names.count("gpu.shuffle") == 12
    # Each element of a lane's 125 once: read, exp'd and written.
    assert _elements(ops, "vector.transfer_read") == 125
    assert _elements(ops, "vector.transfer_write", operand=0) == 125
    assert _elements(ops, "math.exp", operand=0) == 125


def test_ir_layernorm_without_tail(tmp_path):
    """layernorm 128x768: 24 chunks of 32 would unroll past
    MAX_UNROLLED_CHUNKS, so each lane takes 3 4-vectors per chunk: 8 chunks
    of 96 and no tail, so one butterfly per reduction (mean, then variance);
    each element written once. (The row is read once per phase here, 3 x 96
    elements per lane, as it was with 24 chunks of 4-vectors: CSE does not
    merge these reads as it does softmax's.)"""
    kernel, report = kernel_of("layernorm", 128, 768, tmp_path)
    assert "8 chunks of 96 unrolled" in report.reason and "tail" not in report.reason
    ops, _module = kernel_ops(kernel)
    names = [op.name for op in ops]
    assert names.count("gpu.shuffle") == 6
    for absent in ("memref.alloc", "gpu.barrier", "scf.for"):
        assert absent not in names, absent
    assert _elements(ops, "vector.transfer_read") == 3 * 96
    assert _elements(ops, "vector.transfer_write", operand=0) == 96


def test_tail_accesses_get_their_own_binding_alias(tmp_path):
    """SPIR-V reads a binding as 4-vectors only if no access to it is
    narrower (aliases.py). The tail's one element per lane moves onto a copy
    of the binding's subspan (alignment 32 instead of 64), for the input and
    the output, and the spliced kernel is compiled again (phase 3): before
    IREE's SPIR-V conversion the row's main binding is an array of
    vector<4xf32>, the alias one of f32."""
    result = tilefuse.compile_program(
        program("softmax", 256, 1000),
        "vulkan",
        dump_dir=tmp_path,
        phase2_flags=("--mlir-print-ir-before=iree-convert-to-spirv",),
    )
    assert [r.strategy for r in result.reports] == ["row_warp"]
    spliced = (tmp_path / "executable_sources_spliced.mlir").read_text()
    filecheck(
        spliced,
        """
CHECK: hal.executable.export public @main_dispatch_0
CHECK: %[[X:.+]] = arith.constant 2 : index
CHECK: hal.return %[[X]]
CHECK: func.func @main_dispatch_0
CHECK-SAME: translation_info = #translation
CHECK-DAG: %[[IN:.+]] = hal.interface.binding.subspan {{.*}} binding(0) alignment(64)
CHECK-DAG: %[[IN_ALIAS:.+]] = hal.interface.binding.subspan {{.*}} binding(0) alignment(32)
CHECK-DAG: %[[OUT:.+]] = hal.interface.binding.subspan {{.*}} binding(1) alignment(64)
CHECK-DAG: %[[OUT_ALIAS:.+]] = hal.interface.binding.subspan {{.*}} binding(1) alignment(32)
CHECK: vector.transfer_read %[[IN]]{{.*}} vector<4xf32>
CHECK: vector.transfer_read %[[IN_ALIAS]]{{.*}} vector<1xf32>
""",
        tmp_path,
    )
    assert (
        "#translation = #iree_codegen.translation_info<pipeline = #iree_codegen.no_pipeline workgroup_size = [8, 128, 1]"
        in spliced
    )
    before_spirv = (tmp_path / "phase3.log").read_text()
    assert "memref<?xvector<4xf32>, #spirv.storage_class<StorageBuffer>>" in before_spirv
    # Numerics of the spliced build (the test above ran phase 3 too).
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    args = inputs("softmax", 256, 1000, "f32")
    assert float(np.max(np.abs(module.main(*args) - reference("softmax", args)))) < 1e-6


def test_rows_without_tail_need_no_alias(tmp_path):
    """Rows T*V divides have no narrow access: the finished kernel is spliced
    as it is, one subspan per binding, and the log says why."""
    result = tilefuse.compile_program(program("rmsnorm", 16, 1024), "vulkan", dump_dir=tmp_path)
    spliced = (tmp_path / "executable_sources_spliced.mlir").read_text()
    assert spliced.count("binding(0)") == spliced.count("binding(1)") == 1
    (line,) = [line for line in result.log if line.startswith("aliases:")]
    assert line.endswith("left as it is: no binding has accesses narrower than its widest"), line


def test_cuda_keeps_one_binding(tmp_path):
    """Only IREE's SPIR-V lowering needs the alias; CUDA compiles in two phases."""
    tilefuse.compile_program(program("layernorm", 16, 1056), "cuda", dump_dir=tmp_path)
    assert not (tmp_path / "executable_sources_spliced.mlir").exists()


# Lone row reductions.


REDUCTIONS = [
    ((4096, 1000), "f32", "add"),
    ((63, 1000), "f32", "add"),  # odd rows: one per workgroup
    ((3, 2048), "f32", "add"),  # 64 chunks
    ((128, 8), "f32", "mul"),  # one element per lane
    ((5, 40), "bf16", "add"),  # one chunk of 8 x 4 and a tail of 8
    ((64, 768), "f16", "add"),
    ((32, 1016), "bf16", "mul"),  # a tail of 3 per lane
]


@pytest.mark.parametrize(
    "shape,dtype,op", REDUCTIONS, ids=[f"{s}-{d}-{o}" for s, d, o in REDUCTIONS]
)
def test_row_reduction_on_one_subgroup(shape, dtype, op):
    check_reduction(shape, dtype, op, target="vulkan", strategy="row_warp")


@cpu_hypothesis(8)
@given(
    rows=st.integers(1, 4096),
    lanes=st.integers(1, 256),  # n = 8 * lanes: 8..2048
    dtype=st.sampled_from(["f32", "f16", "bf16"]),
    op=st.sampled_from(["add", "mul"]),
)
def test_row_reduction_on_one_subgroup_hypothesis(rows, lanes, dtype, op):
    n = 8 * lanes
    check_reduction(
        (max(1, min(rows, (1 << 21) // n)), n), dtype, op, target="vulkan", strategy="row_warp"
    )


@pytest.mark.parametrize(
    "n,why",
    [
        (1004, "rows of 1004 do not split evenly"),
        (2080, "65 chunks of 32 > 64"),
    ],
)
def test_other_reductions_take_the_row_kernel(n, why, tmp_path):
    from tilefuse.dispatch.read import read_dispatches
    from tilefuse.strategies import row_warp

    result = tilefuse.compile_program(row_reduce((4, n), "f32", "add"), "vulkan", dump_dir=tmp_path)
    assert [r.strategy for r in result.reports] == ["row_reduction"]
    (dispatch,) = read_dispatches((tmp_path / "executable_sources.mlir").read_text())
    params, reason = row_warp.plan(dispatch, load_target("vulkan"))
    assert params is None and why in reason, reason


def test_ir_row_sum_on_one_subgroup(tmp_path):
    """Row sums 4096x1000 on lavapipe: 128 rows per [8, 128, 1] workgroup;
    each lane loops over the 31 chunks with its 4 partials in registers (the
    loop carries a vector, no buffer), adds its element of the tail after two
    butterflies of xor shuffles, and lane 0 writes the row's sum. Nothing is
    allocated, no barrier."""
    dump = tmp_path / "dump"
    result = tilefuse.compile_program(
        row_reduce((4096, 1000), "f32", "add"), "vulkan", dump_dir=dump
    )
    (report,) = result.reports
    assert report.strategy == "row_warp" and "wg=[8, 128, 1]" in report.params, report.line()
    (kernel,) = tilefuse.verify.printed_kernels((dump / "phase2.log").read_text()).values()
    filecheck(
        kernel,
        """
CHECK: func.func @main_dispatch_0
CHECK-SAME: workgroup_size = [8, 128, 1] subgroup_size = 8
CHECK-NOT: memref.alloc
CHECK: scf.for {{.*}} to %c992 step %c32 iter_args({{.*}}) -> (vector<4xf32>)
CHECK-NEXT: affine.apply
CHECK-NEXT: vector.transfer_read {{.*}}#hal.descriptor_type<storage_buffer>>, vector<4xf32>
CHECK-NEXT: arith.addf {{.*}} : vector<4xf32>
CHECK-NEXT: scf.yield
CHECK: vector.transfer_read {{.*}} vector<1xf32>
CHECK: vector.reduction <add>
CHECK-COUNT-6: gpu.shuffle xor
CHECK: scf.if
CHECK-NEXT: vector.transfer_write
CHECK-NOT: gpu.barrier
CHECK: return
""",
        tmp_path,
    )


def test_push_constant_scalars_are_no_work(tmp_path):
    """Llama's q, k and v projections are one executable reading its weight
    at an offset IREE passes as a push constant (index_castui,
    util.assume.int): uniform scalars, not ops a kernel must take. (GPT-2's
    layer norms had such offsets and a flag computed from constants, an i32
    truncated to i1, until hlo/fold_scalars.py and hlo/dot_layouts.py changed
    its buffers.) Every dispatch gets a tilefuse kernel and the block runs
    right (tests/test_corpus.py checks its numerics)."""
    from corpus.load import load
    from tilefuse.dispatch.read import read_dispatches

    path, _, _, _ = load("llama_block_f32")
    result = tilefuse.compile_program(path.read_text(), "vulkan", dump_dir=tmp_path)
    sources = (tmp_path / "executable_sources.mlir").read_text()
    assert "hal.interface.constant.load" in sources  # the case is still there
    for d in read_dispatches(sources):
        assert not {"arith.index_castui", "util.assume.int", "arith.trunci"} & set(d.ops), d.ops
    assert all(r.status == "applied" for r in result.reports), [r.line() for r in result.reports]


def test_boolean_rows_are_refused_up_front():
    """any() of each row of a comparison: a reduction over i1 fails to build
    in the row kernels, so they refuse it rather than fail (bool_ops_bool in
    the corpus), and the result is right."""
    text = """func.func @main(%x: tensor<32x64xf32>) -> tensor<32xi1> {
  %z = stablehlo.constant dense<0.0> : tensor<32x64xf32>
  %c = stablehlo.compare GT, %x, %z : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xi1>
  %f = stablehlo.constant dense<false> : tensor<i1>
  %r = stablehlo.reduce(%c init: %f) applies stablehlo.or across dimensions = [1] : (tensor<32x64xi1>, tensor<i1>) -> tensor<32xi1>
  return %r : tensor<32xi1>
}"""
    module = tilefuse.compile(text, target="vulkan")
    assert all(r.status != "failed" for r in module.reports), [r.line() for r in module.reports]
    x = np.random.default_rng(0).standard_normal((32, 64)).astype(np.float32) - 1.5
    np.testing.assert_array_equal(module.main(x), (x > 0).any(axis=1))
