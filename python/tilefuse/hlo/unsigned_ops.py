"""Reverses and window reductions of unsigned integers, on signless ones.

IREE 3.13's StableHLO conversion fails on two ops over unsigned integers, on
every target, where the same op over signless integers compiles:

- stablehlo.reverse (jnp.flip of a uint8 image, x[::-1] of uint32 ids):
  "failed to legalize operation 'linalg.generic'";
- a cumulative stablehlo.reduce_window (jnp.cumsum, cummax, cumprod of
  unsigned values: a window as long as its dim, padded by all but one
  element, which IREE turns into a scan): "failed to legalize unresolved
  target materialization from ('ui8') to ('i8')". Other windows (a max
  pool of a uint8 image) compile, and are left as they are.

Each is rewritten here to work on the signless integers of the same width,
between stablehlo.bitcast_convert ops (IREE fuses them into the neighbouring
dispatches, but for a scan's result, which it copies once more):

- a reverse only moves bits;
- a window reduction whose body is one add, multiply, and, or or xor of its
  two arguments wraps around the same in either type;
- one whose body is a maximum or a minimum runs on x xor SIGN (the sign
  bit flipped), which orders as signed integers the way x orders as
  unsigned ones; its init goes the same way, its result comes back.

Cumulative reductions of unsigned values with another body (several ops)
are left as they are, with the reason in the log.
"""

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import walk
from .ops import LEFT_AS_IT_IS, dense_ints, shape_of, try_cast
from .scalars import single_combiner

REVERSE = "stablehlo.reverse"
REDUCE_WINDOW = "stablehlo.reduce_window"
WRAPPING = ("stablehlo.add", "stablehlo.multiply", "stablehlo.and", "stablehlo.or", "stablehlo.xor")
ORDERED = ("stablehlo.maximum", "stablehlo.minimum")


def _unsigned(value: ir.Value) -> ir.IntegerType | None:
    """The element type of `value` if it is an unsigned integer tensor."""
    integer = try_cast(ir.IntegerType, ir.ShapedType(value.type).element_type)
    return integer if integer is not None and integer.is_unsigned else None


def _with_element(t: ir.Type, element: ir.Type) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(ir.ShapedType(t).shape, element)


def _create(name, result_type, operands, ip, loc, attributes=None) -> ir.Value:
    return ir.Operation.create(
        name, results=[result_type], operands=operands, attributes=attributes or {}, ip=ip, loc=loc
    ).results[0]


def _signless(value: ir.Value, width: int, flip: bool, ip, loc) -> ir.Value:
    """`value` (unsigned) as signless integers of `width` bits; `flip`:
    with the sign bit flipped, so that signed order is unsigned order."""
    signless = _with_element(value.type, ir.IntegerType.get_signless(width))
    out = _create("stablehlo.bitcast_convert", signless, [value], ip, loc)
    return _flip(out, width, ip, loc) if flip else out


def _flip(value: ir.Value, width: int, ip, loc) -> ir.Value:
    element = ir.IntegerType.get_signless(width)
    sign = ir.DenseElementsAttr.get_splat(
        ir.RankedTensorType.get([], element), ir.IntegerAttr.get(element, -(2 ** (width - 1)))
    )
    scalar = _create("stablehlo.constant", sign.type, [], ip, loc, {"value": sign})
    if ir.ShapedType(value.type).shape:
        scalar = _create(
            "stablehlo.broadcast_in_dim",
            value.type,
            [scalar],
            ip,
            loc,
            {"broadcast_dimensions": ir.DenseI64ArrayAttr.get([])},
        )
    return _create("stablehlo.xor", value.type, [value, scalar], ip, loc)


def _unsigned_again(value: ir.Value, element: ir.Type, flip: bool, ip, loc) -> ir.Value:
    width = ir.IntegerType(element).width
    if flip:
        value = _flip(value, width, ip, loc)
    return _create(
        "stablehlo.bitcast_convert", _with_element(value.type, element), [value], ip, loc
    )


