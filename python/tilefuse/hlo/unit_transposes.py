"""Transposes that move only dims of extent 1 as reshapes, before fusion planning.

JAX's attention keeps a query-length or head-group dim of extent 1 and moves
it around (jax.nn.dot_product_attention: [B, T, N, 1, S] -> [1, B, N, T, S]).
Such a transpose keeps every other dim in its order, so it moves no element:
it is a reshape. Left as a transpose, the planner counts it as data movement
(a softmax group holding one is no kernel's); as a reshape it is metadata.
"""

from iree.compiler import ir

from ..frontend import location_text
from .ops import replace_by_reshape, shape_of


def moves_only_unit_dims(shape: list[int], permutation: list[int]) -> bool:
    """Whether the dims of extent other than 1 keep their order."""
    kept = [d for d in permutation if shape[d] != 1]
    return kept == sorted(kept)


def rewrite_function(func: ir.Operation) -> list[str]:
    """Rewrite every such transpose of `func` in place; one log line each."""
    log = []
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
