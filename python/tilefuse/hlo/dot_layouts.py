"""Operand transposes of a dot_general moved into the ops that produce them.

A dot_general that contracts k over its last dim (attention's q k^T, with q
and k as [batch, heads, seq, head_dim]) is not in matmul layout: in a fusion
region IREE converts it into linalg.transpose + batch_matmul, and the planner
leaves such a contraction to IREE's own formation (planner.TRANSPOSED_FALLBACK).
There IREE folds the transpose into the contraction's indexing map, but not
into the ops before it: the head split feeding k (slice, reshape, transpose
of the qkv projection; or RoPE) becomes one or two dispatches of its own, and
the contraction a third on IREE's kernels (corpus gpt2_block: a strided copy
and a transpose per operand).

When the operand is computed by ops that are a dispatch anyway (an
elementwise op, or a slice IREE would copy, reached through index ops each
read once), the layout change costs nothing there: the operand is
transposed into matmul layout where it is produced,

    dot_general(q, k, batching [0, 1] x [0, 1], contracting [3] x [3])
      -> dot_general(q, transpose(k, [0, 1, 3, 2]), contracting [3] x [2])

and a transpose already producing it is composed with the new one (one
transpose, not two). The planner then fuses the transpose into the
producer's loop group (a transposed write) and the contraction, now plain,
into a matmul group with its epilogue. The result is the same tensor: the
free dims keep their order.

An operand read straight from an argument or another contraction keeps its
layout (IREE folds the transposition into the contraction's map, where a
transpose here would be a dispatch of its own), and so do one with other
readers and a unit-stride slice the contraction reads itself (one head's k
split from a qkv projection: IREE folds the slice into the contraction's
load, where transposed here it would be copied); the log says which and
why.

Where such an operand is the lhs and the rhs would be in matmul layout as
the lhs, the operands swap first, and a transpose of the result puts its
free dims back in order:

    dot_general(v, p) -> transpose(dot_general(p, v))

Attention over [B, S, H, D] tensors ('bhqk,bkhd->bqhd') reads p, the
softmax's result, as the rhs, transposed: IREE folds that transpose into
the softmax's dispatch when it forms the softmax itself, but not into a
tilefuse softmax kernel, and copied p in a dispatch of its own (one more
than plain IREE). Swapped, p is read as stored and v, an argument, is
transposed by IREE as it was before. Where v is computed (split from a qkv
projection) the operands swap too when a transpose reads the result (the
head merge): the transpose back composes with it, and v is transposed where
it is produced.

Before any of this, forms JAX writes are undone:

- free dims of extent 1 beside other free dims are viewed away (a reshape
  of the operand, and of the result back): jax.nn.dot_product_attention's
  p as [1, B, N, T, S] has two free dims, which no rule here takes;

- a transpose that swaps the result's lhs and rhs free dims (the batch dims
  in place) is dot_general(rhs, lhs): `(a.T @ b.T).T` is `b @ a`. The
  operands swap when no fewer of them are then in matmul layout (as stored,
  or read through a transpose producing them); the transpose goes. `(x @
  w).T` with x and w as stored keeps its transpose: swapped, both would be
  read transposed.
- an operand produced by a transpose whose source is in matmul layout is
  read from that source (its dims renumbered in the dimension numbers):
  IREE folds such a transpose into the contraction, where the planner
  would give it a dispatch of its own.
"""

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import defining_op
from .ops import (
    CONTRACTION,
    VIEWS,
    body_ops,
    create_transpose,
    dot_free_extents,
    dot_numbers,
    dot_numbers_attr,
    element_type,
    erase_with_dead_producers,
    op_class,
    shape_of,
    sole_user,
    transposed_type,
    view_back,
)
from .transpose_chains import permutation
from .unit_transposes import moves_only_unit_dims


def plain_order(numbers: dict[str, list[int]], rank: int, side: str) -> list[int]:
    """The dims of operand `side` ("lhs" or "rhs") in matmul layout: batch
    dims, then for lhs its free dims and the contracting dims, for rhs the
    contracting dims and its free dims."""
    batch = numbers[f"{side}_batching_dimensions"]
    contracting = numbers[f"{side}_contracting_dimensions"]
    free = [d for d in range(rank) if d not in batch and d not in contracting]
    return batch + (free + contracting if side == "lhs" else contracting + free)


