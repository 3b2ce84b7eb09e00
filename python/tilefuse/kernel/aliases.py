"""Give the narrow memory accesses of a finished SPIR-V kernel a binding of their own.

IREE's SPIR-V lowering turns a binding into an array of 128-bit vectors only
when every access to it is a multiple of the narrowest one and that is at
least two elements (its SPIRVVectorizeLoadStore pass, one decision per
hal.interface.binding.subspan). A row_warp row of 1000 reads 31 4-vectors
and, in its tail, one element per lane; that one scalar read made every read
of the binding scalar, and lavapipe runs each load instruction as a loop
over the lanes, so a scalar load costs as much as a 4-vector one (measured
in docs/findings.md, 'What a kernel costs on lavapipe'). Two subspans of one
binding are legal (IREE emits aliased SPIR-V variables), so the accesses
narrower than the binding's widest get a copy of the subspan, one per
width, and of the views between it and them; each copy's alignment is
halved once more than the last (64 -> 32 for the first), which is still
true of the buffer and keeps CSE from merging the copies back.

The strategy has finished the kernel when this runs (phase 2 translated it;
phase 3 compiles it with the rest, see driver.alias_kernels), so
the accesses are vector.transfer_read/transfer_write and memref.load/store.
`alias_report` says why it moved nothing when it moves nothing, and checks
its result: every subspan of a binding that had accesses of several widths
carries one width only (an access reached through an op the rewrite does not
follow would stay behind), and no two subspans of such a binding are
identical. A kernel that fails the check is a TilefuseError naming the
binding.
"""

import math

from iree.compiler import ir

from ..errors import TilefuseError
from ..irutil import context, element_bits, symbol_name, walk

SUBSPAN = "hal.interface.binding.subspan"
VIEWS = ("memref.subview", "memref.expand_shape", "memref.collapse_shape", "memref.cast")
# Op name -> position of its memref operand.
ACCESSES = {
    "vector.transfer_read": 0,
    "vector.transfer_write": 1,
    "memref.load": 0,
    "memref.store": 1,
}
# Why nothing moved (alias_report's third value).
NO_SUBSPAN = f"kernel has no {SUBSPAN}"
NO_ACCESS = "no vector.transfer_read/transfer_write or memref.load/store reaches a binding"
ONE_WIDTH = "no binding has accesses narrower than its widest"


def _bits(op: ir.Operation) -> int:
    """Bits one access moves (per thread)."""
    if op.name == "vector.transfer_read":
        vector = ir.VectorType(op.results[0].type)
    elif op.name == "vector.transfer_write":
        vector = ir.VectorType(op.operands[0].type)
    else:
        return element_bits(op.operands[ACCESSES[op.name]].type)
    return math.prod(vector.shape) * element_bits(vector)


def _accesses(value: ir.Value, chain: tuple) -> list[tuple[ir.Operation, tuple]]:
    """(access, views from the subspan to it) for every access through `value`."""
    found = []
    for use in value.uses:
        user = use.owner
        if not isinstance(user, ir.Operation):
            user = user.operation
        if user.name in VIEWS and use.operand_number == 0:
            found += _accesses(user.results[0], (*chain, user))
        elif user.name in ACCESSES and use.operand_number == ACCESSES[user.name]:
            found.append((user, chain))
    return found


def _alias(subspan: ir.Operation, copy: int = 1) -> ir.Operation:
    """A copy of `subspan` before it, its alignment halved `copy` times (at
    least 1: check_aliased refuses copies left identical)."""
    alias = subspan.clone(ip=ir.InsertionPoint(subspan))
    alignment = ir.IntegerAttr(subspan.attributes["alignment"]).value
    alias.attributes["alignment"] = ir.IntegerAttr.get(
        ir.IndexType.get(subspan.context),
        max(alignment >> copy, 1) if alignment > 1 else 2**copy,
    )
    return alias


def alias_narrow_accesses(func: ir.Operation) -> int:
    """Move the accesses narrower than the widest one of their binding onto
    aliases of it, one per width, in place; returns how many moved."""
    moved = 0
    subspans = [op for op in walk(func) if op.name == SUBSPAN]
    for subspan in subspans:
        accesses = _accesses(subspan.results[0], ())
        widths = sorted({_bits(op) for op, _ in accesses}, reverse=True)
        for copy, width in enumerate(widths[1:], 1):
            alias = _alias(subspan, copy)
            for access, chain in accesses:
                if _bits(access) != width:
                    continue
                value = alias.results[0]
                for view in chain:
                    clone = view.clone(ip=ir.InsertionPoint(view))
                    clone.operands[0] = value
                    value = clone.results[0]
                access.operands[ACCESSES[access.name]] = value
                moved += 1
    return moved


