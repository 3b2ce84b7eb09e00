"""Attribute values for the `tilefuse.param`-tagged steps of the transform scripts.

Each strategy module turns its parameters into `{tag: {attribute: value}}`
with these builders (its `attributes` function); library.py sets them on the
cloned named sequence. Names follow the transform ops' property names.
"""

from iree.compiler import ir

from .contract import Launch


def i64(value: int, ctx: ir.Context) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64, ctx), int(value))


def i64_array(values, ctx: ir.Context) -> ir.DenseI64ArrayAttr:
    return ir.DenseI64ArrayAttr.get([int(v) for v in values], ctx)


def i64_list(values, ctx: ir.Context) -> ir.ArrayAttr:
    """An ArrayAttr of i64 (what tile_reduction_using_for takes, not a dense array)."""
    return ir.ArrayAttr.get([i64(v, ctx) for v in values], ctx)


def static_sizes(sizes, ctx: ir.Context) -> dict:
    """Sizes of a tile_using_for step: no scalable dims."""
    return {
        "static_sizes": i64_array(sizes, ctx),
        "scalable_sizes": ir.DenseBoolArrayAttr.get([False] * len(sizes), ctx),
    }


def vector_sizes(sizes, ctx: ir.Context) -> dict:
    """Sizes of a structured.vectorize step: no scalable dims."""
    return {
        "static_vector_sizes": i64_array(sizes, ctx),
        "scalable_sizes": ir.DenseBoolArrayAttr.get([False] * len(sizes), ctx),
    }


def mapping(kind: str, dims, ctx: ir.Context) -> ir.Attribute:
    """e.g. mapping("block", ["x", "y"]) -> [#gpu.block<x>, #gpu.block<y>]."""
    return ir.Attribute.parse("[" + ", ".join(f"#gpu.{kind}<{d}>" for d in dims) + "]", ctx)


def workgroup(launch: Launch, ctx: ir.Context) -> dict:
    """The two tags every strategy ends with: the thread mapping's workgroup
    and subgroup size, and the final translation info carrying the same."""
    x, y, z = launch.workgroup
    return {
        "workgroup_dims": {
            "workgroup_dims": i64_array(launch.workgroup, ctx),
            "subgroup_size": i64(launch.subgroup, ctx),
        },
        "translation_info": {
            "value": ir.Attribute.parse(
                "#iree_codegen.translation_info<pipeline = #iree_codegen.no_pipeline "
                f"workgroup_size = [{x}, {y}, {z}] subgroup_size = {launch.subgroup}>",
                ctx,
            )
        },
    }


def batch_lead(batch: bool) -> tuple[tuple, tuple, tuple]:
    """(workgroup tile lead, block mapping, lead below the workgroup) of a
    matmul kernel: a batch loop comes first, one batch element per
    workgroup (block z), and is not tiled again below it (size 0)."""
    lead, blocks = ((1,), ("z", "y", "x")) if batch else ((), ("y", "x"))
    return lead, blocks, (0,) * len(lead)
