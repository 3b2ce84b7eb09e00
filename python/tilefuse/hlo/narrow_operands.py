"""A contraction reads an f16 or bf16 operand before its convert to f32.

JAX writes a product of mixed types (`x_f16 @ w_f32`, or
`x.astype(jnp.float32) @ w`) as a convert to f32 then an f32 dot_general.
IREE forms one dispatch of both (it fuses a widening convert into the
contraction that reads it); the planner gave the convert a loop dispatch of
its own, whose f32 copy the matmul then read back (`dg_mixed_f16_f32`: 2
dispatches against IREE's 1).

Reading the narrow value directly is the same product: a dot_general with
an f16 or bf16 operand and an f32 result widens each element as it reads it
(linalg's matmul casts its inputs to the output's type, as the kernels
built for hlo/wide_accumulators.py's bf16 x bf16 -> f32 products do), and a
widening convert is exact. So only converts from f16 or bf16 to f32 are
read through; the convert stays where something else reads it.
"""

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import defining_op, walk
from .ops import element_type, try_cast
from .wide_accumulators import CONTRACTIONS, NARROW


def _widened_source(value: ir.Value) -> ir.Value | None:
    """The f16/bf16 value `value` is an f32 convert of, or None."""
    convert = defining_op(value)
    if convert is None or convert.name != "stablehlo.convert":
        return None
    source = convert.operands[0]
    if try_cast(ir.RankedTensorType, source.type) is None:
        return None
    if str(element_type(source.type)) not in NARROW or str(element_type(value.type)) != "f32":
        return None
    return source


def rewrite_function(func: ir.Operation) -> list[str]:
    """Every f32 contraction of `func` reads its operands' f16/bf16 sources
    past their converts; one log line per contraction changed."""
    log = []
    for op in list(walk(func)):
        if op.name not in CONTRACTIONS or len(op.results) != 1:
            continue
        if str(element_type(op.results[0].type)) != "f32":
            continue
        read = []
        for i, value in enumerate(list(op.operands)):
            source = _widened_source(value)
            if source is None:
                continue
            convert = defining_op(value)
            op.operands[i] = source
            if not any(True for _ in convert.results[0].uses):
                convert.erase()
            read.append(f"{'lhs' if i == 0 else 'rhs'} as {element_type(source.type)}")
        if read:
            log.append(
                f"contraction at {location_text(op.location)} reads its {', '.join(read)} "
                f"(widened as read, not converted first)"
            )
    return log
