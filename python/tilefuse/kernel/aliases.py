"""Give the narrow memory accesses of a finished SPIR-V kernel a binding of their own.

IREE's SPIR-V lowering turns a binding into an array of 128-bit vectors only
when every access to it is a multiple of the narrowest one and that is at
least two elements (its SPIRVVectorizeLoadStore pass, one decision per
hal.interface.binding.subspan). A row_warp row of 1000 reads 31 4-vectors
and, in its tail, one element per lane; that one scalar read made every read
of the binding scalar, and lavapipe runs each load instruction as a loop
over the lanes (softmax 256x1000 f32: 1.08x IREE's time, 0.77x with the
tail on its own binding). Two subspans of one binding are legal (IREE emits
aliased SPIR-V variables), so the narrow accesses get a copy of the
subspan, and of the views between it and them; the copy's alignment is
halved, which is still true of the buffer and keeps CSE from merging it back.

The strategy has finished the kernel when this runs (the driver takes it from
the strategy's printout and compiles it again, see driver.alias_stage), so
the accesses are vector.transfer_read/transfer_write and memref.load/store.
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


def _alias(subspan: ir.Operation) -> ir.Operation:
    alias = subspan.clone(ip=ir.InsertionPoint(subspan))
    alignment = ir.IntegerAttr(subspan.attributes["alignment"]).value
    alias.attributes["alignment"] = ir.IntegerAttr.get(
        ir.IndexType.get(subspan.context), alignment // 2 if alignment > 1 else 2
    )
    return alias


def alias_narrow_accesses(func: ir.Operation) -> int:
    """Move the accesses narrower than the widest one of their binding onto an
    alias of it, in place; returns how many moved."""
    moved = 0
    subspans = [op for op in walk(func) if op.name == SUBSPAN]
    for subspan in subspans:
        accesses = _accesses(subspan.results[0], ())
        if not accesses:
            continue
        widest = max(_bits(op) for op, _ in accesses)
        narrow = [(op, chain) for op, chain in accesses if _bits(op) < widest]
        if not narrow:
            continue
        alias = _alias(subspan)
        for access, chain in narrow:
            value = alias.results[0]
            for view in chain:
                copy = view.clone(ip=ir.InsertionPoint(view))
                copy.operands[0] = value
                value = copy.results[0]
            access.operands[ACCESSES[access.name]] = value
            moved += 1
    return moved


def kernel_func(module: ir.Module) -> ir.Operation:
    (func,) = [op.operation for op in module.body.operations if op.operation.name == "func.func"]
    return func


def rewrite_kernel(text: str) -> tuple[str, int]:
    """The printed kernel `text` with its narrow accesses aliased, and how many."""
    ctx = context()
    module = ir.Module.parse(text, ctx)
    func = kernel_func(module)
    moved = alias_narrow_accesses(func)
    return func.get_asm(), moved


def splice(sources: str, kernels: dict[str, tuple[str, list[int]]]) -> str:
    """The executable sources with each named dispatch's function replaced by
    a finished kernel and its workgroup count by the kernel's grid.

    `kernels` maps a dispatch name to (func text, [x, y, z] workgroups). The
    kernel carries translation_info no_pipeline, so IREE compiles it as is.
    """
    ctx = context()
    module = ir.Module.parse(sources, ctx)
    named = [
        op
        for op in walk(module.operation)
        if op.name in ("hal.executable.export", "func.func") and symbol_name(op) in kernels
    ]
    done = set()
    for op in named:  # collected first: the edits below would upset the walk
        name = symbol_name(op)
        if op.name == "hal.executable.export":
            _set_count(op, kernels[name][1])
            continue
        kernel = ir.Module.parse(kernels[name][0], ctx)
        kernel_func(kernel).clone(ip=ir.InsertionPoint(op))
        op.erase()
        done.add(name)
    missing = set(kernels) - done
    if missing:
        raise TilefuseError(f"no function for {sorted(missing)} in the executable sources")
    return module.operation.get_asm(enable_debug_info=True)


def _set_count(export: ir.Operation, grid: list[int]) -> None:
    """Replace the export's workgroup count region by constants."""
    block = export.regions[0].blocks[0]
    for op in reversed(list(block.operations)):
        op.operation.erase()
    index = ir.IndexType.get(export.context)
    with ir.InsertionPoint(block), ir.Location.unknown(export.context):
        counts = [
            ir.Operation.create(
                "arith.constant",
                results=[index],
                attributes={"value": ir.IntegerAttr.get(index, n)},
            ).results[0]
            for n in grid
        ]
        ir.Operation.create("hal.return", operands=counts)
