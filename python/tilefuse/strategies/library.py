"""Write the transform library for phase 2: strategies plus a dispatch table.

Each strategy in transform_scripts/ is a named sequence whose tunable
attributes carry a `tilefuse.param` tag. For every dispatch that got a
strategy, the sequence is cloned under the dispatch's name and its tagged
attributes are set to the values the strategy's `attributes(params)` builds
(through the MLIR Python bindings, not text substitution). Steps that only
some dispatches need are named sequences of their own in the same file,
reached by a `transform.include` that carries a `tilefuse.step` name; the
strategy's `steps(params)` names, for each, the sequence that runs (the step,
or a no-op such as @tilefuse_pass), and the chosen steps are cloned beside
the dispatch's sequence. `@kernel_config` maps each dispatch function, by
name, to its specialized sequence. Steps the strategies share are named
sequences in transform_scripts/common.mlir; the library carries their
definitions once (add_shared_steps). A strategy that configures IREE's
own pipeline (Strategy.configures) is not a codegen spec: @kernel_config
runs its specialized sequence on the dispatch's function right away.
"""

from iree.compiler import ir

from ..errors import TilefuseError
from ..irutil import PARAM_TAG, context, set_tagged, symbol_name, walk
from ..paths import TRANSFORM_SCRIPTS
from . import BY_NAME, Choice

KERNEL_CONFIG_ENTRY = """
  transform.named_sequence @kernel_config(%variant: !transform.any_op {transform.readonly}) {
BODY    transform.yield
  }
"""
KERNEL_CONFIG_CASE = """    %f{i} = transform.structured.match ops{{["func.func"]}}
        attributes {{sym_name = "{dispatch}"}} in %variant
      : (!transform.any_op) -> !transform.any_op
    %s{i} = transform.param.constant #iree_codegen.translation_info<
        pipeline = #iree_codegen.transform_dialect_codegen codegen_spec = @{sequence}>
      -> !transform.any_param
    transform.annotate %f{i} "translation_info" = %s{i} : !transform.any_op, !transform.any_param
"""
# A strategy that configures IREE's pipeline (Strategy.configures): its
# sequence runs here, on the dispatch's function (none in the other
# executables' variants: foreach then runs nothing).
KERNEL_CONFIG_CONFIGURE = """    %f{i} = transform.structured.match ops{{["func.func"]}}
        attributes {{sym_name = "{dispatch}"}} in %variant
      : (!transform.any_op) -> !transform.any_op
    transform.foreach %f{i} : !transform.any_op {{
    ^bb0(%g{i}: !transform.any_op):
      transform.include @{sequence} failures(propagate) (%g{i}) : (!transform.any_op) -> ()
    }}
"""


def kernel_config_case(i: int, choice: Choice) -> str:
    """@kernel_config's lines for one dispatch: its strategy as the
    function's codegen spec, or (a configuring strategy) run right here."""
    case = KERNEL_CONFIG_CONFIGURE if BY_NAME[choice.strategy].configures else KERNEL_CONFIG_CASE
    return case.format(i=i, dispatch=choice.dispatch.name, sequence=sequence_name(choice))


def _parse_script(name: str, ctx: ir.Context) -> tuple[ir.Module, str]:
    """transform_scripts/<name>.mlir (or the strategy's own script text)
    parsed, and its path for messages."""
    record = BY_NAME.get(name)
    if record is not None and record.script is not None:
        return ir.Module.parse(record.script, ctx), name
    path = TRANSFORM_SCRIPTS / f"{name}.mlir"
    try:
        return ir.Module.parse(path.read_text(), ctx), str(path)
    except ir.MLIRError as e:
        raise TilefuseError(f"transform script does not parse: {e}", str(path)) from None


def entry_name(strategy: str) -> str:
    """The main sequence of a strategy's script."""
    return BY_NAME[strategy].entry or f"tilefuse_{strategy}"


def load_template(strategy: str, ctx: ir.Context) -> tuple[ir.Module, ir.Operation]:
    """The strategy's file and its main sequence (the module owns it)."""
    module, path = _parse_script(strategy, ctx)
    entry = entry_name(strategy)
    for op in module.body.operations:
        op = op.operation
        if symbol_name(op) == entry:
            return module, op
    raise TilefuseError(f"no named sequence @{entry}", path)


def add_shared_steps(library: ir.Module, ctx: ir.Context) -> None:
    """The definitions of the shared steps (transform_scripts/common.mlir)
    the strategies reach by transform.include, at the top of `library`."""
    common, _ = _parse_script("common", ctx)
    top = ir.InsertionPoint.at_block_begin(library.body)
    for op in common.body.operations:
        op.operation.clone(ip=top)


def sequence_name(choice: Choice) -> str:
    # A user strategy's name has a colon (user:NAME), which no bare symbol has.
    return f"tilefuse_{choice.strategy.replace(':', '_')}__{choice.dispatch.name}"


STEP_TAG = "tilefuse.step"  # on a transform.include: an optional step


