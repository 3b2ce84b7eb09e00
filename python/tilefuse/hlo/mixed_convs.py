"""Grouped convolutions with a wider result read their operands converted.

JAX writes a convolution of f16/bf16 operands that accumulates in f32
(`preferred_element_type=jnp.float32`, mixed-precision policies) as a
stablehlo.convolution with an f32 result. Where it is depthwise (one input
feature per group, one output per input feature), IREE 3.13 fails to
compile it on every target: "'tensor.collapse_shape' op expected collapsed
type to be 'tensor<3x3x8xbf16>', but got 'tensor<3x3x8xf32>'" (its
depthwise lowering collapses the kernel into the result's element type).
The same convolution of operands converted to the result type first is the
same arithmetic (an f16 or bf16 product is exact in f32, and the sum was
to be f32 anyway), and IREE compiles it, provided the kernel's convert is
kept apart by a stablehlo.optimization_barrier: without one IREE folds it
into the kernel's collapse and fails the same way (its own dispatch, of
the kernel's few elements). So every grouped convolution
(feature_group_count > 1) of mixed float types is rewritten so (where it
is not depthwise IREE compiles it either way: one convert more, fused into
the padding or the convolution's loads).
"""

from iree.compiler import ir

from ..frontend import location_text
from .ops import body_ops, element_name
from .wide_accumulators import NARROW

# Operand element types widened to an f32 result (never narrowed).
OPERANDS = {*NARROW, "f32"}


def rewrite_function(func: ir.Operation) -> list[str]:
    """Convert the operands of every mixed-precision grouped convolution
    of `func` to its result type, in place; one log line each."""
    log = []
    for op in body_ops(func, "stablehlo.convolution"):
        if ir.IntegerAttr(op.attributes["feature_group_count"]).value == 1:
            continue
        wide = element_name(op.results[0])
        narrow = {element_name(v) for v in op.operands}
        if wide != "f32" or narrow == {wide} or not narrow <= OPERANDS:
            continue
        for k, value in enumerate(list(op.operands)):
            if element_name(value) == wide:
                continue
            shape = ir.RankedTensorType(value.type).shape
            with op.location:
                to = ir.RankedTensorType.get(shape, ir.ShapedType(op.results[0].type).element_type)
                at = ir.InsertionPoint(op)
                value = ir.Operation.create(
                    "stablehlo.convert", results=[to], operands=[value], ip=at
                ).results[0]
                if k == 1:
                    value = ir.Operation.create(
                        "stablehlo.optimization_barrier", results=[to], operands=[value], ip=at
                    ).results[0]
            op.operands[k] = value
        log.append(
            f"grouped convolution at {location_text(op.location)}: {'/'.join(sorted(narrow))} "
            f"operands converted to its {wide} result (IREE's depthwise lowering fails on "
            "mixed types)"
        )
    return log
