"""Contractions with several batch dims and an operand IREE would transpose,
on one batch dim, before fusion planning.

IREE 3.13 lowers a dot_general with two or more batch dims by collapsing
them into one batch_matmul, and moves each operand into [batch, M, K] x
[batch, K, N] first: a B stored [batch..., N, K] (attention's k as
[B, H, S, D], in q @ k^T written as an einsum, at prefill or in grouped
query attention's decode) is copied transposed, a dispatch that reads and
writes the whole operand. With one batch dim it does not: the transposition
stays in the contraction's indexing map, which the matmul kernel reads
(found by compiling both; tests/test_batch_dims.py). So such a product is
given one batch dim here,

    y = reshape(dot_general(reshape(a, [B*H, ...]), reshape(b, [B*H, ...])), y's shape)

the reshapes being views of row-major tensors (IREE folds them into the
bindings). Where the product has its f32-to-bf16 or f16 convert
(hlo/wide_accumulators.py), the reshape back goes after it (ops.view_back).

Only batch dims that lead both operands, in the same order, and a product
whose operands are not both in matmul layout already (IREE collapses those
without a copy) are rewritten, and only at decode shapes: at most
split_k.MAX_M rows of A. There the copy is of the whole KV cache and the
scores are a few rows; at prefill the reshape back splits the scores from
a causal mask's broadcast of [S, S], which the softmax group cannot view as
rows (corpus attention_causal_f16: 6 dispatches instead of 4).
"""

import math

from iree.compiler import ir

from ..frontend import location_text
from .dot_layouts import plain_order
from .ops import dot_free_extents, dot_numbers, dot_numbers_attr, shape_of, view_back
from .split_k import MAX_M


def candidate(op: ir.Operation) -> bool:
    if op.name != "stablehlo.dot_general" or len(op.results) != 1:
        return False
    numbers = dot_numbers(op)
    batch = len(numbers["lhs_batching_dimensions"])
    if batch < 2:
        return False
    leading = list(range(batch))
    if (
        numbers["lhs_batching_dimensions"] != leading
        or numbers["rhs_batching_dimensions"] != leading
    ):
        return False
    shapes = [shape_of(v.type) for v in op.operands]
    if any(s is None or any(d < 0 for d in s) for s in shapes):
        return False
    if math.prod(dot_free_extents(op)[0]) > MAX_M:
        return False
    orders = [plain_order(numbers, len(s), side) for s, side in zip(shapes, ("lhs", "rhs"))]
    return any(order != list(range(len(order))) for order in orders)


def _collapse(op: ir.Operation) -> None:
    numbers = dot_numbers(op)
    batch = len(numbers["lhs_batching_dimensions"])
    ip = ir.InsertionPoint(op)
    operands = []
    with op.location:
        for value in op.operands:
            shape = shape_of(value.type)
            element = ir.ShapedType(value.type).element_type
            viewed = ir.RankedTensorType.get([math.prod(shape[:batch])] + shape[batch:], element)
            operands.append(
                ir.Operation.create(
                    "stablehlo.reshape", results=[viewed], operands=[value], ip=ip
                ).results[0]
            )
        shifted = {k: [d - batch + 1 for d in numbers[k]] for k in numbers if "contracting" in k}
        shifted |= {"lhs_batching_dimensions": [0], "rhs_batching_dimensions": [0]}
        attributes = {name: op.attributes[name] for name in op.attributes}
        attributes["dot_dimension_numbers"] = dot_numbers_attr(shifted)
        out = shape_of(op.results[0].type)
        element = ir.ShapedType(op.results[0].type).element_type
        collapsed = [math.prod(out[:batch])] + out[batch:]
        value = ir.Operation.create(
            "stablehlo.dot_general",
            results=[ir.RankedTensorType.get(collapsed, element)],
            operands=operands,
            attributes=attributes,
            ip=ip,
        ).results[0]
    view_back(op, value, ip)
    op.erase()


def rewrite_function(func: ir.Operation) -> list[str]:
    """Collapse the batch dims of every such product of `func`, in place;
    one log line each."""
    log = []
    dots = [o.operation for o in func.regions[0].blocks[0].operations]
    for op in [o for o in dots if candidate(o)]:
        where = location_text(op.location)
        batch = len(dot_numbers(op)["lhs_batching_dimensions"])
        _collapse(op)
        log.append(
            f"dot_general at {where}: its {batch} batch dims collapsed into one "
            "(IREE would copy an operand transposed to collapse them)"
        )
    return log
