"""Argmax/argmin: the variadic stablehlo.reduce JAX emits for
`jnp.argmax(x, axis=1)`, rewritten by hlo/argminmax.py into two row
reductions that the softmax kernel runs in one dispatch.

Numerics on Vulkan (lavapipe) must equal numpy's argmax/argmin exactly (an
index is right or wrong): first index of the max (min) on ties, first NaN
when a row has one, +0 and -0 equal. Inputs are small integers (many ties)
with NaN, signed zeros, infinities and the integer extremes sprinkled in.
Every numerics case asserts the rewrite happened and the kernel ran.
"""

import dataclasses
import math

import ml_dtypes
import numpy as np
import pytest
import tilefuse
from conftest import cpu_hypothesis, tensor
from hypothesis import given
from hypothesis import strategies as st
from iree.compiler import ir
from support import filecheck, kernel_ops
from tilefuse.hlo import argminmax
from tilefuse.runtime import CompiledModule
from tilefuse.targets import load_target

NUMPY = {
    "f32": np.float32,
    "f16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "i32": np.int32,
    "i8": np.int8,
}
# (argmax init, argmin init): the identities JAX uses.
INITS = {
    "f32": ("0xFF800000", "0x7F800000"),
    "f16": ("0xFC00", "0x7C00"),
    "bf16": ("0xFF80", "0x7F80"),
    "i32": ("-2147483648", "2147483647"),
    "i8": ("-128", "127"),
}


def jax_body(kind, dtype, tie="LT", nan=True, compare_type=None):
    """The reducer JAX writes (lax._compute_argminmax): pick the op's value
    if it is greater (less) or NaN, its index also if the values are equal
    and its index is smaller. `tie`, `nan`, `compare_type` make variants."""
    t, i = tensor([], dtype), tensor([], "i32")
    b = tensor([], "i1")
    floats = dtype not in ("i32", "i8")
    ctype = compare_type or ("FLOAT" if floats else "SIGNED")
    direction = "GT" if kind == "argmax" else "LT"
    lines = [f"%better = stablehlo.compare {direction}, %a, %b, {ctype} : ({t}, {t}) -> {b}"]
    if floats and nan:
        lines += [
            f"%isnan = stablehlo.compare NE, %a, %a, {ctype} : ({t}, {t}) -> {b}",
            f"%pick = stablehlo.or %better, %isnan : {b}",
        ]
    else:
        lines.append(f"%pick = stablehlo.or %better, %better : {b}")
    lines += [
        f"%eq = stablehlo.compare EQ, %a, %b, {ctype} : ({t}, {t}) -> {b}",
        f"%first = stablehlo.compare {tie}, %ai, %bi, SIGNED : ({i}, {i}) -> {b}",
        f"%tie = stablehlo.and %eq, %first : {b}",
        f"%picki = stablehlo.or %pick, %tie : {b}",
        f"%v = stablehlo.select %pick, %a, %b : {b}, {t}",
        f"%i = stablehlo.select %picki, %ai, %bi : {b}, {i}",
        f"stablehlo.return %v, %i : {t}, {i}",
    ]
    return lines


def program(kind, rows, n, dtype="f32", body=None, return_values=False, lead=None):
    """jnp.argmax (argmin) over the innermost dim of x: [rows, n] -> [rows]
    i32, or [*lead, n] -> lead when `lead` is given."""
    lead = [rows] if lead is None else lead
    x, idx = tensor([*lead, n], dtype), tensor([*lead, n], "i32")
    vals, out = tensor(lead, dtype), tensor(lead, "i32")
    axis = len(lead)
    init = INITS[dtype][kind == "argmin"]
    results = f"{vals}, {out}" if return_values else out
    returned = "%r#0, %r#1" if return_values else "%r#1"
    body = body or jax_body(kind, dtype)
    lines = [
        f"func.func @main(%x: {x}) -> ({results}) {{",
        f"  %iota = stablehlo.iota dim = {axis} : {idx}",
        f"  %init = stablehlo.constant dense<{init}> : {tensor([], dtype)}",
        f"  %zero = stablehlo.constant dense<0> : {tensor([], 'i32')}",
        f"  %r:2 = stablehlo.reduce(%x init: %init), (%iota init: %zero) across dimensions = [{axis}]",
        f"      : ({x}, {idx}, {tensor([], dtype)}, {tensor([], 'i32')}) -> ({vals}, {out})",
        (
            f"   reducer(%a: {tensor([], dtype)}, %b: {tensor([], dtype)}) "
            f"(%ai: {tensor([], 'i32')}, %bi: {tensor([], 'i32')}) {{"
        ),
        *[f"    {line}" for line in body],
        "  }",
        f"  return {returned} : {results}",
        "}",
    ]
    return "\n".join(lines) + "\n"


