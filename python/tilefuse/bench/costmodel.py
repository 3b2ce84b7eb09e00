"""What each dispatch of a compiled program moves and computes, read from
IREE's executable sources (`--compile-to=executable-sources`).

IREE reports how many dispatches a program has, not how many bytes they move.
Bytes come from each dispatch function: every `dispatch.tensor.load` reads
its slice of a binding from global memory (HBM on a GPU) once, every
`dispatch.tensor.store` writes one. That is the traffic of an ideal kernel
(each byte it needs crosses HBM once): caches and re-reads are not modelled.
The host program lists which executable each `stream.cmd.dispatch` runs, so a
dispatch site counts once even when IREE shares one executable between sites.
"""

import math
from dataclasses import dataclass

from iree.compiler import ir

from ..errors import TilefuseError
from ..irutil import symbol_name, walk

# linalg ops that live in a linalg.generic's body (counted with the generic).
REGION_OPS = ("linalg.index", "linalg.yield")
LOAD = "iree_tensor_ext.dispatch.tensor.load"
STORE = "iree_tensor_ext.dispatch.tensor.store"
# Ops inside a linalg body that compute nothing.
FREE = {"linalg.yield", "linalg.index", "arith.constant", "arith.index_cast"}
CONTRACTIONS = {"linalg.matmul", "linalg.batch_matmul", "linalg.matvec", "linalg.vecmat"}
TENSOR_CORE_TYPES = {"f16", "bf16"}


@dataclass
class DispatchCost:
    name: str  # the export (dispatch function) name
    read_bytes: int
    write_bytes: int
    flops: int  # arithmetic ops, one per element per op; a multiply-add is 2
    tensor_core_flops: int  # the part of `flops` a contraction on f16/bf16 does
    # The part of `flops` an f32 x f32 contraction does: TF32 tensor-core
    # work where the target opts in, and under XLA's default precision.
    f32_contraction_flops: int = 0

    @property
    def bytes(self) -> int:
        return self.read_bytes + self.write_bytes


def _shaped(t: ir.Type) -> ir.ShapedType:
    try:
        return ir.ShapedType(t)
    except (ValueError, TypeError):
        raise TilefuseError(f"expected a tensor, got {t}") from None


def element_bytes(t: ir.Type) -> int:
    """Storage bytes of one element; IREE stores i1 as a byte."""
    for cls in (ir.IntegerType, ir.FloatType):
        try:
            return max(1, math.ceil(cls(t).width / 8))
        except (ValueError, TypeError):
            continue
    raise TilefuseError(f"unknown element type {t}")


def tensor_bytes(t: ir.Type) -> int:
    shaped = _shaped(t)
    if not shaped.has_static_shape:
        raise TilefuseError(f"bench needs static shapes, got {t}")
    return math.prod(shaped.shape) * element_bytes(shaped.element_type)


def _slice_key(op: ir.Operation) -> tuple:
    """Which binding a load/store touches and where: equal keys, same bytes."""
    binding = op.operands[0 if op.name == LOAD else 1]
    attrs = tuple(
        str(op.attributes[a]) for a in ("static_offsets", "static_sizes", "static_strides")
    )
    dynamic = tuple(str(v.get_name()) for v in list(op.operands)[1 if op.name == LOAD else 2 :])
    return (binding.get_name(), attrs, dynamic)


def _element_type_name(v: ir.Value) -> str:
    return str(_shaped(v.type).element_type)


def _iteration_space(op: ir.Operation) -> int:
    """Product of the loop sizes of a linalg.generic, read off its indexing maps."""
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    sizes = {}
    for amap, value in zip(maps, op.operands):
        shape = _shaped(value.type).shape
        for i, expr in enumerate(amap.results):
            try:
                sizes[ir.AffineDimExpr(expr).position] = shape[i]
            except (ValueError, TypeError):
                continue
    return math.prod(sizes.values()) if sizes else 1


def _op_flops(op: ir.Operation) -> tuple[int, int, int]:
    """(flops, f16/bf16 contraction flops, f32 contraction flops) of one
    linalg op."""
    if op.name == "linalg.generic":
        body = op.regions[0].blocks[0]
        per_point = sum(inner.operation.name not in FREE for inner in body.operations)
        return _iteration_space(op) * per_point, 0, 0
    if op.name in CONTRACTIONS:
        lhs, rhs, out = (_shaped(v.type) for v in list(op.operands)[:3])
        k = lhs.shape[-1]
        flops = 2 * math.prod(out.shape) * k
        types = {str(lhs.element_type), str(rhs.element_type)}
        return (
            flops,
            flops if types <= TENSOR_CORE_TYPES else 0,
            flops if types == {"f32"} else 0,
        )
    # linalg.fill, copies, named elementwise: one op per output element.
    if op.results:
        return sum(math.prod(_shaped(r.type).shape) for r in op.results), 0, 0
    return 0, 0, 0


def dispatch_cost(func: ir.Operation) -> DispatchCost:
    """Bytes and flops of one dispatch function."""
    read: dict[tuple, int] = {}
    written: dict[tuple, int] = {}
    flops = tensor_core = f32_contraction = 0
    for op in walk(func):
        if op.name == LOAD:
            read[_slice_key(op)] = tensor_bytes(op.results[0].type)
        elif op.name == STORE:
            written[_slice_key(op)] = tensor_bytes(op.operands[0].type)
        elif op.name.startswith("linalg.") and op.name not in REGION_OPS:
            f, t, f32 = _op_flops(op)
            flops += f
            tensor_core += t
            f32_contraction += f32
    return DispatchCost(
        symbol_name(func),
        sum(read.values()),
        sum(written.values()),
        flops,
        tensor_core,
        f32_contraction,
    )


def _entry_export(dispatch: ir.Operation) -> str:
    # entry_points = [@executable::@variant::@export, ...]: one per target variant.
    first = ir.ArrayAttr(dispatch.attributes["entry_points"])[0]
    return ir.SymbolRefAttr(first).value[-1]


@dataclass
class ProgramCosts:
    dispatches: list[DispatchCost]  # one per dispatch site, in host program order
    executables: int  # distinct executables (IREE deduplicates identical ones)

    @property
    def bytes(self) -> int:
        return sum(d.bytes for d in self.dispatches)


def program_costs(sources_text: str) -> ProgramCosts:
    """Cost of every dispatch site in `--compile-to=executable-sources` output."""
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    module = ir.Module.parse(sources_text, ctx)
    per_export: dict[str, DispatchCost] = {}
    executables = 0
    sites = []
    for op in walk(module.operation):
        if op.name == "hal.executable":
            executables += 1
        elif op.name == "func.func" and op.parent.operation.name == "builtin.module":
            cost = dispatch_cost(op)
            per_export[cost.name] = cost
        elif op.name == "stream.cmd.dispatch":
            sites.append(_entry_export(op))
    missing = [s for s in sites if s not in per_export]
    if missing:
        raise TilefuseError(f"dispatch of unknown export(s) {missing} in executable sources")
    return ProgramCosts([per_export[s] for s in sites], executables)


def io_floor(program_text: str, function: str) -> int:
    """Bytes of `function`'s arguments read once plus its results written once."""
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    module = ir.Module.parse(program_text, ctx)
    for op in module.body.operations:
        op = op.operation
        if op.name == "func.func" and symbol_name(op) == function:
            ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            return sum(tensor_bytes(t) for t in [*ftype.inputs, *ftype.results])
    raise TilefuseError(f"no function @{function} in the program")
