"""StableHLO rewrites run before fusion planning, in one ordered list.

    normalize.py  IREE's input conventions (inline calls, CHLO, f64 demotion)
    fold_scalars.py scalar arithmetic on constants (jnp.var's divisor) folded
    gather_clamps.py a gather of whole rows with its indices clamped, as StableHLO
                  clamps them (IREE's index_select reads outside the operand)
    unsigned_ops.py reverses and window reductions of unsigned integers on signless
                  ones (IREE cannot lower them on unsigned types)
    grouped_convs.py grouped convolutions as depthwise ones and a sum, or one per
                  group (SPIR-V targets: IREE's codegen of them is wrong there)
    mixed_convs.py grouped convolutions of f16/bf16 with an f32 result read their
                  operands converted to f32 (IREE fails on the depthwise ones)
    select_scatters.py select_and_scatter (a max pool's gradient) as strided slices,
                  selects and pads (IREE's lowering leaves an index uninitialized)
    scatter_windows.py a scatter whose update windows sit between its scattered dims
                  into its operand transposed (IREE cannot lower it as written)
    stacked_concats.py a concatenate of equal computed pieces (RoPE's halves) as a
                  select over a new axis (IREE cannot compile it in a region)
    broadcasts.py broadcast chains (JAX's keepdims) folded into one broadcast
    index_broadcasts.py a broadcast of an iota computation (a causal mask) computed at its shape
    transpose_chains.py a transpose of a transpose composed into one (or none), reshapes
                  likewise; again after dot_layouts, which views unit dims away and back
    narrow_operands.py f32 contractions read f16/bf16 operands before their converts
    unit_reduces.py reductions over extent-1 dims (JAX's bias gradients) as reshapes
    unit_transposes.py transposes that move only extent-1 dims as reshapes; a reshape
                  dropping extent-1 dims moved before its transpose
    negated_sums.py sums of negated values (JAX's gradients) as negated sums
    interleaved_reduces.py reductions over runs of dims with kept dims between them
                  (GroupNorm over NHWC) one run at a time (SPIR-V computes them wrong
                  where their result is read back over the rows; no kernel takes them)
    wide_accumulators.py f16 and bf16 contractions accumulating in f32, as XLA's do
    matrix_vectors.py matrix-vector products read the matrix as stored (decode's
                  x @ W.T as a row reduction, q @ k^T without copying k)
    dot_layouts.py operand transposes of a dot_general moved into their producers
                  or read through; operands swapped where that reads a computed one
                  as stored, or takes a transpose of the result
    batch_dims.py several batch dims collapsed into one where IREE would copy an operand transposed
    argminmax.py  argmax/argmin reduces rewritten as two plain reductions
    minmax.py     float row max/min on ordered i32 keys (SPIR-V targets)
    scalars.py    reductions to a scalar as reductions of rows
    column_splits.py column reductions too narrow for the grid split in two steps
    split_k.py    matmuls too small for the grid split along K (decode shapes)
    sorts.py      sorts longer than 256 as a bitonic network of elementwise steps
                  (IREE sorts each row serially in one invocation)
    ops.py        facts about StableHLO ops and tensor types (op classes, shapes)

Each rewrite changes the module in place and returns one log line per
decision; `tilefuse explain --fusion` prints them.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

from iree.compiler import ir

from ..targets import Target
from . import (
    argminmax,
    batch_dims,
    broadcasts,
    column_splits,
    dot_layouts,
    fold_scalars,
    gather_clamps,
    grouped_convs,
    index_broadcasts,
    interleaved_reduces,
    matrix_vectors,
    minmax,
    mixed_convs,
    narrow_operands,
    negated_sums,
    scalars,
    scatter_windows,
    select_scatters,
    sorts,
    split_k,
    stacked_concats,
    transpose_chains,
    unit_reduces,
    unit_transposes,
    unsigned_ops,
    wide_accumulators,
)
from .normalize import normalize
from .ops import LEFT_AS_IT_IS, SPLIT_STEP


@dataclass(frozen=True)
class FunctionRewrite:
    name: str
    applies: Callable[[Target], bool]
    # a func.func, in place, for a target -> log
    rewrite: Callable[[ir.Operation, Target], list[str]]
    # It splits work into steps, each a dispatch of its own (it marks the
    # steps it adds with ops.SPLIT_STEP); explain prints its log.
    splits: bool = False
    # It rewrites what IREE's codegen computes wrong: the program as written
    # is no alternative (its log lines but those that leave an op as it is
    # are Rewritten.corrections).
    corrects: bool = False


def _any_target(rewrite: Callable[[ir.Operation], list[str]]):
    return lambda func, target: rewrite(func)


# In this order: scalars on constants folded first (a select they decide
# goes), then broadcast chains, so that every later rewrite and the
# planner see a reduction's result broadcast directly; reductions that reduce
# nothing are gone before any rewrite counts reductions; a float max to a
# scalar (scalars) is split as the integer max of its keys (minmax), decoded
# once at the end; column reductions are split last, on the rewritten ops.
FUNCTION_REWRITES = (
    FunctionRewrite("fold_scalars", lambda t: True, _any_target(fold_scalars.rewrite_function)),
    FunctionRewrite(
        "gather_clamps",
        lambda t: True,
        _any_target(gather_clamps.rewrite_function),
        corrects=True,
    ),
    FunctionRewrite(
        "unsigned_ops",
        lambda t: True,
        _any_target(unsigned_ops.rewrite_function),
        corrects=True,
    ),
    FunctionRewrite(
        "grouped_convs",
        lambda t: t.grouped_convs_rewritten,
        _any_target(grouped_convs.rewrite_function),
        corrects=True,
    ),
    FunctionRewrite("mixed_convs", lambda t: True, _any_target(mixed_convs.rewrite_function)),
    FunctionRewrite(
        "select_scatters",
        lambda t: t.is_gpu,
        _any_target(select_scatters.rewrite_function),
        corrects=True,
    ),
    FunctionRewrite(
        "scatter_windows",
        lambda t: True,
        _any_target(scatter_windows.rewrite_function),
        corrects=True,
    ),
    FunctionRewrite(
        "sorts",
        lambda t: t.is_gpu,
        sorts.rewrite_function,
        splits=True,
        corrects=True,
    ),
    FunctionRewrite(
        "stacked_concats", lambda t: t.is_gpu, _any_target(stacked_concats.rewrite_function)
    ),
    FunctionRewrite("broadcasts", lambda t: True, _any_target(broadcasts.rewrite_function)),
    FunctionRewrite(
        "index_broadcasts", lambda t: t.is_gpu, _any_target(index_broadcasts.rewrite_function)
    ),
    FunctionRewrite(
        "transpose_chains", lambda t: True, _any_target(transpose_chains.rewrite_function)
    ),
    FunctionRewrite("unit_reduces", lambda t: True, _any_target(unit_reduces.rewrite_function)),
    FunctionRewrite(
        "unit_transposes", lambda t: True, _any_target(unit_transposes.rewrite_function)
    ),
    FunctionRewrite("negated_sums", lambda t: True, _any_target(negated_sums.rewrite_function)),
    FunctionRewrite(
        "interleaved_reduces",
        lambda t: t.is_gpu,
        _any_target(interleaved_reduces.rewrite_function),
        splits=True,
        corrects=True,
    ),
    FunctionRewrite(
        "wide_accumulators", lambda t: True, _any_target(wide_accumulators.rewrite_function)
    ),
    FunctionRewrite("matrix_vectors", lambda t: t.is_gpu, matrix_vectors.rewrite_function),
    FunctionRewrite("dot_layouts", lambda t: t.is_gpu, _any_target(dot_layouts.rewrite_function)),
    FunctionRewrite(
        "transpose_chains_again",
        lambda t: t.is_gpu,
        _any_target(transpose_chains.rewrite_function),
    ),
    FunctionRewrite(
        "narrow_operands", lambda t: t.is_gpu, _any_target(narrow_operands.rewrite_function)
    ),
    FunctionRewrite("batch_dims", lambda t: t.is_gpu, _any_target(batch_dims.rewrite_function)),
    FunctionRewrite("argminmax", lambda t: t.is_gpu, _any_target(argminmax.rewrite_function)),
    FunctionRewrite(
        "minmax",
        lambda t: t.is_gpu and t.float_minmax_as_keys,
        _any_target(minmax.rewrite_function),
    ),
    FunctionRewrite(
        "scalars", lambda t: t.is_gpu, _any_target(scalars.rewrite_function), splits=True
    ),
    FunctionRewrite(
        "column_splits",
        lambda t: t.is_gpu and t.column_split_bytes > 0,
        column_splits.rewrite_function,
        splits=True,
    ),
    FunctionRewrite(
        "split_k",
        lambda t: t.is_gpu and t.multiprocessors > 0,
        split_k.rewrite_function,
        splits=True,
    ),
)


@dataclass
class Rewritten:
    log: list[str]  # one line per decision, each prefixed by what it concerns
    # Steps the splitting rewrites added (ops marked ops.SPLIT_STEP):
    # dispatches a plan has on purpose beyond what IREE's formation of the
    # input would give; and those rewrites' lines of `log` (explain prints
    # them).
    split_steps: int = 0
    splits: list[str] = field(default_factory=list)
    # The lines of the rewrites that correct IREE's codegen (`corrects`).
    corrections: list[str] = field(default_factory=list)


def _take_split_steps(func: ir.Operation) -> int:
    """How many ops of `func` are marked SPLIT_STEP; the marks go."""
    body = func.regions[0].blocks[0].operations
    marked = [o.operation for o in body if SPLIT_STEP in o.operation.attributes]
    for op in marked:
        del op.attributes[SPLIT_STEP]
    return len(marked)


def rewrite_module(module: ir.Module, target: Target) -> Rewritten:
    """Apply IREE's input conventions, then every function rewrite that
    applies to `target`."""
    done = Rewritten([f"input: {line}" for line in normalize(module)])
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func" or not op.regions[0].blocks:
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        for rewrite in FUNCTION_REWRITES:
            if rewrite.applies(target):
                lines = [f"{name}: {line}" for line in rewrite.rewrite(op, target)]
                done.log += lines
                if rewrite.splits:
                    done.splits += lines
                if rewrite.corrects:
                    done.corrections += [line for line in lines if LEFT_AS_IT_IS not in line]
        done.split_steps += _take_split_steps(op)
    return done