def specialize(
    strategy: str,
    params,
    name: str,
    ip: ir.InsertionPoint,
    ctx: ir.Context,
    templates: dict | None = None,
) -> ir.Operation:
    """A copy of the strategy's named sequence at `ip`, renamed and
    parameterized, followed by copies of the optional steps it includes.
    `templates` caches each parsed script, its sequences and its tags across
    calls (one library)."""
    templates = {} if templates is None else templates
    if strategy not in templates:
        module, template = load_template(strategy, ctx)
        steps = {
            symbol_name(op.operation): op.operation
            for op in module.body.operations
            if len(op.operation.regions[0].blocks)  # defined here, not declared
        }
        templates[strategy] = (module, template, steps, _tags(module.operation))
    _module, template, steps, tags = templates[strategy]
    record = BY_NAME[strategy]
    seq = template.clone(ip=ip)
    seq.attributes["sym_name"] = ir.StringAttr.get(name, ctx)
    copies = [seq.operation, *_choose_steps(strategy, steps, seq.operation, params, name, ip, ctx)]
    setters = record.attributes(params, ctx)
    unknown = set(setters) - tags
    if unknown:
        raise TilefuseError(f"{strategy}.mlir lacks tilefuse.param tags: {sorted(unknown)}")
    for copy in copies:
        set_tagged(copy, setters)
    return seq


def _choose_steps(strategy, local, seq, params, name, ip, ctx) -> list[ir.Operation]:
    """Point every `tilefuse.step` include of `seq` at the sequence the
    strategy chose for it; the chosen steps defined in the strategy's file
    (`local`, by name) are cloned (once each) under a name carrying the
    dispatch's."""
    chosen = BY_NAME[strategy].steps(params) if BY_NAME[strategy].steps else {}
    suffix = name.split("__", 1)[1] if "__" in name else name
    copies: dict[str, ir.Operation] = {}
    slots = set()
    # A chosen step may itself include optional steps (matmul's "kernel"
    # step: the exact or the ragged kernel, each with steps of its own):
    # the copies are walked too, each once.
    todo = [seq]
    while todo:
        for op in walk(todo.pop()):
            if op.name != "transform.include" or STEP_TAG not in op.attributes:
                continue
            slot = ir.StringAttr(op.attributes[STEP_TAG]).value
            slots.add(slot)
            if slot not in chosen:
                raise TilefuseError(f"{strategy}: no sequence chosen for step {slot!r} (steps())")
            target = chosen[slot]
            if target in local:
                if target not in copies:
                    copy = local[target].clone(ip=ip)
                    copy.attributes["sym_name"] = ir.StringAttr.get(f"{target}__{suffix}", ctx)
                    copies[target] = copy
                    todo.append(copy)
                target = f"{target}__{suffix}"
            op.attributes["target"] = ir.FlatSymbolRefAttr.get(target, ctx)
    if set(chosen) - slots:
        raise TilefuseError(
            f"{strategy}.mlir has no step {sorted(set(chosen) - slots)} (a tilefuse.step include)"
        )
    return list(copies.values())


def add_script_helpers(strategy: str, templates: dict, library: ir.Module, ctx) -> None:
    """The sequences a strategy's own script (not transform_scripts/: a
    user's) defines besides its entry and its optional steps, once, for the
    includes of its steps (which are cloned per dispatch, unlike these)."""
    _module, _template, steps, _tags = templates[strategy]
    chosen = set()
    for c in (BY_NAME[strategy].steps or (lambda p: {}))(None).values():
        chosen.add(c)
    top = ir.InsertionPoint.at_block_begin(library.body)
    for name, op in steps.items():
        if name != entry_name(strategy) and name not in chosen:
            op.clone(ip=top)


def _tags(op: ir.Operation) -> set[str]:
    return {
        ir.StringAttr(inner.attributes[PARAM_TAG]).value
        for inner in walk(op)
        if PARAM_TAG in inner.attributes
    }


def build_library(choices: list[Choice], debug_info: bool = False) -> str:
    """The library text: specialized strategies and @kernel_config;
    `debug_info` prints every op's location (a user's script keeps its
    file:line there, `tilefuse try`)."""
    ctx = context()
    chosen = [c for c in choices if c.strategy]
    cases = "".join(kernel_config_case(i, c) for i, c in enumerate(chosen))
    # @kernel_config includes the configuring strategies' sequences: each is
    # declared for the parse, and the declaration dropped once defined.
    configuring = [sequence_name(c) for c in chosen if BY_NAME[c.strategy].configures]
    declarations = "".join(
        f"  transform.named_sequence private @{name}(%f: !transform.any_op "
        "{transform.readonly})\n"
        for name in configuring
    )
    library = ir.Module.parse(
        "module attributes {transform.with_named_sequence} {"
        + declarations
        + KERNEL_CONFIG_ENTRY.replace("BODY", cases)
        + "}",
        ctx,
    )
    entry = ir.InsertionPoint.at_block_begin(library.body)
    templates: dict = {}
    for choice in chosen:
        specialize(choice.strategy, choice.params, sequence_name(choice), entry, ctx, templates)
    for op in list(library.body.operations):
        op = op.operation
        if symbol_name(op) in configuring and not len(op.regions[0].blocks):
            op.erase()
    if chosen:
        add_shared_steps(library, ctx)
    for strategy in sorted({c.strategy for c in chosen if BY_NAME[c.strategy].script}):
        add_script_helpers(strategy, templates, library, ctx)
    library.operation.verify()
    return (
        "// Generated by tilefuse: one specialized strategy per dispatch, and the\n"
        "// dispatch table @kernel_config that assigns them by function name.\n"
        + library.operation.get_asm(enable_debug_info=debug_info)
    )
