"""A concatenate of equal pieces it computes, as a select over a new axis,
before fusion planning.

RoPE rotates the two halves of each head and joins them again:

    %r = stablehlo.concatenate %a, %b, dim = 2   # a = x1*c - x2*s, b = x2*c + x1*s
           : (tensor<16x4x8xf32>, tensor<16x4x8xf32>) -> tensor<16x4x16xf32>

In a dispatch region IREE 3.13 lowers a concatenate of values the region
computes to slice inserts it cannot compile (planner._concat_problem), so
the group goes to IREE's own formation, which computes each piece in a
dispatch and copies it into place in another (`slow_memcpy`): four
dispatches for RoPE's q, four for k, in every Llama-style block.

Pieces of one extent `e` along the concatenated dim are a stack along a new
axis of extent k (the piece count) put before that dim, viewed back:

    %a2 = broadcast_in_dim %a, dims = [0, 1, 3]   : 16x4x8 -> 16x4x2x8
    %b2 = broadcast_in_dim %b, dims = [0, 1, 3]
    %i  = iota dim = 2                             : 16x4x2x8
    %s  = select (%i == 0), %a2, %b2
    %r  = reshape %s                               : 16x4x2x8 -> 16x4x16

Every op is elementwise or a view, so the pieces and the select are one
loop group, and the reshape collapses contiguous dims (metadata). Pieces of
extent 1 (jnp.stack's) are broadcast along the concatenated dim itself,
with no new axis and no reshape. Each output element evaluates every
piece's ops and keeps one: k times the arithmetic of a memory-bound
elementwise group, so only up to MAX_PIECES pieces are stacked.

Left as written:

- a concatenate an elementwise op reads (RoPE as `x * cos + concat(-x2,
  x1) * sin`), unless its pieces have extent 1: IREE's own formation fuses
  it into that op's dispatch, while in a region the reshape back would
  stand between the select and that op, and IREE does not fuse across it
  there;
- a concatenate a gather or scatter reads (JAX builds a gather's index
  vectors so, from iotas and computed coordinates): IREE forms the
  gather's dispatch and fuses the concatenate into it; stacked, the select
  was formed apart from the gather (grid sampling: 18 dispatches against
  IREE's 11);
- pieces of different extents (a select needs one shape);
- a concatenate none of whose pieces an elementwise op computes (seen
  through views: jnp.stack reshapes each piece). IREE copies arguments and
  other dispatches' results into place without computing anything, and
  folds a concatenate of a region's inputs into its loads.
"""

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import defining_op, user_op
from .ops import VIEWS, body_ops, op_class, shape_of

CONCATENATE = "stablehlo.concatenate"
MAX_PIECES = 4
NOT_COMPUTED = "no piece is computed by an elementwise op"


def _refusal(op: ir.Operation) -> str | None:
    """Why this concatenate stays as written, or None."""
    shapes = [shape_of(v.type) for v in op.operands]
    if any(s is None for s in shapes):
        return "dynamic shapes"
    if not any(_computed(v) for v in op.operands):
        return NOT_COMPUTED
    dim = ir.IntegerAttr(op.attributes["dimension"]).value
    if len({s[dim] for s in shapes}) != 1:
        return "pieces of different extents"
    if len(shapes) > MAX_PIECES:
        return f"{len(shapes)} pieces (each element would compute all; at most {MAX_PIECES})"
    readers = _reader_classes(op.results[0])
    if "gather" in readers:
        return (
            "a gather or scatter reads it (IREE fuses the concatenate, a gather's "
            "indices, into that op's dispatch, which no tilefuse kernel takes)"
        )
    if shapes[0][dim] > 1 and "elementwise" in readers:
        return (
            "an elementwise op reads it (IREE fuses the concatenate into that op's "
            "dispatch; in a region the stacked form's reshape would stand between them)"
        )
    return None


def _reader_classes(v: ir.Value) -> set[str]:
    """The op classes (ops.op_class) of the ops that read `v`, directly or
    through views."""
    found = set()
    for use in v.uses:
        user = user_op(use)
        if user.name in VIEWS:
            found |= _reader_classes(user.results[0])
        else:
            found.add(op_class(user.name))
    return found


def _computed(v: ir.Value) -> bool:
    """`v` is an elementwise op's result, seen through views (jnp.stack
    reshapes each piece to add the stacked axis)."""
    op = defining_op(v)
    while op is not None and op.name in VIEWS:
        op = defining_op(op.operands[0])
    return op is not None and op_class(op.name) == "elementwise"


def _stack(op: ir.Operation, ip: ir.InsertionPoint) -> ir.Value:
    """The concatenate as broadcasts onto a new axis, a select chain on an
    iota along it, and a reshape to the concatenate's type."""
    dim = ir.IntegerAttr(op.attributes["dimension"]).value
    shape = shape_of(op.operands[0].type)
    pieces = len(op.operands)
    element = ir.ShapedType(op.results[0].type).element_type
    # Pieces of extent 1 (jnp.stack's) broadcast along the dim itself.
    single = shape[dim] == 1
    stacked = shape_of(op.results[0].type) if single else shape[:dim] + [pieces] + shape[dim:]
    stacked_type = ir.RankedTensorType.get(stacked, element)
    index_type = ir.RankedTensorType.get(stacked, ir.IntegerType.get_signless(32))
    mask_type = ir.RankedTensorType.get(stacked, ir.IntegerType.get_signless(1))
    onto = [d if d < dim or single else d + 1 for d in range(len(shape))]

    def create(name, result, operands, **attributes):
        return ir.Operation.create(
            name, results=[result], operands=operands, attributes=attributes, ip=ip
        ).results[0]

    spread = [
        create(
            "stablehlo.broadcast_in_dim",
            stacked_type,
            [v],
            broadcast_dimensions=ir.DenseI64ArrayAttr.get(onto),
        )
        for v in op.operands
    ]
    index = create(
        "stablehlo.iota",
        index_type,
        [],
        iota_dimension=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim),
    )
    equal = ir.Attribute.parse("#stablehlo<comparison_direction EQ>")
    chosen = spread[-1]
    for i in range(pieces - 2, -1, -1):
        at = create(
            "stablehlo.constant",
            index_type,
            [],
            value=ir.DenseElementsAttr.get_splat(
                index_type, ir.IntegerAttr.get(ir.IntegerType.get_signless(32), i)
            ),
        )
        mask = create("stablehlo.compare", mask_type, [index, at], comparison_direction=equal)
        chosen = create("stablehlo.select", stacked_type, [mask, spread[i], chosen])
    return chosen if single else create("stablehlo.reshape", op.results[0].type, [chosen])


def rewrite_function(func: ir.Operation) -> list[str]:
    """Stack every concatenate of `func` that computes equal pieces, in
    place; one log line per concatenate rewritten or left."""
    log = []
    for op in body_ops(func, CONCATENATE):
        where = location_text(op.location)
        why = _refusal(op)
        if why:
            if why != NOT_COMPUTED:
                log.append(f"concatenate at {where} left as written: {why}")
            continue
        pieces = len(op.operands)
        with op.location:
            stacked = _stack(op, ir.InsertionPoint(op))
        op.results[0].replace_all_uses_with(stacked)
        op.erase()
        log.append(
            f"concatenate at {where} of {pieces} equal computed pieces stacked on a new "
            "axis and selected (IREE 3.13 cannot compile it in a region)"
        )
    return log