def _single_use(v: ir.Value) -> bool:
    return sum(1 for _ in v.uses) == 1


def produced_in_a_dispatch(v: ir.Value) -> str | None:
    """Why transposing `v` where it is produced would add a dispatch, or
    None: `v` and every view on the way are read once, and the chain of
    views reaches an elementwise op or a slice, but for a slice the
    contraction reads itself (IREE folds that one into its load, as it
    does the head split of a fused qkv projection read by an einsum)."""
    if _slice_read_in_place(v):
        return "it is a slice the contraction's dispatch reads in place"
    while True:
        if not _single_use(v):
            return "it has other readers"
        op = defining_op(v)
        if op is None:
            return "it is an argument"
        if op.name == "stablehlo.slice" or op_class(op.name) == "elementwise":
            return None
        if op.name not in VIEWS:
            return f"it comes from {op.name}"
        v = op.operands[0]


def _slice_read_in_place(v: ir.Value) -> bool:
    """`v` is a unit-stride slice read only by the op at hand: IREE folds it
    into that op's load."""
    op = defining_op(v)
    return (
        op is not None
        and op.name == "stablehlo.slice"
        and all(s == 1 for s in ir.DenseI64ArrayAttr(op.attributes["strides"]))
        and _single_use(v)
    )


def _transpose(v: ir.Value, perm: list[int], ip: ir.InsertionPoint, loc) -> ir.Value:
    """transpose(v, perm), composed with a transpose producing `v` (read
    only here; the caller erases it); `v`'s source itself where the two
    cancel."""
    inner = defining_op(v)
    if inner is not None and inner.name == "stablehlo.transpose" and _single_use(v):
        first = list(ir.DenseI64ArrayAttr(inner.attributes["permutation"]))
        perm = [first[p] for p in perm]
        v = inner.operands[0]
    if perm == list(range(len(perm))):
        return v
    if moves_only_unit_dims(shape_of(v.type), perm):
        # No element moves (an outer product's g[1, N] as [N, 1]): a view,
        # which the planner does not give a transpose group.
        return ir.Operation.create(
            "stablehlo.reshape",
            results=[transposed_type(v, perm)],
            operands=[v],
            loc=loc,
            ip=ip,
        ).results[0]
    return create_transpose(v, perm, ip, loc)


def rewrite_function(func: ir.Operation) -> list[str]:
    """Put the operands of every dot_general of `func` that is not in matmul
    layout into it where they are produced, in place; one log line per
    dot_general changed or left."""
    log = []
    for op in body_ops(func, "stablehlo.dot_general"):
        where = location_text(op.location)
        if _unit_free_dims(op):
            with op.location:
                op = _drop_unit_free_dims(op)
            log.append(f"dot_general at {where}: {UNIT_FREE_WHY}")
        transpose = _transposed_result(op)
        if transpose is not None and _swap_pays(op):
            op = _swap_into(op, transpose)
            log.append(f"dot_general at {where}: operands swapped, {ABSORBED_WHY}")
        for side, why in _read_through_transposes(op):
            log.append(f"dot_general at {where}: {side} read through its transpose ({why})")
        numbers = dot_numbers(op)
        if len(numbers["lhs_contracting_dimensions"]) != 1:
            continue
        ranks = [len(shape_of(v.type) or []) for v in op.operands]
        if any(len(free) != 1 or free == [1] for free in dot_free_extents(op)):
            continue  # not one free dim a side: the planner leaves it to IREE in any layout
        orders = {s: plain_order(numbers, r, s) for s, r in zip(("lhs", "rhs"), ranks)}
        moved = {s: order != list(range(len(order))) for s, order in orders.items()}
        if not any(moved.values()):
            continue
        if _swap_helps(op, numbers, ranks, moved):
            with op.location:
                op = _swap(op)
            log.append(
                f"dot_general at {where}: operands swapped (the rhs, {SWAPPED_WHY}), "
                "the result transposed back"
            )
            numbers, ranks = dot_numbers(op), ranks[::-1]
            orders = {s: plain_order(numbers, r, s) for s, r in zip(("lhs", "rhs"), ranks)}
            moved = {s: order != list(range(len(order))) for s, order in orders.items()}
            if not any(moved.values()):
                continue
        why = {
            s: produced_in_a_dispatch(v) for s, v in zip(("lhs", "rhs"), op.operands) if moved[s]
        }
        refused = [f"{s}: {w}" for s, w in why.items() if w]
        if refused:
            log.append(
                f"dot_general at {where} keeps its operand layout ({'; '.join(refused)}): "
                "IREE folds the transposition into the contraction"
            )
            continue
        with op.location:
            _make_plain(op, numbers, orders, moved, ranks)
        sides = " and ".join(s for s in ("lhs", "rhs") if moved[s])
        log.append(
            f"dot_general at {where}: {sides} transposed into matmul layout where "
            "produced (the contraction reads them as they are stored)"
        )
    return log


