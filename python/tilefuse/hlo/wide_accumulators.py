"""f16 and bf16 contractions accumulate in f32, as XLA's do.

A JAX matmul of bf16 (or f16) arrays is a dot_general whose result type is
bf16. StableHLO leaves the accumulation's precision to the implementation:
XLA:GPU accumulates in f32 and rounds once, while IREE 3.13 converts the
dot_general to a linalg contraction that accumulates in its result type.
Summing K products in bf16 (8 bits of mantissa) drifts with K: on an H200,
a 4096x4096x11008 bf16 product accumulated in bf16 was off JAX's by 58 (the
outputs are about 300 in size), and 8192^3 by 129 (docs/gpu-results.md).
f16 (10 bits) drifts the same way, four times slower: an f16 sum of K = 4096
products is off the f32 one by several f16 ulps of the output
(tests/test_wide_accumulators.py). Users judge the output against JAX's, so
every f16 and bf16 dot_general here gets an f32 result followed by a convert
to its declared type: the contraction strategies take the convert as part
of their epilogue, which they apply before the one store, so no extra
memory traffic. (On the tensor-core kernel the f32 accumulator tile goes
through workgroup memory, twice the bytes of an f16 one: matmul_mma.py lets
the tiles use the target's whole workgroup memory, which IREE's runtime
opts in to, so large products keep their 128x128 tiles.)
"""

from iree.compiler import ir

from ..irutil import walk
from .ops import element_type, try_cast

CONTRACTIONS = ("stablehlo.dot_general", "stablehlo.dot")
NARROW = ("bf16", "f16")


def _widen(op: ir.Operation) -> None:
    result = op.results[0]
    narrow_type = result.type
    with op.location:
        result.set_type(ir.RankedTensorType.get(narrow_type.shape, ir.F32Type.get()))
        with ir.InsertionPoint.after(op):
            convert = ir.Operation.create(
                "stablehlo.convert", results=[narrow_type], operands=[result]
            )
    result.replace_all_uses_except(convert.results[0], convert)


def rewrite_function(func: ir.Operation) -> list[str]:
    """Give every f16- or bf16-result contraction of `func` an f32 result and a
    convert back; one log line if any changed."""
    widened = 0
    # Nested regions too: a JAX scan over layers is a stablehlo.while whose
    # body holds the layer's matmuls.
    for op in list(walk(func)):
        if op.name not in CONTRACTIONS or len(op.results) != 1:
            continue
        ranked = try_cast(ir.RankedTensorType, op.results[0].type) is not None
        if ranked and str(element_type(op.results[0].type)) in NARROW:
            _widen(op)
            widened += 1
    if not widened:
        return []
    return [f"{widened} f16/bf16 contractions accumulate in f32 (XLA's precision)"]


def rewrite_module(module: ir.Module) -> int:
    """rewrite_function on every function of `module`; how many changed.
    The driver applies it to what IREE's own formation reads too, so that a
    program's precision does not depend on whose dispatches it runs."""
    changed = 0
    for op in module.body.operations:
        op = op.operation
        if op.name == "func.func" and op.regions[0].blocks:
            changed += bool(rewrite_function(op))
    return changed
