"""Write the transform library for phase 2: strategies plus a dispatch table.

Each strategy in transform_scripts/ is a named sequence whose tunable
attributes carry a `tilefuse.param` tag. For every dispatch that got a
strategy, the sequence is cloned under the dispatch's name and its tagged
attributes are set from the chooser's parameters (through the MLIR Python
bindings, not text substitution). `@kernel_config` then maps each dispatch
function, by name, to its specialized sequence.
"""

from iree.compiler import ir

from .errors import TilefuseError
from .paths import TRANSFORM_SCRIPTS
from .strategies import Choice

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


def _walk(op):
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                yield inner.operation
                yield from _walk(inner.operation)


def load_template(strategy: str, ctx: ir.Context) -> tuple[ir.Module, ir.Operation]:
    """The strategy's file and its @tilefuse_<strategy> sequence (the module owns it)."""
    path = TRANSFORM_SCRIPTS / f"{strategy}.mlir"
    try:
        module = ir.Module.parse(path.read_text(), ctx)
    except ir.MLIRError as e:
        raise TilefuseError(f"transform script does not parse: {e}", str(path)) from None
    for op in module.body.operations:
        op = op.operation
        if ir.StringAttr(op.attributes["sym_name"]).value == f"tilefuse_{strategy}":
            return module, op
    raise TilefuseError(f"no named sequence @tilefuse_{strategy}", str(path))


def _i64_array(values, ctx):
    return ir.DenseI64ArrayAttr.get([int(v) for v in values], ctx)


def _apply_loop_params(seq: ir.Operation, p: dict, ctx: ir.Context) -> None:
    wg = p["workgroup_dims"]
    sg = p["subgroup_size"]
    blocks = ", ".join(f"#gpu.block<{d}>" for d in p["workgroup_mapping"])
    threads = ", ".join(f"#gpu.thread<{d}>" for d in p["thread_mapping"])
    setters = {
        "root_inputs": {"raw_position_list": _i64_array(p["root_inputs"], ctx)},
        "workgroup_tile": {
            "static_tile_sizes": _i64_array(p["workgroup_tile"], ctx),
            "mapping": ir.Attribute.parse(f"[{blocks}]", ctx),
        },
        "thread_count": {
            "static_num_threads": _i64_array(p["thread_count"], ctx),
            "mapping": ir.Attribute.parse(f"[{threads}]", ctx),
        },
        "vector_sizes": {
            "static_vector_sizes": _i64_array(p["vector_sizes"], ctx),
            "scalable_sizes": ir.DenseBoolArrayAttr.get([False] * len(p["vector_sizes"]), ctx),
        },
        "workgroup_dims": {
            "workgroup_dims": _i64_array(wg, ctx),
            "subgroup_size": ir.IntegerAttr.get(ir.IntegerType.get_signless(64, ctx), sg),
        },
        "translation_info": {
            "value": ir.Attribute.parse(
                "#iree_codegen.translation_info<pipeline = #iree_codegen.no_pipeline "
                f"workgroup_size = [{wg[0]}, {wg[1]}, {wg[2]}] subgroup_size = {sg}>",
                ctx,
            )
        },
    }
    seen = set()
    for op in _walk(seq):
        if "tilefuse.param" not in op.attributes:
            continue
        tag = ir.StringAttr(op.attributes["tilefuse.param"]).value
        for attr, value in setters.get(tag, {}).items():
            op.attributes[attr] = value
        seen.add(tag)
    missing = set(setters) - seen
    if missing:
        raise TilefuseError(f"loop.mlir lacks tilefuse.param tags: {sorted(missing)}")


APPLY_PARAMS = {"loop": _apply_loop_params}


def sequence_name(choice: Choice) -> str:
    return f"tilefuse_{choice.strategy}__{choice.dispatch.name}"


def specialize(
    strategy: str, params: dict, name: str, ip: ir.InsertionPoint, ctx: ir.Context
) -> ir.Operation:
    """A copy of the strategy's named sequence at `ip`, renamed and parameterized."""
    _module, template = load_template(strategy, ctx)
    seq = template.clone(ip=ip)
    seq.attributes["sym_name"] = ir.StringAttr.get(name, ctx)
    APPLY_PARAMS[strategy](seq.operation, params, ctx)
    return seq


def build_library(choices: list[Choice]) -> str:
    """The library text: specialized strategies and @kernel_config."""
    ctx = ir.Context()
    chosen = [c for c in choices if c.strategy]
    cases = "".join(
        KERNEL_CONFIG_CASE.format(i=i, dispatch=c.dispatch.name, sequence=sequence_name(c))
        for i, c in enumerate(chosen)
    )
    library = ir.Module.parse(
        "module attributes {transform.with_named_sequence} {"
        + KERNEL_CONFIG_ENTRY.replace("BODY", cases)
        + "}",
        ctx,
    )
    entry = ir.InsertionPoint.at_block_begin(library.body)
    for choice in chosen:
        specialize(choice.strategy, choice.params, sequence_name(choice), entry, ctx)
    library.operation.verify()
    return (
        "// Generated by tilefuse: one specialized strategy per dispatch, and the\n"
        "// dispatch table @kernel_config that assigns them by function name.\n" + str(library)
    )
