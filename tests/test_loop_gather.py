"""The loop kernel on roots that gather: a linalg.generic whose body reads a
tensor by tensor.extract at computed indices.

IREE writes RoPE's rotate-half (slices, a negate and a concatenate) as one
generic that extracts from the loaded x at indices computed from
linalg.index (static index arithmetic), and an embedding lookup
(stablehlo.gather of table rows) as one that extracts at an index read from
an input (data-dependent). The loop script vectorizes them with
`vectorize_nd_extract`; each gather becomes one scalar load per element
(docs/strategies.md, loop kernel). Each Vulkan case runs on lavapipe against
numpy and asserts that the loop strategy was applied to the gathering
dispatch; the CUDA cases assemble with ptxas and spill nothing.
Tolerances: f32 1e-6 and f16 4e-3 relative to the output's scale; a lookup
is a copy plus one add, so it is exact against numpy in the input dtype.
"""

import shutil

import numpy as np
import pytest
import tilefuse
from conftest import NUMPY_TYPES, tensor

TOLERANCE = {"f32": 1e-6, "f16": 4e-3}


def rope(shape, dtype):
    """x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1] over the
    last dim (the llama/GPT-NeoX form); cos and sin are [S, D]."""
    *lead, d = shape
    half = d // 2
    x, xh, cs = tensor(shape, dtype), tensor([*lead, half], dtype), tensor(shape[-2:], dtype)
    full = ", ".join(f"0:{n}" for n in lead)
    dims = [len(shape) - 2, len(shape) - 1]
    return f"""func.func @main(%x: {x}, %cos: {cs}, %sin: {cs}) -> {x} {{
  %x1 = stablehlo.slice %x [{full}, 0:{half}] : ({x}) -> {xh}
  %x2 = stablehlo.slice %x [{full}, {half}:{d}] : ({x}) -> {xh}
  %n = stablehlo.negate %x2 : {xh}
  %r = stablehlo.concatenate %n, %x1, dim = {len(shape) - 1} : ({xh}, {xh}) -> {x}
  %cb = stablehlo.broadcast_in_dim %cos, dims = {dims} : ({cs}) -> {x}
  %sb = stablehlo.broadcast_in_dim %sin, dims = {dims} : ({cs}) -> {x}
  %a = stablehlo.multiply %x, %cb : {x}
  %m = stablehlo.multiply %r, %sb : {x}
  %y = stablehlo.add %a, %m : {x}
  return %y : {x}
}}"""


def rope_reference(x, cos, sin):
    half = x.shape[-1] // 2
    x = x.astype(np.float64)
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos.astype(np.float64) + rotated * sin.astype(np.float64)


def embedding(vocab, width, count, dtype):
    """Rows of a [vocab, width] table gathered by an int32 index vector (as
    jnp.take / a stablehlo.gather of slices [1, width]), plus a bias row."""
    table, out = tensor([vocab, width], dtype), tensor([count, width], dtype)
    bias = tensor([width], dtype)
    return f"""func.func @main(%table: {table}, %idx: tensor<{count}xi32>, %bias: {bias}) -> {out} {{
  %i = stablehlo.reshape %idx : (tensor<{count}xi32>) -> tensor<{count}x1xi32>
  %g = "stablehlo.gather"(%table, %i) <{{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, {width}>}}> : ({table}, tensor<{count}x1xi32>) -> {out}
  %b = stablehlo.broadcast_in_dim %bias, dims = [1] : ({bias}) -> {out}
  %y = stablehlo.add %g, %b : {out}
  return %y : {out}
}}"""


def _gathering_report(reports):
    """The one report of these one-dispatch programs, which must be the loop
    kernel's on a root that gathers."""
    (report,) = reports
    assert (report.strategy, report.status) == ("loop", "applied"), report.line()
    assert "gathers by tensor.extract" in report.reason, report.line()
    return report


