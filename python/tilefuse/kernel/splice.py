"""Finished kernels in and out of the executable sources (SPIR-V).

On SPIR-V, phase 2 runs only the strategies (IREE's translation stops after
the transform dialect: `strategy_executables` is its input), and phase 3
compiles the executable sources with every finished kernel put in place of
its dispatch's function (`splice`). Each kernel carries translation_info
no_pipeline, so IREE lowers it as it is; the kernels can be rewritten in
between (aliases.py). The strategies run once, and the SPIR-V lowering once.
"""

from iree.compiler import ir

from ..errors import TilefuseError
from ..irutil import context, defining_op, symbol_name, walk

EXPORT = "hal.executable.export"
DISPATCH_CONFIG = "iree_codegen.dispatch_config"


def strategy_executables(sources: str, names: set[str]) -> str:
    """The executable sources reduced to the dispatches of `names` (what
    phase 2 translates): the host code, every other executable, and any other
    export and function of theirs are left out (IREE's own codegen must not
    run there: it would fail on a named op the strategies' pass does not
    take)."""
    ctx = context()
    module = ir.Module.parse(sources, ctx)
    for op in list(module.body.operations):
        op = op.operation
        exports = {symbol_name(e) for e in walk(op) if e.name == EXPORT}
        if op.name != "hal.executable" or not exports & names:
            op.erase()
            continue
        others = [
            inner
            for inner in walk(op)
            if inner.name in (EXPORT, "func.func") and symbol_name(inner) not in names
        ]
        for inner in others:  # collected first: erasing would upset the walk
            inner.erase()
    return module.operation.get_asm(enable_debug_info=True)


def finished_kernels(translated: str) -> dict[str, tuple[str, list[int]]]:
    """Dispatch name -> (its finished function, its workgroup count), from
    phase 2's output: every function whose translation_info says
    no_pipeline, with the count the strategy set (IREE's dispatch_config,
    all constants). A kernel whose count is not constant is an error."""
    ctx = context()
    module = ir.Module.parse(translated, ctx)
    funcs, counts = {}, {}
    for op in walk(module.operation):
        if op.name == "func.func" and "no_pipeline" in str(op.attributes["translation_info"]):
            funcs[symbol_name(op)] = op.get_asm(enable_debug_info=True)
        elif op.name == DISPATCH_CONFIG:
            counts[ir.FlatSymbolRefAttr(op.attributes["function_ref"]).value] = _constants(op)
    kernels = {}
    for name, text in funcs.items():
        grid = counts.get(name)
        if grid is None or None in grid:
            raise TilefuseError(f"dispatch {name}: the strategy left no constant workgroup count")
        kernels[name] = (text, grid)
    return kernels


def _constants(config: ir.Operation) -> list[int | None]:
    """The values a dispatch_config yields, None where one is not a constant."""
    block = config.regions[0].blocks[0]
    (yield_,) = [op.operation for op in block.operations if op.operation.name.endswith("yield")]
    values = []
    for operand in yield_.operands:
        owner = defining_op(operand)
        if owner is not None and owner.name == "arith.constant":
            values.append(ir.IntegerAttr(owner.attributes["value"]).value)
        else:
            values.append(None)
    return values


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
        if op.name in (EXPORT, "func.func") and symbol_name(op) in kernels
    ]
    done = set()
    for op in named:  # collected first: the edits below would upset the walk
        name = symbol_name(op)
        if op.name == EXPORT:
            _set_count(op, kernels[name][1])
            continue
        kernel = ir.Module.parse(kernels[name][0], ctx)
        (func,) = [f.operation for f in kernel.body.operations if f.operation.name == "func.func"]
        func.clone(ip=ir.InsertionPoint(op))
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