def inputs(rows, n, dtype, seed=0):
    """Small integers (ties everywhere) with the special values sprinkled in:
    for floats NaN in every 5th row, signed zeros, +-inf; for integers the
    type's extremes."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, size=(rows, n)).astype(np.float64)
    cells = rng.integers(0, n, size=(rows, 3))
    if dtype in ("i32", "i8"):
        info = np.iinfo(NUMPY[dtype])
        x[np.arange(rows), cells[:, 0]] = info.min
        x[np.arange(0, rows, 3), cells[::3, 1]] = info.max
        return x.astype(NUMPY[dtype])
    x[np.arange(0, rows, 5), cells[::5, 0]] = np.nan
    x[np.arange(0, rows, 5), cells[::5, 1]] = np.nan
    x[np.arange(1, rows, 7), cells[1::7, 2]] = np.inf
    x[np.arange(2, rows, 7), cells[2::7, 2]] = -np.inf
    if rows > 3:
        x[3] = -1.0  # the max is 0, first as -0.0
        x[3, n // 2 :] = 0.0
        x[3, n // 3] = -0.0
    if rows > 4:
        x[4] = -np.inf if rng.integers(2) else np.inf
    return x.astype(NUMPY[dtype])


def reference(kind, x):
    wide = x.astype(np.float64) if x.dtype.kind == "f" or x.dtype == NUMPY["bf16"] else x
    return (np.argmax if kind == "argmax" else np.argmin)(wide, axis=1).astype(np.int32)


def check_case(kind, rows, n, dtype="f32", target=None, params="", lead=None):
    """`lead`: x is [*lead, n] (rows = their product), as viewed by the rewrite."""
    text = program(kind, rows, n, dtype, lead=lead)
    result = tilefuse.compile_program(text, target or "vulkan")
    assert any(f"{kind} at" in line and "rewritten" in line for line in result.fusion.log)
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    assert [(r.strategy, r.status) for r in module.reports] == [("softmax", "applied")], [
        r.line() for r in module.reports
    ]
    assert params in module.reports[0].params, module.reports[0].line()
    lead = [rows] if lead is None else lead
    x = inputs(rows, n, dtype).reshape(*lead, n)
    got, want = module.main(x).reshape(rows), reference(kind, x.reshape(rows, n))
    assert got.dtype == np.int32
    bad = np.nonzero(got != want)[0]
    assert not len(bad), (
        f"{kind} {rows}x{n} {dtype}: {len(bad)} rows wrong, e.g. row {bad[0]}: "
        f"got {got[bad[0]]}, numpy {want[bad[0]]}"
    )


# Rows of 1000 (31 chunks of 8 x 4 and a peeled one of 8), shorter than a
# chunk, odd (V = 1), spanning two subgroups (4000), long (70000), every
# element type the rewrite takes.
CASES = [
    ("argmax", 256, 1000, "f32"),
    ("argmin", 256, 1000, "f32"),
    ("argmax", 3, 3, "f32"),
    ("argmax", 7, 257, "f16"),
    ("argmin", 9, 1000, "bf16"),
    ("argmin", 64, 33, "i32"),
    ("argmax", 5, 100, "i8"),
    ("argmin", 2, 4000, "f32"),
    ("argmax", 2, 70000, "f32"),
]


@pytest.mark.parametrize("kind,rows,n,dtype", CASES, ids=["-".join(map(str, c)) for c in CASES])
def test_argminmax_vulkan(kind, rows, n, dtype):
    check_case(kind, rows, n, dtype)


@pytest.mark.parametrize("lead", [[8, 64], [2, 3, 5], []], ids=["8x64", "2x3x5", "vector"])
def test_argminmax_other_ranks(lead):
    """Reduced innermost dim of rank 3, 4 and 1: the rewrite views x as rows
    (a reshape IREE folds into the load) and reshapes the indices back."""
    check_case("argmax", math.prod(lead), 257, "f32", lead=lead)


def test_argmax_packed_rows():
    """GPU-style packing (CUDA: 8 rows of 32 lanes) run on lavapipe: 16 rows
    per [8, 16, 1] workgroup."""
    target = dataclasses.replace(load_target("vulkan"), packed_synced_row_threads=128)
    check_case("argmax", 256, 1000, "f32", target=target, params="wg=[8, 16, 1]")


@cpu_hypothesis(6)
@given(
    kind=st.sampled_from(["argmax", "argmin"]),
    rows=st.integers(1, 4096),
    n=st.one_of(st.integers(2, 2048), st.integers(2049, 70000)),
    dtype=st.sampled_from(["f32", "f16", "bf16", "i32"]),
)
def test_argminmax_hypothesis(kind, rows, n, dtype):
    rows = max(1, min(rows, (1 << 21) // n))  # at most ~2M elements per case
    check_case(kind, rows, n, dtype)


def _body_block(kind, dtype, **variant):
    """The reduce body of `program` parsed, and the module keeping it alive."""
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    module = ir.Module.parse(program(kind, 2, 8, dtype, body=jax_body(kind, dtype, **variant)), ctx)
    func = module.body.operations[0].operation
    reduce = [op.operation for op in func.regions[0].blocks[0].operations][3]
    assert reduce.name == "stablehlo.reduce"
    return reduce, module


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", ["f32", "i32"])
def test_body_is_recognised_by_what_it_computes(kind, dtype):
    reduce, _module = _body_block(kind, dtype)
    assert argminmax.body_kind(reduce.regions[0].blocks[0], dtype == "f32") == kind
    assert argminmax.refusal(reduce) == (None, kind)


@pytest.mark.parametrize(
    "variant,why",
    [
        ({"tie": "GT"}, "neither argmax nor argmin"),  # last index on ties
        ({"nan": False}, "neither argmax nor argmin"),  # NaN never picked
        ({"compare_type": "TOTALORDER"}, "TOTALORDER compare"),
    ],
)
def test_other_bodies_are_not_rewritten(variant, why):
    reduce, _module = _body_block("argmax", "f32", **variant)
    reason, kind = argminmax.refusal(reduce)
    assert kind == "" and why in reason


def test_not_rewritten_is_said_and_still_right():
    """A variadic reduce the rewrite does not take (here: its max values are
    returned too) is left to IREE, the log says why, and the program still
    matches numpy."""
    result = tilefuse.compile_program(program("argmax", 6, 50, return_values=True), "vulkan")
    assert any("its max/min values are used" in line for line in result.fusion.log)
    assert all(r.strategy != "softmax" for r in result.reports)
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    x = inputs(6, 50, "f32")
    x[np.isnan(x)] = 7.0  # IREE's own argmax is not checked on NaN here
    values, index = module.main(x)
    np.testing.assert_array_equal(index, reference("argmax", x))
    np.testing.assert_array_equal(values, x.max(axis=1))


def test_ir_argmax(tmp_path):
    """argmax 256x1000 f32 on lavapipe: one [8, 1, 1] workgroup per row. The
    first chunk loop folds each 4-vector's integer keys (bitcast, flip of
    negative ones, NaN -> INT_MAX) into a running arith.maxsi in registers,
    then shuffles; the second recomputes the keys and folds the indices
    holding the max into a running arith.minsi, then shuffles; lane 0 writes
    the row's index to global memory. Nothing but the two accumulators and
    the max's slot is allocated (no key row, no padded copy)."""
    dump = tmp_path / "dump"
    result = tilefuse.compile_program(program("argmax", 256, 1000), "vulkan", dump_dir=dump)
    (report,) = result.reports
    assert (report.strategy, report.status) == ("softmax", "applied"), report.line()
    assert "31 chunks of 32 and one of 8" in report.reason
    (kernel,) = tilefuse.verify.printed_kernels((dump / "phase2.log").read_text()).values()
    filecheck(
        kernel,
        """
CHECK: func.func @main_dispatch_0
CHECK-SAME: workgroup_size = [8, 1, 1] subgroup_size = 8
CHECK: scf.for {{.*}} to %c992 step %c32 iter_args({{.*}}) -> (vector<4xi32>)
CHECK: vector.transfer_read {{.*}}#hal.descriptor_type<storage_buffer>>, vector<4xf32>
CHECK-NEXT: arith.bitcast {{.*}} : vector<4xf32> to vector<4xi32>
CHECK: arith.maxsi {{.*}} : vector<4xi32>
CHECK-NEXT: scf.yield
CHECK: vector.reduction <maxsi>
CHECK: gpu.shuffle xor
CHECK: scf.for {{.*}} to %c992 step %c32 iter_args({{.*}}) -> (vector<4xi32>)
CHECK: arith.bitcast {{.*}} : vector<4xf32> to vector<4xi32>
CHECK: arith.cmpi eq
CHECK-NEXT: arith.select
CHECK-NEXT: arith.minsi {{.*}} : vector<4xi32>
CHECK-NEXT: scf.yield
CHECK: vector.reduction <minsi>
CHECK: gpu.shuffle xor
CHECK: scf.if
CHECK-NEXT: vector.transfer_write {{.*}} : vector<1xi32>, memref<1xi32, {{.*}}#hal.descriptor_type<storage_buffer>>
CHECK-NEXT: }
CHECK-NEXT: return
""",
        tmp_path,
    )
    ops, _module = kernel_ops(kernel)
    allocs = sorted(str(op.results[0].type) for op in ops if op.name == "memref.alloc")
    assert allocs == [
        "memref<1x32xi32, #gpu.address_space<workgroup>>",
        "memref<1x32xi32, #gpu.address_space<workgroup>>",
        "memref<1xi32, #gpu.address_space<workgroup>>",
    ], allocs


