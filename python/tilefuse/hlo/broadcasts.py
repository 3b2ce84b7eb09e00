"""Broadcast chains folded into one broadcast_in_dim.

JAX reduces to rank 1 and broadcasts back through a keepdims shape:

    %m  = reduce %x across [1]            : [512, 1000] -> [512]
    %k  = broadcast_in_dim %m, dims = [0]     : [512] -> [512, 1]
    %b  = broadcast_in_dim %k, dims = [0, 1]  : [512, 1] -> [512, 1000]

The planner sees a reduction result broadcast back over its rows only when
the broadcast reads the reduction directly (a keepdims written as a reshape
that inserts the unit dim folds the same way); with the [512, 1] step between,
a JAX softmax became three groups where the hand-written sample is one. The
chain is one broadcast: broadcast_in_dim(broadcast_in_dim(x, d1), d2) is
broadcast_in_dim(x, [d2[i] for i in d1]). The outer op is replaced; the inner
one goes when nothing else reads it.

Elementwise math on the keepdims shape ([512, 1]: JAX's mean, var + eps,
rsqrt) sits between the two steps of such a chain. Where every operand of an
elementwise op is the same keepdims broadcast (it only inserts unit dims) or
a splat of a scalar, the op runs on the unbroadcast shape and its result is
broadcast instead (`sink_keepdims`), so the chain meets and folds.

IREE's `iree-stablehlo-canonicalize` also folds chains, but it rewrites more
(a unit-dim broadcast becomes a reshape, which the planner reads
differently), so this fold is its own small rewrite.
"""

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import defining_op, walk
from .ops import ELEMENTWISE, element_type, replace_by_reshape, shape_of

BROADCAST = "stablehlo.broadcast_in_dim"


def _dims(op: ir.Operation) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"]))


def rewrite_function(func: ir.Operation) -> list[str]:
    """Sink keepdims broadcasts below elementwise ops, then fold every
    broadcast of a broadcast in `func`, then make keepdims broadcasts of
    products reshapes, in place; one log line per change."""
    return sink_keepdims(func) + fold_chains(func) + products_viewed(func)


CONTRACTIONS = ("stablehlo.dot_general", "stablehlo.dot")


def products_viewed(func: ir.Operation) -> list[str]:
    """A keepdims broadcast of a contraction's result (or of its convert:
    hlo/wide_accumulators.py's) as the reshape it is. JAX restores a batch
    dim of 1 after a batched product ([4, 128, 32] -> [1, 4, 128, 32]); as
    a broadcast it is an index op no contraction group takes, a dispatch of
    its own that copies the result; a reshape at a group's edge IREE folds
    into the store."""
    log = []
    for op in [op for op in walk(func) if op.name == BROADCAST and _keepdims(op)]:
        producer = defining_op(op.operands[0])
        if producer is not None and producer.name == "stablehlo.convert":
            producer = defining_op(producer.operands[0])
        if producer is None or producer.name not in CONTRACTIONS:
            continue
        where = location_text(op.location)
        replace_by_reshape(op)
        log.append(f"broadcast at {where} only adds unit dims to a product: a reshape")
    return log


def _keepdims(op: ir.Operation) -> bool:
    """A broadcast that only inserts unit dims ([512] -> [512, 1])."""
    source, result = shape_of(op.operands[0].type), shape_of(op.results[0].type)
    if source is None or result is None or not source:
        return False
    dims = _dims(op)
    kept = all(result[d] == n for d, n in zip(dims, source))
    inserted = all(n == 1 for i, n in enumerate(result) if i not in dims)
    return kept and inserted and dims == sorted(dims)


def _splat(op: ir.Operation) -> bool:
    return shape_of(op.operands[0].type) == []


