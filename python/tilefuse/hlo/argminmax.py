"""Argmax/argmin as two plain row reductions, before fusion planning.

JAX lowers `jnp.argmax(x, axis=1)` to a variadic stablehlo.reduce over
(x, iota) whose body keeps the larger value (a NaN first) and, on ties, the
smaller index. No tilefuse kernel combines (value, index) pairs: subgroup
shuffles and warp distribution combine one 32-bit value. So such a reduce is
rewritten, in place, as

    k   = key(x)                              i32, ordered as the body orders x
    m   = reduce max of k over the row        (min for argmin)
    idx = reduce min of select(k == m, iota, INT_MAX)

Two chained reductions over one row: the planner makes them one softmax-like
group, and the softmax kernel runs them in one dispatch, recomputing k from x
in each (x is read twice, the second time from cache; k never exists in
memory).

Why an integer key rather than `m = max(x)` on floats: IREE 3.13 lowers a
lane's vector max on SPIR-V to GL.FMax, which drops NaN (see
strategies/row_reduction.py), and then a NaN row would get the index of its
largest number. The key orders floats as their bits read as signed integers,
with the magnitude bits of negative ones flipped; +0 and -0 both map to 0
(the body's EQ finds them equal) and every NaN to INT_MAX (INT_MIN for
argmin: JAX's body picks a NaN for both). Integers are their own key.

Result: the first index of the max (min), or of the first NaN. JAX's body
leaves which NaN wins to the reduction order; this picks the first, as numpy
does.

The body is recognised by what it computes, not how it is spelled: it is
evaluated on every ordering of two (value, index) pairs (less, equal,
greater, NaN on either side, both indices orders), which decides a body made
only of compares, and/or/not and selects of its arguments. A reduce that does
not qualify is left as it is (IREE compiles it), with the reason in the log.
"""

import math

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import defining_op
from .ops import erase_with_dead_producers, shape_of

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
FLOAT_TYPES = {"f32": 32, "f16": 16, "bf16": 16}
INT_TYPES = {"i8": 8, "i16": 16, "i32": 32}

# Probe values: enough to give every ordering of two values (and NaN).
FLOAT_PROBES = [1.0, 2.0, math.nan]
INT_PROBES = [1, 2]
INDEX_PROBES = [(0, 1), (1, 0)]


def _enum(attr: ir.Attribute) -> str:
    # #stablehlo<comparison_direction GT> -> GT (no Python binding for the enum)
    return str(attr).rstrip(">").rsplit(" ", 1)[-1]


def _compare(op: ir.Operation, a, b) -> bool:
    direction = _enum(op.attributes["comparison_direction"])
    if "compare_type" in op.attributes:
        kind = _enum(op.attributes["compare_type"])
        if kind not in ("FLOAT", "SIGNED", "NOTYPE"):
            raise ValueError(f"a {kind} compare")
    # Python's float comparisons are IEEE's: false on NaN except !=.
    return {
        "EQ": a == b,
        "NE": a != b,
        "LT": a < b,
        "LE": a <= b,
        "GT": a > b,
        "GE": a >= b,
    }[direction]


def evaluate(body: ir.Block, args: list) -> list:
    """Run a reduce body of compares, logic and selects on Python scalars.
    Raises ValueError naming the first op it cannot run."""
    env = dict(zip(body.arguments, args))
    for inner in body.operations:
        op = inner.operation
        ins = [env[v] for v in op.operands]
        if op.name == "stablehlo.compare":
            out = _compare(op, *ins)
        elif op.name in ("stablehlo.and", "stablehlo.or", "stablehlo.not"):
            if not all(isinstance(v, bool) for v in ins):
                raise ValueError(f"{op.name} of non-booleans")
            if op.name == "stablehlo.and":
                out = ins[0] and ins[1]
            elif op.name == "stablehlo.or":
                out = ins[0] or ins[1]
            else:
                out = not ins[0]
        elif op.name == "stablehlo.select":
            out = ins[1] if ins[0] else ins[2]
        elif op.name == "stablehlo.return":
            return ins
        else:
            raise ValueError(f"{op.name} in the body")
        env[op.results[0]] = out
    raise ValueError("no stablehlo.return")


