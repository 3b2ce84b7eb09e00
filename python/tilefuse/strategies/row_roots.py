"""What a dispatch over rows looks like, as the row strategies (row_reduction,
row_warp, softmax) ask it: the root's loops, the combining ops whose identity
the transform dialect knows, and the two root shapes they take (one lone row
reduction; a chain of ops over [rows, n])."""

from dataclasses import dataclass

from ..dispatch.read import Dispatch
from .contract import Launch


@dataclass(frozen=True)
class RowParams:
    """What the row kernels' parameters share: T threads along a row on
    workgroup x, R rows on workgroup y."""

    launch: Launch

    @property
    def threads(self) -> int:  # T
        return self.launch.workgroup[0]

    @property
    def rows_per_workgroup(self) -> int:  # R
        return self.launch.workgroup[1]


# Combining ops whose identity the transform dialect knows (the partial
# accumulator starts at it), by reduction name.
COMBINERS = {
    "arith.addf": "add",
    "arith.addi": "add",
    "arith.mulf": "mul",
    "arith.muli": "mul",
    "arith.maximumf": "max",
    "arith.maxnumf": "max",
    "arith.maxsi": "max",
    "arith.minimumf": "min",
    "arith.minnumf": "min",
    "arith.minsi": "min",
    "arith.andi": "and",
    "arith.ori": "or",
}
# Float min/max that must propagate NaN (StableHLO's maximum/minimum).
NAN_PROPAGATING_MINMAX = ("arith.maximumf", "arith.minimumf")
# Shuffles move 32-bit values; narrower accumulators are packed by IREE's
# group reduction, wider ones (f64, i64) are not supported by it.
MAX_ACCUMULATOR_BITS = 32


# The root's loops: an elementwise op over the rows (softmax's normalized
# row), the last row reduction (argmax), or an epilogue over one value per
# row (a mean's sum / N).
ROOT_ELEMENTWISE = ["parallel", "parallel"]
ROOT_REDUCTION = ["parallel", "reduction"]
ROOT_EPILOGUE = ["parallel"]


ROOT_KINDS = {
    tuple(ROOT_ELEMENTWISE): "elementwise",
    tuple(ROOT_REDUCTION): "reduction",
    tuple(ROOT_EPILOGUE): "epilogue",
}


def row_ops_refusal(d: Dispatch, indexed_lone_ok: bool = False) -> str | None:
    """Why the dispatch is not a chain of ops over [rows, n] rows (elementwise,
    row reductions, one value per row) ending in such a root, or None. An op
    over one value per row besides the root (a jnp.var layer norm in f16,
    whose mean two ops read) is recomputed where it is read: by each lane in
    row_warp (every lane holds the reduction's value), by each thread in the
    softmax kernel. `indexed_lone_ok`: a lone row reduction that reads a
    loop index (a masked trace, jnp.tril(x).sum()) is taken too, which the
    softmax kernel computes right and the row kernels do not."""
    if d.problem:
        return d.problem
    if d.root_op != "linalg.generic" or tuple(d.iterator_types) not in ROOT_KINDS:
        return "root is not a linalg.generic over the rows (elementwise, row reduction or one value per row)"
    why_not = d.generic_root_problem()  # a root that gathers (a reversed row)
    if why_not:
        return why_not
    if any(s < 0 for s in d.loop_ranges):
        return "dynamic shapes"
    if len(d.outputs) != 1:
        return f"{len(d.outputs)} results"
    reductions = 0
    for op in d.op_summaries:
        if op.name == "linalg.fill":
            continue
        if op.name != "linalg.generic":
            return f"{op.name} in the dispatch"
        if op.strided_input:
            return "an op reads a [rows, n] input across the rows (a transposed read)"
        if op.iterator_types == ["parallel", "reduction"]:
            reductions += 1
            if len(op.combiners) != 1 or op.combiners[0] not in COMBINERS:
                return f"a reduction combining with {op.combiners}"
        elif (
            op.iterator_types == ROOT_EPILOGUE
            and d.iterator_types != ROOT_EPILOGUE
            and any(o.indexes for o in d.op_summaries)
        ):
            # Found on the corpus (cross_entropy_f32: a log of the row's sum
            # beside a one-hot's iota row): the recomputed ops were left
            # unvectorized ("linalg.generic, linalg.index left").
            return "an op over one value per row beside an op that reads a loop index"
        elif op.iterator_types not in (ROOT_ELEMENTWISE, ROOT_EPILOGUE):
            return f"a linalg.generic over {op.iterator_types}"
        if any(b > MAX_ACCUMULATOR_BITS for b in op.result_bits):
            return "a result wider than 32 bits (shuffles are 32-bit)"
        if any(b == 1 for b in op.result_bits):
            # Found on the corpus (bool_ops_bool: any/all of rows): the
            # reduction over i1 fails to build ("Failed to anaysis the
            # reduction operation").
            return "an i1 result (a reduction over booleans fails to build)"
    if (
        d.iterator_types == ROOT_EPILOGUE
        and sum(o.iterator_types == ROOT_EPILOGUE for o in d.op_summaries) > 1
    ):
        return "several ops over one value per row"
    root_reduces = ROOT_KINDS[tuple(d.iterator_types)] == "reduction"
    lone_indexed = root_reduces and reductions == 1 and any(o.indexes for o in d.op_summaries)
    if reductions < 1 + root_reduces and not (indexed_lone_ok and lone_indexed):
        # A lone row reduction is the row kernel's (row_reduction.py), but
        # for one that reads a loop index, which the row kernels renumber.
        return "no row reduction besides the root"
    return None


