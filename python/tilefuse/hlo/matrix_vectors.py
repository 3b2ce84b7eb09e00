"""Matrix-vector products read as their matrix is stored, before fusion planning.

A dot_general one of whose operands is a vector (each of its free dims has
extent 1: a decode step's x[1, K]) is a matrix-vector product. JAX writes
x @ W.T, with W stored as [N, K] (torch's and most checkpoints' weight
layout), as a transpose of the whole weight before the product: plain IREE
compiles it as a transpose dispatch, which reads and writes every weight
once more, then a vecmat (benchmarks/gpu/decode_m1_nk_bf16: 2 dispatches and
100.7 MB against 33.6 MB); decode attention's q @ swapaxes(k) transposes
the whole KV cache the same way. The product is rewritten to read the
matrix as stored (through such a transpose), in the form `_form` picks for
the stored layout:

- rows (unbatched, contracting dims innermost: one dot product per stored
  row): a row reduction,

      y = reduce(convert(W) * convert(broadcast(x)), add, 0)

  which the planner puts in one row-reduction group with its epilogue, on
  the row kernels. Products and sum are in the dot's result type, f32:
  hlo/wide_accumulators.py has already given every f16 and bf16 contraction
  an f32 result (an f16 or bf16 product is exact in f32).
- vector first (one batch dim, or the matrix stored [batch, K, N]):
  dot_general(vector, stored matrix), which the matmul kernel's
  vector-matrix tiles take (W.T @ x with W as [K, N]; a batched W @ x).
- matrix first (two or more batch dims, contracting dims innermost):
  dot_general(stored matrix, vector), a batch_matmul whose A IREE reads as
  stored (q @ swapaxes(k), k as [B, H, S, D]).

A vector's unit free dims are reshaped away first and back after the
product. A matrix not produced by a transpose is read as stored already:
W @ x stays IREE's linalg.matvec (KEPT_MATVEC) except on SPIR-V with bf16
operands, where IREE 3.13's codegen fails on it ("failed to legalize
operation 'vector.bitcast'") and the row kernels compile it; a batched
W @ x with one batch dim, which IREE lowers to a generic no kernel takes,
goes vector first. Left as they
are (logged): products already in their form, and a vector whose dims are
not in the dot's order. Integer and complex products are not candidates.
"""

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import defining_op, walk
from ..targets import Target
from .argminmax import splice, tensor_text
from .ops import (
    dot_free_extents,
    dot_numbers,
    dot_numbers_attr,
    erase_with_dead_producers,
    shape_of,
    view_back,
)

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
    batches = len(numbers["lhs_batching_dimensions"])
    # Reading the matrix through a transpose that produces it saves the
    # transpose's dispatch; each layout is tried that way first.
    peeled = _through_transpose(op.operands[m_side], roles[m_side])
    layouts = ([peeled] if peeled else []) + [(op.operands[m_side], roles[m_side])]
    for matrix, m_roles in layouts:
        through = matrix != op.operands[m_side]
        form = _form(m_roles, batches)
        if form == "rows":
            if not through and not (target.backend == "spirv" and "bf16" in operand_types):
                return KEPT_MATVEC, {}
            return None, _rows(op, numbers, free, out, m_side, matrix, m_roles) | {
                "transposed": through
            }
        first = m_side if form == "matrix first" else v_side
        if form is None or (first == 0 and not through):
            continue  # no such form, or the product has it already
        return None, {
            "form": form,
            "matrix": matrix,
            "matrix_roles": m_roles,
            "vector": op.operands[v_side],
            "vector_roles": v_roles,
            "transposed": through,
        }
    if not peeled:
        return f"already {_form(roles[m_side], batches) or 'in no form'} as stored", {}
    return "no layout of the matrix that a kernel reads as stored", {}


