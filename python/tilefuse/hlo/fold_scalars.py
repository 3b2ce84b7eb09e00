"""Scalar arithmetic on constants folded into constants, before fusion planning.

JAX's jnp.var (and the layer norms built on it) computes its divisor from the
ddof argument on scalars, after inlining all constants:

    %n = stablehlo.subtract 32.0, stablehlo.convert(0 : i32)
    %ok = stablehlo.compare GT, %n, 0.0
    %v = stablehlo.select %ok, %sum / %n, NaN

IREE 3.13 folds none of it (StableHLO's folders are not in its input
pipeline): the compare becomes a one-element dispatch of its own, and its
i1 result reaches the next dispatch as a push constant, which the host reads
back from the device first (corpus layernorm_*, gpt2_block: one such
dispatch per norm). Here each StableHLO op with a rank-0 result whose
operands are all constants is evaluated in its own element type (numpy
scalars of that width) and replaced by a constant, in program order; a
select on a constant predicate becomes the operand it picks, of any shape.

Only what has one answer is folded: float and signed-integer arithmetic,
comparisons, boolean logic and conversions between f16/f32/f64/i1/i8-i64.
Integer division by zero, unsigned and total-order comparisons, a float to
integer conversion out of range and any other op stay as they are.
"""

import operator

import numpy as np
from iree.compiler import ir

from ..irutil import defining_op
from .ops import element_type, op_class, shape_of

NUMPY = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i1": np.bool_}
NUMPY.update({f"i{w}": getattr(np, f"int{w}") for w in (8, 16, 32, 64)})

BINARY = {
    "stablehlo.add": operator.add,
    "stablehlo.subtract": operator.sub,
    "stablehlo.multiply": operator.mul,
    "stablehlo.maximum": np.maximum,  # NaN propagates, as StableHLO's does
    "stablehlo.minimum": np.minimum,
    "stablehlo.and": operator.and_,
    "stablehlo.or": operator.or_,
    "stablehlo.xor": operator.xor,
}
UNARY = {"stablehlo.negate": operator.neg, "stablehlo.not": operator.invert}
COMPARE = {
    "EQ": operator.eq,
    "NE": operator.ne,
    "LT": operator.lt,
    "LE": operator.le,
    "GT": operator.gt,
    "GE": operator.ge,
}


def _numpy_type(t: ir.Type):
    return NUMPY.get(str(element_type(t)))


def _constant(v: ir.Value):
    """The scalar a rank-0 stablehlo.constant holds (a numpy scalar of its
    element type), or None."""
    owner = defining_op(v)
    if owner is None or owner.name != "stablehlo.constant":
        return None
    cast = _numpy_type(v.type)
    if shape_of(v.type) != [] or cast is None:
        return None
    value = ir.DenseElementsAttr(owner.attributes["value"]).get_splat_value()
    if isinstance(value, ir.BoolAttr):
        return np.bool_(value.value)
    if isinstance(value, ir.FloatAttr):
        return cast(value.value)
    return cast(ir.IntegerAttr(value).value)


def _enum(op: ir.Operation, name: str) -> str:
    """`GT` of `#stablehlo<comparison_direction GT>`."""
    return str(op.attributes[name]).rstrip(">").split()[-1]


def _evaluate(op: ir.Operation, args: list):
    """The op's value on `args`, in its result's type, or None."""
    out = _numpy_type(op.results[0].type)
    if out is None:
        return None
    name = op.name
    with np.errstate(all="ignore"):
        if name == "stablehlo.convert":
            (x,) = args
            if np.issubdtype(out, np.integer) and np.issubdtype(type(x), np.floating):
                info = np.iinfo(out)
                if not np.isfinite(x) or not info.min <= np.trunc(x) <= info.max:
                    return None
            return np.array(x).astype(out)[()]
        if name in UNARY:
            return out(UNARY[name](args[0]))
        if name in BINARY:
            return out(BINARY[name](*args))
        if name == "stablehlo.divide":
            a, b = args
            if np.issubdtype(out, np.floating):
                return out(a / b)
            if out is np.bool_ or b == 0:
                return None
            q = abs(int(a)) // abs(int(b))  # truncated toward zero
            q = q if (a < 0) == (b < 0) else -q
            info = np.iinfo(out)
            if not info.min <= q <= info.max:
                return None  # INT_MIN / -1 overflows: left to the op itself
            return out(q)
        if name == "stablehlo.compare":
            kind = _enum(op, "compare_type") if "compare_type" in op.attributes else None
            boolean = isinstance(args[0], np.bool_)
            if kind == "TOTALORDER" or (kind == "UNSIGNED" and not boolean):
                return None  # -0 < +0 and NaN's place; unsigned integers
            return np.bool_(COMPARE[_enum(op, "comparison_direction")](*args))
    return None


def _replace_by_constant(op: ir.Operation, value) -> None:
    t = op.results[0].type
    element = element_type(t)
    with op.location:
        if isinstance(value, np.floating):
            attr = ir.FloatAttr.get(element, float(value))
        else:
            attr = ir.IntegerAttr.get(element, int(value))
        constant = ir.Operation.create(
            "stablehlo.constant",
            results=[t],
            attributes={"value": ir.DenseElementsAttr.get_splat(t, attr)},
            ip=ir.InsertionPoint(op),
        )
    op.results[0].replace_all_uses_with(constant.results[0])
    op.erase()


def _erase_unused(func: ir.Operation) -> None:
    """Erase the constants, elementwise and index ops nothing reads any more
    (the operands of what was folded: left in place, each would be a group
    of its own with no result), last first."""
    for op in reversed([o.operation for o in func.regions[0].blocks[0].operations]):
        if op_class(op.name) not in ("constant", "elementwise", "index"):
            continue
        if not any(True for r in op.results for _ in r.uses):
            op.erase()


def rewrite_function(func: ir.Operation) -> list[str]:
    """Fold the scalar ops of `func` on constants in place; one log line
    if any was folded."""
    folded, selects = 0, 0
    for op in [o.operation for o in func.regions[0].blocks[0].operations]:
        if not op.name.startswith("stablehlo.") or len(op.results) != 1 or not op.operands:
            continue
        if op.name == "stablehlo.select":
            pick = _constant(op.operands[0])
            if pick is not None:
                op.results[0].replace_all_uses_with(op.operands[1 if pick else 2])
                op.erase()
                selects += 1
            continue
        if shape_of(op.results[0].type) != []:
            continue
        args = [_constant(v) for v in op.operands]
        if any(a is None for a in args):
            continue
        value = _evaluate(op, args)
        if value is not None:
            _replace_by_constant(op, value)
            folded += 1
    if not folded and not selects:
        return []
    _erase_unused(func)
    return [
        (
            f"{folded} scalar ops on constants folded, {selects} selects on a constant "
            "predicate replaced by the operand they pick"
        )
    ]
