"""Collapse the loops of column-reduction roots in the executable sources.

A reduce of x[A, B, C, K] over dims [0, 1, 2] is one column reduction of
x[A*B*C, K] over dim 0: adjacent reduced dims, and adjacent kept dims, are
contiguous in memory and can be merged. IREE collapses them when it forms
the dispatch itself, but not in the regions the fusion stage pre-forms (in
IREE 3.13 their roots sit between iree_tensor_ext.compute_barrier ops, which
seems to stop its collapse-dimensions pass), so a rank-4 reduce
reaches the strategies with three reduction loops, which split_reduction
cannot split. This stage rewrites such a root, before phase 2, to loops
(batch?, kept, reduced), the way IREE's own collapsing (and its
fold_reshape_into_tensor_hal_interface) would leave it: the bindings are
viewed with the collapsed shapes (a copy of each hal.interface.binding.subspan
with the merged type; same buffer, same layout), the loads, the init's fill
and the store take those shapes, and the generic gets the merged maps and
iterators. No reshape op and no copy: a row-major buffer is the same bytes at
either shape.

Only roots of that exact form are touched: every input a load of a whole
binding, indexed (batch.., reduced.., kept..) in loop order, or like the
result (broadcast along the reduced dims: a variance's mean); the init a fill;
the result only stored, indexed (batch.., kept..). Anything else is left as
IREE wrote it (and the chooser says why it does not take it). A reduction
whose result only an elementwise root reads (its epilogue: a mean over H
and W of NHWC, then the division) is collapsed the same way; where its
kept or batch dims merge, the epilogue's loops, loads and store are
collapsed with them, if it reads and writes in loop order and reads whole
bindings besides the reduction.
"""

import math
from dataclasses import dataclass

from iree.compiler import ir

from ..errors import TilefuseError
from ..irutil import defining_op, iterator_types, map_dims, symbol_name, walk
from . import rewrite_sources
from .read import LOAD, STORE, reduction_under


@dataclass
class Layout:
    """Loop groups of a column-reduction root, each a run of loop dims."""

    batch: list[int]
    reduced: list[int]
    kept: list[int]

    def groups(self) -> list[list[int]]:
        return [g for g in (self.batch, self.kept, self.reduced) if g]


def _layout(root: ir.Operation) -> tuple[Layout | None, str | None]:
    """The root's loop groups if it is a collapsible column reduction; else
    None and why, or None and None when it is no column reduction at all
    (nothing to say)."""
    attrs = root.attributes
    if root.name != "linalg.generic" or "iterator_types" not in attrs:
        return None, None
    iters = [it == "reduction" for it in iterator_types(root)]
    rank, parallel = len(iters), iters.count(False)
    num_inputs = ir.DenseI32ArrayAttr(attrs["operandSegmentSizes"])[0]
    maps = [map_dims(ir.AffineMapAttr(a).value) for a in ir.ArrayAttr(attrs["indexing_maps"])]
    first = maps[0] if num_inputs and maps else None
    if parallel in (0, rank) or not first or first[-1] >= parallel:
        return None, None  # no column reduction: nothing reduced, or rows
    if len(root.results) != 1:
        return None, f"{len(root.results)} results"
    if len(maps) != num_inputs + 1 or any(m is None for m in maps):
        return None, "an indexing map that is not a projection of the loops"
    # IREE orders the loops parallel first, then reduced.
    if iters != [False] * parallel + [True] * (rank - parallel):
        return None, "reduced loops are not the innermost loops"
    if maps[-1] != list(range(parallel)):
        return None, "the result is not indexed by the kept loops in order"
    reduced = list(range(parallel, rank))
    full = [m for m in maps[:-1] if m != maps[-1]]
    if not full:
        return None, "no input is read along the reduced dims"
    for m in full:
        # (batch.., reduced.., kept..) with each group in loop order; an
        # input indexed like the result (a variance's mean, broadcast along
        # the reduced dims) is viewed like the result.
        if len(m) != rank or m[-1] >= parallel:
            return None, "an input is not read along a kept dim innermost"
        start = next((i for i, d in enumerate(m) if d >= parallel), None)
        if start is None or m[start : start + len(reduced)] != reduced:
            return None, "an input's reduced dims are not adjacent and in order"
        outer, inner = m[:start], m[start + len(reduced) :]
        if outer + inner != list(range(parallel)):
            return None, "an input's kept dims are not in loop order"
    layout = Layout(outer, reduced, inner)
    if all(len(g) == 1 for g in layout.groups()):
        return None, None  # already (batch?, kept, reduced)
    return layout, None


