"""Reductions to a scalar as row reductions, before fusion planning.

No tilefuse kernel reduces a whole tensor to one value: the row kernel gives
every row its own workgroup(s), and a reduction over every dim has one row.
IREE's default codegen runs such a reduce too. So a reduce over all dims of
its operand (jnp.sum(x), jnp.max(x) of any rank) is rewritten, in place, as
reductions of rows:

    y = reduce(view(reduce(view(x, [P, M]), [1]), [1, P]), [1])     (then a
                                                                     reshape to [])

Step one reduces P rows of M elements (P workgroups, each reading one
contiguous row), step two the P partial results in one row. The views are
stablehlo.reshape ops, which IREE folds into the loads: nothing is copied.
For a rank-1 x, M is the divisor of N (the element count) closest to
ROW_TARGET within [ROW_MIN, ROW_MAX]; a count without such a divisor (a
large prime, say) is reduced as one row, on one workgroup, and the log says
so. A higher-rank x is split between two of its dims (first_row_length says
why). When P is itself large, step two is split the same way (three or more
steps).

The first view is moved above the elementwise ops that produce x and
have no other user (sum(x * x): x is viewed, then squared on [P, M]), so the
planner fuses them into step one, as it fuses a row reduction's producers; a
view below them would leave IREE a dispatch computing x * x on [N] and then
reducing its [P, M] view, which no kernel takes.

Both steps apply the reduce's own init value, so the init must be the
identity of the body's op (0 for add, 1 for multiply, -inf for a float max,
...), which is what JAX emits. A reduce with another init, a variadic
reduce (argmax: argminmax.py), or a body other than one binary op of its
two arguments is left to IREE, with the reason in the log.
"""

import math

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import defining_op
from .argminmax import (
    FLOAT_TYPES,
    INT_TYPES,
    function_reduces,
    splat_value,
    splice,
    tensor_text,
)
from .ops import EXPENSIVE, mark_split_steps, node_class, shape_of

# Body op -> its identity, by element class. The row kernel combines all of
# these (strategies/row_reduction.COMBINERS).
IDENTITIES = {
    "stablehlo.add": {"float": 0.0, "int": 0},
    "stablehlo.multiply": {"float": 1.0, "int": 1},
    "stablehlo.maximum": {"float": -math.inf, "int": "min"},
    "stablehlo.minimum": {"float": math.inf, "int": "max"},
    "stablehlo.and": {"int": -1},
    "stablehlo.or": {"int": 0},
}
# Element counts up to ROW_MAX are one row already: one workgroup reads 16K
# elements quickly. Longer ones are split into rows of about ROW_TARGET
# elements (a few chunks of the row kernel each), at least ROW_MIN.
ROW_MIN, ROW_TARGET, ROW_MAX = 512, 2048, 16384
# Where no split between two dims gives rows of ROW_MIN, rows down to this
# length are still taken (shorter ones leave the reduce to IREE).
ROW_SHORTEST = 128


def _identity(body: str, element: str):
    ids = IDENTITIES[body]
    if element in FLOAT_TYPES:
        return ids.get("float")
    bits = INT_TYPES[element]
    value = ids.get("int")
    if value == "min":
        return -(2 ** (bits - 1))
    if value == "max":
        return 2 ** (bits - 1) - 1
    return value


def _applies_to_arguments(op: ir.Operation, block: ir.Block) -> bool:
    """`op` combines the body's two arguments (in either order)."""
    a, b = block.arguments
    operands = list(op.operands)
    return len(operands) == 2 and (operands == [a, b] or operands == [b, a])