def test_argmax_of_a_returned_softmax():
    """y = softmax(x) is returned and argmaxed: one chained group with two
    results, which the softmax kernel refuses (it stores one row). The
    planner splits it after y (planner.split_plan, logged): the softmax,
    then the argmax reading y back, both on the softmax kernel. The
    planner's index-safety check used to crash on the rewrite's iota in
    such a group (an op with no operands)."""
    softmax = [
        "%fninf = stablehlo.constant dense<0xFF800000> : tensor<f32>",
        "%fzero = stablehlo.constant dense<0.0> : tensor<f32>",
        (
            "%m = stablehlo.reduce(%x init: %fninf) applies stablehlo.maximum across dimensions = [1]"
            " : (tensor<64x300xf32>, tensor<f32>) -> tensor<64xf32>"
        ),
        "%mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<64xf32>) -> tensor<64x300xf32>",
        "%d = stablehlo.subtract %x, %mb : tensor<64x300xf32>",
        "%e = stablehlo.exponential %d : tensor<64x300xf32>",
        (
            "%s = stablehlo.reduce(%e init: %fzero) applies stablehlo.add across dimensions = [1]"
            " : (tensor<64x300xf32>, tensor<f32>) -> tensor<64xf32>"
        ),
        "%sb = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<64xf32>) -> tensor<64x300xf32>",
        "%y = stablehlo.divide %e, %sb : tensor<64x300xf32>",
    ]
    argmax = program("argmax", 64, 300).splitlines()[1:-2]  # its body, reading %x
    text = "\n".join(
        [
            "func.func @main(%x: tensor<64x300xf32>) -> (tensor<64x300xf32>, tensor<64xi32>) {",
            *[f"  {line}" for line in softmax],
            *[line.replace("(%x init", "(%y init") for line in argmax],
            "  return %y, %r#1 : tensor<64x300xf32>, tensor<64xi32>",
            "}",
        ]
    )
    result = tilefuse.compile_program(text, "vulkan")
    assert any("split into" in line and "2 results" in line for line in result.fusion.log)
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    assert [(r.strategy, r.status) for r in module.reports] == [("softmax", "applied")] * 2
    x = np.random.default_rng(1).standard_normal((64, 300)).astype(np.float32)
    y, index = module.main(x)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), atol=1e-6)
    np.testing.assert_array_equal(index, np.argmax(y, axis=1))
