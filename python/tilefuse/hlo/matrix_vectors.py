"""Matrix-vector products read as their matrix is stored, before fusion planning.

A dot_general one of whose operands is a vector (each of its free dims has
extent 1: a decode step's x[1, K]) is a matrix-vector product. JAX writes
x @ W.T, with W stored as [N, K] (torch's and most checkpoints' weight
layout), as a transpose of the whole weight before the product: plain IREE
compiles it as a transpose dispatch, which reads and writes every weight
once more, then a vecmat (benchmarks/gpu/decode_m1_nk_bf16: 2 dispatches and
100.7 MB against 33.6 MB). Two rewrites read the weight as stored instead:

- rows: when the stored matrix holds the contracting dims innermost (one
  dot product per stored row), the product becomes a row reduction,

      y = reduce(convert(W) * convert(broadcast(x)), add, 0)

  which the planner puts in one row-reduction group with its epilogue, on
  the row kernels. Products and sum are in the dot's result type, f32:
  hlo/wide_accumulators.py has already given every f16 and bf16 contraction
  an f32 result (an f16 or bf16 product is exact in f32).
- swap: when the vector has no free dims and the stored matrix holds the
  free dims after the batch dims (W.T @ x with W as [K, N]; a batched
  W @ x), dot_general(matrix, vector) becomes dot_general(vector, matrix),
  the same tensor, which the matmul kernel's vector-matrix tiles take.

A matrix not produced by a transpose is already read as stored: W @ x stays
IREE's linalg.matvec (KEPT_MATVEC) except on SPIR-V with bf16 operands,
where IREE 3.13's codegen fails on it ("failed to legalize operation
'vector.bitcast'") and the row kernels compile it. Left as they are too
(logged): a batched product with the matrix as B (the matmul kernel takes
it), and a vector whose dims are not in the dot's order. Integer and
complex products are not candidates.
"""

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import defining_op, walk
from ..targets import Target
from .argminmax import splice, tensor_text
from .ops import dot_free_extents, dot_numbers, shape_of

SIDES = ("lhs", "rhs")
# Measured on lavapipe (4096x4096 f32 with bias and tanh: 45.5 ms on the row
# kernels against IREE's 16.0; docs/findings.md), not yet on a GPU.
KEPT_MATVEC = (
    "IREE's matvec reads the matrix as stored, and no GPU has timed the row "
    "kernels against it (on lavapipe they were slower)"
)
CONTRACTIONS = ("stablehlo.dot_general", "stablehlo.dot")


def _roles(numbers: dict[str, list[int]], side: str, rank: int) -> list[tuple[str, int]]:
    """Per dim of operand `side`: ("batch", j), ("free", k) or ("contract",
    j), j the position in the dot's batch or contracting list, k the free
    dim's rank among the operand's free dims."""
    batch = numbers[f"{side}_batching_dimensions"]
    contracting = numbers[f"{side}_contracting_dimensions"]
    roles, free = [], 0
    for d in range(rank):
        if d in batch:
            roles.append(("batch", batch.index(d)))
        elif d in contracting:
            roles.append(("contract", contracting.index(d)))
        else:
            roles.append(("free", free))
            free += 1
    return roles


ORDER = {"batch": 0, "free": 1, "contract": 2}


def _in_row_order(roles: list[tuple[str, int]]) -> bool:
    """The dims are batch dims, then free dims, then contracting dims, each
    in the dot's order: the product's rows as stored."""
    return roles == sorted(roles, key=lambda r: (ORDER[r[0]], r[1]))


def _through_transpose(value: ir.Value, roles: list[tuple[str, int]]):
    """(the operand of a transpose producing `value`, the roles of its dims),
    or None if no transpose produces `value`."""
    producer = defining_op(value)
    if producer is None or producer.name != "stablehlo.transpose":
        return None
    perm = list(ir.DenseI64ArrayAttr(producer.attributes["permutation"]))
    stored = [None] * len(perm)
    for i, p in enumerate(perm):  # result dim i of a transpose is its operand's dim perm[i]
        stored[p] = roles[i]
    return producer.operands[0], stored


def _swappable(roles: list[tuple[str, int]]) -> bool:
    """A matrix with these roles is a vector-matrix product's B as it is
    stored: batch dims first in the dot's order, free dims in theirs."""
    nb = sum(1 for kind, _ in roles if kind == "batch")
    free = [j for kind, j in roles if kind == "free"]
    return roles[:nb] == [("batch", j) for j in range(nb)] and free == sorted(free)


