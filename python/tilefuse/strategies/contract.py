"""The strategy contract: what every strategy module declares, in one record.

A strategy is a transform script (transform_scripts/<name>.mlir, sequence
@tilefuse_<name>) plus the Python that decides whether it takes a dispatch
and with which parameters. The driver, the library writer and the fusion
planner see strategies only through this record, never through module
attributes. A strategy's parameters are its own frozen dataclass; all of them
carry the kernel's launch (`Launch`), the one part the driver reads.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from iree.compiler import ir

from ..dispatch.read import Dispatch
from ..targets import Target

# The no-ops of transform_scripts/common.mlir, for an optional step a
# dispatch does not need: one that hands a handle on, one that yields nothing.
PASS = "tilefuse_pass"
SKIP = "tilefuse_skip"


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, int, int]  # workgroups along x, y, z
    workgroup: tuple[int, int, int]  # threads per workgroup along x, y, z
    subgroup: int  # the target's subgroup size the kernel is built for


class Params(Protocol):
    """What every strategy's parameters hold (each is its own frozen dataclass)."""

    # A read-only property, not a plain attribute: the dataclasses are frozen.
    @property
    def launch(self) -> Launch: ...


# params, or None and why the strategy does not take the dispatch
Plan = Callable[[Dispatch, Target], tuple[Params | None, str]]


@dataclass(frozen=True)
class Strategy:
    name: str  # also the script's file name and its sequence @tilefuse_<name>
    plan: Plan
    describe: Callable[[Params], str]  # the parameters in one line, for explain
    # tilefuse.param attribute values for the script, by tag
    attributes: Callable[[Params, ir.Context], dict]
    # For each optional step of the script (a transform.include carrying
    # `tilefuse.step = "<step>"`), the named sequence that runs there: one
    # defined in the script, or a no-op from common.mlir (PASS, SKIP).
    steps: Callable[[Params], dict[str, str]] | None = None
    # Fusion group kinds it compiles whole (the planner outlines them for it),
    # and why it would refuse one such group (graph, group, target), or None.
    fusion_kinds: tuple[str, ...] = ()
    group_refusal: Callable | None = None
    # Why it refuses a root of this static shape (shape, bits, bf16, target)
    # that reads through a tensor.pad; None when it never reads through pads.
    pad_shape_refusal: Callable[[list[int], int, bool, Target], str | None] | None = None
    # Its finished SPIR-V kernel is spliced with aliased narrow accesses
    # (kernel/aliases.py): the printout compiles as is.
    alias_narrow_accesses: bool = False
    # Why its printed kernel (the func.func) is not the kernel it promises,
    # or None: a degradation that still compiles (kernel/verify.py asks it
    # after the checks every kernel passes).
    kernel_refusal: Callable[[ir.Operation, Params], str | None] | None = None
    # The root loop a subgroup's lanes walk in its kernel, for the
    # coalescing verdict `explain` prints; None: the innermost.
    lane_loop: Callable[[Dispatch, Params], int] | None = None
    # Its tiles can be tuned (`tilefuse tune`; its plan reads the cache).
    tunable: "Tunable | None" = None
    # The script's text, when it is not transform_scripts/<name>.mlir (a
    # user's script under `tilefuse try`, printed with its locations so that
    # the library's errors point into the user's file), and its main
    # sequence when that is not @tilefuse_<name>.
    script: str | None = None
    entry: str | None = None
    # Its script configures IREE's own pipeline instead of writing the
    # kernel: @kernel_config runs it on the dispatch's function (it sets a
    # lowering_config and a translation_info naming an IREE pipeline), and
    # IREE builds the kernel. It prints none, so the kernel checks read the
    # PTX instead: `ptx_refusal` (the kernel's PTX, from its .entry) says
    # why the built kernel is not the promised one, or None. CUDA only.
    configures: bool = False
    ptx_refusal: Callable[[str, Params], str | None] | None = None
    # The target's bool field that turns it on (Target.iree_mma), or None.
    # If it fails on a dispatch, the choice with that field off (another
    # tilefuse kernel, where one applies) compiles the dispatch instead of
    # IREE's codegen (strategies/__init__.py, `choose`).
    switch: str | None = None


@dataclass(frozen=True)
class Tunable:
    """What `tilefuse tune` needs of a strategy (strategies/tuning.py)."""

    # Every parameter set it would take for a dispatch, the chooser's pick
    # first ([] if it refuses it): what the tuner times.
    candidates: Callable[[Dispatch, Target], list[Params]]
    # The fields of a parameter set the cache records (and plan matches).
    choice_of: Callable[[Params], dict]
    # The dispatch's cache key: what the choice depends on, not the program.
    signature: Callable[[Dispatch], str]