def _rewrite_reverse(op: ir.Operation, element: ir.IntegerType) -> None:
    ip, loc = ir.InsertionPoint(op), op.location
    x = _signless(op.operands[0], element.width, False, ip, loc)
    attributes = {"dimensions": op.attributes["dimensions"]}
    reversed_ = _create(REVERSE, x.type, [x], ip, loc, attributes)
    op.results[0].replace_all_uses_with(_unsigned_again(reversed_, element, False, ip, loc))
    op.erase()


def is_cumulative(op: ir.Operation) -> bool:
    """A one-input reduce_window whose window spans one dim of its operand,
    padded on one side by all but one element, with unit windows, strides
    and dilations elsewhere: the form IREE converts into a scan."""
    shape = shape_of(op.operands[0].type)
    if shape is None or len(op.operands) != 2:
        return False
    rank = len(shape)
    window = dense_ints(op, "window_dimensions", 1, rank)
    for name in ("window_strides", "base_dilations", "window_dilations"):
        if dense_ints(op, name, 1, rank) != [1] * rank:
            return False
    padding = [[0, 0]] * rank
    if "padding" in op.attributes:
        flat = [int(v) for v in ir.DenseIntElementsAttr(op.attributes["padding"])]
        padding = [flat[2 * d : 2 * d + 2] for d in range(rank)]
    spans = [d for d in range(rank) if window[d] != 1]
    if len(spans) != 1:
        return False
    (d,) = spans
    n = shape[d]
    others_plain = all(padding[e] == [0, 0] for e in range(rank) if e != d)
    return window[d] == n and padding[d] in ([n - 1, 0], [0, n - 1]) and others_plain


def refusal(op: ir.Operation) -> str | None:
    """Why a cumulative reduce_window of unsigned values is left as it is,
    or None."""
    combine = single_combiner(op)
    if combine is None:
        return "its body is not one op of its two arguments"
    if combine.name not in WRAPPING + ORDERED:
        return f"its body is a {combine.name}"
    return None


def _rewrite_reduce_window(op: ir.Operation, element: ir.IntegerType) -> None:
    ip, loc = ir.InsertionPoint(op), op.location
    combine = single_combiner(op)
    flip = combine.name in ORDERED
    width = element.width
    x = _signless(op.operands[0], width, flip, ip, loc)
    init = _signless(op.operands[1], width, flip, ip, loc)
    named = op.attributes
    attributes = {named[i].name: named[i].attr for i in range(len(named))}
    result_type = _with_element(op.results[0].type, ir.IntegerType.get_signless(width))
    new = ir.Operation.create(
        REDUCE_WINDOW,
        results=[result_type],
        operands=[x, init],
        attributes=attributes,
        regions=1,
        ip=ip,
        loc=loc,
    )
    scalar = init.type
    block = new.regions[0].blocks.append(scalar, scalar)
    inner = ir.InsertionPoint(block)
    a, b = block.arguments
    combined = _create(combine.name, scalar, [a, b], inner, loc)
    ir.Operation.create("stablehlo.return", operands=[combined], ip=inner, loc=loc)
    op.results[0].replace_all_uses_with(_unsigned_again(new.results[0], element, flip, ip, loc))
    op.erase()


def rewrite_function(func: ir.Operation) -> list[str]:
    """Rewrite the unsigned reverses and cumulative window reductions of
    `func` in place; one log line each (rewritten, or why not)."""
    log = []
    for op in [o for o in walk(func) if o.name in (REVERSE, REDUCE_WINDOW)]:
        element = _unsigned(op.operands[0])
        if element is None:
            continue
        where = location_text(op.location)
        what = f"{op.name.split('.')[1]} of {element} at {where}"
        if op.name == REVERSE:
            with op.context, op.location:
                _rewrite_reverse(op, element)
            log.append(f"{what} done on i{element.width} (IREE cannot lower it on {element})")
            continue
        if not is_cumulative(op):
            continue  # IREE lowers other windows of unsigned values
        why = refusal(op)
        if why:
            log.append(f"{what} {LEFT_AS_IT_IS}: {why}")
            continue
        with op.context, op.location:
            _rewrite_reduce_window(op, element)
        log.append(f"{what} done on i{element.width} (IREE cannot lower it on {element})")
    return log


__all__ = ["refusal", "rewrite_function"]
