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
between them are gone, so this rewrite runs again after them.
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


def rewrite_function(func: ir.Operation) -> list[str]:
    """Compose every chain of transposes and of reshapes of `func` in place
    (in program order, so a chain of any length ends as one op); one log
    line each."""
    log = []
    for op in [o.operation for o in func.regions[0].blocks[0].operations]:
        where, name = location_text(op.location), op.name.removeprefix("stablehlo.")
        if op.name == "stablehlo.reshape":
            done = _fold_reshape(op)
        elif op.name == "stablehlo.transpose":
            with op.location:
                done = _compose(op)
        else:
            continue
        if done:
            log.append(f"{name} at {where} {done}")
    return log
