"""What tilefuse's kernels can take, as the planner asks it.

The planner never imports the strategies: the driver hands it a
KernelCatalogue (strategies.catalogue() builds it from the strategy records),
and tests may hand it a smaller one.
"""

from collections.abc import Callable
from dataclasses import dataclass

from ..targets import Target

# (graph, group, target) -> why the kernel refuses the group, or None
GroupRefusal = Callable[..., str | None]
# (shape, element bits, bf16, target) -> why no kernel reads through a pad
# into a root of this shape, or None
PadShapeRefusal = Callable[[list[int], int, bool, Target], str | None]
# (rows M, columns N, target) -> why no matmul kernel computes an operand's
# prologue (a dequantization) for an M x N product, or None
PrologueRefusal = Callable[[int, int, Target], str | None]


@dataclass(frozen=True)
class GroupKernel:
    name: str  # the strategy's name, for the planner's log
    kinds: tuple[str, ...]  # group kinds it compiles whole
    refusal: GroupRefusal | None = None


@dataclass(frozen=True)
class KernelCatalogue:
    group_kernels: tuple[GroupKernel, ...] = ()
    pad_shape_refusal: PadShapeRefusal | None = None  # None: no kernel reads through pads
    prologue_refusal: PrologueRefusal | None = None  # None: no kernel takes prologues

    def kernel_for(self, kind: str) -> bool:
        """Some kernel declares it compiles groups of this kind."""
        return any(kind in k.kinds for k in self.group_kernels)

    def refusal(self, kind: str, graph, group, target: Target) -> str | None:
        """Why no kernel declaring `kind` takes this group, or None if one does."""
        reasons = []
        for k in self.group_kernels:
            if kind not in k.kinds:
                continue
            why = k.refusal(graph, group, target) if k.refusal else None
            if why is None:
                return None
            reasons.append(f"{k.name}: {why}")
        return "; ".join(reasons) or f"no tilefuse kernel compiles {kind} groups"

    def matmul_prologue_refusal(self, rows: int, columns: int, target: Target) -> str | None:
        """Why no kernel computes an operand's prologue for a rows x columns
        product, or None."""
        if self.prologue_refusal is None:
            return "no tilefuse kernel computes an operand in a contraction's dispatch"
        return self.prologue_refusal(rows, columns, target)

    def pad_refusal(self, shape: list[int], bits: int, bf16: bool, target: Target) -> str | None:
        """Why no kernel reads through a pad into a root of this shape, or None."""
        if self.pad_shape_refusal is None:
            return NO_PAD_READER
        return self.pad_shape_refusal(shape, bits, bf16, target)


NO_PAD_READER = "no tilefuse kernel reads through a pad"