SWAPPED_WHY = (
    "computed here, is then read in matmul layout; the lhs is an argument or a contraction's result"
)
UNIT_FREE_WHY = "free dims of extent 1 beside others dropped (viewed away, and back after it)"


def _free(numbers: dict[str, list[int]], side: str, rank: int) -> list[int]:
    """The free dims of operand `side`: neither batching nor contracting."""
    bound = numbers[f"{side}_batching_dimensions"] + numbers[f"{side}_contracting_dimensions"]
    return [d for d in range(rank) if d not in bound]


def _unit_free_dims(op: ir.Operation) -> list[list[int]]:
    """Per operand of a batched product, its free dims of extent 1 where it
    has other free dims (jax.nn.dot_product_attention's [1, B, N, T, S]
    probabilities); [] for none. A side whose free dims are all of extent 1
    is a vector (hlo/matrix_vectors.py's) and keeps them. So does an
    argument (a decode step's q as [B, G, R, 1, D]): the reshape back after
    the product would sit between the scores and their softmax, which then
    left its scale and max keys to IREE (attn_decode_gqa_q1_f16: the softmax
    on IREE's codegen). An unbatched product keeps them too: IREE collapses
    its free dims itself (x[1, S, D] @ w: the planner leaves it to IREE with
    its epilogue, which a reshape here would cut off)."""
    numbers = dot_numbers(op)
    if not numbers["lhs_batching_dimensions"]:
        return []
    found = []
    for side, value in zip(("lhs", "rhs"), op.operands):
        shape = shape_of(value.type)
        free = _free(numbers, side, len(shape))
        unit = [d for d in free if shape[d] == 1]
        found.append(unit if len(unit) < len(free) and not _an_argument(value) else [])
    return found if any(found) else []


def _drop_unit_free_dims(op: ir.Operation) -> ir.Operation:
    """`op` on its operands without the dims _unit_free_dims names, its
    result reshaped back; returns the new dot_general."""
    ip = ir.InsertionPoint(op)
    numbers = dot_numbers(op)
    operands, kept_numbers, shapes = [], {}, []
    for side, value, gone in zip(("lhs", "rhs"), op.operands, _unit_free_dims(op)):
        shape = shape_of(value.type)
        kept = [d for d in range(len(shape)) if d not in gone]
        for kind in ("batching", "contracting"):
            key = f"{side}_{kind}_dimensions"
            kept_numbers[key] = [kept.index(d) for d in numbers[key]]
        shapes.append([shape[d] for d in kept])
        if gone:
            element = ir.ShapedType(value.type).element_type
            viewed = ir.RankedTensorType.get(shapes[-1], element)
            value = ir.Operation.create(
                "stablehlo.reshape", results=[viewed], operands=[value], loc=op.location, ip=ip
            ).results[0]
        operands.append(value)
    # The result's dims: batch, then lhs free, then rhs free.
    lhs, rhs = shapes
    out = [lhs[d] for d in kept_numbers["lhs_batching_dimensions"]]
    out += [lhs[d] for d in _free(kept_numbers, "lhs", len(lhs))]
    out += [rhs[d] for d in _free(kept_numbers, "rhs", len(rhs))]
    attributes = {name: op.attributes[name] for name in op.attributes}
    attributes["dot_dimension_numbers"] = dot_numbers_attr(kept_numbers)
    element = ir.ShapedType(op.results[0].type).element_type
    new = ir.Operation.create(
        "stablehlo.dot_general",
        results=[ir.RankedTensorType.get(out, element)],
        operands=operands,
        attributes=attributes,
        loc=op.location,
        ip=ip,
    )
    view_back(op, new.results[0], ip)
    op.erase()
    return new