def _binding(subspan: ir.Operation) -> int:
    return ir.IntegerAttr(subspan.attributes["binding"]).value


def _source(value: ir.Value) -> tuple[ir.Operation | None, list[str]]:
    """The binding subspan the memref `value` is a view of, and the ops on the
    way that the rewrite does not follow. Walks back through any op whose
    first operand is a memref, not only VIEWS, so that the check sees what
    the rewrite missed; None for workgroup memory and other memrefs."""
    unfollowed = []
    while True:
        owner = value.owner
        if isinstance(owner, ir.Block):
            return None, unfollowed
        op = owner.operation
        if op.name == SUBSPAN:
            return op, unfollowed
        if not op.operands or not isinstance(op.operands[0].type, ir.MemRefType):
            return None, unfollowed
        if op.name not in VIEWS:
            unfollowed.append(op.name)
        value = op.operands[0]


def binding_widths(func: ir.Operation) -> dict[ir.Operation, tuple[set[int], set[str]]]:
    """For every subspan that some access reaches: the widths (bits) of those
    accesses, and the ops on their way that the rewrite does not follow."""
    found: dict[ir.Operation, tuple[set[int], set[str]]] = {}
    for op in walk(func):
        if op.name not in ACCESSES:
            continue
        subspan, unfollowed = _source(op.operands[ACCESSES[op.name]])
        if subspan is None:
            continue
        widths, ops = found.setdefault(subspan, (set(), set()))
        widths.add(_bits(op))
        ops.update(unfollowed)
    return found


def _same_subspan(a: ir.Operation, b: ir.Operation) -> bool:
    """Whether CSE would merge the two subspans."""
    attrs = [{name: str(op.attributes[name]) for name in op.attributes} for op in (a, b)]
    return (
        attrs[0] == attrs[1]
        and str(a.results[0].type) == str(b.results[0].type)
        and len(a.operands) == len(b.operands)
        and all(x == y for x, y in zip(a.operands, b.operands, strict=True))
    )


def check_aliased(func: ir.Operation, mixed: set[int]) -> None:
    """The rewrite's post-condition for the bindings in `mixed` (those whose
    accesses had several widths before it): each subspan of them carries one
    width, and no two of them are identical. A TilefuseError names the
    binding otherwise."""
    name = symbol_name(func)
    after = binding_widths(func)
    for binding in sorted(mixed):
        for widths, unfollowed in (v for s, v in after.items() if _binding(s) == binding):
            if len(widths) > 1:
                through = (
                    f" (reached through {', '.join(sorted(unfollowed))}, which the rewrite "
                    "does not follow)"
                    if unfollowed
                    else ""
                )
                raise TilefuseError(
                    f"aliasing narrow accesses: binding {binding} still has "
                    f"{'- and '.join(str(w) for w in sorted(widths))}-bit accesses on one "
                    f"subspan{through}",
                    name,
                )
        subspans = [op for op in walk(func) if op.name == SUBSPAN and _binding(op) == binding]
        for i, a in enumerate(subspans):
            if any(_same_subspan(a, b) for b in subspans[i + 1 :]):
                raise TilefuseError(
                    f"aliasing narrow accesses: binding {binding} has two identical subspans "
                    "(no alignment left to halve), which CSE would merge back",
                    name,
                )


def alias_function(func: ir.Operation) -> tuple[int, str]:
    """Alias the narrow accesses of `func` in place and check the result:
    (how many accesses moved, why none did: "" when some did)."""
    subspans = [op for op in walk(func) if op.name == SUBSPAN]
    if not subspans:
        return 0, NO_SUBSPAN
    before = binding_widths(func)
    if not before:
        return 0, NO_ACCESS
    mixed = {_binding(s) for s, (widths, _) in before.items() if len(widths) > 1}
    moved = alias_narrow_accesses(func)
    check_aliased(func, mixed)
    if moved:
        return moved, ""
    return 0, ONE_WIDTH


def kernel_func(module: ir.Module) -> ir.Operation:
    (func,) = [op.operation for op in module.body.operations if op.operation.name == "func.func"]
    return func


def alias_report(text: str) -> tuple[str, int, str]:
    """The finished kernel `text` with its narrow accesses aliased, how many
    moved, and why none did ("" when some did; as the strategies' plan says
    why it does not take a dispatch). Raises TilefuseError, naming the
    binding, if the result still mixes widths on one subspan."""
    ctx = context()
    module = ir.Module.parse(text, ctx)
    func = kernel_func(module)
    moved, why_not = alias_function(func)
    return func.get_asm(), moved, why_not


def rewrite_kernel(text: str) -> tuple[str, int]:
    """The printed kernel `text` with its narrow accesses aliased, and how
    many (alias_report without the reason)."""
    text, moved, _why_not = alias_report(text)
    return text, moved