def _sizes(order: list[list[int]], dim_sizes: list[int]) -> list[int]:
    return [math.prod(dim_sizes[d] for d in g) for g in order]


def _full_load(value: ir.Value) -> ir.Operation | None:
    """The dispatch load reading all of `value`'s binding, used only here."""
    op = defining_op(value)
    if op is None or op.name != LOAD or len(op.operands) != 1:
        return None  # dynamic offsets or sizes
    shape = list(ir.RankedTensorType(value.type).shape)
    binding = str(op.operands[0].type)
    whole = f"tensor<{'x'.join(map(str, shape))}x" in binding
    if not whole or any(ir.DenseI64ArrayAttr(op.attributes["static_offsets"])):
        return None
    return op if len(list(value.uses)) == 1 else None


def _elementwise_of_loads(value: ir.Value) -> ir.Operation | None:
    """An all-parallel, identity-indexed generic of whole-binding loads (a
    convert the fusion stage left outside the root), used only here."""
    op = defining_op(value)
    if op is None or op.name != "linalg.generic" or len(list(value.uses)) != 1:
        return None
    attrs = op.attributes
    if "reduction" in iterator_types(op):
        return None
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(attrs["indexing_maps"])]
    if any(not m.is_permutation or map_dims(m) != list(range(m.n_dims)) for m in maps):
        return None
    num_inputs = ir.DenseI32ArrayAttr(attrs["operandSegmentSizes"])[0]
    if any(_full_load(op.operands[i]) is None for i in range(num_inputs)):
        return None
    init = defining_op(op.operands[num_inputs])
    return op if init is not None and init.name == "tensor.empty" else None


def _fill_of_empty(value: ir.Value) -> ir.Operation | None:
    op = defining_op(value)
    if op is None or op.name != "linalg.fill" or len(list(value.uses)) != 1:
        return None
    empty = defining_op(op.operands[1])
    return op if empty is not None and empty.name == "tensor.empty" else None


def _retype_binding(subspan: ir.Operation, sizes: list[int], element) -> ir.Value:
    """A copy of a binding's subspan that views it with the collapsed shape."""
    copy = subspan.clone(ip=ir.InsertionPoint(subspan))
    access = str(subspan.results[0].type).split("<", 1)[1].split(":", 1)[0]
    tensor = ir.RankedTensorType.get(sizes, element)
    copy.results[0].set_type(ir.Type.parse(f"!iree_tensor_ext.dispatch.tensor<{access}:{tensor}>"))
    return copy.results[0]


def _set_slice(op: ir.Operation, sizes: list[int]) -> None:
    ctx = op.context
    op.attributes["static_offsets"] = ir.DenseI64ArrayAttr.get([0] * len(sizes), ctx)
    op.attributes["static_sizes"] = ir.DenseI64ArrayAttr.get(sizes, ctx)
    op.attributes["static_strides"] = ir.DenseI64ArrayAttr.get([1] * len(sizes), ctx)


def _collapse_load(load: ir.Operation, sizes: list[int]) -> ir.Value:
    """A load of the same binding, viewed with the collapsed shape."""
    element = ir.RankedTensorType(load.results[0].type).element_type
    new = load.clone(ip=ir.InsertionPoint(load))
    new.operands[0] = _retype_binding(load.operands[0].owner, sizes, element)
    _set_slice(new, sizes)
    new.results[0].set_type(ir.RankedTensorType.get(sizes, element))
    # The old load and subspan are left dead (IREE drops them): erasing ops
    # through the Python bindings while other handles to them live corrupts
    # memory.
    return new.results[0]


def _collapse_elementwise(
    op: ir.Operation, sizes: list[int], computed: ir.Operation | None = None
) -> None:
    """Same-shape elementwise op: collapse its loads, init and loops alike
    (an input `computed` produces is collapsed there, not re-viewed)."""
    attrs = op.attributes
    num_inputs = ir.DenseI32ArrayAttr(attrs["operandSegmentSizes"])[0]
    for i in range(num_inputs):
        if computed is None or defining_op(op.operands[i]) != computed:
            op.operands[i] = _collapse_load(_full_load(op.operands[i]), sizes)
    for value in (op.operands[num_inputs], op.results[0]):  # tensor.empty, result
        value.set_type(ir.RankedTensorType.get(sizes, ir.RankedTensorType(value.type).element_type))
    identity = ir.AffineMap.get_identity(len(sizes), op.context)
    count = len(ir.ArrayAttr(attrs["indexing_maps"]))
    op.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(identity)] * count)
    op.attributes["iterator_types"] = ir.Attribute.parse(
        "[" + ", ".join(["#linalg.iterator_type<parallel>"] * len(sizes)) + "]", op.context
    )