# (2, 4, 64, 64): heads of 64 (exact tiles); (1, 3, 5, 6): a half of 3 and a
# row of 6 (vectors of 2 that straddle the halves).
@pytest.mark.parametrize("shape", [(2, 4, 64, 64), (1, 3, 5, 6)], ids=str)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_rope_rotate_half_vulkan(shape, dtype):
    module = tilefuse.compile(rope(shape, dtype), target="vulkan")
    _gathering_report(module.reports)
    rng = np.random.default_rng(0)
    kind = NUMPY_TYPES[dtype]
    x = rng.standard_normal(shape).astype(kind)
    cos, sin = (rng.standard_normal(shape[-2:]).astype(kind) for _ in range(2))
    out = module.main(x, cos, sin)
    assert out.shape == shape and out.dtype == kind
    ref = rope_reference(x, cos, sin)
    err = np.max(np.abs(out.astype(np.float64) - ref)) / np.max(np.abs(ref))
    assert err <= TOLERANCE[dtype], f"relative error {err}"


# 37 rows: ragged row tiles (masked index reads and masked gathers); 7 rows
# of 6: exact tiles.
@pytest.mark.parametrize("vocab,width,count", [(1000, 128, 37), (50, 6, 7)], ids=str)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_embedding_lookup_vulkan(vocab, width, count, dtype):
    module = tilefuse.compile(embedding(vocab, width, count, dtype), target="vulkan")
    _gathering_report(module.reports)
    rng = np.random.default_rng(1)
    kind = NUMPY_TYPES[dtype]
    table = rng.standard_normal((vocab, width)).astype(kind)
    bias = rng.standard_normal(width).astype(kind)
    # The first and last rows, repeats, and random rows.
    idx = rng.integers(0, vocab, count).astype(np.int32)
    idx[:3] = [0, vocab - 1, 0]
    out = module.main(table, idx, bias)
    np.testing.assert_array_equal(out, table[idx] + bias)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
@pytest.mark.parametrize("target,arch", [("cuda", "sm_80"), ("cuda-sm90", "sm_90")])
@pytest.mark.parametrize(
    "program",
    [rope((2, 4, 64, 64), "f32"), embedding(1000, 128, 37, "f32")],
    ids=["rope", "embedding"],
)
def test_gathers_assemble_without_spills(program, target, arch, tmp_path):
    """The gather is an llvm.masked.gather that NVPTX scalarizes: one
    ld.global per element; the embedding's ragged rows read their index by a
    masked load (the script's step lower_transfers)."""
    result = tilefuse.compile_program(program, target, dump_dir=tmp_path, strict=True)
    report = _gathering_report(result.reports)
    assert report.registers and report.spill_bytes == 0, report.line()
    # The embedding compiles on IREE's dispatch formation (one dispatch; the
    # fusion plan has two), in a folder of its own; its PTX is copied to
    # DIR/binaries, where --dump-dir puts the final compile's.
    (ptx,) = (tmp_path / "binaries").glob("*.ptx")
    assert f".target {arch}" in ptx.read_text()
    assert "ld.global.b32" in ptx.read_text()  # the gathered elements


def _picked(logits, labels):
    """Cross entropy's pick, `take_along_axis(logits, labels)`: IREE's body
    also extracts the label it receives (dispatch/own_extracts.py)."""
    import jax.numpy as jnp

    return jnp.take_along_axis(logits, labels[:, None], -1)[:, 0] * 2.0


@pytest.mark.parametrize("target", ["vulkan", "cuda", "cuda-sm90"])
def test_take_along_axis_is_the_loop_kernels(target):
    """On CUDA the body's extract of its own label made the vectorizer fail
    (the dispatch ran on IREE's codegen, a FALLBACK); read as the block
    argument, the loop kernel takes it on every target (strict: no
    fallback), and on lavapipe it picks exactly what numpy picks."""
    import jax

    rng = np.random.default_rng(3)
    logits = rng.standard_normal((32, 300)).astype(np.float32)
    labels = rng.integers(0, 300, 32).astype(np.int32)
    text = jax.jit(_picked).lower(logits, labels).as_text()
    result = tilefuse.compile_program(text, target, strict=True)
    assert any("read as the block argument" in line for line in result.log), result.log
    gathering = [r for r in result.reports if "gathers by tensor.extract" in r.reason]
    assert [(r.strategy, r.status) for r in gathering] == [("loop", "applied")], [
        r.line() for r in result.reports
    ]
    if target == "vulkan":
        out = tilefuse.runtime.CompiledModule(result.vmfb, "vulkan").main(logits, labels)
        np.testing.assert_array_equal(out, logits[np.arange(32), labels] * 2.0)


