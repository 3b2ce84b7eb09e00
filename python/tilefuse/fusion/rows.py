"""Softmax-like groups of rank > 2 viewed as rows, so the softmax kernel
takes them.

A layernorm over [B, S, H], an attention softmax over [B, heads, S, S] or
a mean over [B, S, H] reduces the innermost dim(s) of a rank-3 or rank-4
tensor; the softmax kernel (strategies/softmax.py) takes rank-2 rows. Such
a group computes the same thing on [B*S, H] (a mean over the last two dims
of [N, H, W]: on [N, H*W]): every op works row by row. So its ops are rewritten in
place on the collapsed shapes, with a stablehlo.reshape at each edge (of a
value read from outside, and back for a result used outside). Reshapes of
row-major tensors are views: IREE folds the ones at a dispatch's edge into
its bindings, and the planner puts the input ones in the group
(softmax.group_refusal accepts a reshape of a value from outside).

Only groups of this exact form are rewritten: every reduce over the same
innermost dims I of one shape [L..., I...]; every other member elementwise,
a splat constant, or a broadcast_in_dim that rebroadcasts a reduced value
([L...] over [L..., I...]), a row vector ([I...]) or a scalar; every value
of one of these shapes, but for one side of a reshape (a matrix-vector
product's [B, H, S] viewed as [B, H, 1, S], or its sums [1, N] returned as
[N, 1]: a row-major reshape views any shape as the collapsed rows too). Anything else is left as it is, and the planner's
reason stands. The fusion stage asks this of softmax-like groups the kernel
refused and of row-reduction groups with an epilogue (no kernel takes those
at rank > 2; a plain row reduction is the row kernel's at any rank).
"""

import math

from iree.compiler import ir

from ..hlo.ops import element_type, shape_of, try_cast
from .graph import FuncGraph
from .groups import Group, reduce_dims


def _tensor(shape: list[int], element: ir.Type) -> ir.Type:
    return ir.RankedTensorType.get(shape, element)


class _Spaces:
    """The group's row space [L..., I...] (I: the reduced innermost dims),
    reduced space [L...] and their collapsed forms [R, N] and [R]."""

    def __init__(self, row: list[int], kept: int):
        self.row, self.lead, self.inner = row, row[:kept], row[kept:]
        self.rows, self.n = math.prod(self.lead), math.prod(self.inner)

    def collapsed(self, shape: list[int] | None) -> list[int] | None:
        """The collapsed shape (a scalar stays one), or None for a shape of
        neither space. Another shape of the same elements is one of the
        space too where its rows line up: [4, 200] and [4, 1, 200] are
        [1, 4, 1, 200]'s rows (JAX's batch dim of 1 dropped and restored
        around a decode step's product)."""
        if shape == self.row:
            return [self.rows, self.n]
        if shape == self.lead:
            return [self.rows]
        if shape == self.inner:
            return [self.n]
        if shape == []:
            return []
        if shape is None:
            return None
        if math.prod(shape) == self.rows * self.n and any(
            math.prod(shape[k:]) == self.n for k in range(len(shape) + 1)
        ):
            return [self.rows, self.n]
        if math.prod(shape) == self.rows and self.n != 1:
            return [self.rows]
        return None


def _broadcast_dims(operand: list[int], dims: list[int], spaces: _Spaces) -> list[int] | None:
    k, rank = len(spaces.lead), len(spaces.row)
    if operand == spaces.lead and dims == list(range(k)):
        return [0]
    if operand == spaces.inner and dims == list(range(k, rank)):
        return [1]
    if operand == spaces.row and dims == list(range(rank)):
        return [0, 1]
    if operand == []:
        return []
    return None


