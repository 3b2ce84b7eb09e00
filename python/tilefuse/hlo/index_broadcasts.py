"""A broadcast of a value computed from iotas alone, computed at the
broadcast's shape instead, before fusion planning.

A causal mask is made once over [S, S] and broadcast over batch and heads
(jnp.tril, flax's make_causal_mask):

    %m = compare GE, iota(dim 0), iota(dim 1) : [S, S]
    %b = broadcast_in_dim %m, dims = [2, 3]   : [S, S] -> [B, H, S, S]

A softmax of rank > 2 is run on its rows ([B*H*S, S], fusion/rows.py), and
an [S, S] operand has no place in that view: the group stayed rank 4, which
no tilefuse kernel takes, and IREE's formation split the softmax into more
dispatches than plain IREE. The same mask at the broadcast's shape is
iota(dim 2) >= iota(dim 3): every op of the computation repeated on [B, H,
S, S], each iota along the dim the broadcast maps its dim to. An iota costs
an index computation per element, where the broadcast is a load.

Only computations of iotas, splat constants, broadcasts of scalars and
elementwise ops are recomputed, up to MAX_OPS ops.
"""

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import defining_op
from .ops import ELEMENTWISE, shape_of

BROADCAST = "stablehlo.broadcast_in_dim"
MAX_OPS = 16


def _index_computation(value: ir.Value) -> list[ir.Operation] | None:
    """The ops computing `value` from iotas and constants, producers first;
    None if anything else feeds it."""
    ops: list[ir.Operation] = []

    def visit(v: ir.Value) -> bool:
        op = defining_op(v)
        if op is None:
            return False
        if any(op == seen for seen in ops):
            return True
        if op.name == "stablehlo.iota":
            pass
        elif op.name == "stablehlo.constant":
            try:
                if not ir.DenseElementsAttr(op.attributes["value"]).is_splat:
                    return False
            except TypeError:  # the bindings cannot read some (a complex dense attr)
                return False
        elif op.name == BROADCAST:
            if shape_of(op.operands[0].type) != []:
                return False
        elif op.name in ELEMENTWISE:
            if not all(visit(x) for x in op.operands):
                return False
        else:
            return False
        ops.append(op)
        return len(ops) <= MAX_OPS

    return ops if visit(value) and any(op.name == "stablehlo.iota" for op in ops) else None


def _at_shape(ops: list[ir.Operation], shape: list[int], dims: list[int], ip) -> dict:
    """The ops again, on `shape`: an iota along the dim `dims` maps its dim
    to; returns old result -> new value."""
    mapped = {}
    for op in ops:
        element = ir.ShapedType(op.results[0].type).element_type
        result = ir.RankedTensorType.get(shape, element)
        attributes = {name: op.attributes[name] for name in op.attributes}
        operands = [mapped.get(v, v) for v in op.operands]
        if op.name == "stablehlo.iota":
            along = ir.IntegerAttr(op.attributes["iota_dimension"]).value
            attributes["iota_dimension"] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), dims[along]
            )
        elif op.name == "stablehlo.constant":
            splat = ir.DenseElementsAttr(op.attributes["value"]).get_splat_value()
            attributes["value"] = ir.DenseElementsAttr.get_splat(result, splat)
        new = ir.Operation.create(
            op.name,
            results=[result],
            operands=operands,
            attributes=attributes,
            loc=op.location,
            ip=ip,
        )
        mapped[op.results[0]] = new.results[0]
    return mapped


def rewrite_function(func: ir.Operation) -> list[str]:
    """Recompute every broadcast of an iota computation in `func` at its
    shape, in place; one log line each."""
    log = []
    block = func.regions[0].blocks[0]
    for op in [o.operation for o in block.operations]:
        if op.name != BROADCAST:
            continue
        ops = _index_computation(op.operands[0])
        if ops is None:
            continue
        dims = list(ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"]))
        where = location_text(op.location)
        with op.location:
            mapped = _at_shape(ops, shape_of(op.results[0].type), dims, ir.InsertionPoint(op))
        op.results[0].replace_all_uses_with(mapped[op.operands[0]])
        op.erase()
        for dead in reversed(ops):
            if not any(True for r in dead.results for _ in r.uses):
                dead.erase()
        log.append(f"broadcast at {where} of a value computed from iotas: computed at its shape")
    return log
