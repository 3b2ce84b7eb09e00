"""Pick a strategy and its parameters for each dispatch.

A Choice either names a strategy (a named sequence in transform_scripts/) with
the parameters to specialize it with, or says why no tilefuse strategy applies
so that IREE's own codegen compiles the dispatch; `explain` prints that reason.
"""

from dataclasses import dataclass, field

from ..dispatches import Dispatch
from ..targets import Target
from . import column_reduction, loop, row_reduction, row_warp, softmax


@dataclass
class Choice:
    dispatch: Dispatch
    strategy: str | None  # None: IREE's default codegen
    params: dict = field(default_factory=dict)
    reason: str = ""  # why this strategy, or why none
    failure: str = ""  # a chooser's internal error: IREE's codegen takes the dispatch

    def describe_params(self) -> str:
        module = dict(STRATEGIES).get(self.strategy)
        return module.describe(self.params) if module else ""


# Tried in order; the first that applies wins.
STRATEGIES = [
    ("loop", loop),
    ("row_warp", row_warp),
    ("row_reduction", row_reduction),
    ("column_reduction", column_reduction),
    ("softmax", softmax),
]


def choose(dispatch: Dispatch, target: Target) -> Choice:
    if not target.is_gpu:
        return Choice(dispatch, None, reason=f"target {target.name} uses IREE's CPU codegen")
    reasons = []
    for name, module in STRATEGIES:
        try:
            params, why = module.plan(dispatch, target)
        except Exception as e:  # noqa: BLE001 -- a chooser bug must not cost the compile
            failure = f"{name} chooser failed: internal error {type(e).__name__}: {e}"
            return Choice(dispatch, None, reason=failure, failure=failure)
        if params is not None:
            return Choice(dispatch, name, params, why)
        reasons.append(f"{name}: {why}")
    return Choice(dispatch, None, reason="; ".join(reasons))
