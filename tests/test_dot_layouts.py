"""Operand transposes of a dot_general moved into their producers
(hlo/dot_layouts.py): attention's q k^T with heads split from one qkv
projection. IR checks of the rewrite (k^T made where k is, the transposes
composed; an argument keeps its layout), then the program on Vulkan against
numpy (f32, rtol 1e-5 of the largest |output|) with every dispatch on a
tilefuse kernel and no copy dispatch."""

import numpy as np
import pytest
import tilefuse
from iree.compiler import ir
from support import filecheck
from tilefuse.hlo import dot_layouts
from tilefuse.runtime import CompiledModule


def _heads(slice_from: int, name: str) -> list[str]:
    """[2, 16, 96] qkv -> one of q, k, v as [batch, heads, seq, head_dim]."""
    sliced, split, heads = "tensor<2x16x32xf32>", "tensor<2x16x2x16xf32>", "tensor<2x2x16x16xf32>"
    window = f"[0:2, 0:16, {slice_from}:{slice_from + 32}]"
    return [
        f"%{name}s = stablehlo.slice %qkv {window} : (tensor<2x16x96xf32>) -> {sliced}",
        f"%{name}r = stablehlo.reshape %{name}s : ({sliced}) -> {split}",
        f"%{name} = stablehlo.transpose %{name}r, dims = [0, 2, 1, 3] : ({split}) -> {heads}",
    ]


H = "tensor<2x2x16x16xf32>"
SCORES = (
    f"%s = stablehlo.dot_general %q, %k2, batching_dims = [0, 1] x [0, 1],"
    f" contracting_dims = [3] x [3] : ({H}, {H}) -> {H}"
)


def attention(scale_k: bool) -> str:
    """q k^T / 4 of a qkv projection; k scaled by 2 on the way when
    `scale_k` (an elementwise producer, as RoPE is)."""
    scale = [
        f"%two = stablehlo.constant dense<2.0> : {H}",
        f"%k2 = stablehlo.multiply %k, %two : {H}",
    ]
    lines = [
        "func.func @main(%qkv: tensor<2x16x96xf32>) -> tensor<2x2x16x16xf32> {",
        *_heads(0, "q"),
        *_heads(32, "k"),
        *(scale if scale_k else []),
        SCORES if scale_k else SCORES.replace("%k2", "%k"),
        f"%quarter = stablehlo.constant dense<0.25> : {H}",
        f"%y = stablehlo.multiply %s, %quarter : {H}",
        f"return %y : {H}",
    ]
    return "\n  ".join(lines) + "\n}\n"


# The same contraction on arguments: nothing produces k in a dispatch.
ARGUMENTS = f"""func.func @main(%q: {H}, %k2: {H}) -> {H} {{
  {SCORES}
  return %s : {H}
}}
"""


def _rewrite(text: str) -> tuple[ir.Module, list[str]]:
    module = ir.Module.parse(text, ir.Context())
    return module, dot_layouts.rewrite_function(module.body.operations[0].operation)


def test_k_transposes_are_composed(tmp_path):
    module, log = _rewrite(attention(scale_k=False))
    assert len(log) == 1 and "rhs transposed into matmul layout" in log[0], log
    # k's head split and the new transpose are one transpose of the
    # reshaped slice, and the contraction is plain.
    filecheck(
        str(module),
        """
CHECK: stablehlo.transpose %{{.*}}, dims = [0, 2, 1, 3]
CHECK: %[[KR:.*]] = stablehlo.reshape %{{.*}} : (tensor<2x16x32xf32>) -> tensor<2x16x2x16xf32>
CHECK: %[[KT:.*]] = stablehlo.transpose %[[KR]], dims = [0, 2, 3, 1]
CHECK: stablehlo.dot_general %{{.*}}, %[[KT]], batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2]
""",
        tmp_path,
    )
    assert str(module).count("stablehlo.transpose") == 2  # q's and k's, one each


def test_k_is_transposed_after_its_producer(tmp_path):
    module, log = _rewrite(attention(scale_k=True))
    assert len(log) == 1 and "rhs transposed into matmul layout" in log[0], log
    filecheck(
        str(module),
        """
CHECK: %[[K2:.*]] = stablehlo.multiply
CHECK: %[[KT:.*]] = stablehlo.transpose %[[K2]], dims = [0, 1, 3, 2]
CHECK: stablehlo.dot_general %{{.*}}, %[[KT]], batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2]
""",
        tmp_path,
    )


def test_an_argument_keeps_its_layout():
    module, log = _rewrite(ARGUMENTS)
    assert len(log) == 1 and "keeps its operand layout (rhs: it is an argument)" in log[0], log
    assert "contracting_dims = [3] x [3]" in str(module)