def _isnan(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _same(a, b) -> bool:
    return a == b or (_isnan(a) and _isnan(b))


def body_kind(body: ir.Block, floats: bool) -> str:
    """ "argmax" or "argmin" if the body picks as JAX's does; raises ValueError."""
    values = FLOAT_PROBES if floats else INT_PROBES
    for kind in ("argmax", "argmin"):
        ok = True
        for av in values:
            for bv in values:
                for ai, bi in INDEX_PROBES:
                    out_v, out_i = evaluate(body, [av, ai, bv, bi])
                    a_nan, b_nan = _isnan(av), _isnan(bv)
                    if a_nan and b_nan:  # either NaN: which one is order-dependent
                        ok &= _isnan(out_v) and out_i in (ai, bi)
                        continue
                    if a_nan or b_nan:
                        a_wins = a_nan
                    elif av == bv:
                        a_wins = ai < bi
                    else:
                        a_wins = av > bv if kind == "argmax" else av < bv
                    ok &= _same(out_v, av if a_wins else bv) and out_i == (ai if a_wins else bi)
        if ok:
            return kind
    raise ValueError("the body is neither argmax nor argmin (first index, NaN first)")


def splat_value(value: ir.Value):
    """The scalar of a splat stablehlo.constant, or None."""
    owner = defining_op(value)
    if owner is None or owner.name != "stablehlo.constant":
        return None
    attr = owner.attributes["value"]
    for cls, scalar in (
        (ir.DenseFPElementsAttr, ir.FloatAttr),
        (ir.DenseIntElementsAttr, ir.IntegerAttr),
    ):
        try:
            dense = cls(attr)
        except (ValueError, TypeError):
            continue
        return scalar(dense.get_splat_value()).value if dense.is_splat else None
    return None


def _identity(kind: str, element: str, bits: int) -> float | int:
    if element in FLOAT_TYPES:
        return -math.inf if kind == "argmax" else math.inf
    return -(2 ** (bits - 1)) if kind == "argmax" else 2 ** (bits - 1) - 1


def refusal(op: ir.Operation) -> tuple[str | None, str]:
    """(None, kind) if `op`, a two-operand stablehlo.reduce, is rewritten;
    else (why not, "")."""
    if len(op.operands) != 4 or len(op.results) != 2:
        return f"a reduce of {len(op.operands) // 2} operands", ""
    x, iota, value_init, index_init = op.operands
    shape = shape_of(x.type)
    dims = list(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
    if shape is None or dims != [len(shape) - 1]:
        return "not over the innermost dim alone (the softmax kernel's rows)", ""
    element = str(ir.ShapedType(x.type).element_type)
    index_type = str(ir.ShapedType(iota.type).element_type)
    if element not in FLOAT_TYPES and element not in INT_TYPES:
        return f"{element} values (f32, f16, bf16, i8, i16, i32 are rewritten)", ""
    if index_type != "i32":
        return f"{index_type} indices (i32 are rewritten)", ""
    producer = defining_op(iota)
    if not (
        producer is not None
        and producer.name == "stablehlo.iota"
        and ir.IntegerAttr(producer.attributes["iota_dimension"]).value == dims[0]
    ):
        return "the indices are not an iota along the reduced dim", ""
    if any(True for _ in op.results[0].uses):
        return "its max/min values are used (only the indices are rewritten)", ""
    try:
        kind = body_kind(op.regions[0].blocks[0], element in FLOAT_TYPES)
    except ValueError as e:
        return str(e), ""
    bits = FLOAT_TYPES.get(element) or INT_TYPES[element]
    if splat_value(value_init) != _identity(kind, element, bits) or splat_value(index_init) != 0:
        return f"initial values other than ({_identity(kind, element, bits)}, 0)", ""
    return None, kind


def tensor_text(shape: list[int], element: str) -> str:
    """`tensor<2x3xf32>` for the templates below; `tensor<f32>` for []."""
    return f"tensor<{''.join(f'{d}x' for d in shape)}{element}>"


def float_key_lines(x_type: str, element: str, nan_key: int, zeros_equal: bool) -> list[str]:
    """StableHLO lines defining %key, an i32 tensor ordered as the floats of
    %x (of `x_type`): the bits read as a signed integer, those of negative
    floats with their 31 low bits flipped (an involution: the same xor
    decodes a key), NaN mapped to `nan_key`. +0 and -0 both map to 0 when
    `zeros_equal` (EQ finds them equal); else -0 stays just below +0, as
    IEEE maximum/minimum order them. f16/bf16 bits are sign-extended first,
    which keeps their order. Needs %zero, an i32 zero of %x's shape."""
    i32 = x_type.replace(element, "i32")
    i1 = x_type.replace(element, "i1")
    lines = []
    if FLOAT_TYPES[element] == 32:
        lines.append(f"%bits = stablehlo.bitcast_convert %x : ({x_type}) -> {i32}")
    else:
        i16 = x_type.replace(element, "i16")
        lines += [
            f"%bits16 = stablehlo.bitcast_convert %x : ({x_type}) -> {i16}",
            f"%bits = stablehlo.convert %bits16 : ({i16}) -> {i32}",
        ]
    lines += [
        f"%magnitude = stablehlo.constant dense<{INT32_MAX}> : {i32}",
        f"%nan_key = stablehlo.constant dense<{nan_key}> : {i32}",
        f"%negative = stablehlo.compare LT, %bits, %zero, SIGNED : ({i32}, {i32}) -> {i1}",
        f"%flipped = stablehlo.xor %bits, %magnitude : {i32}",
        f"%ordered = stablehlo.select %negative, %flipped, %bits : {i1}, {i32}",
    ]
    ordered = "%ordered"
    if zeros_equal:
        lines += [
            f"%fzero = stablehlo.constant dense<0.0> : {x_type}",
            f"%is_zero = stablehlo.compare EQ, %x, %fzero, FLOAT : ({x_type}, {x_type}) -> {i1}",
            f"%signless = stablehlo.select %is_zero, %zero, %ordered : {i1}, {i32}",
        ]
        ordered = "%signless"
    lines += [
        f"%is_nan = stablehlo.compare NE, %x, %x, FLOAT : ({x_type}, {x_type}) -> {i1}",
        f"%key = stablehlo.select %is_nan, %nan_key, {ordered} : {i1}, {i32}",
    ]
    return lines


def _template(kind: str, shape: list[int], element: str, loc: str) -> str:
    """The rewrite as a function of x, every op at the reduce's location. x
    of another rank than 2 is reshaped to rows of its innermost dim (a view,
    IREE folds it), and the indices back."""
    *kept, n = shape
    rows = math.prod(kept)
    in_type, out_type = tensor_text(shape, element), tensor_text(kept, "i32")
    x_type = tensor_text([rows, n], element)
    i32, i1 = tensor_text([rows, n], "i32"), tensor_text([rows, n], "i1")
    row = tensor_text([rows], "i32")
    best, init = ("maximum", INT32_MIN) if kind == "argmax" else ("minimum", INT32_MAX)
    lines = []
    if len(shape) != 2:
        lines.append(f"%x = stablehlo.reshape %x_in : ({in_type}) -> {x_type}")
    lines += [
        f"%iota = stablehlo.iota dim = 1 : {i32}",
        f"%zero = stablehlo.constant dense<0> : {i32}",
        f"%none = stablehlo.constant dense<{INT32_MAX}> : {i32}",
    ]
    key = "%key"
    if element == "i32":
        key = "%x"
    elif element in INT_TYPES:
        lines.append(f"%key = stablehlo.convert %x : ({x_type}) -> {i32}")
    else:
        nan_key = INT32_MAX if kind == "argmax" else INT32_MIN
        lines += float_key_lines(x_type, element, nan_key, zeros_equal=True)
    lines += [
        f"%init = stablehlo.constant dense<{init}> : tensor<i32>",
        f"%big = stablehlo.constant dense<{INT32_MAX}> : tensor<i32>",
        (
            f"%best = stablehlo.reduce({key} init: %init) applies stablehlo.{best}"
            f" across dimensions = [1] : ({i32}, tensor<i32>) -> {row}"
        ),
        f"%best_row = stablehlo.broadcast_in_dim %best, dims = [0] : ({row}) -> {i32}",
        f"%is_best = stablehlo.compare EQ, {key}, %best_row, SIGNED : ({i32}, {i32}) -> {i1}",
        f"%candidates = stablehlo.select %is_best, %iota, %none : {i1}, {i32}",
        (
            f"%index = stablehlo.reduce(%candidates init: %big) applies stablehlo.minimum"
            f" across dimensions = [1] : ({i32}, tensor<i32>) -> {row}"
        ),
    ]
    result = "%index"
    if len(shape) != 2:
        lines.append(f"%result = stablehlo.reshape %index : ({row}) -> {out_type}")
        result = "%result"
    body = "\n".join(f"  {line} {loc}" for line in lines)
    x_arg = "%x" if len(shape) == 2 else "%x_in"
    return (
        f"func.func @argminmax({x_arg}: {in_type}) -> {out_type} {{\n{body}\n"
        f"  return {result} : {out_type} {loc}\n}}"
    )


def splice(
    op: ir.Operation, template: str, x: ir.Value | list[ir.Value], result: int
) -> list[ir.Operation]:
    """Replace `op` by the body of `template` (a func.func of one argument,
    given `x`, or of as many as `x` lists), which computes its result number
    `result` (the others must be unused). Producers of `op` left without
    users (inits, an iota) go. Returns the ops moved in, in order."""
    helper = ir.Module.parse(template, op.context)
    helper_block = helper.body.operations[0].operation.regions[0].blocks[0]
    for argument, value in zip(helper_block.arguments, x if isinstance(x, list) else [x]):
        argument.replace_all_uses_with(value)
    inner = [o.operation for o in helper_block.operations]
    for moved in inner[:-1]:
        moved.move_before(op)
    op.results[result].replace_all_uses_with(inner[-1].operands[0])
    erase_with_dead_producers(op)
    return inner[:-1]


def function_reduces(func: ir.Operation, variadic: bool) -> list[ir.Operation]:
    """The stablehlo.reduce ops of `func`'s body, variadic ones (several
    results) or the others, collected before a rewrite changes the body."""
    return [
        op.operation
        for op in func.regions[0].blocks[0].operations
        if op.operation.name == "stablehlo.reduce" and (len(op.operation.results) > 1) == variadic
    ]


def rewrite_function(func: ir.Operation) -> list[str]:
    """Rewrite every qualifying variadic reduce of `func` in place; one log
    line per variadic reduce (rewritten, or why not)."""
    log = []
    for op in function_reduces(func, variadic=True):
        loc = str(op.location)  # every op of the rewrite gets the reduce's
        where = location_text(op.location)
        why, kind = refusal(op)
        if why:
            log.append(f"variadic reduce at {where} left to IREE: {why}")
            continue
        x = op.operands[0]
        element = str(ir.ShapedType(x.type).element_type)
        shape = shape_of(x.type)
        splice(op, _template(kind, shape, element, loc), x, result=1)
        log.append(f"{kind} at {where} over rows of {shape[-1]} rewritten as two row reductions")
    return log


__all__ = [
    "body_kind",
    "evaluate",
    "float_key_lines",
    "refusal",
    "rewrite_function",
    "splice",
    "tensor_text",
]