def candidate(op: ir.Operation, target: Target) -> tuple[str | None, dict]:
    """(None, the rewrite's facts) if `op` is rewritten; else (why not, {}),
    '' when it is no matrix-vector product at all (nothing to log)."""
    if len(op.results) != 1 or len(op.operands) != 2:
        return "", {}
    shapes = [shape_of(v.type) for v in op.operands]
    out = shape_of(op.results[0].type)
    if out is None or any(s is None or any(d < 0 for d in s) for s in shapes + [out]):
        return "", {}
    free = dot_free_extents(op)
    vectors = [all(e == 1 for e in f) for f in free]
    if vectors.count(True) != 1:
        return "", {}  # a matmul, or two vectors
    v_side = vectors.index(True)
    m_side = 1 - v_side
    numbers = dot_numbers(op)
    if not numbers["lhs_contracting_dimensions"]:
        return "", {}  # an outer product: nothing is summed
    element = str(ir.ShapedType(op.results[0].type).element_type)
    operand_types = {str(ir.ShapedType(v.type).element_type) for v in op.operands}
    if element != "f32" or not operand_types <= {"f32", "f16", "bf16"}:
        return "", {}
    roles = [_roles(numbers, s, len(shape)) for s, shape in zip(SIDES, shapes)]
    v_roles = roles[v_side]
    if not _in_row_order([r for r in v_roles if r[0] != "free"]):
        return "the vector's dims are not in the dot's order", {}
    batched = bool(numbers["lhs_batching_dimensions"])
    # Reading the matrix through a transpose that produces it saves the
    # transpose's dispatch; each layout is tried that way first.
    peeled = _through_transpose(op.operands[m_side], roles[m_side])
    layouts = ([peeled] if peeled else []) + [(op.operands[m_side], roles[m_side])]
    for matrix, m_roles in layouts:
        through = matrix != op.operands[m_side]
        if not batched and _in_row_order(m_roles):
            if not through and not (target.backend == "spirv" and "bf16" in operand_types):
                return KEPT_MATVEC, {}
            return None, _rows(op, numbers, free, out, m_side, matrix, m_roles) | {
                "transposed": through
            }
        if (through or m_side == 0) and not free[v_side] and _swappable(m_roles):
            return None, {
                "form": "swap",
                "matrix": matrix,
                "matrix_roles": m_roles,
                "vector": op.operands[v_side],
                "vector_roles": v_roles,
                "transposed": through,
            }
    if batched and m_side == 1:
        return "batched, the matrix as B (the matmul kernel's vector-matrix tiles take it)", {}
    if not batched and m_side == 1 and not peeled:
        return (
            "the matrix stores a contracting dim before a free one (the matmul kernel's vector-matrix tiles take it)",
            {},
        )
    return "no layout of the matrix the row or vector-matrix kernels read as stored", {}


def _rows(op, numbers, free, out, m_side, matrix, m_roles) -> dict:
    """The row reduction's facts: its loops (the result's dims, then the
    contracting dims) and where each operand's dims sit among them
    (increasing: no operand is transposed)."""
    nc = len(numbers["lhs_contracting_dimensions"])
    first = sum(len(f) for f in free[:m_side])  # the matrix's free dims in the result
    contract_at = list(range(len(out), len(out) + nc))
    m_dims = [first + j if kind == "free" else contract_at[j] for kind, j in m_roles]
    v_side = 1 - m_side
    v_roles = _roles(numbers, SIDES[v_side], len(shape_of(op.operands[v_side].type)))
    lhs = shape_of(op.operands[0].type)
    return {
        "form": "rows",
        "matrix": matrix,
        "vector": op.operands[v_side],
        "loops": out + [lhs[d] for d in numbers["lhs_contracting_dimensions"]],
        "matrix_dims": m_dims,
        "vector_dims": [contract_at[j] for kind, j in v_roles if kind == "contract"],
        "summed": contract_at,
        "out": out,
    }


