"""Facts about StableHLO ops and tensor types that every stage before
codegen asks: the op classes the fusion rules and rewrites use, and shapes,
element types and sizes of tensor types."""

from iree.compiler import ir

from ..irutil import defining_op, user_op

ELEMENTWISE = {
    "stablehlo." + n
    for n in [
        "abs",
        "add",
        "and",
        "atan2",
        "cbrt",
        "ceil",
        "clamp",
        "compare",
        "complex",
        "convert",
        "cosine",
        "divide",
        "exponential",
        "exponential_minus_one",
        "floor",
        "imag",
        "is_finite",
        "log",
        "log_plus_one",
        "logistic",
        "maximum",
        "minimum",
        "multiply",
        "negate",
        "not",
        "or",
        "popcnt",
        "power",
        "real",
        "remainder",
        "round_nearest_afz",
        "round_nearest_even",
        "rsqrt",
        "select",
        "shift_left",
        "shift_right_arithmetic",
        "shift_right_logical",
        "sign",
        "sine",
        "sqrt",
        "subtract",
        "tan",
        "tanh",
        "xor",
    ]
}
# Elementwise ops that cost a transcendental evaluation per element: never
# duplicated by the planner (index-safety rule).
EXPENSIVE = {
    "stablehlo." + n
    for n in [
        "atan2",
        "cbrt",
        "cosine",
        "divide",
        "exponential",
        "exponential_minus_one",
        "log",
        "log_plus_one",
        "logistic",
        "power",
        "remainder",
        "rsqrt",
        "sine",
        "sqrt",
        "tan",
        "tanh",
    ]
}
INDEX_ONLY = {
    "stablehlo." + n
    for n in [
        "broadcast_in_dim",
        "broadcast",
        "reshape",
        "transpose",
        "slice",
        "concatenate",
        "pad",
        "reverse",
        "iota",
    ]
}
# Ops that only view their operand's elements in another shape or order:
# rewrites look through them to the op that computes a value.
VIEWS = {"stablehlo.reshape", "stablehlo.transpose", "stablehlo.broadcast_in_dim"}
REDUCE = {"stablehlo.reduce"}
CONTRACTION = {"stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution"}
GATHER_SCATTER = {"stablehlo.gather", "stablehlo.scatter"}
CONSTANT = {"stablehlo.constant", "arith.constant"}
TERMINATOR = {"func.return", "stablehlo.return"}


def op_class(name: str) -> str:
    """elementwise, index, reduce, contraction, gather, constant, terminator or other."""
    for cls, names in (
        ("elementwise", ELEMENTWISE),
        ("index", INDEX_ONLY),
        ("reduce", REDUCE),
        ("contraction", CONTRACTION),
        ("gather", GATHER_SCATTER),
        ("constant", CONSTANT),
        ("terminator", TERMINATOR),
    ):
        if name in names:
            return cls
    return "other"


def node_class(op: ir.Operation) -> str:
    """op_class, except that a bitcast_convert between types of one width
    (same shape) is elementwise; one that changes the width adds or drops a
    dim and stays "other"."""
    if op.name == "stablehlo.bitcast_convert":
        shapes = [shape_of(v.type) for v in (op.operands[0], op.results[0])]
        if shapes[0] is not None and shapes[0] == shapes[1]:
            return "elementwise"
    return op_class(op.name)


# How a rewrite that corrects IREE's codegen (hlo.FunctionRewrite.corrects)
# says, in its log, that it left an op as it was: rewrite_module counts the
# other lines as corrections.
LEFT_AS_IT_IS = "left as it is"


def element_name(value: ir.Value) -> str:
    """`f32`, `bf16`, ...: the element type of a tensor value, as printed."""
    return str(element_type(value.type))


def attributes_text(op: ir.Operation, skip: tuple[str, ...] = ()) -> str:
    """The op's attributes but `skip`, as the inside of an attribute
    dictionary (for a template that recreates the op)."""
    named = op.attributes
    return ", ".join(
        f"{named[i].name} = {named[i].attr}" for i in range(len(named)) if named[i].name not in skip
    )


def body_ops(func: ir.Operation, name: str) -> list[ir.Operation]:
    """The ops named `name` in `func`'s body, collected before a rewrite
    changes it."""
    return [o.operation for o in func.regions[0].blocks[0].operations if o.operation.name == name]