ABSORBED_WHY = "which puts the result's free dims in the order a transpose of it wanted"


def _transposed_result(op: ir.Operation) -> ir.Operation | None:
    """The transpose that is the only reader of `op`'s result (or of its
    sole convert: hlo/wide_accumulators.py's back to bf16) and swaps its
    lhs and rhs free dims, the batch dims in place: then it is
    dot_general(rhs, lhs)."""
    if "algorithm" in op.attributes:
        return None  # its lhs and rhs precision types would swap too
    transpose, _ = _result_transpose(op)
    if transpose is None:
        return None
    if not all(dot_free_extents(op)):
        return None
    return transpose if permutation(transpose) == _swapped_order(op) else None


def _in_layout_as_read(operands: list[ir.Value], numbers: dict[str, list[int]]) -> int:
    """How many of a dot_general's operands, with these numbers, are in
    matmul layout as they are or read through a transpose producing them."""
    count = 0
    for side, value in zip(("lhs", "rhs"), operands):
        rank = len(shape_of(value.type))
        order = plain_order(numbers, rank, side)
        count += order == list(range(rank)) or _through(value, numbers, side) is not None
    return count


def _swap_pays(op: ir.Operation) -> bool:
    """Swapped, no fewer operands are in matmul layout (the transpose of the
    result goes either way). (x @ W)^T with x and W as stored stays: swapped,
    both would be read transposed."""
    numbers = dot_numbers(op)
    operands = list(op.operands)
    return _in_layout_as_read(operands[::-1], _swapped(numbers)) >= _in_layout_as_read(
        operands, numbers
    )


def _through(value: ir.Value, numbers: dict[str, list[int]], side: str, plain_only: bool = True):
    """(the source of a transpose producing operand `value`, the dot's
    numbers reading it instead) if its free dims keep their order (so the
    result is the same) and that source is in matmul layout (or, unless
    `plain_only`, an argument, a reshape of one or a slice read in place:
    IREE folds the transposition into the contraction, as it would have
    folded the transpose); else None."""
    transpose = defining_op(value)
    if transpose is None or transpose.name != "stablehlo.transpose":
        return None
    perm = permutation(transpose)
    batching, contracting = (f"{side}_{kind}_dimensions" for kind in ("batching", "contracting"))
    free = [perm[d] for d in _free(numbers, side, len(perm))]
    if free != sorted(free):
        return None
    read = dict(numbers)
    read[batching] = [perm[d] for d in numbers[batching]]
    read[contracting] = [perm[d] for d in numbers[contracting]]
    plain = plain_order(read, len(perm), side) == list(range(len(perm)))
    argument = _an_argument(transpose.operands[0]) and _single_use(value)
    if not plain and (plain_only or not argument):
        return None
    return transpose.operands[0], read


def _an_argument(value: ir.Value) -> bool:
    """`value` is a function argument, or a reshape of one (a view), or a
    slice read once with unit strides (IREE folds it into the contraction's
    load: Swin's k sliced from its qkv projection, then transposed)."""
    if _slice_read_in_place(value):
        return True
    while (op := defining_op(value)) is not None:
        if op.name != "stablehlo.reshape":
            return False
        value = op.operands[0]
    return True


def _read_through_transposes(op: ir.Operation) -> list[tuple[str, str]]:
    """Make `op` read each operand a transpose produces from that
    transpose's source where `_through` allows, in place; the sides it did
    and why.
    The transpose goes if nothing else reads it. (JAX's grad of x @ W.T
    writes W.T and x.T, attention k.T; IREE folds such a transpose into the
    contraction, where the planner would give it a dispatch of its own.)"""
    done = []
    for i, side in enumerate(("lhs", "rhs")):
        through = _through(op.operands[i], dot_numbers(op), side, plain_only=False)
        if through is None:
            continue
        plain = _through(op.operands[i], dot_numbers(op), side) is not None
        why = (
            "in matmul layout as stored"
            if plain
            else "an argument or a slice read in place: IREE folds the transposition"
        )
        transpose = defining_op(op.operands[i])
        op.operands[i] = through[0]
        with op.context:
            op.attributes["dot_dimension_numbers"] = dot_numbers_attr(through[1])
        if not any(True for _ in transpose.results[0].uses):
            transpose.erase()
        done.append((side, why))
    return done