def _swap(op: ir.Operation, facts: dict) -> None:
    """Replace `op` by dot_general(vector, matrix): the same result (the
    vector has no free dims), now a vector-matrix product."""

    def dims(roles, kind):
        found = sorted((j, d) for d, (k, j) in enumerate(roles) if k == kind)
        return ", ".join(str(d) for _, d in found)

    v, m = facts["vector_roles"], facts["matrix_roles"]
    numbers = (
        f"lhs_batching_dimensions = [{dims(v, 'batch')}], "
        f"rhs_batching_dimensions = [{dims(m, 'batch')}], "
        f"lhs_contracting_dimensions = [{dims(v, 'contract')}], "
        f"rhs_contracting_dimensions = [{dims(m, 'contract')}]"
    )
    attributes = {name: op.attributes[name] for name in op.attributes}
    with op.location:
        attributes["dot_dimension_numbers"] = ir.Attribute.parse(f"#stablehlo.dot<{numbers}>")
    swapped = ir.Operation.create(
        "stablehlo.dot_general",
        results=[op.results[0].type],
        operands=[facts["vector"], facts["matrix"]],
        attributes=attributes,
        loc=op.location,
        ip=ir.InsertionPoint(op),
    )
    op.results[0].replace_all_uses_with(swapped.results[0])
    producers = [defining_op(v) for v in op.operands]
    op.erase()
    for p in producers:  # a transpose read through
        if p is not None and not any(True for r in p.results for _ in r.uses):
            p.erase()


def _template(op: ir.Operation, facts: dict) -> str:
    """The rewrite as a func.func of the matrix (%m) and the vector (%v):
    both broadcast to the loops (the vector's unit free dims dropped first),
    converted to f32, multiplied and summed over the contracting dims."""
    loops, out = facts["loops"], facts["out"]
    f32 = lambda shape: tensor_text(shape, "f32")
    lines = []

    def to_loops(name: str, value: ir.Value, dims: list[int]) -> str:
        """`value` as %name over the loops, in f32. The convert comes after
        the broadcast: IREE fuses an elementwise op over the loops into the
        reduction, where a convert of the vector alone would be an op over
        [K] that the row kernels take for one over the rows."""
        value_type = str(value.type)
        element = str(ir.ShapedType(value.type).element_type)
        shape = [loops[d] for d in dims]
        if shape_of(value.type) != shape:  # the vector's unit free dims go
            viewed = tensor_text(shape, element)
            lines.append(f"%{name}_view = stablehlo.reshape %{name} : ({value_type}) -> {viewed}")
            name, value_type = f"{name}_view", viewed
        if shape != loops:
            wide = tensor_text(loops, element)
            lines.append(
                f"%{name}_b = stablehlo.broadcast_in_dim %{name}, dims = [{', '.join(map(str, dims))}]"
                f" : ({value_type}) -> {wide}"
            )
            name, value_type = f"{name}_b", wide
        if element != "f32":
            lines.append(
                f"%{name}_f32 = stablehlo.convert %{name} : ({value_type}) -> {f32(loops)}"
            )
            name = f"{name}_f32"
        return "%" + name

    m = to_loops("m", facts["matrix"], facts["matrix_dims"])
    v = to_loops("v", facts["vector"], facts["vector_dims"])
    summed = ", ".join(map(str, facts["summed"]))
    lines += [
        f"%p = stablehlo.multiply {m}, {v} : {f32(loops)}",
        "%zero = stablehlo.constant dense<0.0> : tensor<f32>",
        (
            f"%y = stablehlo.reduce(%p init: %zero) applies stablehlo.add across dimensions = "
            f"[{summed}] : ({f32(loops)}, tensor<f32>) -> {f32(out)}"
        ),
    ]
    loc = str(op.location)
    body = "\n".join(f"  {line} {loc}" for line in lines)
    m_type, v_type = facts["matrix"].type, facts["vector"].type
    return (
        f"func.func @gemv(%m: {m_type}, %v: {v_type}) -> {f32(out)} {{\n{body}\n"
        f"  return %y : {f32(out)} {loc}\n}}"
    )


def rewrite_function(func: ir.Operation, target: Target) -> list[str]:
    """Rewrite every matrix-vector product of `func` stored row-wise, in
    place (nested regions too: a scan over layers holds its products in a
    while body); one log line per product rewritten or left."""
    log = []
    for op in [o for o in walk(func) if o.name in CONTRACTIONS]:
        why, facts = candidate(op, target)
        if why == "":
            continue
        where = location_text(op.location)
        if why:
            log.append(f"matrix-vector product at {where} stays a contraction: {why}")
            continue
        shape = "x".join(map(str, shape_of(facts["matrix"].type)))
        through = " (read through its transpose)" if facts["transposed"] else ""
        if facts["form"] == "rows":
            splice(op, _template(op, facts), [facts["matrix"], facts["vector"]], result=0)
            done = f"a row reduction over the {shape} matrix{through}"
        else:
            _swap(op, facts)
            done = f"a vector-matrix product, the {shape} matrix as B{through}"
        log.append(f"matrix-vector product at {where} rewritten as {done}")
    return log
