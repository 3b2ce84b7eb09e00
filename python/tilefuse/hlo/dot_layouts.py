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
transpose here would be a dispatch of its own), and so does one with other
readers; the log says which and why.

Where such an operand is the lhs and the rhs would be in matmul layout as
the lhs, the operands swap first, and a transpose of the result puts its
free dims back in order:

    dot_general(v, p) -> transpose(dot_general(p, v))

Attention over [B, S, H, D] tensors ('bhqk,bkhd->bqhd') reads p, the
softmax's result, as the rhs, transposed: IREE folds that transpose into
the softmax's dispatch when it forms the softmax itself, but not into a
tilefuse softmax kernel, and copied p in a dispatch of its own (one more
than plain IREE). Swapped, p is read as stored and v, an argument, is
transposed by IREE as it was before.
"""

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import defining_op
from .ops import (
    dot_free_extents,
    dot_numbers,
    dot_numbers_attr,
    erase_with_dead_producers,
    op_class,
    shape_of,
    sole_user,
)

# Index ops a layout change may look through on the way to the producer.
VIEWS = {"stablehlo.reshape", "stablehlo.transpose", "stablehlo.broadcast_in_dim"}


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
    views reaches an elementwise op or a slice."""
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
    shape = shape_of(v.type)
    element = ir.ShapedType(v.type).element_type
    return ir.Operation.create(
        "stablehlo.transpose",
        results=[ir.RankedTensorType.get([shape[p] for p in perm], element)],
        operands=[v],
        attributes={"permutation": ir.DenseI64ArrayAttr.get(perm)},
        loc=loc,
        ip=ip,
    ).results[0]


def rewrite_function(func: ir.Operation) -> list[str]:
    """Put the operands of every dot_general of `func` that is not in matmul
    layout into it where they are produced, in place; one log line per
    dot_general changed or left."""
    log = []
    dots = [
        o.operation
        for o in func.regions[0].blocks[0].operations
        if o.operation.name == "stablehlo.dot_general"
    ]
    for op in dots:
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
        where = location_text(op.location)
        if _swap_helps(op, numbers, ranks, moved):
            with op.location:
                op = _swap(op, numbers)
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


SWAPPED_WHY = "computed here, is then read in matmul layout; the lhs is an argument"


def _swap_helps(op: ir.Operation, numbers: dict, ranks: list[int], moved: dict) -> bool:
    """The lhs is an argument (no producer to transpose it in) and not in
    matmul layout, and the rhs, computed by an op, would be in it as the
    lhs: swapped, only the argument needs a transpose (IREE's)."""
    lhs, rhs = op.operands
    if not moved["lhs"] or defining_op(lhs) is not None or defining_op(rhs) is None:
        return False
    if "algorithm" in op.attributes:
        return False  # its lhs and rhs precision types would swap too; kept as written
    order = plain_order(_swapped(numbers), ranks[1], "lhs")
    return order == list(range(len(order)))


def _swapped(numbers: dict[str, list[int]]) -> dict[str, list[int]]:
    """The dims of dot_general(rhs, lhs)."""
    swap = {"lhs": "rhs", "rhs": "lhs"}
    return {key: numbers[swap[key[:3]] + key[3:]] for key in numbers}


def _swap(op: ir.Operation, numbers: dict) -> ir.Operation:
    """dot_general(rhs, lhs), then a transpose of its result into `op`'s
    order (the free dims of lhs before those of rhs); returns the new
    dot_general."""
    ip = ir.InsertionPoint(op)
    attributes = {name: op.attributes[name] for name in op.attributes}
    attributes["dot_dimension_numbers"] = dot_numbers_attr(_swapped(numbers))
    if "precision_config" in attributes:
        precision = list(ir.ArrayAttr(attributes["precision_config"]))
        attributes["precision_config"] = ir.ArrayAttr.get(precision[::-1])
    shape = shape_of(op.results[0].type)
    batch = len(numbers["lhs_batching_dimensions"])
    free_lhs, free_rhs = (len(f) for f in dot_free_extents(op))
    # result dims: batch, lhs free, rhs free; swapped: batch, rhs free, lhs free
    swapped_order = (
        list(range(batch))
        + list(range(batch + free_lhs, batch + free_lhs + free_rhs))
        + list(range(batch, batch + free_lhs))
    )
    element = ir.ShapedType(op.results[0].type).element_type
    swapped = ir.Operation.create(
        "stablehlo.dot_general",
        results=[ir.RankedTensorType.get([shape[d] for d in swapped_order], element)],
        operands=list(op.operands)[::-1],
        attributes=attributes,
        loc=op.location,
        ip=ip,
    )
    back = [swapped_order.index(d) for d in range(len(shape))]
    user = sole_user(op, "stablehlo.transpose")
    if user is not None:
        # A transpose reads the result (a head merge): one transpose, not two.
        perm = list(ir.DenseI64ArrayAttr(user.attributes["permutation"]))
        at = ir.InsertionPoint(user)
        composed = _transpose(swapped.results[0], [back[p] for p in perm], at, user.location)
        user.results[0].replace_all_uses_with(composed)
        user.erase()
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