def _rewrite_refusal(
    root: ir.Operation, num_inputs: int, epilogue: ir.Operation | None = None
) -> str | None:
    """Why the root's operands cannot be re-viewed in place, or None: inputs
    must be whole-binding loads, the init a fill, the result only stored
    (or only read by the `epilogue`)."""
    for i in range(num_inputs):
        value = root.operands[i]
        if _full_load(value) is None and _elementwise_of_loads(value) is None:
            return f"input {i} is not a whole-binding load (nor elementwise of such loads)"
    if _fill_of_empty(root.operands[num_inputs]) is None:
        return "the init is not a fill of an empty tensor"
    if epilogue is not None:
        if not all(u.owner == epilogue for u in root.results[0].uses):
            return "the result is used by something else than its epilogue"
        return None
    if not all(u.owner.name == STORE for u in root.results[0].uses):
        return "the result is used by something else than a store"
    return None


def _rewrite(
    root: ir.Operation, layout: Layout, epilogue: ir.Operation | None = None
) -> str | None:
    """Collapse the root's loops (the bindings are re-viewed, no reshape op);
    None, or why the root was left as it is. `epilogue`: the root is the
    reduction an elementwise epilogue reads, whose result keeps its shape."""
    ctx = root.context
    attrs = root.attributes
    num_inputs = ir.DenseI32ArrayAttr(attrs["operandSegmentSizes"])[0]
    why = _rewrite_refusal(root, num_inputs, epilogue)
    if why:
        return why
    merges_kept = len(layout.batch) > 1 or len(layout.kept) > 1
    if epilogue is not None and merges_kept:
        why = _epilogue_refusal(epilogue, root)
        if why:
            return why
    maps = [map_dims(ir.AffineMapAttr(a).value) for a in ir.ArrayAttr(attrs["indexing_maps"])]
    # An input indexed like the result (broadcast along the reduced dims) is
    # viewed like the result; the others as (batch?, reduced, kept).
    like_result = [m == maps[num_inputs] for m in maps[:num_inputs]]
    full = like_result.index(False)
    dim_sizes = [0] * len(maps[full])
    for d, n in zip(maps[full], ir.RankedTensorType(root.operands[full].type).shape):
        dim_sizes[d] = n
    in_sizes = _sizes([g for g in (layout.batch, layout.reduced, layout.kept) if g], dim_sizes)
    out_sizes = _sizes([g for g in (layout.batch, layout.kept) if g], dim_sizes)
    for i in range(num_inputs):
        sizes = out_sizes if like_result[i] else in_sizes
        elementwise = _elementwise_of_loads(root.operands[i])
        if elementwise is None:
            root.operands[i] = _collapse_load(_full_load(root.operands[i]), sizes)
        else:
            _collapse_elementwise(elementwise, sizes)
    fill = _fill_of_empty(root.operands[num_inputs])
    out_type = ir.RankedTensorType.get(
        out_sizes, ir.RankedTensorType(root.results[0].type).element_type
    )
    same_output = list(ir.RankedTensorType(root.results[0].type).shape) == out_sizes
    fill.operands[1].owner.results[0].set_type(out_type)  # the tensor.empty
    fill.results[0].set_type(out_type)
    root.results[0].set_type(out_type)
    if epilogue is not None:
        if not same_output:
            _collapse_epilogue(epilogue, root, out_sizes)
    else:
        for use in [] if same_output else list(root.results[0].uses):
            _collapse_store(use.owner, out_sizes, out_type.element_type)
    # New loops: (batch?, kept, reduced) -> dims b, k, r.
    b = 1 if layout.batch else 0
    k, r = b, b + 1
    loops = ", ".join(f"d{i}" for i in range(b + 2))
    in_res = ", ".join(["d0"] * b + [f"d{r}", f"d{k}"])
    out_res = ", ".join(["d0"] * b + [f"d{k}"])
    new_maps = [f"affine_map<({loops}) -> ({out_res if like else in_res})>" for like in like_result]
    new_maps.append(f"affine_map<({loops}) -> ({out_res})>")
    root.attributes["indexing_maps"] = ir.Attribute.parse(f"[{', '.join(new_maps)}]", ctx)
    iters = ["parallel"] * (b + 1) + ["reduction"]
    root.attributes["iterator_types"] = ir.Attribute.parse(
        "[" + ", ".join(f"#linalg.iterator_type<{t}>" for t in iters) + "]", ctx
    )
    return None


