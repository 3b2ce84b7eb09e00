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
from .irutil import set_tagged, symbol_name, walk
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


def load_template(strategy: str, ctx: ir.Context) -> tuple[ir.Module, ir.Operation]:
    """The strategy's file and its @tilefuse_<strategy> sequence (the module owns it)."""
    path = TRANSFORM_SCRIPTS / f"{strategy}.mlir"
    try:
        module = ir.Module.parse(path.read_text(), ctx)
    except ir.MLIRError as e:
        raise TilefuseError(f"transform script does not parse: {e}", str(path)) from None
    for op in module.body.operations:
        op = op.operation
        if symbol_name(op) == f"tilefuse_{strategy}":
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
    seen = set_tagged(seq, setters)
    missing = set(setters) - seen
    if missing:
        raise TilefuseError(f"loop.mlir lacks tilefuse.param tags: {sorted(missing)}")


RAGGED_TAIL = "tilefuse.ragged_tail"


FULL_CHUNKS = "tilefuse.full_chunks"
DIVISIBLE = "tilefuse.divisible"


def _erase_tagged(seq: ir.Operation, tags: set[str]) -> None:
    """Delete the steps carrying any of `tags` (latest first, as each may use
    an earlier one's handle)."""
    for op in reversed([op for op in walk(seq) if any(t in op.attributes for t in tags)]):
        op.erase()


def _erase_ragged_tail(seq: ir.Operation) -> None:
    """Delete the steps marked for the peeled last chunk: a row T*V divides
    has no tail."""
    _erase_tagged(seq, {RAGGED_TAIL})


def _tail_takes_whole_row(seq: ir.Operation) -> None:
    """A row shorter than one chunk is all tail: the split leaves the whole
    row in its first part, so the tail steps get that handle instead."""
    (split,) = [op for op in walk(seq) if op.name == "transform.split_handle"]
    split.results[1].replace_all_uses_with(split.results[0])


def _select_row_layout(seq: ir.Operation, layout: str) -> None:
    """Keep the steps of one layout (see transform_scripts/row_reduction.mlir)."""
    if layout == "divisible":
        _erase_tagged(seq, {RAGGED_TAIL})
    elif layout == "ragged":
        _erase_tagged(seq, {DIVISIBLE})
    else:  # "short": no full chunk
        _tail_takes_whole_row(seq)
        _erase_tagged(seq, {DIVISIBLE, FULL_CHUNKS})


def _apply_row_reduction_params(seq: ir.Operation, p: dict, ctx: ir.Context) -> None:
    threads, sg = p["threads"], p["subgroup_size"]
    blocks = ", ".join(f"#gpu.block<{d}>" for d in p["workgroup_mapping"])
    i64 = ir.IntegerType.get_signless(64, ctx)
    setters = {
        "root_inputs": {"raw_position_list": _i64_array(p["root_inputs"], ctx)},
        "root_init": {"operand_number": ir.IntegerAttr.get(i64, p["root_init"])},
        "workgroup_tile": {
            "static_tile_sizes": _i64_array(p["workgroup_tile"], ctx),
            "mapping": ir.Attribute.parse(f"[{blocks}]", ctx),
        },
        "full_length": {
            "dimension": ir.IntegerAttr.get(i64, p["reduced_dim"]),
            "static_chunk_sizes": ir.IntegerAttr.get(i64, p["full_length"]),
        },
        "chunk": {
            "split_factor": ir.IntegerAttr.get(i64, p["chunk"][-1]),
            "insert_split_dimension": ir.IntegerAttr.get(i64, p["reduced_dim"]),
        },
        # tile_reduction_using_for takes an I64ArrayAttr, not a dense array.
        "tail_chunk": {
            "tile_sizes": ir.ArrayAttr.get([ir.IntegerAttr.get(i64, v) for v in p["chunk"]], ctx)
        },
        "chunk_threads": {"static_num_threads": _i64_array(p["chunk_threads"], ctx)},
        "chunk_step": {
            "static_sizes": _i64_array(p["chunk_step"], ctx),
            "scalable_sizes": ir.DenseBoolArrayAttr.get([False] * len(p["chunk_step"]), ctx),
        },
        "thread_count": {"static_num_threads": _i64_array(p["thread_count"], ctx)},
        "tail_tile": {"static_tile_sizes": _i64_array(p["tail_tile"], ctx)},
        "vector_sizes": {
            "static_vector_sizes": _i64_array(p["vector_sizes"], ctx),
            "scalable_sizes": ir.DenseBoolArrayAttr.get([False] * len(p["vector_sizes"]), ctx),
        },
        "warp_size": {"warp_size": ir.IntegerAttr.get(i64, threads)},
        "workgroup_dims": {
            "workgroup_dims": _i64_array([threads, 1, 1], ctx),
            "subgroup_size": ir.IntegerAttr.get(i64, sg),
        },
        "translation_info": {
            "value": ir.Attribute.parse(
                "#iree_codegen.translation_info<pipeline = #iree_codegen.no_pipeline "
                f"workgroup_size = [{threads}, 1, 1] subgroup_size = {sg}>",
                ctx,
            )
        },
    }
    seen = set_tagged(seq, setters)
    missing = set(setters) - seen
    if missing:
        raise TilefuseError(f"row_reduction.mlir lacks tilefuse.param tags: {sorted(missing)}")
    _select_row_layout(seq, p["layout"])


