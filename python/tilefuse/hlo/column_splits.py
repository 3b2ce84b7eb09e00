"""Column reductions too narrow for the grid split in two steps, before fusion planning.

The column kernel (strategies/column_reduction.py) gives each workgroup a
slice of the kept columns and splits the reduced dim among its threads only.
With few kept columns (70000x3 summed over rows: 3 columns) that is one
workgroup for the whole input, however many rows there are: one
multiprocessor of a GPU, one core of lavapipe. Seed 000 and ByteIR split such
a reduction across the grid; XLA's tree-reduction rewriter does it as here,
as two reductions:

    y = reduce(reduce(view(x, [.., P, M, ..]), [M's dim]), [P's dim])

Step one reduces P chunks of M rows each (P times the workgroups, each chunk
a column reduction with a batch dim), step two the [P, kept] partials (a
small column reduction). The view splits the reduced dim and is a
stablehlo.reshape that IREE folds into the loads; it is moved above the
elementwise ops that compute x, so that they fuse into step one
(scalars.hoist_view). A reduce over several adjacent dims needs no view:
step one reduces the inner ones, step two the outer.

Whether to split is the target's: a reduction is split when the kernel would
get fewer workgroups than the target runs at once (`multiprocessors`, 2 where
unknown) and it reads at least `column_split_bytes` (below that the second
launch costs more than the idle units; measured on lavapipe in
docs/findings.md, 'Splitting tall column reductions'). P is the divisor of
the reduced length closest to CHUNKS_PER_UNIT chunks per unit, keeping
chunks of at least MIN_CHUNK_ROWS rows; a length without such a divisor (a
large prime) is left whole, and the log says so. So is a reduction of a
unary op's result (a convert of bf16 to f32): IREE moves the view back below
it, and step one would hold an expand_shape the column kernel does not take.

Both steps start from the reduce's own init, so the init must be the
identity of the body's op (scalars.identity_body), as for reductions to a
scalar.
"""

import math

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import defining_op
from ..targets import Target
from .argminmax import function_reduces, splice, tensor_text
from .ops import bytes_of, mark_split_steps, node_class, shape_of
from .scalars import hoist_view, identity_body

# Chunks of step one per unit the target runs at once: several, so that
# uneven chunks and units finishing early even out.
CHUNKS_PER_UNIT = 4
# Rows of a chunk, at least: fewer makes step two as large as step one.
MIN_CHUNK_ROWS = 64
# Kept columns one workgroup of the column kernel covers, at the least: a
# subgroup's lanes, each with a vector (the kernel narrows its workgroups to
# one subgroup when that gives more of them).
VECTOR = 4


def _units(target: Target) -> int:
    return target.multiprocessors or 2


def kernel_workgroups(shape: list[int], dims: list[int], target: Target) -> int:
    """About how many workgroups the column kernel gives this reduce: one per
    outer kept index and per subgroup-wide slice of the inner kept columns."""
    outer = math.prod(shape[: dims[0]])
    inner = math.prod(shape[dims[-1] + 1 :])
    return outer * math.ceil(inner / (target.subgroup_size * VECTOR))