def _collapse_store(store: ir.Operation, sizes: list[int], element) -> None:
    store.operands[1] = _retype_binding(store.operands[1].owner, sizes, element)
    _set_slice(store, sizes)


def _epilogue_refusal(epilogue: ir.Operation, reduction: ir.Operation) -> str | None:
    """Why an epilogue cannot be collapsed with its reduction's kept loops,
    or None: every map the identity, its other inputs whole-binding loads,
    its init an empty tensor, its result only stored."""
    attrs = epilogue.attributes
    num_inputs = ir.DenseI32ArrayAttr(attrs["operandSegmentSizes"])[0]
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(attrs["indexing_maps"])]
    identity = ir.AffineMap.get_identity(maps[0].n_dims, epilogue.context)
    if len(epilogue.results) != 1 or any(m != identity for m in maps):
        return "an epilogue over several kept dims that does not read and write them in order"
    for i in range(num_inputs):
        value = epilogue.operands[i]
        if defining_op(value) != reduction and _full_load(value) is None:
            return "an epilogue over several kept dims that reads more than whole bindings"
    init = defining_op(epilogue.operands[num_inputs])
    if init is None or init.name != "tensor.empty":
        return "an epilogue over several kept dims whose init is not an empty tensor"
    if not all(u.owner.name == STORE for u in epilogue.results[0].uses):
        return "an epilogue over several kept dims whose result is used by something else"
    return None


def _collapse_epilogue(epilogue: ir.Operation, reduction: ir.Operation, sizes: list[int]) -> None:
    """The epilogue over the collapsed kept loops, and its stores re-viewed
    (_epilogue_refusal said it can)."""
    _collapse_elementwise(epilogue, sizes, computed=reduction)
    element = ir.RankedTensorType(epilogue.results[0].type).element_type
    for use in list(epilogue.results[0].uses):
        _collapse_store(use.owner, sizes, element)


def _root_of(func: ir.Operation) -> ir.Operation | None:
    """The op whose single result the function stores, if it is one op."""
    stores = [op for op in walk(func) if op.name == STORE]
    owners = {id(s.operands[0].owner): s.operands[0] for s in stores}
    if len(owners) != 1:
        return None
    return defining_op(next(iter(owners.values())))


def collapse_column_reductions(sources: str) -> tuple[str, list[str]]:
    """The executable sources with column-reduction roots collapsed, and one
    line per column reduction with several reduced or kept loops: collapsed
    (the loops before and after), or left as IREE wrote it and why."""
    return rewrite_sources(sources, collapse_in)


def collapse_in(module: ir.Module) -> tuple[bool, list[str]]:
    """collapse_column_reductions on the parsed sources, in place."""
    found, log = [], []
    for op in walk(module.operation):
        if op.name != "func.func" or op.parent.operation.name != "builtin.module":
            continue
        if not any(inner.name == LOAD for inner in walk(op)):
            continue
        root = _root_of(op)
        epilogue = None
        if root is not None and (under := reduction_under(root)) is not None:
            epilogue, root = root, under[1]
        layout, why = _layout(root) if root is not None else (None, None)
        name = symbol_name(op)
        if layout is not None:
            found.append((name, root, layout, epilogue))
        elif why:
            log.append(f"{name}: column reduction not collapsed: {why}")
    changed = False
    with ir.Location.unknown(module.context):
        # Rewrite after the walk, not during it.
        for name, root, layout, epilogue in found:
            before = iterator_types(root)
            why = _rewrite(root, layout, epilogue)
            if why:
                log.append(f"{name}: column reduction not collapsed: {why}")
                continue
            after = iterator_types(root)
            # Post-condition: (batch?, kept, reduced), one reduced loop last.
            if after[-1] != "reduction" or after.count("reduction") != 1 or len(after) > 3:
                raise TilefuseError(f"{name}: collapse left loops {after}")
            log.append(f"{name}: column reduction loops {before} collapsed to {after}")
            changed = True
    return changed, log