def sink_keepdims(func: ir.Operation) -> list[str]:
    log = []
    for op in [op for op in walk(func) if op.name in ELEMENTWISE]:
        producers = [defining_op(v) for v in op.operands]
        if any(p is None or p.name != BROADCAST for p in producers):
            continue
        keep = [p for p in producers if _keepdims(p)]
        if not keep or any(not (_keepdims(p) or _splat(p)) for p in producers):
            continue
        source = keep[0].operands[0].type
        if any(p.operands[0].type != source or _dims(p) != _dims(keep[0]) for p in keep):
            continue
        shape = shape_of(source)
        ip, loc = ir.InsertionPoint(op), op.location
        operands = []
        for p in producers:
            if _splat(p):
                splat_type = ir.RankedTensorType.get(
                    shape, element_type(p.results[0].type), loc=loc
                )
                p = ir.Operation.create(
                    BROADCAST,
                    results=[splat_type],
                    operands=[p.operands[0]],
                    attributes={"broadcast_dimensions": ir.DenseI64ArrayAttr.get([], op.context)},
                    loc=loc,
                    ip=ip,
                )
                operands.append(p.results[0])
            else:
                operands.append(p.operands[0])
        small_type = ir.RankedTensorType.get(shape, element_type(op.results[0].type), loc=loc)
        named = [op.attributes[i] for i in range(len(op.attributes))]
        attributes = {a.name: a.attr for a in named}
        small = ir.Operation.create(
            op.name, results=[small_type], operands=operands, attributes=attributes, loc=loc, ip=ip
        )
        wide = ir.Operation.create(
            BROADCAST,
            results=[op.results[0].type],
            operands=[small.results[0]],
            attributes={"broadcast_dimensions": keep[0].attributes["broadcast_dimensions"]},
            loc=loc,
            ip=ip,
        )
        op.results[0].replace_all_uses_with(wide.results[0])
        where = location_text(loc)
        op.erase()
        once = []  # add %k, %k: one producer read twice is erased once
        for p in producers:
            if not any(p == q for q in once):
                once.append(p)
        for p in once:
            if not list(p.results[0].uses):
                p.erase()
        log.append(f"{op_name(small)} at {where} computed before its keepdims broadcast")
    return log


def op_name(op: ir.Operation) -> str:
    return op.name.removeprefix("stablehlo.")


def _unit_insertion(reshape: ir.Operation) -> list[int] | None:
    """Where a reshape that only inserts unit dims ([8] -> [8, 1]) puts each
    source dim: the broadcast_in_dim dims it is (a keepdims written as a
    reshape); None for any other reshape."""
    source, result = shape_of(reshape.operands[0].type), shape_of(reshape.results[0].type)
    if source is None or result is None:
        return None
    dims, i = [], 0
    for j, n in enumerate(result):
        if i < len(source) and source[i] == n:
            dims.append(j)
            i += 1
        elif n != 1:
            return None
    return dims if i == len(source) else None


def fold_chains(func: ir.Operation) -> list[str]:
    log = []
    for op in [op for op in walk(func) if op.name == BROADCAST]:
        inner = op.operands[0].owner
        if isinstance(inner, ir.Block):
            continue  # a block argument
        inner = inner.operation
        if inner.name == BROADCAST:
            inner_dims = _dims(inner)
        elif inner.name == "stablehlo.reshape":
            inner_dims = _unit_insertion(inner)
            if inner_dims is None:
                continue
        else:
            continue
        # Innermost first: a chain of three folds as the walk reaches each.
        source = inner.operands[0]
        outer_dims = _dims(op)
        dims = [outer_dims[i] for i in inner_dims]
        folded = ir.Operation.create(
            BROADCAST,
            results=[op.results[0].type],
            operands=[source],
            attributes={"broadcast_dimensions": ir.DenseI64ArrayAttr.get(dims, op.context)},
            loc=op.location,
            ip=ir.InsertionPoint(op),
        )
        op.results[0].replace_all_uses_with(folded.results[0])
        where = location_text(op.location)
        op.erase()
        if not list(inner.results[0].uses):
            inner.erase()
        log.append(f"broadcast chain at {where} folded into one broadcast_in_dim")
    return log


__all__ = ["rewrite_function"]