@pytest.mark.parametrize("scale_k", [False, True])
def test_attention_scores_on_lavapipe(scale_k):
    result = tilefuse.compile_program(attention(scale_k), "vulkan")
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    lines = [r.line() for r in module.reports]
    assert all(r.status == "applied" for r in module.reports), lines
    # q, k^T (with its scale) and the contraction: no copy of a slice, no
    # transpose of k beside the one that makes it.
    assert len(module.reports) == 3, lines
    assert [r.strategy for r in module.reports].count("matmul") == 1, lines
    qkv = np.random.default_rng(0).standard_normal((2, 16, 96)).astype(np.float32)
    heads = qkv.reshape(2, 16, 6, 16).transpose(0, 2, 1, 3).astype(np.float64)
    q, k = heads[:, 0:2], heads[:, 2:4]
    k = 2 * k if scale_k else k
    want = (q @ k.transpose(0, 1, 3, 2)) / 4
    got = module.main(qkv)
    assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want))


T = "tensor<2x8x4x16xf32>"
S = "tensor<2x4x8x8xf32>"


@pytest.mark.parametrize("epilogue", [False, True])
def test_heads_inner_einsum_on_lavapipe(epilogue):
    """einsum('bthd,bshd->bhts') on computed q and k (batch dims not
    leading on either side): both are transposed where produced."""
    lines = [
        f"func.func @main(%x: {T}, %y: {T}) -> {S} {{",
        f"%two = stablehlo.constant dense<2.0> : {T}",
        f"%q = stablehlo.multiply %x, %two : {T}",
        f"%k = stablehlo.add %y, %two : {T}",
        (
            f"%s = stablehlo.dot_general %q, %k, batching_dims = [0, 2] x [0, 2],"
            f" contracting_dims = [3] x [3] : ({T}, {T}) -> {S}"
        ),
        f"%half = stablehlo.constant dense<0.5> : {S}",
        f"%r = stablehlo.multiply %s, %half : {S}",
        f"return {'%r' if epilogue else '%s'} : {S}",
    ]
    result = tilefuse.compile_program("\n  ".join(lines) + "\n}\n", "vulkan")
    assert any("lhs and rhs transposed into matmul layout" in line for line in result.fusion.log)
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    assert all(r.status == "applied" for r in module.reports), [r.line() for r in module.reports]
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((2, 8, 4, 16)).astype(np.float32) for _ in range(2))
    want = np.einsum("bthd,bshd->bhts", 2.0 * x.astype(np.float64), y + 2.0)
    want = want * 0.5 if epilogue else want
    assert np.max(np.abs(module.main(x, y) - want)) <= 1e-5 * np.max(np.abs(want))


def test_heads_split_from_a_projection_left_to_iree():
    """A BERT block's head split: q, k, v sliced from x @ w_qkv, whose
    [B, S, D] x [D, 3D] form IREE keeps (several free dims on one side).
    The slicing transposes stay tilefuse's loop groups (IREE would copy each
    strided slice in a dispatch of its own, then transpose it): no copy
    dispatch, every dispatch on a tilefuse kernel, against JAX on the CPU."""
    import jax

    def scores(x, w):
        q, k, _ = jax.numpy.split(x @ w, 3, -1)
        heads = lambda t: t.reshape(2, 24, 4, 16).transpose(0, 2, 1, 3)
        return heads(q) @ heads(k).transpose(0, 1, 3, 2)

    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((2, 24, 64), (64, 192))]
    result = tilefuse.compile_program(jax.jit(scores).lower(*args).as_text(), "vulkan")
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    lines = [r.line() for r in module.reports]
    assert all(r.status == "applied" for r in module.reports), lines
    assert not any("memcpy" in r.name for r in module.reports), lines
    want = np.asarray(jax.jit(scores)(*args))
    assert np.max(np.abs(module.main(*args) - want)) <= 1e-5 * np.max(np.abs(want))


