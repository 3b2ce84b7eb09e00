"""StableHLO rewrites run before fusion planning, in one ordered list.

    normalize.py  IREE's input conventions (inline calls, CHLO, f64 demotion)
    broadcasts.py broadcast chains (JAX's keepdims) folded into one broadcast
    unit_reduces.py reductions over extent-1 dims (JAX's bias gradients) as reshapes
    argminmax.py  argmax/argmin reduces rewritten as two plain reductions
    minmax.py     float row max/min on ordered i32 keys (SPIR-V targets)
    scalars.py    reductions to a scalar as reductions of rows
    ops.py        facts about StableHLO ops and tensor types (op classes, shapes)

Each rewrite changes the module in place and returns one log line per
decision; `tilefuse explain --fusion` prints them.
"""

from collections.abc import Callable
from dataclasses import dataclass

from iree.compiler import ir

from ..targets import Target
from . import argminmax, broadcasts, minmax, scalars, unit_reduces
from .normalize import normalize


@dataclass(frozen=True)
class FunctionRewrite:
    name: str
    applies: Callable[[Target], bool]
    rewrite: Callable[[ir.Operation], list[str]]  # a func.func, in place -> log


# In this order: broadcast chains first, so that every later rewrite and the
# planner see a reduction's result broadcast directly; reductions that reduce
# nothing are gone before any rewrite counts reductions; a float max to a
# scalar (scalars) is split as the integer max of its keys (minmax), decoded
# once at the end.
FUNCTION_REWRITES = (
    FunctionRewrite("broadcasts", lambda t: True, broadcasts.rewrite_function),
    FunctionRewrite("unit_reduces", lambda t: True, unit_reduces.rewrite_function),
    FunctionRewrite("argminmax", lambda t: t.is_gpu, argminmax.rewrite_function),
    FunctionRewrite(
        "minmax", lambda t: t.is_gpu and t.float_minmax_as_keys, minmax.rewrite_function
    ),
    FunctionRewrite("scalars", lambda t: t.is_gpu, scalars.rewrite_function),
)


def rewrite_module(module: ir.Module, target: Target) -> list[str]:
    """Apply IREE's input conventions, then every function rewrite that
    applies to `target`; the log lines, each prefixed by what it concerns."""
    log = [f"input: {line}" for line in normalize(module)]
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func" or not op.regions[0].blocks:
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        for rewrite in FUNCTION_REWRITES:
            if rewrite.applies(target):
                log += [f"{name}: {line}" for line in rewrite.rewrite(op)]
    return log