def _vector_sizes(sizes, ctx) -> dict:
    return {
        "static_vector_sizes": _i64_array(sizes, ctx),
        "scalable_sizes": ir.DenseBoolArrayAttr.get([False] * len(sizes), ctx),
    }


def _apply_column_reduction_params(seq: ir.Operation, p: dict, ctx: ir.Context) -> None:
    wg, sg = p["workgroup_dims"], p["subgroup_size"]
    i64 = ir.IntegerType.get_signless(64, ctx)
    blocks = ", ".join(f"#gpu.block<{d}>" for d in p["workgroup_mapping"])
    step = p["reduction_step"]
    setters = {
        "root_init": {"raw_position_list": _i64_array([p["root_init"]], ctx)},
        "split": {
            "split_factor": ir.IntegerAttr.get(i64, p["split"]),
            "insert_split_dimension": ir.IntegerAttr.get(i64, p["insert_split_dimension"]),
        },
        "workgroup_tile": {
            "static_tile_sizes": _i64_array(p["workgroup_tile"], ctx),
            "mapping": ir.Attribute.parse(f"[{blocks}]", ctx),
        },
        "thread_count": {"static_num_threads": _i64_array(p["thread_count"], ctx)},
        "reduction_step": {
            "static_sizes": _i64_array(step, ctx),
            "scalable_sizes": ir.DenseBoolArrayAttr.get([False] * len(step), ctx),
        },
        "loop_vector": _vector_sizes(p["loop_vector"], ctx),
        "partial_vector": _vector_sizes(p["partial_vector"], ctx),
        "combine_threads": {"static_num_threads": _i64_array(p["combine_threads"], ctx)},
        "combine_step": {
            "static_sizes": _i64_array(p["combine_step"], ctx),
            "scalable_sizes": ir.DenseBoolArrayAttr.get([False] * len(p["combine_step"]), ctx),
        },
        "combine_vector": _vector_sizes(p["combine_vector"], ctx),
        "output_threads": {"static_num_threads": _i64_array(p["output_threads"], ctx)},
        "output_vector": _vector_sizes(p["output_vector"], ctx),
        "workgroup_dims": {
            "workgroup_dims": _i64_array(wg, ctx),
            "subgroup_size": ir.IntegerAttr.get(i64, sg),
        },
        "translation_info": {
            "value": ir.Attribute.parse(
                "#iree_codegen.translation_info<pipeline = #iree_codegen.no_pipeline "
                f"workgroup_size = [{wg[0]}, {wg[1]}, {wg[2]}] subgroup_size = {sg}>",
                ctx,
            )
        },
    }
    seen = set_tagged(seq, setters)
    missing = set(setters) - seen
    if missing:
        raise TilefuseError(f"column_reduction.mlir lacks tilefuse.param tags: {sorted(missing)}")


def _apply_softmax_params(seq: ir.Operation, p: dict, ctx: ir.Context) -> None:
    threads, sg = p["threads"], p["subgroup_size"]
    i64 = ir.IntegerType.get_signless(64, ctx)
    setters = {
        # tile_reduction_using_for takes an I64ArrayAttr, not a dense array.
        "reduction_chunk": {
            "tile_sizes": ir.ArrayAttr.get(
                [ir.IntegerAttr.get(i64, v) for v in p["reduction_chunk"]], ctx
            )
        },
        "row_chunk": {
            "static_sizes": _i64_array(p["row_chunk"], ctx),
            "scalable_sizes": ir.DenseBoolArrayAttr.get([False] * len(p["row_chunk"]), ctx),
        },
        "thread_tile": {"static_tile_sizes": _i64_array(p["thread_tile"], ctx)},
        "vector_sizes": _vector_sizes(p["vector_sizes"], ctx),
        "warp_size": {"warp_size": ir.IntegerAttr.get(i64, threads)},
        "workgroup_dims": {
            "workgroup_dims": _i64_array([threads, 1, 1], ctx),
            "subgroup_size": ir.IntegerAttr.get(i64, sg),
        },
        "translation_info": {
            "value": ir.Attribute.parse(
                "#iree_codegen.translation_info<pipeline = #iree_codegen.no_pipeline "
                f"workgroup_size = [{threads}, 1, 1] subgroup_size = {sg}>",
                ctx,
            )
        },
    }
    seen = set_tagged(seq, setters)
    missing = set(setters) - seen
    if missing:
        raise TilefuseError(f"softmax.mlir lacks tilefuse.param tags: {sorted(missing)}")
    if not p["peel"]:
        _erase_ragged_tail(seq)


APPLY_PARAMS = {
    "loop": _apply_loop_params,
    "row_reduction": _apply_row_reduction_params,
    "column_reduction": _apply_column_reduction_params,
    "softmax": _apply_softmax_params,
}


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
