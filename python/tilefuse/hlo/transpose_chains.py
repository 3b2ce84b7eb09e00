"""A transpose of a transpose composed into one, before fusion planning.

JAX's gradients transpose a contraction's result and transpose it back
(grad of x @ W.T wrt W: `transpose(transpose(dot_general(g, x)))`). IREE's
StableHLO canonicalization leaves such a chain, and the planner would give
each transpose a dispatch of its own: a copy of the whole tensor each. The
two are one transpose (`perm = first[second]`), and none at all where they
cancel. A transpose whose permutation is the identity goes too.

The inner transpose stays where it has other readers. Reshapes chain the
same way (a reshape of a reshape is one reshape; one to its operand's own
shape goes): the contraction rewrites view unit dims away and back
(hlo/dot_layouts.py), and the transposes they leave meet once the views
between them are gone, so this rewrite runs again after them. An
elementwise op between two unit-dim reshapes (JAX's attention scales its
scores between two) is computed before the first, so that they meet.
"""

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import defining_op
from .ops import ELEMENTWISE, shape_of


def permutation(op: ir.Operation) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))


def _compose(op: ir.Operation) -> str | None:
    """Fold the transpose producing `op`'s operand into `op` (a transpose);
    what it did, or None."""
    inner = defining_op(op.operands[0])
    if inner is not None and inner.name != "stablehlo.transpose":
        inner = None
    perm, source = permutation(op), op.operands[0]
    if inner is not None:
        perm, source = [permutation(inner)[p] for p in perm], inner.operands[0]
    if perm == list(range(len(perm))):
        op.results[0].replace_all_uses_with(source)
        done = "cancels the transpose before it" if inner is not None else "is the identity"
    elif inner is not None:
        composed = ir.Operation.create(
            "stablehlo.transpose",
            results=[op.results[0].type],
            operands=[source],
            attributes={"permutation": ir.DenseI64ArrayAttr.get(perm)},
            loc=op.location,
            ip=ir.InsertionPoint(op),
        )
        op.results[0].replace_all_uses_with(composed.results[0])
        done = "composed with the transpose before it"
    else:
        return None
    op.erase()
    if inner is not None and not any(True for _ in inner.results[0].uses):
        inner.erase()
    return done


def _fold_reshape(op: ir.Operation) -> str | None:
    """Read `op` (a reshape) from the source of a reshape producing its
    operand, or drop it if it keeps its operand's shape; what it did, or
    None."""
    inner = defining_op(op.operands[0])
    if inner is not None and inner.name == "stablehlo.reshape":
        op.operands[0] = inner.operands[0]
        if not any(True for _ in inner.results[0].uses):
            inner.erase()
        done = "folded with the reshape before it"
    else:
        done = None
    if op.operands[0].type == op.results[0].type:
        op.results[0].replace_all_uses_with(op.operands[0])
        op.erase()
        return "keeps its operand's shape: removed"
    return done


def _unit_view(op: ir.Operation | None) -> bool:
    """A reshape that only inserts or drops dims of extent 1."""
    if op is None or op.name != "stablehlo.reshape":
        return False
    source, result = (shape_of(v.type) for v in (op.operands[0], op.results[0]))
    return [d for d in source if d != 1] == [d for d in result if d != 1]


def _splat(v: ir.Value) -> bool:
    """A broadcast of a scalar (or a scalar constant's splat)."""
    op = defining_op(v)
    return (
        op is not None
        and op.name == "stablehlo.broadcast_in_dim"
        and shape_of(op.operands[0].type) == []
    )


def _sink_unit_view(op: ir.Operation) -> str | None:
    """An elementwise op each of whose operands is a unit-dim reshape of a
    value of one shape, or a broadcast scalar, and whose one reader is a
    unit-dim reshape too, computed on that shape and reshaped after it;
    what it did, or None. JAX's attention moves the unit
    dims of its scores around ([B, N, T, 1, S], then [1, B, N, T, S]) with
    the scale between two such reshapes; sunk, they meet and fold, where
    between them the scale was an op no softmax group takes."""
    users = list(op.results[0].uses)
    if len(users) != 1 or not _unit_view(users[0].owner.operation):
        return None  # sunk, the reshape would meet no other to fold with
    producers = [defining_op(v) for v in op.operands]
    views = [p for p in producers if _unit_view(p)]
    if not views or not all(_unit_view(p) or _splat(v) for p, v in zip(producers, op.operands)):
        return None
    source = views[0].operands[0].type
    if any(p.operands[0].type != source for p in views):
        return None
    shape, ip = shape_of(source), ir.InsertionPoint(op)
    operands = []
    for p, v in zip(producers, op.operands):
        if _unit_view(p):
            operands.append(p.operands[0])
            continue
        element = ir.ShapedType(v.type).element_type
        operands.append(
            ir.Operation.create(
                "stablehlo.broadcast_in_dim",
                results=[ir.RankedTensorType.get(shape, element)],
                operands=[p.operands[0]],
                attributes={"broadcast_dimensions": ir.DenseI64ArrayAttr.get([])},
                loc=op.location,
                ip=ip,
            ).results[0]
        )
    element = ir.ShapedType(op.results[0].type).element_type
    small = ir.Operation.create(
        op.name,
        results=[ir.RankedTensorType.get(shape, element)],
        operands=operands,
        attributes={name: op.attributes[name] for name in op.attributes},
        loc=op.location,
        ip=ip,
    )
    view = ir.Operation.create(
        "stablehlo.reshape",
        results=[op.results[0].type],
        operands=[small.results[0]],
        loc=op.location,
        ip=ip,
    )
    op.results[0].replace_all_uses_with(view.results[0])
    op.erase()
    for p in {id(p): p for p in producers if p is not None}.values():
        if not any(True for r in p.results for _ in r.uses):
            p.erase()
    return "computed before the unit-dim reshape of its operands"


def rewrite_function(func: ir.Operation) -> list[str]:
    """Compose every chain of transposes and of reshapes of `func` in place
    (in program order, so a chain of any length ends as one op), sinking
    unit-dim reshapes below elementwise ops on the way; one log line
    each."""
    log = []
    for op in [o.operation for o in func.regions[0].blocks[0].operations]:
        where, name = location_text(op.location), op.name.removeprefix("stablehlo.")
        if op.name == "stablehlo.reshape":
            done = _fold_reshape(op)
        elif op.name == "stablehlo.transpose":
            with op.location:
                done = _compose(op)
        elif op.name in ELEMENTWISE and len(op.results) == 1:
            with op.location:
                done = _sink_unit_view(op)
        else:
            continue
        if done:
            log.append(f"{name} at {where} {done}")
    return log