def try_cast(cls, value):
    """cls(value), or None when value is not one."""
    try:
        return cls(value)
    except (ValueError, TypeError):
        return None


def shape_of(t: ir.Type) -> list[int] | None:
    """Static shape of a ranked tensor type; None when dynamic or not a tensor."""
    st = try_cast(ir.RankedTensorType, t)
    if st is None or not st.has_static_shape:
        return None
    return list(st.shape)


def transposed_type(value: ir.Value, permutation: list[int]) -> ir.RankedTensorType:
    """The type of `value` (static shape) transposed by `permutation`."""
    shape = shape_of(value.type)
    element = ir.ShapedType(value.type).element_type
    return ir.RankedTensorType.get([shape[p] for p in permutation], element)


def create_transpose(
    value: ir.Value, permutation: list[int], ip: ir.InsertionPoint, loc=None
) -> ir.Value:
    """A stablehlo.transpose of `value` at `ip` (at `loc`, else the current one)."""
    return ir.Operation.create(
        "stablehlo.transpose",
        results=[transposed_type(value, permutation)],
        operands=[value],
        attributes={"permutation": ir.DenseI64ArrayAttr.get(permutation)},
        loc=loc,
        ip=ip,
    ).results[0]


def element_type(t: ir.Type) -> ir.Type:
    st = try_cast(ir.ShapedType, t)
    return st.element_type if st is not None else t


def element_bits(t: ir.Type) -> int:
    """Width of a tensor's (or scalar's) element type; 32 when it has none."""
    et = element_type(t)
    for cls in (ir.IntegerType, ir.FloatType):
        typed = try_cast(cls, et)
        if typed is not None:
            return typed.width
    return 32


def bytes_of(t: ir.Type) -> int:
    st = try_cast(ir.RankedTensorType, t)
    if st is None or not st.has_static_shape:
        return 0
    count = 1
    for d in st.shape:
        count *= d
    return count * max(element_bits(t), 8) // 8


DOT_DIMENSION_KEYS = (
    "lhs_batching_dimensions",
    "rhs_batching_dimensions",
    "lhs_contracting_dimensions",
    "rhs_contracting_dimensions",
)


def dot_numbers_attr(numbers: dict[str, list[int]]) -> ir.Attribute:
    """The #stablehlo.dot attribute of these batching and contracting dims
    (keys DOT_DIMENSION_KEYS; dot_numbers read back), in the current context."""
    dims = ", ".join(f"{key} = [{', '.join(map(str, numbers[key]))}]" for key in DOT_DIMENSION_KEYS)
    return ir.Attribute.parse(f"#stablehlo.dot<{dims}>")


def dot_numbers(op: ir.Operation) -> dict[str, list[int]]:
    """The batching and contracting dims of a stablehlo.dot_general (keys
    DOT_DIMENSION_KEYS); a stablehlo.dot contracts lhs's last dim with rhs's
    first. Read from the attribute as printed: the wheel has no StableHLO
    attribute bindings."""
    if op.name == "stablehlo.dot":
        lhs_rank = len(ir.ShapedType(op.operands[0].type).shape)
        return {
            "lhs_batching_dimensions": [],
            "rhs_batching_dimensions": [],
            "lhs_contracting_dimensions": [lhs_rank - 1],
            "rhs_contracting_dimensions": [0],
        }
    return attribute_lists(op.attributes["dot_dimension_numbers"], DOT_DIMENSION_KEYS)


def attribute_lists(attr: ir.Attribute, keys) -> dict[str, list[int]]:
    """The integer lists `key = [..]` of a StableHLO attribute as printed
    (#stablehlo.dot, #stablehlo.scatter), [] for a key it omits: the wheel
    has no StableHLO attribute bindings."""
    text = str(attr)
    numbers = {}
    for key in keys:
        _, sep, rest = text.partition(key + " = [")
        numbers[key] = (
            [int(x) for x in rest.split("]", 1)[0].split(",") if x.strip()] if sep else []
        )
    return numbers


def dense_ints(op: ir.Operation, name: str, default: int, rank: int) -> list[int]:
    """An op's i64 array attribute (a window's dimensions, strides or
    dilations), or `default` for each of `rank` dims where it is omitted."""
    if name not in op.attributes:
        return [default] * rank
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def index_vector_dim(attr: ir.Attribute) -> int:
    """A gather's or scatter's index_vector_dim, as printed; StableHLO omits
    it when it is 0."""
    _, found, rest = str(attr).partition("index_vector_dim = ")
    return int(rest.rstrip(">").split(",")[0]) if found else 0


