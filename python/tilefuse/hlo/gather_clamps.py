"""Row gathers with their indices clamped, as StableHLO's gather clamps them.

StableHLO clamps a gather's start indices so that every slice lies inside
the operand, and JAX relies on it: `x[i]` with `i` past the end reads the
last row, `jnp.take(x, i, mode="clip")` is that gather alone, and the
default `fill` mode masks the result of an unclamped gather. IREE 3.13
turns a gather of whole rows along dim 0 (index_select: one index per row,
start_index_map = [0], collapsed_slice_dims = [0], slice sizes [1, the
other dims whole], offset dims trailing) into torch_index_select, which
does not clamp: an index past either end reads outside the operand
(garbage on llvm-cpu, zeros on lavapipe, whatever lies there on a GPU).
Every other gather form IREE lowers with the clamp.

Rewritten, on every target (plain IREE computes these wrong for all of
them): the indices of such a gather clamped to [0, rows - 1] by a
stablehlo.clamp first. The clamp is elementwise on the indices; IREE fuses
it into the gather's dispatch with the rest of their arithmetic. Indices
computed from constants alone are left as they are: the program fixes them
(JAX's bounds arithmetic on shapes), and IREE hoists such a computation
into an initializer, where a clamp would be one more dispatch (two in T5).
"""

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import defining_op, walk
from .ops import attribute_lists, index_vector_dim, shape_of

GATHER = "stablehlo.gather"
KEYS = (
    "offset_dims",
    "collapsed_slice_dims",
    "operand_batching_dims",
    "start_index_map",
)


def is_row_gather(op: ir.Operation) -> bool:
    """The gathers IREE lowers as torch_index_select (the module docstring):
    whole rows of dim 0, one index each."""
    operand, indices = shape_of(op.operands[0].type), shape_of(op.operands[1].type)
    result = shape_of(op.results[0].type)
    if operand is None or indices is None or result is None or not operand:
        return False
    attr = op.attributes["dimension_numbers"]
    numbers = attribute_lists(attr, KEYS)
    vector_dim = max(0, len(indices) - 1)
    if index_vector_dim(attr) != vector_dim or (indices and indices[-1] != 1):
        return False
    if numbers["start_index_map"] != [0] or numbers["collapsed_slice_dims"] != [0]:
        return False
    if numbers["operand_batching_dims"]:
        return False
    if numbers["offset_dims"] != list(range(vector_dim, len(result))):
        return False
    sizes = list(ir.DenseI64ArrayAttr(op.attributes["slice_sizes"]))
    return sizes == [1, *operand[1:]]


def _from_constants(value: ir.Value) -> bool:
    """Whether `value` is computed from constants and iotas alone."""
    stack, seen = [value], []
    while stack:
        owner = defining_op(stack.pop())
        if owner is None:
            return False  # a function's or a loop body's argument
        if any(owner == other for other in seen):
            continue
        seen.append(owner)
        if owner.name not in ("stablehlo.constant", "stablehlo.iota"):
            stack += list(owner.operands)
    return True


def _splat(element: ir.Type, value: int, ip: ir.InsertionPoint, loc) -> ir.Value:
    scalar = ir.RankedTensorType.get([], element)
    attr = ir.DenseElementsAttr.get_splat(scalar, ir.IntegerAttr.get(element, value))
    return ir.Operation.create(
        "stablehlo.constant", results=[scalar], attributes={"value": attr}, loc=loc, ip=ip
    ).results[0]


def rewrite_function(func: ir.Operation) -> list[str]:
    """Clamp the indices of every row gather of `func` in place; one log
    line per gather clamped."""
    gathers = [
        op
        for op in walk(func)
        if op.name == GATHER and is_row_gather(op) and not _from_constants(op.operands[1])
    ]
    log = []
    with func.context, func.location:
        for op in gathers:
            indices = op.operands[1]
            rows = shape_of(op.operands[0].type)[0]
            element = ir.ShapedType(indices.type).element_type
            ip, loc = ir.InsertionPoint(op), op.location
            low, high = _splat(element, 0, ip, loc), _splat(element, rows - 1, ip, loc)
            clamp = ir.Operation.create(
                "stablehlo.clamp",
                results=[indices.type],
                operands=[low, indices, high],
                loc=loc,
                ip=ip,
            )
            op.operands[1] = clamp.results[0]
            log.append(
                f"row gather at {location_text(loc)}: indices clamped to [0, {rows - 1}] "
                "(IREE's index_select reads outside the operand for an index out of range)"
            )
    return log


__all__ = ["is_row_gather", "rewrite_function"]
