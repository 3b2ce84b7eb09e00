"""A transpose of a transpose composed into one, before fusion planning.

JAX's gradients transpose a contraction's result and transpose it back
(grad of x @ W.T wrt W: `transpose(transpose(dot_general(g, x)))`). IREE's
StableHLO canonicalization leaves such a chain, and the planner would give
each transpose a dispatch of its own: a copy of the whole tensor each. The
two are one transpose (`perm = first[second]`), and none at all where they
cancel. A transpose whose permutation is the identity goes too.

The inner transpose stays where it has other readers.
"""

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import defining_op


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


def rewrite_function(func: ir.Operation) -> list[str]:
    """Compose every chain of transposes of `func` in place (in program
    order, so a chain of any length ends as one transpose); one log line
    each."""
    log = []
    for op in [o.operation for o in func.regions[0].blocks[0].operations]:
        if op.name != "stablehlo.transpose":
            continue
        where = location_text(op.location)
        with op.location:
            done = _compose(op)
        if done:
            log.append(f"transpose at {where} {done}")
    return log
