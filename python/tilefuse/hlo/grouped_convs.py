"""Grouped convolutions as convolutions IREE's SPIR-V codegen gets right.

A convolution with feature_group_count G (1 < G < input features: ResNeXt's
and RegNet's grouped 3x3s) comes out wrong on IREE 3.13's SPIR-V path:
IREE lowers it to one linalg.generic over (group, feature, h, w, kh, kw, c)
and its BaseDistribute configuration writes zeros and partial sums
(relative error 0.7 to 1.0 on lavapipe for 3x3 windows over 9x9 to 16x16
images; two 8x8 cases came out right; plain
iree-compile too; the llvm-cpu backend is right; docs/findings.md,
'Grouped convolutions on SPIR-V'). Depthwise convolutions (one input
feature per group), ungrouped ones and 1x1 grouped ones are right. So, on the targets that
ask for it (`grouped_convs_rewritten`), each grouped convolution becomes
an equivalent made of those:

- ci = C/G input features per group, up to MAX_DEPTHWISE_FEATURES: a
  depthwise convolution (feature_group_count = C) whose kernel holds, for
  each input feature c of group g, the group's co output kernels, then a
  sum over c:

      y[.., (g, c, f)] = conv_depthwise(x, w')      w'[.., 1, (g, c, f)] = w[.., c, (g, f)]
      out[.., (g, f)]  = sum over c of y[.., (g, c, f)]

  (the intermediate is ci times the output; f16/bf16 are summed in f32).
- more input features per group: one ungrouped convolution per group, on
  its slice of the input features and of the kernel's output features,
  concatenated along the output features.

A convolution with batch_group_count B > 1 (JAX's weight gradient of a
grouped convolution) is as wrong there; it becomes B convolutions, each of
its slice of the input's batch and of the kernel's output features.

Left as they are, with the reason in the log: what IREE computes right
there (a depthwise convolution, the weight gradient of one, whose batch
groups hold one element each, and a grouped convolution with a 1x1
window), and dynamic shapes.
"""

from iree.compiler import ir

from ..frontend import location_text
from .argminmax import splice, tensor_text
from .ops import LEFT_AS_IT_IS, attributes_text, body_ops, element_name, shape_of
from .wide_accumulators import NARROW

# Above this many input features per group, the depthwise form's
# intermediate (that many times the output) costs more than G convolutions.
MAX_DEPTHWISE_FEATURES = 16


def _layout(attr: ir.Attribute) -> tuple[list[str], list[str], list[str]]:
    """The roles of the input, kernel and output dims, as printed in
    `#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>` (the wheel
    has no StableHLO attribute bindings)."""
    text = str(attr)
    body = text[text.index("<") + 1 : text.rindex(">")]
    operands, output = body.split("->")
    lhs, rhs = operands.split("]x[")

    def roles(part: str) -> list[str]:
        return [r.strip() for r in part.strip().strip("[]").split(",")]

    return roles(lhs), roles(rhs), roles(output)


def _conv_attr(lhs: list[str], rhs: list[str], out: list[str], ctx) -> ir.Attribute:
    text = f"#stablehlo.conv<[{', '.join(lhs)}]x[{', '.join(rhs)}]->[{', '.join(out)}]>"
    return ir.Attribute.parse(text, ctx)


