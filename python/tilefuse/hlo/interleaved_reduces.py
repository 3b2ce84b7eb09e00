"""Reductions over runs of dims with kept dims between them, one run at a
time, before fusion planning.

GroupNorm over NHWC (Flax's default layout; Stable Diffusion's UNet) views
[N, H, W, C] as [N, H, W, G, C/G] and reduces H, W and C/G, keeping N and G:

    %m = stablehlo.reduce(%x init: 0) applies stablehlo.add
           across dimensions = [1, 2, 4] : (tensor<2x64x64x32x10xf32>, ...) -> tensor<2x32xf32>

Two runs of reduced dims ({H, W} and {C/G}) with a kept dim (G) between
them. No tilefuse kernel takes such a reduce (the row kernel wants the
reduced dims innermost, the column kernel one run of them), and where the
mean is put back over its rows (x - mean) IREE forms one dispatch of the
reduction and its reader, which its SPIR-V codegen computes wrong (the
reduction's result read across the rows it reduced: docs/findings.md, 'A
reduction read transposed in its own dispatch'; GroupNorm came out 2.56
wrong, relative, on lavapipe, plain IREE and tilefuse alike).

So such a reduce, where its result (or an elementwise op or a view of it)
is broadcast back over what it read, becomes one reduce per run, each over
a single run of adjacent dims, which the row kernel (a run at the end) or
the column kernel (any other) takes:

    %p = reduce(view(%x, [2, 4096, 320])) over [1]   -> 2x320   (column kernel)
    %m = reduce(view(%p, [2, 32, 10])) over [2]      -> 2x32    (row kernel)

A reduce nothing reads back is left as it is: IREE's formation computes it
right, in one dispatch. The run reducing the most elements goes first, so
that the partial result written between the steps is as small as it can
be. Every step starts from the reduce's own init, so the init must be the
identity of the body's op (scalars.identity_body). A float sum is then
added in another order, as any split reduction's is. Dims of extent 1
belong to no run (they are neither read across nor reduced).
"""

import math

from iree.compiler import ir

from ..frontend import location_text
from .argminmax import function_reduces, splice, tensor_text
from .ops import mark_split_steps, node_class, shape_of
from .scalars import hoist_view, identity_body


def reduced_runs(shape: list[int], dims: list[int]) -> list[list[int]]:
    """The runs of `dims` (reduced dims of `shape`) that no kept dim of
    extent > 1 separates, outermost first; a unit dim joins no run."""
    runs: list[list[int]] = []
    open_run = False
    for d, n in enumerate(shape):
        if n == 1:
            continue
        if d in dims:
            if not open_run:
                runs.append([])
            runs[-1].append(d)
            open_run = True
        else:
            open_run = False
    return runs


def steps_for(shape: list[int], dims: list[int]) -> list[tuple[list[int], int]]:
    """Per step, (the view it reduces, the dim of the view it reduces): one
    run of `dims` per step, the run of most elements first. A step views
    what it reads as [dims before the run..., the run, after it], the
    last part left out where empty (IREE folds the view into the loads; the
    row kernel takes a run at the end, the column kernel any other). The
    dims before stay apart, so that the last step leaves the reduce's own
    shape and its readers fuse into it (a mean's division). Unit dims in a run's
    span, and unit dims of `dims` outside every run, need no step."""
    remaining = list(range(len(shape)))  # original dims not reduced yet
    steps = []
    runs = sorted(reduced_runs(shape, dims), key=lambda run: -math.prod(shape[d] for d in run))
    for run in runs:
        lo, hi = remaining.index(run[0]), remaining.index(run[-1])
        before, span, after = remaining[:lo], remaining[lo : hi + 1], remaining[hi + 1 :]
        view = [shape[d] for d in before] + [math.prod(shape[d] for d in span)]
        view += [math.prod(shape[d] for d in after)] if after else []
        remaining = before + after
        steps.append((view, len(before)))
    return steps


def _template(op: ir.Operation, steps: list[tuple[list[int], int]]) -> str:
    """A func.func of one argument reducing it in `steps` (each viewing what
    it reads) and viewing the last result as the reduce's."""
    x_type = str(op.operands[0].type)
    out = str(op.results[0].type)
    element = str(ir.ShapedType(op.operands[0].type).element_type)
    body = op.regions[0].blocks[0].operations[0].operation.name
    init = str(op.operands[1].owner.operation.attributes["value"])
    scalar = tensor_text([], element)
    lines = [f"%init = stablehlo.constant {init}"]
    value, current = "%x", x_type
    for k, (view, dim) in enumerate(steps):
        lines.append(
            f"%v{k} = stablehlo.reshape {value} : ({current}) -> {tensor_text(view, element)}"
        )
        partial = view[:dim] + view[dim + 1 :]
        lines.append(
            f"%p{k} = stablehlo.reduce(%v{k} init: %init) applies {body}"
            f" across dimensions = [{dim}] : ({tensor_text(view, element)}, {scalar})"
            f" -> {tensor_text(partial, element)}"
        )
        value, current = f"%p{k}", tensor_text(partial, element)
    lines.append(f"%y = stablehlo.reshape {value} : ({current}) -> {out}")
    loc = str(op.location)
    text = "\n".join(f"  {line} {loc}" for line in lines)
    return f"func.func @runs(%x: {x_type}) -> {out} {{\n{text}\n  return %y : {out} {loc}\n}}"


def read_back_over_rows(op: ir.Operation) -> bool:
    """The reduce's result, or an elementwise op or a view of it, is
    broadcast back over as many elements as the reduce reads (x - mean)."""
    reduced = math.prod(shape_of(op.results[0].type) or [])
    size = math.prod(shape_of(op.operands[0].type) or [])
    values, seen = [op.results[0]], []
    while values:
        value = values.pop()
        for use in value.uses:
            user = use.owner.operation
            if user in seen:
                continue
            seen.append(user)
            elements = [math.prod(shape_of(r.type) or []) for r in user.results]
            if user.name == "stablehlo.broadcast_in_dim" and elements == [size]:
                return True
            if elements == [reduced] and (
                user.name == "stablehlo.reshape" or node_class(user) == "elementwise"
            ):
                values.append(user.results[0])
    return False


def rewrite_function(func: ir.Operation) -> list[str]:
    """Rewrite every reduce of `func` over interleaved runs of dims in place;
    one log line per such reduce (rewritten, or why not)."""
    log = []
    for op in function_reduces(func, variadic=False):
        shape = shape_of(op.operands[0].type)
        dims = sorted(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
        if shape is None or len(reduced_runs(shape, dims)) < 2:
            continue
        if not read_back_over_rows(op):
            continue  # IREE's formation computes it right; one dispatch
        where = location_text(op.location)
        why, _ = identity_body(op)
        if why:
            log.append(f"reduce at {where} over interleaved dims {dims} left as it is: {why}")
            continue
        steps = steps_for(shape, dims)
        moved = splice(op, _template(op, steps), op.operands[0], result=0)
        mark_split_steps(moved, "stablehlo.reduce")
        with func.context, func.location:
            hoist_view(next(o for o in moved if o.name == "stablehlo.reshape"))
        log.append(
            f"reduce at {where} of {shape} over interleaved dims {dims} rewritten as "
            f"{len(steps)} reduces: "
            f"{', then '.join(f'dim {dim} of {view}' for view, dim in steps)}"
        )
    return log


__all__ = ["reduced_runs", "rewrite_function", "steps_for"]
