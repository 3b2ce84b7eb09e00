"""Sums of negated values as negated sums, before fusion planning.

JAX's gradients sum negated terms (layernorm's backward: the mean's
gradient is reduce(negate(g * x), add)). IREE fuses the negate into the
reduction's body, and arith canonicalization folds `acc + (-v)` into
`acc - v`: a reduction whose combiner is a subtraction, which has no
identity. No tilefuse row or column kernel takes it (a split reduction
would combine partial results by subtracting them), and IREE's own codegen
fails on some ("Failed to get an identity value for the reduction
operation": jax.grad of a layernorm, on Vulkan and CUDA).

So `reduce(negate(y), add, init 0)` becomes `negate(reduce(y, add, 0))`:
the negate moves to the reduced values, where IREE fuses it into whatever
reads them. Rounding is symmetric, so every partial sum is the exact
negation of the other's; only a zero's sign can differ (0 + -0 is +0).
Only a one-operand add-reduce of a negate used by nothing else, with its
identity (0) as init, is rewritten (integers too: negation is exact).
"""

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import defining_op
from .argminmax import function_reduces
from .scalars import identity_body


def rewrite_function(func: ir.Operation) -> list[str]:
    """Rewrite every such reduce of `func` in place; one log line each."""
    log = []
    for op in function_reduces(func, variadic=False):
        negate = defining_op(op.operands[0])
        if negate is None or negate.name != "stablehlo.negate":
            continue
        if len(list(negate.results[0].uses)) != 1:
            continue
        why, body = identity_body(op)  # the init must be the add's 0
        if why or body != "stablehlo.add":
            continue
        op.operands[0] = negate.operands[0]
        negated = ir.Operation.create(
            "stablehlo.negate",
            results=[op.results[0].type],
            operands=[op.results[0]],
            loc=op.location,
            ip=ir.InsertionPoint.after(op),
        )
        op.results[0].replace_all_uses_except(negated.results[0], negated)
        negate.erase()
        log.append(f"sum of a negate at {location_text(op.location)} rewritten as a negated sum")
    return log
