"""Float row max/min as an integer max/min of ordered keys (SPIR-V targets).

IREE 3.13 lowers a lane's `vector.reduction <maximumf>` on SPIR-V to a
GL.FMax chain that drops NaN, so the row kernel reads scalars for float
max/min there (strategies/row_reduction.py, V = 1), which lavapipe runs far
slower than 4-vectors (measured in docs/findings.md, 'Float max/min on
SPIR-V'). On i32 keys ordered as the floats
(argminmax.float_key_lines: -0 just below +0, as IEEE maximum and minimum
order them; NaN above every key for max, below for min, so it wins as
StableHLO's maximum/minimum propagate it) the reduction is an integer one and
128-bit vectors are safe. The key's xor is its own inverse, so the result
decodes back exactly (a NaN decodes to a NaN):

    y = decode(reduce max(key(x)))       decode(k) = bits(k < 0 ? k ^ M : k)

The decode is an epilogue over one value per row, which the softmax kernel
runs in the same dispatch (strategies/softmax.py).

Rewritten: a reduce whose body is stablehlo.maximum or minimum, of f32, f16
or bf16, over the innermost dim(s), with the identity (-inf for max, +inf for
min) as init, and whose result is not broadcast back over the rows (a
softmax's max stays a float max: NaN reaches that kernel's output through
exp either way). Only on targets that ask for it (`float_minmax_as_keys`).
"""

import math

from iree.compiler import ir

from ..frontend import location_text
from .argminmax import (
    FLOAT_TYPES,
    INT32_MAX,
    INT32_MIN,
    float_key_lines,
    function_reduces,
    splat_value,
    splice,
    tensor_text,
)
from .ops import ELEMENTWISE, shape_of

BODIES = {"stablehlo.maximum": "max", "stablehlo.minimum": "min"}


def refusal(op: ir.Operation) -> tuple[str | None, str]:
    """(None, "max" or "min") if `op`, a one-operand stablehlo.reduce, is
    rewritten; else (why not, "")."""
    body = [o.operation.name for o in op.regions[0].blocks[0].operations]
    if len(body) != 2 or body[0] not in BODIES:
        return "not a max/min", ""
    kind = BODIES[body[0]]
    x, init = op.operands
    shape = shape_of(x.type)
    element = str(ir.ShapedType(x.type).element_type)
    if shape is None or element not in FLOAT_TYPES:
        return f"{element} values", ""
    dims = list(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
    if not dims or dims != list(range(len(shape) - len(dims), len(shape))):
        return "not over the innermost dims (a column reduction has no NaN problem)", ""
    if splat_value(init) != (-math.inf if kind == "max" else math.inf):
        return "an init other than the identity", ""
    if _broadcast_back(op.results[0]):
        return "its result is broadcast back (a softmax-like max)", ""
    return None, kind


# What a softmax's max passes through before it is broadcast back over the
# rows: jax.nn.softmax writes `maximum(-inf, max)`, a reshape adds the kept
# unit dim.
_PER_ROW = ELEMENTWISE | {"stablehlo.reshape"}


def _broadcast_back(value: ir.Value) -> bool:
    """Whether `value` (one per row) reaches a broadcast_in_dim through
    elementwise ops and reshapes: the rows' kernel reads it back, and a
    softmax group's max stays a float max there."""
    todo = [value]
    for _ in range(64):  # a softmax's max is a few ops from its broadcast
        if not todo:
            break
        for use in todo.pop().uses:
            user = use.owner.operation
            if user.name == "stablehlo.broadcast_in_dim":
                return True
            if user.name in _PER_ROW:
                todo += list(user.results)
    return False


def _template(kind: str, shape: list[int], dims: list[int], element: str, loc: str) -> str:
    kept = shape[: len(shape) - len(dims)]
    x_type, i32 = tensor_text(shape, element), tensor_text(shape, "i32")
    out_type, out_i32, out_i1 = (tensor_text(kept, t) for t in (element, "i32", "i1"))
    best, init = ("maximum", INT32_MIN) if kind == "max" else ("minimum", INT32_MAX)
    nan_key = INT32_MAX if kind == "max" else INT32_MIN
    lines = [f"%zero = stablehlo.constant dense<0> : {i32}"]
    lines += float_key_lines(x_type, element, nan_key, zeros_equal=False)
    lines += [
        f"%init = stablehlo.constant dense<{init}> : tensor<i32>",
        (
            f"%best = stablehlo.reduce(%key init: %init) applies stablehlo.{best}"
            f" across dimensions = {dims} : ({i32}, tensor<i32>) -> {out_i32}"
        ),
        f"%zero_row = stablehlo.constant dense<0> : {out_i32}",
        f"%magnitude_row = stablehlo.constant dense<{INT32_MAX}> : {out_i32}",
        (
            f"%best_negative = stablehlo.compare LT, %best, %zero_row, SIGNED"
            f" : ({out_i32}, {out_i32}) -> {out_i1}"
        ),
        f"%best_flipped = stablehlo.xor %best, %magnitude_row : {out_i32}",
        f"%best_bits = stablehlo.select %best_negative, %best_flipped, %best : {out_i1}, {out_i32}",
    ]
    if FLOAT_TYPES[element] == 32:
        lines.append(f"%y = stablehlo.bitcast_convert %best_bits : ({out_i32}) -> {out_type}")
    else:
        out_i16 = tensor_text(kept, "i16")
        lines += [
            f"%best_bits16 = stablehlo.convert %best_bits : ({out_i32}) -> {out_i16}",
            f"%y = stablehlo.bitcast_convert %best_bits16 : ({out_i16}) -> {out_type}",
        ]
    body = "\n".join(f"  {line} {loc}" for line in lines)
    return (
        f"func.func @minmax(%x: {x_type}) -> {out_type} {{\n{body}\n"
        f"  return %y : {out_type} {loc}\n}}"
    )


def rewrite_function(func: ir.Operation) -> list[str]:
    """Rewrite every qualifying float max/min reduce of `func` in place; one
    log line per reduce rewritten."""
    log = []
    for op in function_reduces(func, variadic=False):
        why, kind = refusal(op)
        if why:
            continue
        x = op.operands[0]
        shape = shape_of(x.type)
        dims = list(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
        element = str(ir.ShapedType(x.type).element_type)
        where = location_text(op.location)
        splice(op, _template(kind, shape, dims, element, str(op.location)), x, result=0)
        log.append(
            f"row {kind} at {where} rewritten on ordered i32 keys "
            "(IREE's SPIR-V vector max/min drops NaN; integer keys keep 4-vectors)"
        )
    return log


__all__ = ["refusal", "rewrite_function"]