@pytest.mark.parametrize("explicit_transpose", [False, True], ids=["einsum", "k_T"])
def test_k_sliced_from_one_head_projection_is_read_in_place(explicit_transpose):
    """One head, q and k sliced straight from x @ w_qkv (Swin's window
    attention, a padded-mask encoder): IREE folds each slice into the
    contraction's load and the transposition into its map, so transposing
    k where it is produced would copy it in a dispatch of its own (one more
    than plain IREE's 4 here). Kept as written, every dispatch still on a
    tilefuse kernel, against JAX on the CPU (1e-5 of the largest |output|)."""
    import jax

    def scores(x, w):
        q, k, v = jax.numpy.split(x @ w, 3, -1)
        s = (
            q @ k.transpose(0, 2, 1)
            if explicit_transpose
            else jax.numpy.einsum("bqd,bkd->bqk", q, k)
        )
        return jax.nn.softmax(s / 4.0, -1) @ v

    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((3, 20, 32), (32, 96))]
    result = tilefuse.compile_program(jax.jit(scores).lower(*args).as_text(), "vulkan")
    said = [line for line in result.fusion.log if "reads in place" in line]
    assert said, result.fusion.log
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    lines = [r.line() for r in module.reports]
    assert all(r.status == "applied" for r in module.reports), lines
    assert len(module.reports) == 4 and not any("transpose" in r.name for r in module.reports), (
        lines
    )
    want = np.asarray(jax.jit(scores)(*args))
    assert np.max(np.abs(module.main(*args) - want)) <= 1e-5 * np.max(np.abs(want))


# p @ v as einsum('bhqk,bkhd->bqhd') writes it: v, an argument, first; p, a
# softmax's result, read transposed as the rhs.
P_V = """func.func @main(%v: tensor<2x12x4x16xf32>, %s: tensor<2x4x8x12xf32>) -> tensor<2x8x4x16xf32> {
  %p = stablehlo.exponential %s : tensor<2x4x8x12xf32>
  %o = stablehlo.dot_general %v, %p, batching_dims = [0, 2] x [0, 1], contracting_dims = [1] x [3] : (tensor<2x12x4x16xf32>, tensor<2x4x8x12xf32>) -> tensor<2x4x16x8xf32>
  %r = stablehlo.transpose %o, dims = [0, 3, 1, 2] : (tensor<2x4x16x8xf32>) -> tensor<2x8x4x16xf32>
  return %r : tensor<2x8x4x16xf32>
}
"""


def test_operands_swap_so_that_a_computed_one_is_read_as_stored(tmp_path):
    """dot_general(v, p) -> dot_general(p, v): p in matmul layout as the
    lhs, v (an argument) left for IREE to transpose, and the transpose back
    composed with the one after it."""
    module, log = _rewrite(P_V)
    assert "operands swapped" in log[0], log
    assert "keeps its operand layout (rhs: it is an argument)" in log[1], log
    filecheck(
        str(module),
        """
CHECK: %[[P:.*]] = stablehlo.exponential
CHECK: %[[O:.*]] = stablehlo.dot_general %[[P]], %arg0, batching_dims = [0, 1] x [0, 2], contracting_dims = [3] x [1] {{.*}} -> tensor<2x4x8x16xf32>
CHECK: %[[R:.*]] = stablehlo.transpose %[[O]], dims = [0, 2, 1, 3]
CHECK: return %[[R]]
""",
        tmp_path,
    )
    assert str(module).count("stablehlo.transpose") == 1


# The same with v computed (sliced from a qkv projection in a model; here a
# negation) and the product accumulated in f32, narrowed back before the
# head merge (hlo/wide_accumulators' form).
P_V_COMPUTED = """func.func @main(%v0: tensor<2x12x4x16xbf16>, %s: tensor<2x4x8x12xbf16>)
    -> tensor<2x8x4x16xbf16> {
  %v = stablehlo.negate %v0 : tensor<2x12x4x16xbf16>
  %p = stablehlo.exponential %s : tensor<2x4x8x12xbf16>
  %o = stablehlo.dot_general %v, %p, batching_dims = [0, 2] x [0, 1], contracting_dims = [1] x [3] : (tensor<2x12x4x16xbf16>, tensor<2x4x8x12xbf16>) -> tensor<2x4x16x8xf32>
  %n = stablehlo.convert %o : (tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xbf16>
  %r = stablehlo.transpose %n, dims = [0, 3, 1, 2] : (tensor<2x4x16x8xbf16>) -> tensor<2x8x4x16xbf16>
  return %r : tensor<2x8x4x16xbf16>
}
"""