def refusal(op: ir.Operation) -> tuple[str | None, str]:
    """(None, body op name) if `op`, a one-operand stablehlo.reduce, is a
    reduction to a scalar this module rewrites; else (why not, "")."""
    x = op.operands[0]
    shape = shape_of(x.type)
    dims = sorted(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
    if shape is None or dims != list(range(len(shape))):
        return "not a reduction over every dim", ""
    if math.prod(shape) < 2:
        return "fewer than two elements", ""
    why, body = identity_body(op)
    if why:
        return why, ""
    if steps(shape) is None:
        return f"no split between two of its dims gives rows of {ROW_SHORTEST} elements or more", ""
    return None, body


def identity_body(op: ir.Operation) -> tuple[str | None, str]:
    """(None, body op name) if `op`, a one-operand stablehlo.reduce, combines
    with one op of IDENTITIES and starts from that op's identity; else (why
    not, "")."""
    x, init = op.operands
    element = str(ir.ShapedType(x.type).element_type)
    if element not in FLOAT_TYPES and element not in INT_TYPES:
        return f"{element} values", ""
    combiner = single_combiner(op)
    if combiner is None or combiner.name not in IDENTITIES:
        return "its body is not one add, multiply, maximum, minimum, and or or", ""
    identity = _identity(combiner.name, element)
    if identity is None:
        return f"{combiner.name} of {element} values", ""
    if splat_value(init) != identity:
        return f"its init is not the identity of {combiner.name} ({identity})", ""
    return None, combiner.name


def single_combiner(op: ir.Operation) -> ir.Operation | None:
    """The one op of a one-operand reduce's (or reduce_window's) body, if
    the body applies it to its two arguments and yields its result; else
    None."""
    block = op.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    if len(body) != 2 or not _applies_to_arguments(body[0], block):
        return None
    return body[0] if body[1].operands[0] == body[0].results[0] else None


def _closest(lengths: list[int]) -> int:
    return min(lengths, key=lambda m: (abs(math.log2(m / ROW_TARGET)), -m))


def row_length(n: int) -> int:
    """Elements per row when `n` elements of a rank-1 tensor are split into
    rows (n itself: one row)."""
    if n <= ROW_MAX:
        return n
    divisors = [m for m in range(ROW_MIN, ROW_MAX + 1) if n % m == 0]
    return _closest(divisors) if divisors else n


def first_row_length(shape: list[int]) -> int | None:
    """Elements per row of step one, or None. A rank-1 tensor is split at any
    divisor (the view is an expand_shape, which IREE folds into the load).
    Higher ranks are split between two dims (a view collapsing the dims on
    each side): a split elsewhere is a collapse and then an expand, and IREE
    moves that expand below the group's elementwise ops, where no kernel
    takes it."""
    n = math.prod(shape)
    if len(shape) == 1:
        return row_length(n)
    splits = [math.prod(shape[j:]) for j in range(1, len(shape))]
    in_range = [m for m in splits if ROW_MIN <= m <= ROW_MAX]
    if in_range:
        return _closest(in_range)
    if n <= ROW_MAX:
        return n
    longer = [m for m in splits if m > ROW_MAX]  # long rows, but one per workgroup
    if longer:
        return min(longer)
    # Only rows shorter than ROW_MIN (a 200 x 200 matrix): many of them still
    # beat one workgroup reading everything, IREE's codegen of the reduce
    # (which on lavapipe fails where it reads a loop index: jnp.trace), down
    # to rows of a subgroup's few vectors.
    short = max(splits)
    return short if short >= ROW_SHORTEST else None


def steps(shape: list[int]) -> list[tuple[int, int]] | None:
    """The [rows, length] views of each step, first to last; None if the
    shape has no split step one can take."""
    m = first_row_length(shape)
    if m is None:
        return None
    n = math.prod(shape)
    views = [(n // m, m)]
    n //= m
    while n > 1:
        m = row_length(n)
        views.append((n // m, m))
        n //= m
    return views


def _template(body: str, x_type: str, element: str, init: str, views, loc: str) -> str:
    lines = [f"%init = stablehlo.constant {init}"]
    scalar = tensor_text([], element)
    value, value_type = "%x", x_type
    for i, (rows, length) in enumerate(views):
        view = tensor_text([rows, length], element)
        out = tensor_text([rows], element)
        viewed = value
        if value_type != view:  # x may be [P, M] already: no reshape then
            viewed = f"%view{i}"
            lines.append(f"{viewed} = stablehlo.reshape {value} : ({value_type}) -> {view}")
        lines.append(
            f"%step{i} = stablehlo.reduce({viewed} init: %init) applies {body}"
            f" across dimensions = [1] : ({view}, {scalar}) -> {out}"
        )
        value, value_type = f"%step{i}", out
    lines.append(f"%y = stablehlo.reshape {value} : ({value_type}) -> {scalar}")
    text = "\n".join(f"  {line} {loc}" for line in lines)
    return (
        f"func.func @scalar(%x: {x_type}) -> {scalar} {{\n{text}\n  return %y : {scalar} {loc}\n}}"
    )


def _splat(value: ir.Value) -> bool:
    owner = defining_op(value)
    return (
        owner is not None
        and owner.name == "stablehlo.constant"
        and ir.DenseElementsAttr(owner.attributes["value"]).is_splat
    )


def _view(value: ir.Value, shape: list[int], before: ir.Operation) -> ir.Value:
    """`value` on `shape`: a new splat constant for a splat, else a reshape."""
    result = ir.RankedTensorType.get(shape, ir.ShapedType(value.type).element_type)
    if _splat(value):
        dense = ir.DenseElementsAttr(value.owner.operation.attributes["value"])
        attrs = {"value": ir.DenseElementsAttr.get_splat(result, dense.get_splat_value())}
        name, operands = "stablehlo.constant", []
    else:
        attrs, name, operands = {}, "stablehlo.reshape", [value]
    op = ir.Operation.create(
        name,
        results=[result],
        operands=operands,
        attributes=attrs,
        loc=before.location,
        ip=ir.InsertionPoint(before),
    )
    return op.results[0]


def _elementwise(op: ir.Operation) -> bool:
    """As the planner classes it (a same-width bitcast_convert, the float
    keys of minmax.py, counts)."""
    return node_class(op) == "elementwise"


def _scalar_broadcast(op: ir.Operation) -> bool:
    """A broadcast_in_dim of a rank-0 value (JAX's `1 - x` is one): it is
    recreated on the view's shape as any elementwise op of the cone, so an
    expensive op reading it (`1 / (1 + exp(-x))`) reads nothing from
    outside."""
    return op.name == "stablehlo.broadcast_in_dim" and shape_of(op.operands[0].type) == []


def _cone(root: ir.Operation, view: ir.Operation) -> list[ir.Operation]:
    """The elementwise ops of x's full shape that feed `root` (x's producer)
    and whose results nothing but the cone and `view` reads, program order."""
    shape = shape_of(view.operands[0].type)
    candidates, stack = [], [root]
    while stack:
        op = stack.pop()
        if op is None or _inside(op, candidates):
            continue
        if not (_elementwise(op) or _scalar_broadcast(op)):
            continue
        if len(op.results) != 1 or shape_of(op.results[0].type) != shape:
            continue
        candidates.append(op)
        stack += [defining_op(v) for v in op.operands]
    # An expensive op reading a value from outside stays outside: IREE does
    # not fuse it into the reduction, and collapses it back to [N] with an
    # expand_shape left inside (exp(x) * y failed); it becomes a loop
    # dispatch whose result is viewed.
    candidates = [
        op
        for op in candidates
        if op.name not in EXPENSIVE
        or all(_inside(defining_op(v), candidates) for v in _tensors(op))
    ]
    changed = True
    while changed:  # drop ops read from outside; that may expose others
        inside = candidates + [view]
        kept = [
            op
            for op in candidates
            if all(_inside(u.owner.operation, inside) for u in op.results[0].uses)
        ]
        changed = len(kept) != len(candidates)
        candidates = kept
    return sorted(candidates, key=_position)


def _inside(op: ir.Operation | None, ops: list[ir.Operation]) -> bool:
    return op is not None and any(op == o for o in ops)


def _unary(op: ir.Operation) -> bool:
    """One tensor operand (abs(x), convert(x), ...). The view is not moved
    above a cone of unary ops only: IREE collapses them back to [N] and
    leaves an expand_shape between them and the reduction, which no kernel
    takes (sum(abs(x)) failed). Left below them, the view is a reshape
    between two ops, which the planner keeps out of a reduction group: they
    run as a loop dispatch of their own and step one reads its result. With
    a binary op in the cone (exp(x * y), the float keys' selects) IREE fuses
    the whole cone into the reduction."""
    return len(_tensors(op)) == 1


def _tensors(op: ir.Operation) -> list[ir.Value]:
    """The operands that are not scalars."""
    return [v for v in op.operands if shape_of(v.type) != []]


def _position(op: ir.Operation) -> int:
    for i, other in enumerate(op.parent.regions[0].blocks[0].operations):
        if other.operation == op:
            return i
    raise ValueError("op not in its parent's block")


def _recreate(ops, shape, mapped: dict, anchor, ip, keep_scalars: bool) -> None:
    """Clone the single-result elementwise `ops` (program order) onto
    `shape`, at `ip`. An operand already in `mapped` (old value -> new, by
    identity) is replaced; any other is viewed on `shape` before `anchor`
    (kept as it is if a scalar and `keep_scalars`). Fills `mapped`."""

    def lookup(v):
        return next((new for old, new in mapped.items() if old == v), None)

    for op in ops:
        operands = []
        for v in op.operands:
            new = lookup(v)
            if new is None:
                keep = keep_scalars and shape_of(v.type) == []
                new = mapped[v] = v if keep else _view(v, shape, anchor)
            operands.append(new)
        named = op.attributes
        element = ir.ShapedType(op.results[0].type).element_type
        clone = ir.Operation.create(
            op.name,
            results=[ir.RankedTensorType.get(shape, element)],
            operands=operands,
            attributes={named[i].name: named[i].attr for i in range(len(named))},
            loc=op.location,
            ip=ip,
        )
        mapped[op.results[0]] = clone.results[0]


def _lookup(mapped: dict, v):
    return next(new for old, new in mapped.items() if old == v)


def hoist_view(view: ir.Operation) -> None:
    """Put the stablehlo.reshape `view` of x above the elementwise ops that
    compute x (the cone nothing else reads): they are recreated on the
    view's shape, reading views of their inputs."""
    root = defining_op(view.operands[0])
    splits = len(shape_of(view.results[0].type)) > len(shape_of(view.operands[0].type))
    cone = _cone(root, view) if root is not None else []
    if not cone or splits and all(_unary(op) for op in cone):
        return
    mapped: dict = {}
    target = shape_of(view.results[0].type)
    _recreate(cone, target, mapped, view, ir.InsertionPoint(view), keep_scalars=True)
    view.results[0].replace_all_uses_with(_lookup(mapped, view.operands[0]))
    view.erase()
    for op in reversed(cone):
        op.erase()


def sink_view(view: ir.Operation) -> None:
    """Move the final stablehlo.reshape `view` ([1] to []) below the
    elementwise ops that read the result (with scalar splat constants): they
    are recreated on [1], so the planner fuses them into the last step as
    its epilogue (a float max's key decode) instead of leaving a rank-0
    dispatch to IREE."""
    result = view.results[0]
    one = shape_of(view.operands[0].type)
    sunk: list[ir.Operation] = []

    def available(v) -> bool:
        if v == result or _inside(defining_op(v), sunk):
            return True
        return shape_of(v.type) == [] and _splat(v)

    grown = True
    while grown:
        grown = False
        users = [
            u.owner.operation for v in [result] + [op.results[0] for op in sunk] for u in v.uses
        ]
        for op in sorted(users, key=_position):
            if _inside(op, sunk) or not _elementwise(op) or len(op.results) != 1:
                continue
            if shape_of(op.results[0].type) == [] and all(available(v) for v in op.operands):
                sunk.append(op)
                grown = True
    if not sunk:
        return
    sunk.sort(key=_position)
    at = ir.InsertionPoint(sunk[0])
    mapped = {result: view.operands[0]}
    _recreate(sunk, one, mapped, sunk[0], at, keep_scalars=False)
    for op in sunk:
        outside = [u for u in op.results[0].uses if not _inside(u.owner.operation, sunk)]
        if outside:
            back = ir.Operation.create(
                "stablehlo.reshape",
                results=[op.results[0].type],
                operands=[_lookup(mapped, op.results[0])],
                loc=op.location,
                ip=at,
            )
            op.results[0].replace_all_uses_with(back.results[0])
    for op in reversed(sunk):
        op.erase()
    if not any(True for _ in result.uses):
        view.erase()


def rewrite_function(func: ir.Operation) -> list[str]:
    """Rewrite every qualifying reduction to a scalar of `func` in place; one
    log line per reduction to a scalar (rewritten, or why not)."""
    log = []
    for op in function_reduces(func, variadic=False):
        why, body = refusal(op)
        if why == "not a reduction over every dim":
            continue
        where = location_text(op.location)
        if why:
            log.append(f"reduction to a scalar at {where} left to IREE: {why}")
            continue
        x, init = op.operands
        element = str(ir.ShapedType(x.type).element_type)
        shape = shape_of(x.type)
        n = math.prod(shape)
        init_text = str(init.owner.operation.attributes["value"])
        views = steps(shape)
        template = _template(body, str(x.type), element, init_text, views, str(op.location))
        users = [(u.owner.operation, u.operand_number) for u in op.results[0].uses]
        readers = [u.owner.operation for u in x.uses]
        mark_split_steps(splice(op, template, x, result=0), "stablehlo.reduce")
        with func.context, func.location:
            first_view = next(
                (
                    u.owner.operation
                    for u in x.uses
                    if u.owner.operation.name == "stablehlo.reshape"
                    and not _inside(u.owner.operation, readers)
                ),
                None,
            )
            if first_view is not None:
                hoist_view(first_view)
            last_view = defining_op(users[0][0].operands[users[0][1]]) if users else None
            if last_view is not None and last_view.name == "stablehlo.reshape":
                sink_view(last_view)
        rows = ", then ".join(f"[{r}, {m}]" for r, m in views)
        note = (
            f" (no divisor gives rows of {ROW_MIN} to {ROW_MAX}: one workgroup)"
            if views[0][0] == 1 and n > ROW_MAX
            else ""
        )
        log.append(f"reduction to a scalar at {where}: {n} elements reduced as rows {rows}{note}")
    return log


__all__ = ["refusal", "rewrite_function", "steps"]
