"""Merge a dispatch's elementwise roots into one op, in the executable sources.

A training step's forward matmul stores what the backward pass reads: the
pre-activation, its square, the activation, 1 - tanh(...) (JAX's GELU
gradient), each yielded by one of a chain of elementwise linalg.generic ops
that read each other. A kernel tiles one root and fuses what it reads; with
stores from several ops there is no one root, and every strategy refused
such a dispatch ("6 results computed by 3 different ops"), leaving IREE's
default codegen to run the matmul. IREE's own formation merges such chains
with its multi-use elementwise fusion, but not inside the regions the fusion
stage pre-forms. This stage runs that pass,
`iree-dispatch-creation-fuse-multi-use-elementwise-producer`, on exactly
those dispatches: the chain becomes one generic yielding every stored value,
which the strategies take as their root.

Only dispatches whose stored values come from two or more linalg.generic
ops, all of them elementwise (every loop parallel), are touched; the log
says which were merged and which were left and why. Not merged: an arith op
on a whole tensor among the roots (IREE's widening of a stored i1 to i8,
beside the op computing it: converted to a generic first, the pass still
merged none, so such dispatches are left as they are).
"""

from iree.compiler import ir, passmanager

from ..irutil import defining_op, iterator_types, symbol_name, walk
from . import rewrite_sources
from .read import LOAD, STORE

PIPELINE = (
    "func.func(iree-dispatch-creation-fuse-multi-use-elementwise-producer, canonicalize, cse)"
)


def _stored_by(func: ir.Operation) -> list[ir.Operation]:
    """The distinct ops whose results the function stores."""
    found = []
    for op in walk(func):
        if op.name != STORE:
            continue
        producer = defining_op(op.operands[0])
        if producer is not None and not any(producer == f for f in found):
            found.append(producer)
    return found


def _elementwise(op: ir.Operation) -> bool:
    return op.name == "linalg.generic" and all(it == "parallel" for it in iterator_types(op))


def fuse_elementwise_roots(sources: str) -> tuple[str, list[str]]:
    """The executable sources with each dispatch's elementwise roots merged,
    and one line per dispatch with several roots."""
    return rewrite_sources(sources, fuse_roots_in)


def fuse_roots_in(module: ir.Module) -> tuple[bool, list[str]]:
    """fuse_elementwise_roots on the parsed sources, in place."""
    targets, log = [], []
    for op in walk(module.operation):
        if op.name != "func.func" or not any(inner.name == LOAD for inner in walk(op)):
            continue
        roots = _stored_by(op)
        if len(roots) < 2:
            continue
        name = symbol_name(op)
        if all(_elementwise(r) for r in roots):
            targets.append((name, op, len(roots)))
        else:
            kinds = sorted({r.name for r in roots if not _elementwise(r)})
            log.append(f"{name}: {len(roots)} roots not merged: not all elementwise ({kinds})")
    changed = False
    for name, func, count in targets:
        passmanager.PassManager.parse(PIPELINE, module.context).run(func)
        left = len(_stored_by(func))
        if left < count:
            changed = True
            log.append(f"{name}: {count} elementwise roots merged into {left}")
        else:
            log.append(f"{name}: {count} elementwise roots left as they are (the pass merged none)")
    return changed, log