# How IREE 3.13 lowers a matrix-vector dot_general, by the matrix's layout
# (found by compiling each; tests/test_matrix_vectors.py):
# - [batch, free, contract] unbatched: linalg.matvec (rows form here);
#   with one batch dim, a generic over B, N, K that the matmul kernel takes
#   with the vector as A; with two or more, a batch_matmul over the
#   collapsed batch that transposes a B stored [N, K] (a dispatch copying
#   the whole matrix, attention's KV cache at decode), but reads an A stored
#   [M, K] as it is: the matrix goes first.
# - [batch, contract, free]: the vector-matrix layout at any batch count.
def _form(roles: list[tuple[str, int]], batches: int) -> str | None:
    """'rows', 'vector first' or 'matrix first': the product for a matrix
    stored with these dims; None for another layout."""
    if _in_row_order(roles):
        return "rows" if not batches else "vector first" if batches == 1 else "matrix first"
    column = sorted(roles, key=lambda r: ({"batch": 0, "contract": 1, "free": 2}[r[0]], r[1]))
    return "vector first" if roles == column else None


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


def _reorder(op: ir.Operation, facts: dict) -> None:
    """Replace `op` by dot_general(vector, matrix) or (matrix, vector), as
    facts["form"] says, reading the stored matrix and the vector without
    its unit free dims; a reshape after it restores them."""
    ip = ir.InsertionPoint(op)
    vector, v_roles = facts["vector"], facts["vector_roles"]
    if any(kind == "free" for kind, _ in v_roles):
        # The unit free dims go first: the product is then in matmul layout
        # (planner.plain_contraction), which an operand with a unit dim
        # between its batch and contracting dims is not.
        kept = [d for d, (kind, _) in enumerate(v_roles) if kind != "free"]
        shape = shape_of(vector.type)
        element = ir.ShapedType(vector.type).element_type
        with op.location:
            viewed = ir.RankedTensorType.get([shape[d] for d in kept], element)
        vector = ir.Operation.create(
            "stablehlo.reshape", results=[viewed], operands=[vector], loc=op.location, ip=ip
        ).results[0]
        v_roles = [v_roles[d] for d in kept]
    pair = [(vector, v_roles), (facts["matrix"], facts["matrix_roles"])]
    if facts["form"] == "matrix first":
        pair.reverse()

    def dims(roles, kind):
        return [d for _, d in sorted((j, d) for d, (k, j) in enumerate(roles) if k == kind)]

    (a, a_roles), (b, b_roles) = pair
    numbers = {
        "lhs_batching_dimensions": dims(a_roles, "batch"),
        "rhs_batching_dimensions": dims(b_roles, "batch"),
        "lhs_contracting_dimensions": dims(a_roles, "contract"),
        "rhs_contracting_dimensions": dims(b_roles, "contract"),
    }
    shape_a, shape_b = shape_of(a.type), shape_of(b.type)
    batch = [shape_a[d] for d, (k, _) in enumerate(a_roles) if k == "batch"]
    free_a = [shape_a[d] for d, (k, _) in enumerate(a_roles) if k == "free"]
    free_b = [shape_b[d] for d, (k, _) in enumerate(b_roles) if k == "free"]
    result = op.results[0].type
    element = ir.ShapedType(result).element_type
    attributes = {name: op.attributes[name] for name in op.attributes}
    with op.location:
        attributes["dot_dimension_numbers"] = dot_numbers_attr(numbers)
        reordered_type = ir.RankedTensorType.get(batch + free_a + free_b, element)
    new = ir.Operation.create(
        "stablehlo.dot_general",
        results=[reordered_type],
        operands=[a, b],
        attributes=attributes,
        loc=op.location,
        ip=ip,
    ).results[0]
    view_back(op, new, ip)  # the vector's unit free dims come back
    erase_with_dead_producers(op)  # and a transpose read through


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
            _reorder(op, facts)
            operands = ("the vector", f"the {shape} matrix as stored")
            if facts["form"] == "matrix first":
                operands = operands[::-1]
            done = f"dot_general({', '.join(operands)}){through}"
        log.append(f"matrix-vector product at {where} rewritten as {done}")
    return log