def test_an_embedding_lookup_is_one_dispatch_with_its_index_arithmetic():
    """jnp.take's index wrap, the gather (left to IREE) and the select of
    its fill value, read by an RMSNorm and a residual add: as two regions
    around the gather, the plan issued 5 dispatches against IREE's 3, and
    IREE's formation was taken instead (T5's embeddings, in every model of
    sweep 17). The loop groups around the gather are left to IREE, which
    fuses them with it; the plan is kept, at IREE's count, every dispatch
    on a tilefuse kernel."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def f(table, ids, w):
        e = jnp.take(table, ids, axis=0)
        n = e * jax.lax.rsqrt(jnp.mean(e * e, -1, keepdims=True) + 1e-6)
        return e + jnp.tanh(n @ w)

    rng = np.random.default_rng(7)
    table = rng.standard_normal((96, 48)).astype(np.float32)
    ids = rng.integers(-5, 100, (2, 16)).astype(np.int32)  # wrapped and out-of-range too
    w = (rng.standard_normal((48, 48)) * 0.1).astype(np.float32)
    text = jax.jit(f).lower(table, ids, w).as_text()
    result = tilefuse.compile_program(text, "vulkan", statistics=True)
    assert not [n for n in result.notes if "plan not used" in n], result.notes
    reasons = {g.why_not_outlined.split(" (")[0] for g in result.fusion.groups["main"]}
    assert {
        "reads a gather left to IREE",
        "computes the indices of a gather left to IREE",
    } <= reasons
    plain = tilefuse.compile_program(text, "vulkan", statistics=True, fusion=False)
    assert result.scheduled_dispatches <= plain.scheduled_dispatches
    assert [r.status for r in result.reports] == ["applied"] * len(result.reports)
    got = np.asarray(tilefuse.CompiledModule(result.vmfb, "vulkan").main(table, ids, w))
    want = np.asarray(jax.jit(f)(table, ids, w))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_strided_slice_of_a_gather_is_left_to_iree_with_it():
    """A strided slice ([:, :, 0:32] of [2, 16, 96]) of an embedding lookup:
    elsewhere a strided slice keeps its group out of IREE's hands, since IREE
    copies it in a dispatch of its own; beside a gather, IREE fuses it into
    the gather's dispatch. Outlined on its own the group cost a third
    dispatch, and the plan was dropped for IREE's formation."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def f(table, ids, w):
        e = jnp.take(table, ids, axis=0)
        return jnp.tanh(e[:, :, 0:32] * 2.0 + 1.0) @ w

    rng = np.random.default_rng(7)
    table = rng.standard_normal((96, 96)).astype(np.float32)
    ids = rng.integers(-5, 100, (2, 16)).astype(np.int32)  # NaN rows for out-of-range ids
    w = (rng.standard_normal((32, 48)) * 0.1).astype(np.float32)
    text = jax.jit(f).lower(table, ids, w).as_text()
    result = tilefuse.compile_program(text, "vulkan", statistics=True)
    assert not [n for n in result.notes if "plan not used" in n], result.notes
    reasons = {g.why_not_outlined.split(" (")[0] for g in result.fusion.groups["main"]}
    assert "reads a gather left to IREE" in reasons
    plain = tilefuse.compile_program(text, "vulkan", statistics=True, fusion=False)
    assert result.scheduled_dispatches <= plain.scheduled_dispatches
    got = np.asarray(tilefuse.CompiledModule(result.vmfb, "vulkan").main(table, ids, w))
    np.testing.assert_allclose(got, np.asarray(jax.jit(f)(table, ids, w)), rtol=1e-5, atol=1e-5)
