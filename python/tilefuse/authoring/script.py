"""A user's transform script, made into a strategy the library can clone.

The script's entry is `@__transform_main` (as for `transform-interpreter`)
or its only public named sequence; it receives the dispatch's func.func. The
library (strategies/library.py) wants a strategy whose main sequence receives
what IREE hands a codegen spec (the dispatch's module on SPIR-V, its function
on CUDA) and prints the finished kernel (kernel/verify.py reads the
printout). So the script gets a wrapper, @tilefuse_try:

    %func = match func.func in %dispatch
    include @user_script (%func)      <- the user's entry, renamed; an optional
                                         step, cloned per dispatch by the library
    print (match func.func in the module)

The user's file is parsed under its own path, and the strategy's text is
printed with every op's location, so the library's errors point into the
user's file (`script.mlir:LINE:COL`). `with_step_prints` adds, after every
top-level op of the entry, a `transform.print` of the function
(`--print-after`).
"""

import re
from dataclasses import dataclass
from pathlib import Path

from iree.compiler import ir

from ..errors import TilefuseError
from ..frontend import location_text
from ..irutil import context, file_positions, symbol_name, walk
from ..strategies.contract import Launch, Strategy

WRAPPER = "tilefuse_try"
USER_ENTRY = "user_script"  # the entry's name in the library (then __<dispatch>)
STEP = "script"  # the wrapper's tilefuse.step include
STEP_PRINT = "tilefuse try: step"  # transform.print name: "<STEP_PRINT> <n>"

WRAPPER_TEXT = """
module attributes {transform.with_named_sequence} {
  transform.named_sequence private @user_script(%func: !transform.any_op {transform.consumed})
  transform.named_sequence @tilefuse_try(%dispatch: !transform.any_op {transform.readonly}) {
    %func = transform.structured.match ops{["func.func"]} in %dispatch
      : (!transform.any_op) -> !transform.any_op
    %module = transform.get_parent_op %func <{deduplicate, op_name = "builtin.module"}>
      : (!transform.any_op) -> !transform.any_op
    transform.include @user_script failures(propagate) (%func) {tilefuse.step = "script"}
      : (!transform.any_op) -> ()
    %kernel = transform.structured.match ops{["func.func"]} in %module
      : (!transform.any_op) -> !transform.any_op
    transform.print %kernel : !transform.any_op
    transform.yield
  }
}
"""

# Inserted into the entry for --print-after: the module (first), then after
# each step the function in it, printed under a name carrying the step.
PRINT_TEXT = """
module attributes {transform.with_named_sequence} {
  transform.named_sequence @printer(%func: !transform.any_op {transform.readonly}) {
    %module = transform.get_parent_op %func <{deduplicate, op_name = "builtin.module"}>
      : (!transform.any_op) -> !transform.any_op
    %kernel = transform.structured.match ops{["func.func"]} in %module
      : (!transform.any_op) -> !transform.any_op
    "transform.print"(%kernel) <{name = "step"}> : (!transform.any_op) -> ()
    transform.yield
  }
}
"""


@dataclass(frozen=True)
class Step:
    index: int  # 1-based, in the entry's top-level ops
    op: str  # the transform op's name
    location: str  # file:line:col in the user's script


@dataclass(frozen=True)
class UserParams:
    """What the user's kernel turned out to be (read from it after the fact)."""

    launch: Launch
    script: str


@dataclass
class UserScript:
    path: str  # as the user named it
    name: str  # the strategy's name: the file name
    text: str  # the user's sequences and the wrapper, with locations
    steps: list[Step]


def _mlir_error(e: ir.MLIRError, path: str) -> TilefuseError:
    diags = e.error_diagnostics
    if diags:
        return TilefuseError(diags[0].message, location_text(diags[0].location, None))
    return TilefuseError(f"cannot parse: {e}", path)


def strategy_name(path: str) -> str:
    """The script's file name, as a symbol part (no `__`: the library splits
    sequence names on it)."""
    name = re.sub(r"[^\w.]", "_", Path(path).name)
    return re.sub(r"_{2,}", "_", name)


def _entry(module: ir.Module, path: str) -> ir.Operation:
    defined = [
        op.operation
        for op in module.body.operations
        if op.operation.name == "transform.named_sequence" and len(op.operation.regions[0].blocks)
    ]
    for op in defined:
        if symbol_name(op) == "__transform_main":
            return op
    public = [
        op
        for op in defined
        if "sym_visibility" not in op.attributes
        or ir.StringAttr(op.attributes["sym_visibility"]).value == "public"
    ]
    if len(public) != 1:
        names = ", ".join(f"@{symbol_name(op)}" for op in public) or "none"
        raise TilefuseError(
            "no entry: name it @__transform_main, or leave one public named sequence "
            f"(public: {names})",
            path,
        )
    return public[0]