def refusal(graph: FuncGraph, group: Group) -> tuple[str | None, _Spaces | None]:
    """(None, spaces) if the group can be viewed as rows, else (why not, None)."""
    members = [graph.nodes[i] for i in group.members]
    reduces = [n for n in members if n.cls == "reduce"]
    # One indexing map for every reduce's input: one row shape, one set of dims.
    reads = {n.maps[0] if n.maps else None for n in reduces}
    if len(reads) != 1 or None in reads:
        return "reductions over different shapes or dims", None
    row, dims = reduces[0].operand_shapes[0], reduce_dims(reduces[0])
    kept = len(row) - len(dims)
    if not dims or dims != list(range(kept, len(row))):
        return "a reduce of other dims than the innermost ones", None
    if kept == 1 and len(dims) == 1:
        return "already rows", None
    spaces = _Spaces(row, kept)
    if spaces.lead == spaces.inner:
        return f"kept and reduced dims of one shape {spaces.lead}", None
    for node in members:
        if node.cls == "reduce":
            if len(node.op.operands) != 2:
                return "a variadic reduce", None
        elif node.name == "stablehlo.broadcast_in_dim" and not _is_view(node):
            dims = node.ints("broadcast_dimensions")
            if _broadcast_dims(node.operand_shapes[0], dims, spaces) is None:
                return f"a broadcast of {node.operand_shapes[0]} along {dims}", None
        elif node.cls == "constant":
            if not node.is_splat_constant:
                return "a constant that is not a splat", None
        elif node.name == "stablehlo.iota":
            why = _iota_refusal(node, spaces)
            if why:
                return why, None
        elif node.cls != "elementwise" and not _is_view(node):
            return f"{node.name} in the group", None
        shapes = [shape_of(r.type) for r in node.op.results]
        if _is_view(node):
            # A view of any shape onto a space, or of a space onto any shape
            # (the reduced values as [N, 1]); the latter's readers in the
            # group are refused by their own shapes.
            if any(spaces.collapsed(s) is not None for s in [*shapes, *node.operand_shapes]):
                continue
        else:
            shapes += [s for s in node.operand_shapes]
        if any(spaces.collapsed(s) is None for s in shapes):
            return f"{node.name} on a shape of neither the rows nor the reduced space", None
    return None, spaces


def _is_view(node) -> bool:
    """A reshape, or a broadcast that only inserts dims of extent 1 (JAX's
    [B*H, S, S] scores as [1, B*H, S, S]): both view the same elements."""
    if node.name == "stablehlo.reshape":
        return True
    if node.name != "stablehlo.broadcast_in_dim" or node.shape is None:
        return False
    dims = node.ints("broadcast_dimensions")
    return dims == sorted(dims) and math.prod(node.shape) == math.prod(node.operand_shapes[0])


def _iota_refusal(node, spaces: _Spaces) -> str | None:
    """Why an iota of the group has no form on the collapsed rows, or None.
    Along a kept dim it is the row number divided by the extent of the kept
    dims after it, modulo its own extent (a causal mask's query index over
    [B, H, S, S]); along the one reduced dim it is the column."""
    if try_cast(ir.IntegerType, element_type(node.result_type())) is None:
        return "an iota that is not of integers"
    along = ir.IntegerAttr(node.op.attributes["iota_dimension"]).value
    if node.shape not in (spaces.row, spaces.lead):
        return "an iota on a shape of neither the rows nor the reduced space"
    if along >= len(spaces.lead) and len(spaces.inner) != 1:
        return "an iota along one of several reduced dims"
    return None


def _iota_on_rows(node, spaces: _Spaces, ip: ir.InsertionPoint, loc) -> ir.Value:
    """The group's iota on the collapsed shape (see _iota_refusal)."""
    shape = spaces.collapsed(node.shape)
    result = node.result_type()
    along = ir.IntegerAttr(node.op.attributes["iota_dimension"]).value
    collapsed = _tensor(shape, element_type(result))

    def create(name, operands, **attributes):
        return ir.Operation.create(
            name, results=[collapsed], operands=operands, attributes=attributes, loc=loc, ip=ip
        ).results[0]

    def splat(n: int) -> ir.Value:
        value = ir.DenseElementsAttr.get_splat(
            collapsed, ir.IntegerAttr.get(element_type(result), n)
        )
        return create("stablehlo.constant", [], value=value)

    kept = len(spaces.lead)
    index_type = ir.IntegerType.get_signless(64)
    if along >= kept:
        return create("stablehlo.iota", [], iota_dimension=ir.IntegerAttr.get(index_type, 1))
    row = create("stablehlo.iota", [], iota_dimension=ir.IntegerAttr.get(index_type, 0))
    after = math.prod(spaces.lead[along + 1 :])
    if after > 1:
        row = create("stablehlo.divide", [row, splat(after)])
    if along > 0:
        row = create("stablehlo.remainder", [row, splat(spaces.lead[along])])
    return row


