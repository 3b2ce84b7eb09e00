"""Transposes that move only dims of extent 1 as reshapes, before fusion planning.

JAX's attention keeps a query-length or head-group dim of extent 1 and moves
it around (jax.nn.dot_product_attention: [B, T, N, 1, S] -> [1, B, N, T, S]).
Such a transpose keeps every other dim in its order, so it moves no element:
it is a reshape. Left as a transpose, the planner counts it as data movement
(a softmax group holding one is no kernel's); as a reshape it is metadata.

JAX also drops a batch dim of extent 1 after a transpose (q @ swapaxes(k)
at batch 1: reshape(transpose(k)) from [1, H, D, S] to [H, D, S]). The
reshape moves to the transpose's operand, which it views just the same,
so that the transpose is what the contraction reads (hlo/matrix_vectors.py
reads through it to k as stored).
"""

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import defining_op
from .ops import replace_by_reshape, shape_of


def moves_only_unit_dims(shape: list[int], permutation: list[int]) -> bool:
    """Whether the dims of extent other than 1 keep their order."""
    kept = [d for d in permutation if shape[d] != 1]
    return kept == sorted(kept)


def _dropped_unit_dims(shape: list[int], viewed: list[int]) -> list[int] | None:
    """The dims of `shape` a reshape to `viewed` drops, if it only drops dims
    of extent 1; else None."""
    dropped, j = [], 0
    for d, extent in enumerate(shape):
        if j < len(viewed) and viewed[j] == extent:
            j += 1
        elif extent == 1:
            dropped.append(d)
        else:
            return None
    return dropped if j == len(viewed) and dropped else None


def _reshape_first(op: ir.Operation) -> bool:
    """Rewrite reshape(transpose(x)), `op` the reshape, dropping only dims of
    extent 1, as transpose(reshape(x)); whether it did."""
    transpose = defining_op(op.operands[0])
    if transpose is None or transpose.name != "stablehlo.transpose":
        return False
    if sum(1 for _ in transpose.results[0].uses) != 1:
        return False
    shape = shape_of(transpose.results[0].type)
    viewed = shape_of(op.results[0].type)
    if shape is None or viewed is None:
        return False
    dropped = _dropped_unit_dims(shape, viewed)
    if dropped is None:
        return False
    permutation = list(ir.DenseI64ArrayAttr(transpose.attributes["permutation"]))
    kept = [permutation[i] for i in range(len(shape)) if i not in dropped]
    source = transpose.operands[0]
    source_shape = shape_of(source.type)
    element = ir.ShapedType(source.type).element_type
    ip = ir.InsertionPoint(op)
    with op.location:
        view_type = ir.RankedTensorType.get([source_shape[d] for d in sorted(kept)], element)
        renumbered = ir.DenseI64ArrayAttr.get([sorted(kept).index(d) for d in kept])
    view = ir.Operation.create(
        "stablehlo.reshape", results=[view_type], operands=[source], loc=op.location, ip=ip
    )
    new = ir.Operation.create(
        "stablehlo.transpose",
        results=[op.results[0].type],
        operands=[view.results[0]],
        attributes={"permutation": renumbered},
        loc=transpose.location,
        ip=ip,
    )
    op.results[0].replace_all_uses_with(new.results[0])
    op.erase()
    transpose.erase()
    return True


def rewrite_function(func: ir.Operation) -> list[str]:
    """Rewrite every such transpose of `func` in place; one log line each."""
    log = []
    for op in [o.operation for o in func.regions[0].blocks[0].operations]:
        where = location_text(op.location)
        if op.name == "stablehlo.reshape" and _reshape_first(op):
            log.append(
                f"reshape at {where} drops only dims of extent 1: moved before its transpose"
            )
    for op in [o.operation for o in func.regions[0].blocks[0].operations]:
        if op.name != "stablehlo.transpose":
            continue
        shape = shape_of(op.operands[0].type)
        permutation = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
        if shape is None or permutation == sorted(permutation):
            continue
        if not moves_only_unit_dims(shape, permutation):
            continue
        where = location_text(op.location)
        replace_by_reshape(op)
        log.append(f"transpose at {where} moves only dims of extent 1: rewritten as a reshape")
    return log