def _count(op: ir.Operation, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


def refusal(op: ir.Operation) -> str | None:
    """Why the rewrite leaves this convolution, or None."""
    groups, batch_groups = _count(op, "feature_group_count"), _count(op, "batch_group_count")
    if groups == 1 and batch_groups == 1:
        return "not grouped"
    if groups > 1 and batch_groups > 1:
        return "both feature and batch groups"
    shapes = [shape_of(v.type) for v in (op.operands[0], op.operands[1], op.results[0])]
    if any(s is None for s in shapes):
        return "dynamic shapes"
    lhs, rhs, _ = _layout(op.attributes["dimension_numbers"])
    if groups > 1 and shapes[0][lhs.index("f")] == groups:
        return "depthwise (one input feature per group)"
    if batch_groups > 1 and shapes[0][lhs.index("b")] == batch_groups:
        return "one batch element per group (a depthwise convolution's weight gradient)"
    window = [shapes[1][i] for i, role in enumerate(rhs) if role not in ("i", "o")]
    if groups > 1 and all(extent == 1 for extent in window):
        return "a 1x1 window"
    return None


def _reshape(result: str, value: str, source: str, to: str) -> str:
    return f"{result} = stablehlo.reshape {value} : ({source}) -> {to}"


def _transpose(result: str, value: str, dims: list[int], source: str, to: str) -> str:
    return f"{result} = stablehlo.transpose {value}, dims = {dims} : ({source}) -> {to}"


def _slice(result: str, value: str, starts: list[int], sizes: list[int], source, to) -> str:
    bounds = ", ".join(f"{a}:{a + n}" for a, n in zip(starts, sizes))
    return f"{result} = stablehlo.slice {value} [{bounds}] : ({source}) -> {to}"


def _convolution(result: str, operands: str, attributes: str, types: str, to: str) -> str:
    return f'{result} = "stablehlo.convolution"({operands}) <{{{attributes}}}> : ({types}) -> {to}'


def _function(op: ir.Operation, lines: list[str], result: str) -> str:
    """The template splice() takes: @grouped(%x, %w) computing `result`."""
    x, w = op.operands[0], op.operands[1]
    y_type, loc = op.results[0].type, str(op.location)
    body = "\n".join(f"  {line} {loc}" for line in lines)
    return (
        f"func.func @grouped(%x: {x.type}, %w: {w.type}) -> {y_type} {{\n"
        f"{body}\n  return {result} : {y_type} {loc}\n}}"
    )


def _depthwise_template(op: ir.Operation) -> str:
    x, w = op.operands[0], op.operands[1]
    lhs, rhs, out = _layout(op.attributes["dimension_numbers"])
    x_shape, w_shape, y_shape = (shape_of(v.type) for v in (x, w, op.results[0]))
    groups = _count(op, "feature_group_count")
    features = x_shape[lhs.index("f")]
    ci, co = features // groups, w_shape[rhs.index("o")] // groups
    n = len(rhs) - 2  # spatial dims
    w_elem, y_elem = element_name(w), element_name(op.results[0])
    acc = "f32" if y_elem in NARROW else y_elem

    # The kernel as [spatial..., i, o], then [spatial..., 1, (g, c, f)].
    order = [rhs.index(str(k)) for k in range(n)] + [rhs.index("i"), rhs.index("o")]
    taps = [w_shape[i] for i in order[:n]]
    kernel_types = [
        tensor_text(taps + dims, w_elem)
        for dims in ([ci, groups * co], [ci, groups, co], [groups, ci, co], [1, features * co])
    ]
    lines, kernel = [], "%w"
    if order != list(range(n + 2)):
        lines.append(_transpose("%wt", "%w", order, str(w.type), kernel_types[0]))
        kernel = "%wt"
    lines += [
        _reshape("%w1", kernel, kernel_types[0], kernel_types[1]),
        _transpose("%w2", "%w1", [*range(n), n + 1, n, n + 2], kernel_types[1], kernel_types[2]),
        _reshape("%w3", "%w2", kernel_types[2], kernel_types[3]),
    ]

    # The depthwise convolution, its output features split as (g, c, f) and
    # summed over c.
    f_at = out.index("f")
    wide, split, summed, back = (
        tensor_text(y_shape[:f_at] + middle + y_shape[f_at + 1 :], acc)
        for middle in ([features * co], [groups, ci, co], [groups, co], [groups * co])
    )
    kernel_layout = [str(k) for k in range(n)] + ["i", "o"]
    attributes = ", ".join(
        [
            f"dimension_numbers = {_conv_attr(lhs, kernel_layout, out, op.context)}",
            f"feature_group_count = {features} : i64",
            attributes_text(op, ("dimension_numbers", "feature_group_count")),
        ]
    )
    zero = "0" if acc.startswith(("i", "ui")) else "0.0"
    lines += [
        _convolution("%y", "%x, %w3", attributes, f"{x.type}, {kernel_types[3]}", wide),
        _reshape("%ys", "%y", wide, split),
        f"%zero = stablehlo.constant dense<{zero}> : tensor<{acc}>",
        (
            f"%s = stablehlo.reduce(%ys init: %zero) applies stablehlo.add "
            f"across dimensions = [{f_at + 1}] : ({split}, tensor<{acc}>) -> {summed}"
        ),
        _reshape("%r", "%s", summed, back),
    ]
    if acc == y_elem:
        return _function(op, lines, "%r")
    lines.append(f"%c = stablehlo.convert %r : ({back}) -> {op.results[0].type}")
    return _function(op, lines, "%c")


def _per_group_template(op: ir.Operation) -> str:
    """One ungrouped convolution per group: of a slice of the input's
    features (feature groups) or of its batch (batch groups, a grouped
    convolution's weight gradient), and of the kernel's output features."""
    x, w = op.operands[0], op.operands[1]
    lhs, rhs, out = _layout(op.attributes["dimension_numbers"])
    x_shape, w_shape, y_shape = (shape_of(v.type) for v in (x, w, op.results[0]))
    groups = max(_count(op, "feature_group_count"), _count(op, "batch_group_count"))
    by_batch = _count(op, "batch_group_count") > 1
    x_at = lhs.index("b") if by_batch else lhs.index("f")
    o_at, f_out = rhs.index("o"), out.index("f")
    x_part, w_part, y_part = list(x_shape), list(w_shape), list(y_shape)
    x_part[x_at] //= groups
    w_part[o_at] //= groups
    y_part[f_out] //= groups
    x_type, w_type, y_type = (
        tensor_text(shape, element_name(v))
        for shape, v in ((x_part, x), (w_part, w), (y_part, op.results[0]))
    )
    attributes = ", ".join(
        [
            "feature_group_count = 1 : i64",
            "batch_group_count = 1 : i64",
            attributes_text(op, ("feature_group_count", "batch_group_count")),
        ]
    )
    lines, parts = [], []
    for g in range(groups):
        x_start, w_start = [0] * len(x_shape), [0] * len(w_shape)
        x_start[x_at], w_start[o_at] = g * x_part[x_at], g * w_part[o_at]
        lines += [
            _slice(f"%x{g}", "%x", x_start, x_part, x.type, x_type),
            _slice(f"%w{g}", "%w", w_start, w_part, w.type, w_type),
            _convolution(f"%y{g}", f"%x{g}, %w{g}", attributes, f"{x_type}, {w_type}", y_type),
        ]
        parts.append(f"%y{g}")
    types = ", ".join([y_type] * groups)
    lines.append(
        f"%r = stablehlo.concatenate {', '.join(parts)}, dim = {f_out} : ({types}) "
        f"-> {op.results[0].type}"
    )
    return _function(op, lines, "%r")


def rewrite_function(func: ir.Operation) -> list[str]:
    """Rewrite every grouped convolution of `func` in place; one log line
    per grouped convolution (rewritten, or why not)."""
    log = []
    for op in body_ops(func, "stablehlo.convolution"):
        why = refusal(op)
        if why == "not grouped":
            continue
        where = location_text(op.location)
        if why:
            log.append(f"grouped convolution at {where} {LEFT_AS_IT_IS}: {why}")
            continue
        lhs, _, _ = _layout(op.attributes["dimension_numbers"])
        groups, batch_groups = _count(op, "feature_group_count"), _count(op, "batch_group_count")
        x, w = op.operands[0], op.operands[1]
        if batch_groups > 1:
            splice(op, _per_group_template(op), [x, w], result=0)
            log.append(
                f"grouped convolution at {where} ({batch_groups} batch groups) as "
                f"{batch_groups} convolutions, concatenated"
            )
            continue
        ci = shape_of(x.type)[lhs.index("f")] // groups
        if ci <= MAX_DEPTHWISE_FEATURES:
            splice(op, _depthwise_template(op), [x, w], result=0)
            log.append(
                f"grouped convolution at {where} ({groups} groups of {ci} features) "
                "as a depthwise convolution and a sum over each group's features"
            )
        else:
            splice(op, _per_group_template(op), [x, w], result=0)
            log.append(
                f"grouped convolution at {where} ({groups} groups of {ci} features) "
                f"as {groups} convolutions, concatenated"
            )
    return log