def _swap_into(op: ir.Operation, transpose: ir.Operation) -> ir.Operation:
    """Replace `transpose(op)` (through `op`'s sole convert, if any) by
    dot_general(rhs, lhs), which computes the transposed result itself."""
    ip = ir.InsertionPoint(transpose)
    with op.location:
        swapped = _swapped_dot(op, ip)
    _, convert = _result_transpose(op)
    _replace_result_transpose(transpose, convert, _converted(swapped.results[0], convert, ip))
    op.erase()
    return swapped


def _swap_helps(op: ir.Operation, numbers: dict, ranks: list[int], moved: dict) -> bool:
    """The lhs is not in matmul layout, the rhs, computed by an op, would be
    in it as the lhs, and swapped costs no transpose that stays: the lhs is
    an argument (no producer to transpose it in; only it then needs a
    transpose, IREE's), or both operands are moved as they are, a
    transpose reads the result (the transpose back composes with it) and
    the lhs is computed in a dispatch anyway (produced_in_a_dispatch: it is
    then transposed there; a GQA repeat of an argument is left as written,
    IREE folds both transpositions into the product).
    Attention over [B, S, H, D] ('bhqk,bkhd->bqhd' as JAX writes it: v^T
    p^T, then the head merge) is the second: as written p, the softmax's
    result, took a transpose dispatch of its own. An lhs a contraction
    produces (T5's v, its projection reshaped) counts as an argument: IREE
    folds its transposition into the contraction that reads it, and p, kept
    as the rhs, took a transpose dispatch in each attention (T5: 6 of the
    16 dispatches it issued above plain IREE)."""
    lhs, rhs = op.operands
    if not moved["lhs"] or defining_op(rhs) is None:
        return False
    if defining_op(lhs) is not None and not (
        moved["rhs"]
        and _result_transpose(op)[0] is not None
        and (produced_in_a_dispatch(lhs) is None or _from_contraction(lhs))
    ):
        return False
    if "algorithm" in op.attributes:
        return False  # its lhs and rhs precision types would swap too; kept as written
    order = plain_order(_swapped(numbers), ranks[1], "lhs")
    return order == list(range(len(order)))


def _from_contraction(v: ir.Value) -> bool:
    """`v` is a contraction's result, seen through views each read once."""
    while (op := defining_op(v)) is not None and op.name in VIEWS and _single_use(v):
        v = op.operands[0]
    op = defining_op(v)
    return op is not None and op.name in CONTRACTION and _single_use(v)


def _swapped(numbers: dict[str, list[int]]) -> dict[str, list[int]]:
    """The dims of dot_general(rhs, lhs)."""
    swap = {"lhs": "rhs", "rhs": "lhs"}
    return {key: numbers[swap[key[:3]] + key[3:]] for key in numbers}


def _swapped_order(op: ir.Operation) -> list[int]:
    """The result dims of dot_general(rhs, lhs) as dims of `op`'s result:
    `op`'s are batch, lhs free, rhs free; swapped, batch, rhs free, lhs free."""
    batch = len(dot_numbers(op)["lhs_batching_dimensions"])
    free_lhs, free_rhs = (len(f) for f in dot_free_extents(op))
    return (
        list(range(batch))
        + list(range(batch + free_lhs, batch + free_lhs + free_rhs))
        + list(range(batch, batch + free_lhs))
    )


def _swapped_dot(op: ir.Operation, ip: ir.InsertionPoint) -> ir.Operation:
    """dot_general(rhs, lhs) of `op`'s operands (its precisions swapped too),
    created at `ip`; its result dims are _swapped_order's."""
    attributes = {name: op.attributes[name] for name in op.attributes}
    attributes["dot_dimension_numbers"] = dot_numbers_attr(_swapped(dot_numbers(op)))
    if "precision_config" in attributes:
        precision = list(ir.ArrayAttr(attributes["precision_config"]))
        attributes["precision_config"] = ir.ArrayAttr.get(precision[::-1])
    shape = shape_of(op.results[0].type)
    element = ir.ShapedType(op.results[0].type).element_type
    return ir.Operation.create(
        "stablehlo.dot_general",
        results=[ir.RankedTensorType.get([shape[d] for d in _swapped_order(op)], element)],
        operands=list(op.operands)[::-1],
        attributes=attributes,
        loc=op.location,
        ip=ip,
    )


