"""Fuse an elementwise op that a reduction reads through a broadcast into
the reduction, in the executable sources.

A matrix-vector product as a row reduction (hlo/matrix_vectors.py) of bf16
or f16 operands converts the vector x[K] to f32; in a region the fusion
stage forms, IREE keeps that convert as its own linalg.generic over [K],
which the reduction reads through a broadcast map ((rows, k) -> (k)). The
row kernels read every one-dimensional op of a row reduction's dispatch as
an op over one value per row, and refused the dispatch ("several ops over
one value per row"). IREE's own formation fuses such producers into their
consumer's body, and so does this stage, with the same upstream pass
(`linalg-fuse-elementwise-ops`: an elementwise producer read only by its
consumer is inlined into the consumer's body), on exactly the dispatches
that hold such a producer: the reduction then converts each element as it
reads it, as in the dispatches IREE forms.

A producer the reduction reads in another order is fused the same way: a
variance over H and W of NHWC (jnp.var of an instance norm) computes
(x - mean)^2 over [N, H, W, C] and reduces it in loops (N, C, H, W); left
apart, no kernel took the dispatch and its group went back to IREE's
formation (five dispatches where IREE has three).
"""

from iree.compiler import ir, passmanager

from ..irutil import defining_op, iterator_types, map_dims, symbol_name, walk
from .read import LOAD

PIPELINE = "func.func(linalg-fuse-elementwise-ops, canonicalize, cse)"


def _broadcast_producer(op: ir.Operation) -> bool:
    """`op`, a reduction generic, reads the result of an elementwise generic
    used nowhere else through a map that drops one of its parallel loops,
    or permutes its loops."""
    if op.name != "linalg.generic":
        return False
    loops = iterator_types(op)
    if "reduction" not in loops:
        return False
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    inputs = len(op.operands) - len(op.results)
    for value, amap in zip(list(op.operands)[:inputs], maps):
        producer = defining_op(value)
        if producer is None or producer.name != "linalg.generic":
            continue
        if any(it != "parallel" for it in iterator_types(producer)):
            continue
        if sum(1 for _ in value.uses) != 1:
            continue
        dims = map_dims(amap)
        parallel = {d for d, it in enumerate(loops) if it == "parallel"}
        if dims is not None and not parallel <= set(dims):
            return True
        if dims is not None and dims != sorted(dims):
            return True  # read in another order: a transposed producer
    return False


def fuse_broadcasts_in(module: ir.Module) -> tuple[bool, list[str]]:
    """Fuse such producers in each dispatch that has one, in place."""
    changed, log = False, []
    for func in walk(module.operation):
        if func.name != "func.func" or not any(inner.name == LOAD for inner in walk(func)):
            continue
        if not any(_broadcast_producer(op) for op in walk(func)):
            continue
        passmanager.PassManager.parse(PIPELINE, module.context).run(func)
        changed = True
        log.append(
            f"{symbol_name(func)}: elementwise ops a reduction reads through a broadcast "
            "or in another order fused into it"
        )
    return changed, log
