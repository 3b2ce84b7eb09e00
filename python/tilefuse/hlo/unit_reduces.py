"""Reductions over dims of extent 1 as reshapes, before fusion planning.

JAX's gradient of a broadcast sums over the broadcast dims, and where one had
extent 1 (a bias kept as [1, N], a keepdims [M, 1]) that sum reduces nothing:

    %g = stablehlo.reduce(%d init: 0) applies stablehlo.add
           across dimensions = [0] : (tensor<1x64xf32>, tensor<f32>) -> tensor<64xf32>

Each element is combined with the init alone, so when the init is the
identity of the body's op the result is the operand, reshaped. Left as a
reduce, it is a group of its own that no kernel takes (there is no row to
split), and IREE makes it a dispatch; as a reshape it is metadata (IREE folds
it into the loads of whatever reads it).

Only a one-operand reduce whose body is one add, multiply, maximum, minimum,
and or or of its two arguments, with that op's identity as init, is
rewritten (scalars.identity_body decides), and an and / or of booleans (i1)
from true / false: jnp.take's bounds check is an `all` over the index
vector's one dim, which was a group no kernel takes and a dispatch of its
own in each embedding lookup (T5: three, and the loop groups beside them);
any other is left as it is.
"""

from iree.compiler import ir

from ..frontend import location_text
from .argminmax import function_reduces, splat_value
from .ops import replace_by_reshape, shape_of
from .scalars import identity_body, single_combiner

# The identity of each boolean combiner, as splat_value reads an i1 splat.
BOOLEAN_IDENTITIES = {"stablehlo.and": (1, -1), "stablehlo.or": (0,)}


def rewrite_function(func: ir.Operation) -> list[str]:
    """Rewrite every reduce of `func` over extent-1 dims alone in place; one
    log line per rewrite."""
    log = []
    for op in function_reduces(func, variadic=False):
        shape = shape_of(op.operands[0].type)
        dims = list(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
        if shape is None or not dims or any(shape[d] != 1 for d in dims):
            continue
        why, body = identity_body(op)
        if why:
            body = _boolean_body(op)
        if why and body is None:
            continue
        where = location_text(op.location)
        replace_by_reshape(op)
        name = body.removeprefix("stablehlo.")
        log.append(f"{name}-reduction at {where} over dims of extent 1 rewritten as a reshape")
    return log


def _boolean_body(op: ir.Operation) -> str | None:
    """The body op of `op`, a one-operand reduce of booleans whose body is
    one and / or of its two arguments from that op's identity, else None."""
    x, init = op.operands
    if str(ir.ShapedType(x.type).element_type) != "i1":
        return None
    combiner = single_combiner(op)
    if combiner is None or combiner.name not in BOOLEAN_IDENTITIES:
        return None
    return combiner.name if splat_value(init) in BOOLEAN_IDENTITIES[combiner.name] else None