def has_epilogue(graph: FuncGraph, group: Group, spaces: _Spaces) -> bool:
    """Some op of the group works on the reduced values (a mean's / n)."""
    return any(
        graph.nodes[i].cls == "elementwise" and graph.nodes[i].shape == spaces.lead
        for i in group.members
    )


def _attributes(node, spaces: _Spaces, new_type: ir.Type | None) -> dict[str, ir.Attribute]:
    named = node.op.attributes
    attrs = {named[i].name: named[i].attr for i in range(len(named))}
    if node.cls == "reduce":
        attrs["dimensions"] = ir.DenseI64ArrayAttr.get([1])
    elif node.name == "stablehlo.broadcast_in_dim":
        dims = _broadcast_dims(node.operand_shapes[0], node.ints("broadcast_dimensions"), spaces)
        attrs["broadcast_dimensions"] = ir.DenseI64ArrayAttr.get(dims)
    elif node.cls == "constant":
        dense = ir.DenseElementsAttr(attrs["value"])
        attrs["value"] = ir.DenseElementsAttr.get_splat(new_type, dense.get_splat_value())
    return attrs


def _reshape(value: ir.Value, shape: list[int], before: ir.Operation) -> ir.Value:
    result = _tensor(shape, ir.ShapedType(value.type).element_type)
    op = ir.Operation.create(
        "stablehlo.reshape",
        results=[result],
        operands=[value],
        loc=before.location,
        ip=ir.InsertionPoint(before),
    )
    return op.results[0]


def view_as_rows(graph: FuncGraph, group: Group, spaces: _Spaces) -> None:
    """Rewrite the group's ops on the collapsed shapes, in place."""
    with graph.func.context, graph.func.location:
        _rewrite(graph, group, spaces)


def _rewrite(graph: FuncGraph, group: Group, spaces: _Spaces) -> None:
    members = set(group.members)
    mapped: dict = {}  # old value -> value on the collapsed shape
    old_ops = []
    for i in group.members:
        node = graph.nodes[i]
        op = node.op
        operands = []
        if op.name == "stablehlo.iota":
            mapped[op.results[0]] = _iota_on_rows(node, spaces, ir.InsertionPoint(op), op.location)
            old_ops.append((node, op))
            continue
        for v, p in zip(op.operands, node.producers):
            if p in members:
                operands.append(mapped[v])
                continue
            shape = shape_of(v.type)
            target = spaces.collapsed(shape)
            if _is_view(node) or target == shape:
                operands.append(v)  # a view views it on the collapsed shape itself
            else:
                operands.append(_reshape(v, target, op))
        # A reshape out of the spaces keeps its result shape.
        types = [
            _tensor(
                spaces.collapsed(shape_of(r.type)) or shape_of(r.type),
                ir.ShapedType(r.type).element_type,
            )
            for r in op.results
        ]
        view = _is_view(node)
        if view and operands[0].type == types[0]:
            # A view between two values of one collapsed shape is nothing
            # there (a reshape kept in the group is one IREE cannot fold).
            mapped[op.results[0]] = operands[0]
            old_ops.append((node, op))
            continue
        new = ir.Operation.create(
            "stablehlo.reshape" if view else op.name,
            results=types,
            operands=operands,
            attributes={} if view else _attributes(node, spaces, types[0] if types else None),
            regions=len(op.regions),
            loc=op.location,
            ip=ir.InsertionPoint(op),
        )
        for old_region, new_region in zip(op.regions, new.regions):
            old_region.blocks[0].append_to(new_region)  # the reducer body
        for old, value in zip(op.results, new.results):
            mapped[old] = value
        old_ops.append((node, op))
    for node, op in old_ops:
        for old in op.results:
            if any(u.owner.operation not in [o for _, o in old_ops] for u in old.uses):
                back = mapped[old]
                if back.type != old.type:
                    back = _reshape(back, shape_of(old.type), op)
                old.replace_all_uses_with(back)
    for _, op in reversed(old_ops):
        op.erase()


__all__ = ["has_epilogue", "refusal", "view_as_rows"]
