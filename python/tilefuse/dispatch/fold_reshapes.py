"""Fold reshapes of loads and stores into the bindings, in the executable sources.

hlo/scalars.py views a reduction to a scalar as rows ([160] read as
[1, 160]); when the viewed value comes from another dispatch, the reshape
sits in the reading dispatch as a tensor.expand_shape of its load, and the
row kernels refuse a dispatch holding one ("tensor.expand_shape in the
dispatch": an MLP's mean squared error stayed on IREE's codegen). IREE folds
such reshapes into the binding (a view of the same buffer with the other
shape) in the dispatches it forms itself, with
`iree-codegen-fold-reshape-into-interface-tensor`, but not in the regions
the fusion stage pre-forms. This stage runs that pass on the dispatches
that hold a reshape of a load or of a stored value, and keeps its result
where no reshape is left in the dispatch (else a reshape moves between two
ops, where no kernel takes it); the log names them.

Where a reshape sits between two computed values instead (a group-wise
int8 dequantization: convert [K, N], view as [G, K/G, N], scale per group,
view back), that pass alone leaves it, and the dispatch stayed on IREE's
codegen ("root op is tensor.collapse_shape"). Then the stage tries again
with IREE's `iree-codegen-propagate-reshapes-by-expansion` first, which
moves the view through the elementwise ops to the load, where it folds.

A reshape between computed values and no binding's (a group's value viewed
with a unit dim, [2, 16] as [2, 16, 1], multiplied there and viewed back:
jax.grad of a layernorm) was not tried at all, and the loop kernel refused
the dispatch ("only direct producers are fused"). For such a dispatch whose
ops are all parallel, MLIR's `linalg-fold-unit-extent-dims` is tried first:
it drops the unit dims, the views then cancel or reach the loads, where they
fold. Expansion alone would also remove them, but leaves every op on
[2, 16, 1], whose innermost dim of 1 the loop kernel cannot vectorize. Its
result is kept only where every op keeps one rank (else a producer of lower
rank is left beside the root, which the loop kernel fails on). Not
where the dispatch reduces: hlo/scalars.py views a scalar's reduction as a
[1, N] row on purpose.
"""

from iree.compiler import ir, passmanager

from ..irutil import iterator_types, symbol_name, walk
from . import rewrite_sources
from .read import LOAD, STORE, defining_op_name

FOLD = "iree-codegen-fold-reshape-into-interface-tensor, canonicalize"
# Tried in order; the first that leaves no reshape in the dispatch is kept.
PIPELINES = (
    f"func.func({FOLD})",
    f"func.func(iree-codegen-propagate-reshapes-by-expansion, {FOLD})",
)
# Tried first on an all-parallel dispatch with a reshape between computed values.
UNIT_DIMS = f"func.func(linalg-fold-unit-extent-dims, canonicalize, \
iree-codegen-propagate-reshapes-by-expansion, {FOLD})"
RESHAPES = ("tensor.expand_shape", "tensor.collapse_shape")


def _binding_reshapes(func: ir.Operation) -> int:
    """Reshapes of a load, or stored, in `func`."""
    of_load = (
        op.name in RESHAPES and defining_op_name(op.operands[0]) == LOAD for op in walk(func)
    )
    stored = (
        op.name == STORE and defining_op_name(op.operands[0]) in RESHAPES for op in walk(func)
    )
    return sum(of_load) + sum(stored)


def _computed_reshapes(func: ir.Operation) -> int:
    """Reshapes in `func` of a value computed there (not of a load)."""
    return sum(
        op.name in RESHAPES and defining_op_name(op.operands[0]) not in (LOAD, None)
        for op in walk(func)
    )


def _one_loop_count(func: ir.Operation) -> bool:
    """Every linalg.generic of `func` has as many loops as every other.
    Folding unit dims can leave a producer of lower rank than its reader
    (a layernorm gradient's per-row [32, 1] term became [32] beside a
    [32, 128] root), which the loop kernel cannot vectorize (IREE's greedy
    fusion folds no such producer into a root of more than 3 operands)."""
    counts = {len(iterator_types(op)) for op in walk(func) if op.name == "linalg.generic"}
    return len(counts) <= 1


# linalg ops without an iterator_types attribute that reduce nothing.
PARALLEL_NAMED = (
    "linalg.yield",
    "linalg.index",
    "linalg.fill",
    "linalg.transpose",
    "linalg.broadcast",
    "linalg.copy",
)


def _all_parallel(func: ir.Operation) -> bool:
    """No linalg op of `func` reduces (a named contraction counts as one)."""
    for op in walk(func):
        if not op.name.startswith("linalg.") or op.name in PARALLEL_NAMED:
            continue
        if "iterator_types" not in op.attributes or "reduction" in iterator_types(op):
            return False
    return True


def fold_binding_reshapes(sources: str) -> tuple[str, list[str]]:
    """The executable sources with reshapes of loads and stores folded into
    their bindings, and one line per dispatch that held any."""
    return rewrite_sources(sources, fold_reshapes_in)


def fold_reshapes_in(module: ir.Module) -> tuple[bool, list[str]]:
    """fold_binding_reshapes on the parsed sources, in place."""
    log, changed = [], False
    funcs = [
        op
        for op in walk(module.operation)
        if op.name == "func.func" and any(inner.name == LOAD for inner in walk(op))
    ]
    for func in funcs:
        before = _binding_reshapes(func)
        computed = _computed_reshapes(func)
        pipelines = PIPELINES if before else ()
        if computed and _all_parallel(func):
            pipelines = (UNIT_DIMS, *pipelines)
        if not pipelines:
            continue
        before += computed
        name = symbol_name(func)
        for pipeline in pipelines:
            # On a copy: where a reshape is left anywhere in the function (a
            # split-K sum's loads folded, a collapse_shape moved between its
            # ops instead), the original stays, which the loop kernel reads
            # as views.
            folded = func.clone(ip=ir.InsertionPoint(func))
            passmanager.PassManager.parse(pipeline, module.context).run(folded)
            if not any(op.name in RESHAPES for op in walk(folded)) and (
                pipeline != UNIT_DIMS or _one_loop_count(folded)
            ):
                break
            folded.erase()
        else:
            log.append(
                f"{name}: reshapes not folded into bindings (one would stay in the dispatch)"
            )
            continue
        func.erase()
        changed = True
        log.append(f"{name}: {before} reshapes folded into bindings")
    return changed, log
