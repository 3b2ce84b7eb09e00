"""The fusion kinds, each a predicate over one producer -> consumer edge.

A rule says whether the group of `producer` and the group of `consumer` may
become one group; the planner (planner.py) then checks what every merge must
satisfy (no cycle, index safety, target limits). `Plan` gives the rules what
they need: the graph, the group of each op and each group's kind.
"""

import math
from typing import Protocol

from iree.compiler import ir

from ..hlo.ops import dot_free_extents, element_bits, element_type
from ..targets import Target
from .catalogue import KernelCatalogue
from .graph import FuncGraph, Node
from .groups import REDUCTION_KINDS, moves_innermost, plain_contraction, rebroadcasts

LOOP_OPS = ("elementwise", "index")


class Plan(Protocol):
    graph: FuncGraph
    target: Target
    kernels: KernelCatalogue

    def kind_of(self, node: int) -> str: ...

    def members_of(self, node: int) -> set[int]: ...


def _reduces(plan: Plan, node: int) -> list[Node]:
    return [
        plan.graph.nodes[i] for i in plan.members_of(node) if plan.graph.nodes[i].cls == "reduce"
    ]


def loop(plan: Plan, p: Node, c: Node) -> bool:
    """Elementwise and index-only ops fuse both ways (ByteIR ElementFusion)."""
    return (
        p.cls in LOOP_OPS
        and c.cls in LOOP_OPS
        and plan.kind_of(p.index) == "loop"
        and plan.kind_of(c.index) == "loop"
    )


def reduction_producer(plan: Plan, p: Node, c: Node) -> bool:
    """A reduction takes its elementwise/broadcast producers (ByteIR ReductionFusion)."""
    return plan.kind_of(c.index) in REDUCTION_KINDS and plan.kind_of(p.index) == "loop"


def reduction_consumer(plan: Plan, p: Node, c: Node) -> bool:
    """Elementwise consumers of a reduction group, in the reduced space (an
    epilogue such as sum / N) or in the row space reached through a broadcast
    back over the reduced dims (softmax, layernorm): XLA fuses these, ByteIR
    cannot."""
    if plan.kind_of(p.index) not in REDUCTION_KINDS or plan.kind_of(c.index) != "loop":
        return False
    for r in _reduces(plan, p.index):
        if c.cls == "elementwise" and c.shape in (r.shape, r.operand_shapes[0]):
            return True
        if rebroadcasts(plan.graph, c, r):
            return True
    return False


def _same_rows(a: list[Node], b: list[Node]) -> bool:
    """Every reduce of `a` and of `b` reads its input through one map: the
    same input shape, reduced over the same dims."""
    return bool(a and b) and all(
        x.maps is not None and x.maps[0] == y.maps[0] for x in a for y in b
    )


def reduction_chain(plan: Plan, p: Node, c: Node) -> bool:
    """Reductions over the same rows, one feeding the other (softmax's max then
    sum, layernorm's mean then variance), share one group."""
    return (
        plan.kind_of(p.index) in REDUCTION_KINDS
        and plan.kind_of(c.index) in REDUCTION_KINDS
        and _same_rows(_reduces(plan, p.index), _reduces(plan, c.index))
    )


def siblings(plan: Plan, a: Node, b: Node) -> bool:
    """Reductions over the same input and iteration space share one group (a
    multi-output kernel reads the input once). `a` and `b` read a common value."""
    return (
        a.cls == "reduce"
        and b.cls == "reduce"
        and plan.kind_of(a.index) in REDUCTION_KINDS
        and plan.kind_of(b.index) in REDUCTION_KINDS
        and _same_rows(_reduces(plan, a.index), _reduces(plan, b.index))
    )


def _widens_float(node: Node) -> bool:
    """A convert to a wider float (bf16/f16 -> f32)."""
    if node.name != "stablehlo.convert":
        return False
    source, result = node.op.operands[0].type, node.result_type()
    if not all(isinstance(element_type(t), ir.FloatType) for t in (source, result)):
        return False
    return element_bits(result) > element_bits(source)