def chunks(reduced: int, workgroups: int, target: Target) -> int | None:
    """P: the divisor of `reduced` that brings the workgroups closest to
    CHUNKS_PER_UNIT per unit, with chunks of at least MIN_CHUNK_ROWS; None
    if no divisor in [2, reduced / MIN_CHUNK_ROWS]."""
    want = max(2, math.ceil(CHUNKS_PER_UNIT * _units(target) / workgroups))
    divisors = [p for p in range(2, reduced // MIN_CHUNK_ROWS + 1) if reduced % p == 0]
    if not divisors:
        return None
    return min(divisors, key=lambda p: (abs(math.log2(p / want)), p))


def refusal(op: ir.Operation, target: Target) -> str | None:
    """Why the one-operand reduce `op` is not split (None: it is). '' when it
    is no tall column reduction at all (nothing to log)."""
    shape = shape_of(op.operands[0].type)
    dims = sorted(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
    if shape is None or not dims or dims[-1] == len(shape) - 1 or len(dims) == len(shape):
        return ""  # not a column reduction (rows and scalars have their own kernels)
    if dims != list(range(dims[0], dims[-1] + 1)):
        return ""  # non-adjacent reduced dims: no single column reduction either
    workgroups = kernel_workgroups(shape, dims, target)
    if workgroups >= _units(target) or bytes_of(op.operands[0].type) < target.column_split_bytes:
        return ""
    why, _ = identity_body(op)
    if why:
        return why
    if len(dims) == 1:
        if chunks(shape[dims[0]], workgroups, target) is None:
            return (
                f"its {shape[dims[0]]} rows have no divisor giving chunks of {MIN_CHUNK_ROWS} rows"
            )
        if _unary_producer(op.operands[0]):
            # IREE would move the view below a unary op again and leave an
            # expand_shape inside step one, which the column kernel does not
            # take (a convert of bf16 to f32 was tried): two dispatches
            # would become three, one of them IREE's.
            return "its operand comes from a unary op (a convert, say), which IREE keeps apart"
    return None


def _unary_producer(x: ir.Value) -> bool:
    owner = defining_op(x)
    if owner is None or node_class(owner) != "elementwise":
        return False
    return sum(1 for v in owner.operands if shape_of(v.type) != []) == 1


def _split_dims(shape: list[int], dims: list[int], workgroups: int, target: Target):
    """(view shape or None, step-one dims, step-two dims): for one reduced
    dim, the view splitting it into [P, M]; for several, the split between
    two of them whose outer part is closest to the wanted P."""
    if len(dims) == 1:
        d = dims[0]
        p = chunks(shape[d], workgroups, target)
        view = shape[:d] + [p, shape[d] // p] + shape[d + 1 :]
        return view, [d + 1], [d]
    want = CHUNKS_PER_UNIT * _units(target) / workgroups
    j = min(
        range(1, len(dims)),
        key=lambda j: abs(math.log2(math.prod(shape[dims[0] : dims[j]]) / want)),
    )
    return None, dims[j:], dims[:j]


def _template(op, shape, view, first, second) -> str:
    x_type = str(op.operands[0].type)
    element = str(ir.ShapedType(op.operands[0].type).element_type)
    body = op.regions[0].blocks[0].operations[0].operation.name
    init = str(op.operands[1].owner.operation.attributes["value"])
    loc = str(op.location)
    source = view or shape
    partial = [n for i, n in enumerate(source) if i not in first]
    # Step two's dims, numbered in the partial tensor (step one's are gone).
    second_dims = [d - sum(1 for f in first if f < d) for d in second]
    result = [n for i, n in enumerate(partial) if i not in second_dims]
    lines = [f"%init = stablehlo.constant {init}"]
    viewed = "%x"
    if view:
        viewed = "%view"
        lines.append(f"%view = stablehlo.reshape %x : ({x_type}) -> {tensor_text(view, element)}")
    scalar = tensor_text([], element)
    lines.append(
        f"%partial = stablehlo.reduce({viewed} init: %init) applies {body}"
        f" across dimensions = {first} : ({tensor_text(source, element)}, {scalar})"
        f" -> {tensor_text(partial, element)}"
    )
    lines.append(
        f"%y = stablehlo.reduce(%partial init: %init) applies {body}"
        f" across dimensions = {second_dims} : ({tensor_text(partial, element)}, {scalar})"
        f" -> {tensor_text(result, element)}"
    )
    text = "\n".join(f"  {line} {loc}" for line in lines)
    out = tensor_text(result, element)
    return f"func.func @split(%x: {x_type}) -> {out} {{\n{text}\n  return %y : {out} {loc}\n}}"


def rewrite_function(func: ir.Operation, target: Target) -> list[str]:
    """Split every column reduction of `func` the target wants split, in
    place; one log line per candidate (split, or why not)."""
    log = []
    for op in function_reduces(func, variadic=False):
        why = refusal(op, target)
        if why == "":
            continue
        where = location_text(op.location)
        if why:
            log.append(f"column reduction at {where} not split over the grid: {why}")
            continue
        x = op.operands[0]
        shape = shape_of(x.type)
        dims = sorted(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
        workgroups = kernel_workgroups(shape, dims, target)
        view, first, second = _split_dims(shape, dims, workgroups, target)
        moved = splice(op, _template(op, shape, view, first, second), x, result=0)
        mark_split_steps(moved, "stablehlo.reduce")
        if view:  # the template's one reshape is the view of x
            with func.context, func.location:
                hoist_view(next(o for o in moved if o.name == "stablehlo.reshape"))
        chunk_count = view[dims[0]] if view else math.prod(shape[dims[0] : second[-1] + 1])
        log.append(
            f"column reduction at {where} split over the grid: {shape} over dims {dims} "
            f"in {chunk_count} chunks (step one reduces dims {first}"
            f"{' of the view ' + str(view) if view else ''}, step two dims {second}); "
            f"{workgroups} workgroup(s) unsplit, {_units(target)} units"
        )
    return log


__all__ = ["refusal", "rewrite_function"]