def _check_signature(entry: ir.Operation, path: str) -> None:
    ftype = ir.FunctionType(ir.TypeAttr(entry.attributes["function_type"]).value)
    if len(ftype.inputs) != 1 or ftype.results:
        raise TilefuseError(
            f"@{symbol_name(entry)} must take one handle (the dispatch's function) "
            f"and return nothing; it is {ftype}",
            location_text(entry.location, path),
        )
    if str(ftype.inputs[0]) not in ("!transform.any_op", '!transform.op<"func.func">'):
        raise TilefuseError(
            f"@{symbol_name(entry)} takes {ftype.inputs[0]}: it receives the dispatch's "
            "function, as !transform.any_op",
            location_text(entry.location, path),
        )


def _top_level_ops(entry: ir.Operation) -> list[ir.Operation]:
    ops = [op.operation for op in entry.regions[0].blocks[0].operations]
    return ops[:-1]  # the transform.yield


def load_script(path: str, with_step_prints: bool = False) -> UserScript:
    """Parse and check the user's script; its strategy text (see the module
    docstring)."""
    if not Path(path).is_file():
        raise TilefuseError(f"no such file: {path}")
    ctx = context()
    try:
        module = ir.Module.parseFile(path, ctx)
        module.operation.verify()
    except ir.MLIRError as e:
        raise _mlir_error(e, path) from None
    entry = _entry(module, path)
    _check_signature(entry, path)
    steps = []
    for i, op in enumerate(_top_level_ops(entry), 1):
        position = next(file_positions(op.location), None)
        where = f"{position[0]}:{position[1]}:{position[2]}" if position else path
        steps.append(Step(i, op.name, where))
    if with_step_prints:
        _add_step_prints(entry, ctx)
    entry.attributes["sym_name"] = ir.StringAttr.get(USER_ENTRY, ctx)
    for op in walk(module.operation):  # the user's own includes of the entry
        if op.name == "transform.include" and ir.FlatSymbolRefAttr(
            op.attributes["target"]
        ).value == symbol_name(entry):
            op.attributes["target"] = ir.FlatSymbolRefAttr.get(USER_ENTRY, ctx)
    wrapper = ir.Module.parse(WRAPPER_TEXT, ctx)
    top = ir.InsertionPoint(module.body)
    for op in wrapper.body.operations:
        if symbol_name(op.operation) == WRAPPER:  # not the entry's declaration
            op.operation.clone(ip=top)
    text = module.operation.get_asm(enable_debug_info=True)
    return UserScript(path, strategy_name(path), text, steps)


def _add_step_prints(entry: ir.Operation, ctx: ir.Context) -> None:
    """A print of the function before the first top-level op of `entry`
    (step 0) and after each (step n)."""
    printer = ir.Module.parse(PRINT_TEXT, ctx)
    seq = printer.body.operations[0].operation
    block = seq.regions[0].blocks[0]
    get_module, match, print_op = (op.operation for op in list(block.operations)[:3])
    template_arg = block.arguments[0]
    body = entry.regions[0].blocks[0]
    ops = _top_level_ops(entry)
    last = list(body.operations)[-1].operation  # the yield
    module_op = get_module.clone(ir.InsertionPoint.at_block_begin(body)).operation
    module_op.replace_uses_of_with(template_arg, body.arguments[0])
    for i in range(len(ops) + 1):  # before op i: after step i
        point = ir.InsertionPoint(ops[i] if i < len(ops) else last)
        found = match.clone(point).operation
        found.replace_uses_of_with(get_module.results[0], module_op.results[0])
        printed = print_op.clone(point).operation
        printed.replace_uses_of_with(match.results[0], found.results[0])
        printed.attributes["name"] = ir.StringAttr.get(f"{STEP_PRINT} {i}", ctx)


def step_printouts(log: str) -> dict[int, str]:
    """Step number -> the function as printed after it (0: before the first)."""
    found = {}
    parts = re.split(rf"\[\[\[ IR printer: {re.escape(STEP_PRINT)} (\d+) \]\]\]\n", log)
    for number, text in zip(parts[1::2], parts[2::2]):
        text = text.split("[[[ IR printer:", 1)[0]
        found[int(number)] = text.rstrip() + "\n"
    return found


def user_strategy(script: UserScript, kernel_refusal) -> Strategy:
    """The script as a Strategy record (strategies.registered makes it known)."""
    return Strategy(
        name=script.name,
        plan=lambda dispatch, target: (None, "a user's script: `tilefuse try` assigns it"),
        describe=lambda p: (
            f"grid={list(p.launch.grid) if p.launch.grid else '?'} wg={list(p.launch.workgroup)}"
        ),
        attributes=lambda params, ctx: {},
        steps=lambda params: {STEP: USER_ENTRY},
        kernel_refusal=kernel_refusal,
        script=script.text,
        entry=WRAPPER,
    )