def matmul_epilogue(plan: Plan, p: Node, c: Node) -> bool:
    """A contraction takes its elementwise epilogue (bias, activation, residual)
    and a transpose that keeps the innermost dim (a head merge), and the
    index-only/elementwise producers of that epilogue's other operands.

    A contraction IREE forms (not in matmul layout: planner.TRANSPOSED_FALLBACK)
    takes no convert to a wider float: IREE fuses no such consumer into a
    contraction's dispatch, so it and what follows it became a dispatch of
    their own (attention in f16 with its softmax in f32: the scale's extf and
    the max keys, one more dispatch than plain IREE). Outside the group they
    join the softmax that reads them."""
    if plan.kind_of(p.index) == "matmul" and plan.kind_of(c.index) == "loop":
        hero = plan.graph.nodes[
            min(i for i in plan.members_of(p.index) if plan.graph.nodes[i].cls == "contraction")
        ]
        if _widens_float(c) and not plain_contraction(hero):
            return False
        if c.name == "stablehlo.transpose":
            # Attention's head merge ([B, H, S, D] -> [B, S, H, D]): the
            # kernel stores its rows of N where the permutation puts them,
            # as contiguous as before (IREE's formation fuses it too).
            return plain_contraction(hero) and not moves_innermost(c)
        return c.cls == "elementwise" and c.shape == hero.shape
    if plan.kind_of(c.index) == "matmul" and plan.kind_of(p.index) == "loop":
        return c.cls == "elementwise" and p.cls in LOOP_OPS
    return False


def matmul_prologue(plan: Plan, p: Node, c: Node) -> bool:
    """A contraction in matmul layout takes the elementwise op computing an
    operand (a dequantization: convert(w) * scale) when that op reads only
    the function's arguments, through broadcasts at most, and nothing else
    reads it: the FMA matmul kernel computes it per K step in registers
    (strategies/matmul.py, prologues), as IREE's formation fuses it, where
    the kernels take a prologue for the product's shape (the catalogue's
    matmul_prologue_refusal: exact tiles, and on targets whose taller
    products run on tensor cores only short ones)."""
    if c.cls != "contraction" or plan.kind_of(c.index) != "matmul":
        return False
    if plan.kind_of(p.index) != "loop" or p.cls != "elementwise" or not plain_contraction(c):
        return False
    lhs_free, rhs_free = dot_free_extents(c.op)
    if plan.kernels.matmul_prologue_refusal(math.prod(lhs_free), math.prod(rhs_free), plan.target):
        return False
    group = plan.members_of(p.index)
    members = [plan.graph.nodes[i] for i in group]
    return all(
        m.cls in LOOP_OPS
        and not m.returned
        and all(i == -1 or i in group for i in m.producers)
        and all(i in group or i == c.index for i in m.users)
        for m in members
    )


def transpose_hero(plan: Plan, p: Node, c: Node) -> bool:
    """A transpose that moves the innermost dim is the hero of its own group
    (it needs a tiled, shared-memory kernel); its elementwise producers and
    consumers join it, other transposes do not."""
    kp, kc = plan.kind_of(p.index), plan.kind_of(c.index)
    if kp == "transpose" and kc == "loop":
        return c.cls == "elementwise"
    if kc == "transpose" and kp == "loop":
        return p.cls == "elementwise" or (p.cls == "index" and not moves_innermost(p))
    return False


# Applied in this order, each over all edges in program order, until nothing
# changes. Epilogues first: a scale between a dot and a softmax belongs to the dot.
EDGE_RULES = [
    ("matmul-epilogue", matmul_epilogue),
    ("matmul-prologue", matmul_prologue),
    ("reduction-producer", reduction_producer),
    ("reduction-chain", reduction_chain),
    ("reduction-consumer", reduction_consumer),
    ("transpose", transpose_hero),
    ("loop", loop),
]
