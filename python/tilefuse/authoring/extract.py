"""One dispatch of a program as a standalone module (`tilefuse dispatches --extract`).

The source is the dispatch's function in phase 1's executable sources: linalg
on tensors between `dispatch.tensor.load`s of its input bindings and
`dispatch.tensor.store`s to its outputs. The standalone module is

    func.func @main(<one tensor per load>) -> (<one tensor per store>) {
      %r = flow.dispatch.region -> (...) { <the dispatch's ops> flow.return }
      return %r
    }

The loads become the function's arguments (the tensor each one reads, with
its static shape and type), the stored values its results. The region keeps
the ops one dispatch, as the fusion stage's regions do: IREE (plain
iree-compile, or tilefuse's phase 1) forms exactly this dispatch again
instead of splitting it by its own heuristics. The ops are moved, not copied,
so the values they capture (constants) stay bound.
"""

from dataclasses import dataclass

from iree.compiler import ir

from ..dispatch.read import LOAD, STORE
from ..errors import TilefuseError
from ..irutil import context, symbol_name, walk

SUBSPAN = "hal.interface.binding.subspan"
PUSH_CONSTANT = "hal.interface.constant.load"


@dataclass
class Extracted:
    text: str  # the standalone module
    inputs: list[str]  # tensor types of its arguments
    results: list[str]  # tensor types of its results


def dispatch_function(module: ir.Module, name: str) -> ir.Operation:
    """The function of dispatch `name` in parsed executable sources."""
    for op in walk(module.operation):
        if (
            op.name == "func.func"
            and op.parent.operation.name == "builtin.module"
            and symbol_name(op) == name
        ):
            return op
    raise TilefuseError(f"no dispatch function {name} in the executable sources")


def extract_dispatch(sources_text: str, name: str, header: str = "") -> Extracted:
    """Dispatch `name` of the executable sources as a standalone module
    (text, `header` lines first)."""
    ctx = context(unregistered=True)
    sources = ir.Module.parse(sources_text, ctx)
    func = dispatch_function(sources, name)
    body = func.regions[0].blocks[0]
    ops = [op.operation for op in body.operations]
    dynamic = [op for op in ops if op.name == PUSH_CONSTANT]
    if dynamic:
        raise TilefuseError(
            f"dispatch {name} reads push constants (dynamic shapes or offsets): "
            "only static dispatches can be extracted"
        )
    loads = [op for op in ops if op.name == LOAD]
    stores = [op for op in ops if op.name == STORE]
    if not stores:
        raise TilefuseError(f"dispatch {name} stores nothing")
    stored = [op.operands[0] for op in stores]
    inputs = [op.results[0].type for op in loads]
    results = [v.type for v in stored]

    with ctx, func.location:
        out = ir.Module.create()
        with ir.InsertionPoint(out.body):
            main = ir.Operation.create(
                "func.func",
                attributes={
                    "sym_name": ir.StringAttr.get("main"),
                    "function_type": ir.TypeAttr.get(ir.FunctionType.get(inputs, results)),
                },
                regions=1,
            )
        entry = main.regions[0].blocks.append(*inputs)
        with ir.InsertionPoint(entry):
            region = ir.Operation.create(
                "flow.dispatch.region",
                results=results,
                operands=[],
                attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([0, 0])},
                regions=2,  # the body, and an empty workgroup-count region
            )
            ir.Operation.create("func.return", operands=list(region.results))
        block = region.regions[0].blocks.append()
        with ir.InsertionPoint(block):
            ret = ir.Operation.create("flow.return", operands=stored)
        for load, arg in zip(loads, entry.arguments):
            load.results[0].replace_all_uses_with(arg)
        names = [op.name for op in ops]
        # Stores read the subspans and loads read them: erase in that order.
        for kind in (STORE, LOAD, SUBSPAN):
            for op, op_name in zip(ops, names):
                if op_name == kind:
                    op.erase()
        for op, op_name in zip(ops, names):
            if op_name not in (SUBSPAN, LOAD, STORE, "func.return"):
                op.move_before(ret)
        for op in list(block.operations):  # the subspans' offsets, now unused
            op = op.operation
            if op.name == "arith.constant" and not list(op.results[0].uses):
                op.erase()
    out.operation.verify()
    text = out.operation.get_asm(assume_verified=True)
    return Extracted(header + text, [str(t) for t in inputs], [str(t) for t in results])


def pick_dispatch(names: list[str], wanted: str, model: str) -> int:
    """The index of dispatch `wanted` (an index or a name) among `names`."""
    if wanted.isdigit():
        if int(wanted) < len(names):
            return int(wanted)
        raise TilefuseError(
            f"no dispatch {wanted}: it has {len(names)} "
            f"(0 to {len(names) - 1}; `tilefuse dispatches {model}` lists them)",
            model,
        )
    if wanted in names:
        return names.index(wanted)
    raise TilefuseError(f"no dispatch named {wanted}; its dispatches: {', '.join(names)}", model)
