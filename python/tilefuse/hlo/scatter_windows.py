"""A scatter whose update windows are not the operand's trailing dims, with
the operand transposed so that they are.

JAX's gradient of `img[b, :, y, x]` (a bilinear grid sample's corner
gathers on NCHW) is a scatter-add into [B, C, H, W] whose window is the
channel dim, between the scattered ones:

    scatter(%zeros: 2x8x16x20, %idx: 2x12x12x3, %upd: 2x12x12x8)
        update_window_dims = [3], inserted_window_dims = [0, 2, 3],
        scatter_dims_to_operand_dims = [0, 2, 3]

IREE 3.13 cannot lower it ("'iree_linalg_ext.scatter' op expected indices
to be equal to batch rank or batch rank + 1"; plain iree-compile fails on
it for every target). The same scatter into the operand transposed so that
the window dims come last, in their order, and its result transposed back,
is one IREE compiles:

    %t = transpose %zeros, dims = [0, 2, 3, 1]             : 2x16x20x8
    %s = scatter(%t, %idx, %upd) inserted_window_dims = [0, 1, 2],
             scatter_dims_to_operand_dims = [0, 1, 2]       (windows unchanged)
    %r = transpose %s, dims = [0, 3, 1, 2]                  : 2x8x16x20

The updates are untouched: their window dims keep the operand's order.
Every target's IREE fails alike, so this runs for all of them, and IREE's
own formation gets the rewritten program too (`corrects`).
"""

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import defining_op
from .ops import (
    LEFT_AS_IT_IS,
    attribute_lists,
    body_ops,
    create_transpose,
    index_vector_dim,
    shape_of,
    transposed_type,
)

SCATTER = "stablehlo.scatter"
LIST_KEYS = (
    "update_window_dims",
    "inserted_window_dims",
    "input_batching_dims",
    "scatter_indices_batching_dims",
    "scatter_dims_to_operand_dims",
)


def scatter_numbers(op: ir.Operation) -> dict[str, list[int] | int]:
    """The scatter's dimension numbers (LIST_KEYS, and index_vector_dim)."""
    attr = op.attributes["scatter_dimension_numbers"]
    numbers: dict[str, list[int] | int] = attribute_lists(attr, LIST_KEYS)
    numbers["index_vector_dim"] = index_vector_dim(attr)
    return numbers


def scatter_numbers_attr(numbers: dict[str, list[int] | int]) -> ir.Attribute:
    fields = [f"{key} = [{', '.join(map(str, numbers[key]))}]" for key in LIST_KEYS if numbers[key]]
    fields.append(f"index_vector_dim = {numbers['index_vector_dim']}")
    return ir.Attribute.parse(f"#stablehlo.scatter<{', '.join(fields)}>")


def window_order(op: ir.Operation) -> list[int] | None:
    """The operand permutation that puts the update window dims last (the
    other dims first, each group in its order), or None where they are
    last already."""
    numbers = scatter_numbers(op)
    rank = len(shape_of(op.operands[0].type))
    placed = set(numbers["inserted_window_dims"]) | set(numbers["input_batching_dims"])
    window = [d for d in range(rank) if d not in placed]
    if window == list(range(rank - len(window), rank)):
        return None
    return [d for d in range(rank) if d in placed] + window


def _refusal(op: ir.Operation) -> str | None:
    if any(shape_of(v.type) is None for v in (*op.operands, *op.results)):
        return "dynamic shapes"
    return None


def _transpose(value: ir.Value, permutation: list[int], ip: ir.InsertionPoint) -> ir.Value:
    result = transposed_type(value, permutation)
    source = defining_op(value)
    # The init JAX writes (zeros) is made at the new shape: a transpose of a
    # constant would be a fusion group of its own that IREE folds away.
    if source is not None and source.name == "stablehlo.constant":
        splat = ir.DenseElementsAttr(source.attributes["value"])
        if splat.is_splat:
            return ir.Operation.create(
                "stablehlo.constant",
                results=[result],
                attributes={
                    "value": ir.DenseElementsAttr.get_splat(result, splat.get_splat_value())
                },
                ip=ip,
            ).results[0]
    scalar_broadcast = (
        source is not None
        and source.name == "stablehlo.broadcast_in_dim"
        and not shape_of(source.operands[0].type)
    )
    if scalar_broadcast:
        return ir.Operation.create(
            "stablehlo.broadcast_in_dim",
            results=[result],
            operands=[source.operands[0]],
            attributes={"broadcast_dimensions": ir.DenseI64ArrayAttr.get([])},
            ip=ip,
        ).results[0]
    return create_transpose(value, permutation, ip)


def _rewrite(op: ir.Operation, order: list[int]) -> None:
    """Transpose the operands by `order`, rewrite the numbers, transpose the
    results back (variadic scatters: every operand and result alike)."""
    count = (len(op.operands) - 1) // 2  # operands, indices, updates
    moved = [order.index(d) for d in range(len(order))]  # old dim -> new, and back
    numbers = scatter_numbers(op)
    for key in ("inserted_window_dims", "input_batching_dims", "scatter_dims_to_operand_dims"):
        numbers[key] = [moved[d] for d in numbers[key]]
    with op.location:
        before = ir.InsertionPoint(op)
        for i in range(count):
            old = op.operands[i]
            op.operands[i] = _transpose(old, order, before)
            source = defining_op(old)
            if source is not None and not list(old.uses):
                source.erase()
        op.attributes["scatter_dimension_numbers"] = scatter_numbers_attr(numbers)
        for i in range(count):
            result = op.results[i]
            result.set_type(op.operands[i].type)
            restored = _transpose(result, moved, ir.InsertionPoint.after(op))
            result.replace_all_uses_except(restored, restored.owner.operation)


def rewrite_function(func: ir.Operation) -> list[str]:
    """Rewrite every scatter of `func` whose windows are not trailing; one
    log line each."""
    log = []
    for op in body_ops(func, SCATTER):
        order = window_order(op)
        if order is None:
            continue
        where = location_text(op.location)
        why = _refusal(op)
        if why:
            log.append(f"scatter at {where} {LEFT_AS_IT_IS}: {why}")
            continue
        _rewrite(op, order)
        log.append(
            f"scatter at {where} into its operand transposed by {order}, so that the update "
            "windows are its last dims (IREE 3.13 cannot lower windows between scattered dims)"
        )
    return log