def dot_free_extents(op: ir.Operation) -> list[list[int]]:
    """Per operand of a dot_general (lhs, rhs), the extents of its free dims
    (neither batch nor contracting)."""
    numbers = dot_numbers(op)
    free = []
    for side, value in zip(("lhs", "rhs"), op.operands):
        bound = set(
            numbers[f"{side}_batching_dimensions"] + numbers[f"{side}_contracting_dimensions"]
        )
        shape = shape_of(value.type) or []
        free.append([extent for i, extent in enumerate(shape) if i not in bound])
    return free


# A unit attribute on an op a rewrite added as a dispatch of its own on
# purpose (a reduction's second step, a split-K sum): rewrite_module counts
# and removes them (the fusion plan's split_steps).
SPLIT_STEP = "tilefuse.split_step"
# A unit attribute on the ops a rewrite added whose dispatches IREE's own
# formation should form: the planner puts them in no group. A sort network's
# step (sorts.py) stays several linalg ops in a pre-formed region, which no
# kernel takes; IREE fuses it into one generic the loop kernel takes.
FORMED_BY_IREE = "tilefuse.formed_by_iree"


def mark_split_steps(ops: list[ir.Operation], name: str, skip_first: bool = True) -> None:
    """Mark the ops named `name` among `ops` as split steps, but the first
    when `skip_first` (the step that does the work IREE's formation would
    have had anyway)."""
    found = [op for op in ops if op.name == name]
    for op in found[1:] if skip_first else found:
        op.attributes[SPLIT_STEP] = ir.UnitAttr.get(op.context)


def replace_by_reshape(op: ir.Operation) -> None:
    """Replace `op`, whose one result holds its first operand's elements in
    the same order, by a stablehlo.reshape of that operand (erasing it)."""
    reshape = ir.Operation.create(
        "stablehlo.reshape",
        results=[op.results[0].type],
        operands=[op.operands[0]],
        loc=op.location,
        ip=ir.InsertionPoint(op),
    )
    op.results[0].replace_all_uses_with(reshape.results[0])
    op.erase()


def sole_user(op: ir.Operation, name: str) -> ir.Operation | None:
    """The op named `name` that is the only user of `op`'s result, if any."""
    uses = list(op.results[0].uses)
    if len(uses) != 1:
        return None
    user = user_op(uses[0])
    return user if user.name == name else None


def sole_convert(op: ir.Operation) -> ir.Operation | None:
    """The stablehlo.convert that is the only user of `op`'s result, if any
    (hlo/wide_accumulators.py puts one after every bf16 product)."""
    return sole_user(op, "stablehlo.convert")


def view_back(op: ir.Operation, value: ir.Value, ip: ir.InsertionPoint) -> None:
    """Replace the uses of `op`'s one result by `value`, its elements in
    another shape, reshaped back. Where `op` has a sole convert (the f32
    contraction's back to bf16 or f16, hlo/wide_accumulators.py), that
    convert is applied to `value` instead and the reshape follows it: the
    convert stays the contraction's epilogue, and the reshape sits at the
    edge of whatever reads it (a softmax group views it as rows)."""
    result = op.results[0]
    convert = sole_convert(op)
    if convert is not None:
        with op.location:
            narrow = ir.RankedTensorType.get(
                shape_of(value.type), ir.ShapedType(convert.results[0].type).element_type
            )
        value = ir.Operation.create(
            "stablehlo.convert", results=[narrow], operands=[value], loc=op.location, ip=ip
        ).results[0]
        result = convert.results[0]
    if value.type != result.type:
        value = ir.Operation.create(
            "stablehlo.reshape", results=[result.type], operands=[value], loc=op.location, ip=ip
        ).results[0]
    result.replace_all_uses_with(value)
    if convert is not None:
        convert.erase()


def erase_with_dead_producers(op: ir.Operation) -> None:
    """Erase `op`, then each distinct op producing its operands that is left
    without users (a transpose a rewrite read through, an init)."""
    producers = []
    for value in op.operands:
        owner = defining_op(value)
        if owner is not None and not any(owner == p for p in producers):
            producers.append(owner)
    op.erase()
    for p in producers:
        if not any(True for r in p.results for _ in r.uses):
            p.erase()
