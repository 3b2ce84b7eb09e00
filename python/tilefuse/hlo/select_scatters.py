"""select_and_scatter (a max pool's gradient) as slices, selects and pads.

JAX's gradient of a max pool (`reduce_window` of max) is a
stablehlo.select_and_scatter: in each window of x, select an element with
the comparison (GE: the first maximum), and add the window's value of s
there. IREE 3.13 lowers it to a reduction that keeps (value, index) per
window, whose index init it leaves uninitialized (its own warning: "reads
uninitialized values from an operand produced by a tensor.empty op"), then
a scatter; on lavapipe the result is wrong (relative error 0.59 for a 2x2
pool of [1, 8, 8, 4], plain iree-compile too; the llvm-cpu backend is
right). So, on GPU targets, each one is rewritten with ops IREE gets
right, the same selection in the same order:

    x_k      = strided slice of x at window offset k (one value per window),
               for the K offsets of a window in row-major order
    v, i     = x_0, 0; then for k = 1..K-1: keep = compare(v, x_k) (the
               select body's comparison); v = keep ? v : x_k; i = keep ? i : k
    out      = init + sum over k of pad(i == k ? s : 0), placed at offset k
               every stride (interior padding stride - 1)

Only the form JAX writes is rewritten: the select body one compare of its
two arguments, the scatter body one add of them, no padding, static
shapes. Anything else is left as it is and the log says why.
"""

import math
from itertools import product

from iree.compiler import ir

from ..frontend import location_text
from .argminmax import splice, tensor_text
from .ops import LEFT_AS_IT_IS, attributes_text, body_ops, dense_ints, element_name, shape_of


def _body(region: ir.Region) -> list[ir.Operation]:
    return [o.operation for o in region.blocks[0].operations]


def _reads_arguments_in_order(op: ir.Operation, region: ir.Region) -> bool:
    arguments = list(region.blocks[0].arguments)
    return len(op.operands) == 2 and all(
        isinstance(v.owner, ir.Block) and v == a for v, a in zip(op.operands, arguments)
    )


def refusal(op: ir.Operation) -> str | None:
    """Why this select_and_scatter is left as it is, or None."""
    x, s = op.operands[0], op.operands[1]
    x_shape, s_shape = shape_of(x.type), shape_of(s.type)
    if x_shape is None or s_shape is None:
        return "dynamic shapes"
    select, scatter = _body(op.regions[0]), _body(op.regions[1])
    if len(select) != 2 or select[0].name != "stablehlo.compare":
        return "the select body is not one comparison"
    if not _reads_arguments_in_order(select[0], op.regions[0]):
        return "the select body does not compare its arguments in order"
    if len(scatter) != 2 or scatter[0].name != "stablehlo.add":
        return "the scatter body is not one add"
    if "padding" in op.attributes and any(ir.DenseIntElementsAttr(op.attributes["padding"])):
        return "padded windows"
    rank = len(x_shape)
    window = dense_ints(op, "window_dimensions", 1, rank)
    strides = dense_ints(op, "window_strides", 1, rank)
    windows = [(n - w) // st + 1 for n, w, st in zip(x_shape, window, strides)]
    if windows != s_shape:
        return "the source is not one value per window"
    return None


def _template(op: ir.Operation) -> str:
    x, s, init = op.operands
    x_shape, s_shape = shape_of(x.type), shape_of(s.type)
    rank = len(x_shape)
    window = dense_ints(op, "window_dimensions", 1, rank)
    strides = dense_ints(op, "window_strides", 1, rank)
    element, s_element = element_name(x), element_name(s)
    view, flags = tensor_text(s_shape, element), tensor_text(s_shape, "i1")
    indices, values = tensor_text(s_shape, "i32"), tensor_text(s_shape, s_element)
    compare_attrs = attributes_text(_body(op.regions[0])[0])
    offsets = list(product(*(range(w) for w in window)))
    lines = []
    for k, offset in enumerate(offsets):
        bounds = ", ".join(
            f"{o}:{o + (n - 1) * st + 1}:{st}" for o, n, st in zip(offset, s_shape, strides)
        )
        lines.append(f"%x{k} = stablehlo.slice %x [{bounds}] : ({x.type}) -> {view}")
        lines.append(f"%k{k} = stablehlo.constant dense<{k}> : {indices}")
    value, index = "%x0", "%k0"
    for k in range(1, len(offsets)):
        lines += [
            (
                f'%keep{k} = "stablehlo.compare"({value}, %x{k}) {{{compare_attrs}}} : '
                f"({view}, {view}) -> {flags}"
            ),
            f"%v{k} = stablehlo.select %keep{k}, {value}, %x{k} : {flags}, {view}",
            f"%i{k} = stablehlo.select %keep{k}, {index}, %k{k} : {flags}, {indices}",
        ]
        value, index = f"%v{k}", f"%i{k}"
    zero = "0.0" if s_element.startswith(("f", "bf")) else "0"
    lines += [
        f"%zero = stablehlo.constant dense<{zero}> : {values}",
        f"%zs = stablehlo.constant dense<{zero}> : tensor<{s_element}>",
        f"%acc0 = stablehlo.broadcast_in_dim %init, dims = [] : ({init.type}) -> {x.type}",
    ]
    total = "%acc0"
    for k, offset in enumerate(offsets):
        high = [
            n - (o + (m - 1) * st + 1) for n, o, m, st in zip(x_shape, offset, s_shape, strides)
        ]
        interior = [st - 1 for st in strides]
        lines += [
            f"%hit{k} = stablehlo.compare EQ, {index}, %k{k} : ({indices}, {indices}) -> {flags}",
            f"%c{k} = stablehlo.select %hit{k}, %s, %zero : {flags}, {values}",
            (
                f"%p{k} = stablehlo.pad %c{k}, %zs, low = {list(offset)}, high = {high}, "
                f"interior = {interior} : ({values}, tensor<{s_element}>) -> {x.type}"
            ),
            f"%acc{k + 1} = stablehlo.add {total}, %p{k} : {x.type}",
        ]
        total = f"%acc{k + 1}"
    loc = str(op.location)
    body = "\n".join(f"  {line} {loc}" for line in lines)
    return (
        f"func.func @scatter(%x: {x.type}, %s: {s.type}, %init: {init.type}) -> {x.type} {{\n"
        f"{body}\n  return {total} : {x.type} {loc}\n}}"
    )


def rewrite_function(func: ir.Operation) -> list[str]:
    """Rewrite every select_and_scatter of `func` in place; one log line each."""
    log = []
    for op in body_ops(func, "stablehlo.select_and_scatter"):
        where = location_text(op.location)
        why = refusal(op)
        if why:
            log.append(f"select_and_scatter at {where} {LEFT_AS_IT_IS}: {why}")
            continue
        window = dense_ints(op, "window_dimensions", 1, len(shape_of(op.operands[0].type)))
        splice(op, _template(op), list(op.operands), result=0)
        log.append(
            f"select_and_scatter at {where} as {math.prod(window)} strided slices, "
            "selects and pads (IREE's lowering leaves its index uninitialized)"
        )
    return log