def test_operands_swap_when_the_result_is_transposed_anyway(tmp_path):
    """Both operands off matmul layout and the result read by a transpose
    (through its convert back to bf16): swapped, p is read as stored, v is
    transposed where it is computed, the transpose back composes with the
    head merge, and the convert stays in the product's epilogue. As written,
    p had a transpose dispatch of its own (min_qkv_attn_*: 9 dispatches,
    IREE 7; now 8)."""
    module, log = _rewrite(P_V_COMPUTED)
    assert "operands swapped" in log[0], log
    filecheck(
        str(module),
        """
CHECK: %[[V:.*]] = stablehlo.negate
CHECK: %[[P:.*]] = stablehlo.exponential
CHECK: %[[VT:.*]] = stablehlo.transpose %[[V]], dims = [0, 2, 1, 3]
CHECK: %[[O:.*]] = stablehlo.dot_general %[[P]], %[[VT]], batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] {{.*}} -> tensor<2x4x8x16xf32>
CHECK: %[[N:.*]] = stablehlo.convert %[[O]] {{.*}} -> tensor<2x4x8x16xbf16>
CHECK: %[[R:.*]] = stablehlo.transpose %[[N]], dims = [0, 2, 1, 3]
CHECK: return %[[R]]
""",
        tmp_path,
    )
    assert str(module).count("stablehlo.transpose") == 2


def test_a_repeat_of_an_argument_keeps_the_product_as_written():
    """v a GQA repeat of an argument (a broadcast, no dispatch of its own):
    swapped, v would need a transpose dispatch; as written IREE folds both
    transpositions into the product (attn_gqa_repeat_f32: 6 dispatches
    with the swap, 5 without, as at sweep 9)."""
    text = P_V_COMPUTED.replace(
        "%v = stablehlo.negate %v0 : tensor<2x12x4x16xbf16>",
        "%v = stablehlo.broadcast_in_dim %v0, dims = [0, 1, 2, 3]"
        " : (tensor<2x12x4x16xbf16>) -> tensor<2x12x4x16xbf16>",
    )
    module, log = _rewrite(text)
    assert not any("operands swapped" in line for line in log), log
    assert str(module).count("stablehlo.transpose") == 1, str(module)


# T5's p @ v: v is its projection reshaped to [B, S, H, D] (no elementwise op
# between), p the softmax, and the head merge transposes the result.
P_V_PROJECTED = """func.func @main(%x: tensor<2x12x32xf32>, %w: tensor<32x64xf32>, %s: tensor<2x4x8x12xf32>)
    -> tensor<2x8x4x16xf32> {
  %vp = stablehlo.dot_general %x, %w, contracting_dims = [2] x [0] : (tensor<2x12x32xf32>, tensor<32x64xf32>) -> tensor<2x12x64xf32>
  %v = stablehlo.reshape %vp : (tensor<2x12x64xf32>) -> tensor<2x12x4x16xf32>
  %p = stablehlo.exponential %s : tensor<2x4x8x12xf32>
  %o = stablehlo.dot_general %v, %p, batching_dims = [0, 2] x [0, 1], contracting_dims = [1] x [3] : (tensor<2x12x4x16xf32>, tensor<2x4x8x12xf32>) -> tensor<2x4x16x8xf32>
  %r = stablehlo.transpose %o, dims = [0, 3, 1, 2] : (tensor<2x4x16x8xf32>) -> tensor<2x8x4x16xf32>
  return %r : tensor<2x8x4x16xf32>
}
"""


def test_operands_swap_when_v_comes_from_its_projection(tmp_path):
    """v, a contraction's result, counts as an argument: IREE folds its
    transposition into the product that reads it. As written, p (the rhs)
    took a transpose dispatch in each of T5's six attentions (t5_seq2seq:
    128 dispatches against plain IREE's 112; 122 with the swap)."""
    module, log = _rewrite(P_V_PROJECTED)
    swapped = [line for line in log if "operands swapped" in line]
    assert len(swapped) == 1 and "-:6:" in swapped[0], log
    filecheck(
        str(module),
        """
CHECK: %[[P:.*]] = stablehlo.exponential
CHECK: %[[O:.*]] = stablehlo.dot_general %[[P]], {{.*}}, batching_dims = [0, 1] x [0, 2], contracting_dims = [3] x [1] {{.*}} -> tensor<2x4x8x16xf32>
CHECK: %[[R:.*]] = stablehlo.transpose %[[O]], dims = [0, 2, 1, 3]
CHECK: return %[[R]]
""",
        tmp_path,
    )
    result = tilefuse.compile_program(P_V_PROJECTED, "vulkan")
    assert not any("transpose_2x4x8x12" in r.name for r in result.reports), [
        r.name for r in result.reports
    ]
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 12, 32)).astype(np.float32)
    w = rng.standard_normal((32, 64)).astype(np.float32) * 0.2
    s = rng.standard_normal((2, 4, 8, 12)).astype(np.float32)
    v = (x @ w).reshape(2, 12, 4, 16)
    want = np.einsum("bkhd,bhqk->bqhd", v, np.exp(s))
    got = CompiledModule(result.vmfb, "vulkan", result.reports).main(x, w, s)
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