def lone_reduction_refusal(d: Dispatch) -> str | None:
    """Why the root is not one reduction of [rows..., n] rows over the
    innermost dim (with direct producers fused), or None."""
    why_not = d.generic_root_problem()
    if why_not:
        return why_not
    its = d.iterator_types
    if "reduction" not in its:
        return "root has no reduction dims"
    if its.count("reduction") > 1:
        return f"{its.count('reduction')} reduction dims (IREE did not collapse them)"
    if its[-1] != "reduction":
        return "reduced dim is not the innermost loop (a column reduction)"
    if len(its) == 1:
        return "rank-1 reduction to a scalar (hlo/scalars.py rewrites those it can as rows; the fusion log says why not this one)"
    if len(its) - 1 > 3:
        return f"{len(its) - 1} parallel dims, more than the 3-D grid"
    if any(s < 0 for s in d.loop_ranges):
        return "dynamic shapes"
    if len(d.outputs) != 1:
        return f"{len(d.outputs)} results (a variadic reduce: hlo/argminmax.py rewrites argmax/argmin over the innermost dim, not this one)"
    reduced = len(its) - 1
    if any(dim != reduced for dim in d.input_inner_dims):
        return "an input is not read along the reduced dim (strided rows)"
    combiner = d.combiners[0] if d.combiners else None
    if combiner not in COMBINERS:
        return f"combiner {combiner} has no known identity"
    if any(o.indexes for o in d.op_summaries):
        # sum(where(x > 0, iota, 0)) over rows of 5000: the row kernel's
        # chunking of the reduced dim renumbered linalg.index (8 of 8 rows
        # wrong); the row-warp kernel failed to build. (The softmax kernel
        # takes argmax's iota: hlo/argminmax.py.)
        return "an op reads a loop index (linalg.index), which the kernels' chunking renumbers (the softmax kernel takes it)"
    if d.outputs[0].bits > MAX_ACCUMULATOR_BITS:
        return f"{d.outputs[0].element_type} accumulator (shuffles are 32-bit)"
    others = len(d.ops) - 1
    fusable = [p for p in d.input_producers if p and p.startswith("linalg.")]
    fills = d.ops.count("linalg.fill")
    if others > len(fusable) + fills:
        return f"{others} ops besides the root, only direct producers are fused"
    return None


def widest_bits(d: Dispatch) -> int:
    """The widest element a row kernel's vectors hold: of any op's result or input."""
    results = (b for op in d.op_summaries for b in op.result_bits)
    return max([*results, *(o.bits for o in d.inputs)])
