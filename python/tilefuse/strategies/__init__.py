"""Pick a strategy and its parameters for each dispatch.

A Choice either names a strategy (a named sequence in transform_scripts/) with
the parameters to specialize it with, or says why no tilefuse strategy applies
so that IREE's own codegen compiles the dispatch; `explain` prints that reason.
Every strategy is a `Strategy` record (contract.py); this module lists them.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from ..dispatch.read import Dispatch
from ..fusion.catalogue import GroupKernel, KernelCatalogue
from ..targets import Target
from . import (
    column_reduction,
    loop,
    matmul,
    matmul_coop,
    matmul_mma,
    matmul_mma_iree,
    row_reduction,
    row_warp,
    softmax,
    transpose,
)
from .contract import Params, Strategy

# Tried in order; the first that applies wins.
STRATEGIES: tuple[Strategy, ...] = (
    transpose.STRATEGY,  # before loop: it takes the roots loop would stride
    loop.STRATEGY,
    row_warp.STRATEGY,
    row_reduction.STRATEGY,
    column_reduction.STRATEGY,
    softmax.STRATEGY,
    # before matmul: on Vulkan targets with cooperative matrices it takes the
    # f16 contractions matmul would run on FMAs
    matmul_coop.STRATEGY,
    matmul.STRATEGY,
    # after matmul, which leaves it the f16 and bf16 contractions it takes
    # (on targets with iree_mma), before matmul_mma, which takes the f16
    # ones it refuses
    matmul_mma_iree.STRATEGY,
    matmul_mma.STRATEGY,
)
BY_NAME = {s.name: s for s in STRATEGIES}


@dataclass
class Choice:
    dispatch: Dispatch
    strategy: str | None  # None: IREE's default codegen
    params: Params | None = None  # the strategy's own dataclass; None with no strategy
    reason: str = ""  # why this strategy, or why none
    failure: str = ""  # a chooser's internal error: IREE's codegen takes the dispatch
    # A user strategy's choice: the built-in choice the dispatch gets if the
    # user's kernel fails (phase 2 swaps it in and says why).
    fallback: "Choice | None" = None

    def describe_params(self) -> str:
        return BY_NAME[self.strategy].describe(self.params) if self.strategy else ""


def choose(dispatch: Dispatch, target: Target, user: tuple[Strategy, ...] = ()) -> Choice:
    """The first of `user` (user strategies, strategies/user.py) and then the
    built-ins that takes the dispatch; a user strategy's choice carries the
    built-in one as its fallback."""
    if not target.is_gpu:
        return Choice(dispatch, None, reason=f"target {target.name} uses IREE's CPU codegen")
    if user:
        builtin = choose(dispatch, target)
        mine = _first(dispatch, target, user)
        if mine.strategy:
            return replace(mine, fallback=builtin)
        return builtin
    if dispatch.complex_type:
        # Every built-in kernel vectorizes, and a vector of complex numbers
        # does not exist: refused here, not failed in phase 2 (a retry).
        why = f"{dispatch.complex_type} values: no tilefuse kernel vectorizes complex numbers"
        return Choice(dispatch, None, reason=why)
    dynamic = next((o for o in dispatch.loaded if -1 in o.shape), None)
    if dynamic is not None:
        # A root of static shape can still read one (IREE loaded a buffer
        # twice, once with a dynamic size for a reduction): every kernel
        # tiles static shapes only.
        dims = "x".join("?" if n < 0 else str(n) for n in dynamic.shape)
        why = f"loads a tensor of dynamic shape ({dims}x{dynamic.element_type})"
        return Choice(dispatch, None, reason=why)
    if dispatch.body_loop:
        why = f"a {dispatch.body_loop} inside an op's body: IREE's vectorizer does not take it"
        return Choice(dispatch, None, reason=why)
    if dispatch.sub_byte_store and target.backend == "spirv":
        why = (
            f"stores {dispatch.sub_byte_store} values: on SPIR-V only IREE's codegen"
            " emulates packed sub-byte stores"
        )
        return Choice(dispatch, None, reason=why)
    if dispatch.transposed_reduction_read:
        # Only IREE's formation makes one (the plan keeps a reduction and a
        # read across its rows in separate groups); no kernel is built for it.
        why = (
            f"{dispatch.transposed_reduction_read}, across the rows it reduced: "
            "no tilefuse kernel reads a reduction's result so in its own dispatch"
        )
        return Choice(dispatch, None, reason=why)
    return _switched_off_fallback(_first(dispatch, target, STRATEGIES), target)


def _switched_off_fallback(choice: Choice, target: Target) -> Choice:
    """A choice of a strategy that a target field switches on
    (Strategy.switch) carries the choice with that field off as its
    fallback, where that is a tilefuse kernel: an f16 product that IREE's
    pipeline fails on under matmul_mma_iree goes to matmul_mma, a bf16 one
    to the FMA kernel, not to IREE's codegen."""
    switch = BY_NAME[choice.strategy].switch if choice.strategy else None
    if not switch or not getattr(target, switch):
        return choice
    other = choose(choice.dispatch, replace(target, **{switch: False}))
    return replace(choice, fallback=other) if other.strategy else choice


def _first(dispatch: Dispatch, target: Target, strategies: tuple[Strategy, ...]) -> Choice:
    reasons = []
    for strategy in strategies:
        try:
            params, why = strategy.plan(dispatch, target)
        except Exception as e:  # noqa: BLE001 -- a chooser bug must not cost the compile
            failure = f"{strategy.name} chooser failed: internal error {type(e).__name__}: {e}"
            return Choice(dispatch, None, reason=failure, failure=failure)
        if params is not None:
            return Choice(dispatch, strategy.name, params, why)
        reasons.append(f"{strategy.name}: {why}")
    return Choice(dispatch, None, reason="; ".join(reasons))


@contextmanager
def registered(*strategies: Strategy) -> Iterator[None]:
    """`strategies` known by name (BY_NAME) in this scope, to the library
    writer and the kernel checks, without being tried by `choose`: a user's
    script that `tilefuse try` assigns to dispatches itself, the user
    strategies of a compile (`choose` gets those as a parameter). A name
    already known (an enclosing scope registered it) is left as it is."""
    for s in strategies:
        if s.name in {b.name for b in STRATEGIES}:
            raise ValueError(f"a built-in strategy is named {s.name}")
    added = [s for s in strategies if s.name not in BY_NAME]
    for s in added:
        BY_NAME[s.name] = s
    try:
        yield
    finally:
        for s in added:
            del BY_NAME[s.name]


def catalogue() -> KernelCatalogue:
    """What these strategies can take, for the fusion planner."""
    return KernelCatalogue(
        group_kernels=tuple(
            GroupKernel(s.name, s.fusion_kinds, s.group_refusal)
            for s in STRATEGIES
            if s.fusion_kinds
        ),
        pad_shape_refusal=_pad_shape_refusal([s for s in STRATEGIES if s.pad_shape_refusal]),
        prologue_refusal=matmul.prologue_refusal,
    )


def _pad_shape_refusal(readers: list[Strategy]):
    """None when no strategy reads through pads; else a refusal that holds
    only when every such strategy refuses."""
    if len(readers) <= 1:
        return readers[0].pad_shape_refusal if readers else None

    def refusal(shape, bits, bf16, target):
        reasons = []
        for s in readers:
            why = s.pad_shape_refusal(shape, bits, bf16, target)
            if why is None:
                return None
            reasons.append(f"{s.name}: {why}")
        return "; ".join(reasons)

    return refusal