def _result_transpose(op: ir.Operation) -> tuple[ir.Operation | None, ir.Operation | None]:
    """(the transpose that alone reads `op`'s result, directly or through a
    convert read once (hlo/wide_accumulators' f32 product narrowed back),
    that convert or None); (None, None) where there is none."""
    user = sole_user(op, "stablehlo.transpose")
    if user is not None:
        return user, None
    convert = sole_user(op, "stablehlo.convert")
    user = sole_user(convert, "stablehlo.transpose") if convert is not None else None
    return (user, convert) if user is not None else (None, None)


def _converted(value: ir.Value, convert: ir.Operation | None, ip: ir.InsertionPoint) -> ir.Value:
    """`value` (another product) through a convert like `convert` (a product's
    narrowing back: its element type, `value`'s shape); `value` itself where
    there is none."""
    if convert is None:
        return value
    element = element_type(convert.results[0].type)
    narrow = ir.RankedTensorType.get(shape_of(value.type), element, loc=convert.location)
    return ir.Operation.create(
        "stablehlo.convert", results=[narrow], operands=[value], loc=convert.location, ip=ip
    ).results[0]


def _replace_result_transpose(
    transpose: ir.Operation, convert: ir.Operation | None, value: ir.Value
) -> None:
    """`value` for what `transpose` computed; it and the convert it read go."""
    transpose.results[0].replace_all_uses_with(value)
    transpose.erase()
    if convert is not None:
        convert.erase()


def _swap(op: ir.Operation) -> ir.Operation:
    """dot_general(rhs, lhs), then a transpose of its result into `op`'s
    order (the free dims of lhs before those of rhs); returns the new
    dot_general."""
    ip = ir.InsertionPoint(op)
    swapped = _swapped_dot(op, ip)
    swapped_order = _swapped_order(op)
    back = [swapped_order.index(d) for d in range(len(swapped_order))]
    if defining_op(op.operands[0]) is None:
        # v an argument: a transpose reading the product itself composes;
        # through its convert the two stay apart, and IREE, which forms
        # that product, folds the one after it into its dispatch.
        user, convert = sole_user(op, "stablehlo.transpose"), None
    else:
        user, convert = _result_transpose(op)
    if user is not None:
        # A transpose reads the result (a head merge): one transpose, not two.
        perm = list(ir.DenseI64ArrayAttr(user.attributes["permutation"]))
        at = ir.InsertionPoint(user)
        # The convert stays the product's epilogue: before the transpose.
        result = _converted(swapped.results[0], convert, at)
        composed = _transpose(result, [back[p] for p in perm], at, user.location)
        _replace_result_transpose(user, convert, composed)
    else:
        transposed = _transpose(swapped.results[0], back, ip, op.location)
        op.results[0].replace_all_uses_with(transposed)
    op.erase()
    return swapped


def _make_plain(
    op: ir.Operation,
    numbers: dict[str, list[int]],
    orders: dict[str, list[int]],
    moved: dict[str, bool],
    ranks: list[int],
) -> None:
    """Replace `op` by a dot_general in matmul layout reading its operands
    transposed (orders) where `moved` says."""
    ip = ir.InsertionPoint(op)
    operands = [
        _transpose(v, orders[s], ip, op.location) if moved[s] else v
        for s, v in zip(("lhs", "rhs"), op.operands)
    ]
    batch = len(numbers["lhs_batching_dimensions"])
    plain_numbers = {
        "lhs_batching_dimensions": list(range(batch)),
        "rhs_batching_dimensions": list(range(batch)),
        "lhs_contracting_dimensions": [ranks[0] - 1],
        "rhs_contracting_dimensions": [batch],
    }
    attributes = {name: op.attributes[name] for name in op.attributes}
    attributes["dot_dimension_numbers"] = dot_numbers_attr(plain_numbers)
    plain = ir.Operation.create(
        "stablehlo.dot_general",
        results=[op.results[0].type],
        operands=operands,
        attributes=attributes,
        loc=op.location,
        ip=ip,
    )
    op.results[0].replace_all_uses_with(plain.results[0])
    erase_with_dead_producers(op)  # and a transpose composed into the new one
