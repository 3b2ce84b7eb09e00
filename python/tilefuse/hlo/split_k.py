"""Split-K for matmuls whose output is too small for the grid, before fusion planning.

A decode-time matmul (M = 1..16 rows against a [K, N] weight) gives the FMA
matmul kernel (strategies/matmul.py) a handful of workgroups: 4096x4096 at
M = 1 is 8 workgroups of 512 columns, 8 of a GPU's 108-132
multiprocessors, each streaming its share of the weight alone. XLA's
split-K and ByteIR's answer: cut K into S chunks and give each its own
workgroups, then add the S partial products. As StableHLO:

    p = dot_general(view(a, [M, S, K/S]), view(b, [S, K/S, N]),
                    batching_dims = [S] x [S])            # [S, M, N]
    y = view(p[0], [M, N]) + ... + view(p[S-1], [M, N])  # slices of p

Step one is a batched matmul on the same kernel (S times the workgroups);
step two is an elementwise sum of slices, into which the planner fuses the
matmul's epilogue (bias, activation), on the loop kernel. The views are
reshapes IREE folds into the loads, except that IREE makes the batch dim of
`a` leading with a copy of `a` (M x K elements: small when M is).

Whether and how far to split is the target's: only where `multiprocessors`
is known (a GPU; lavapipe's 2 cores are already filled by 8 workgroups),
for at most MAX_M rows, when the kernel's grid (matmul.workgroups) has
fewer workgroups than that.
S is the smallest divisor of K that fills the multiprocessors, at most
MAX_SPLIT (the sum reads S partials per output) and leaving at least
MIN_K_CHUNK of K per chunk. A and B in f32, f16 or bf16, and the result in
their one type or in f32 (hlo/wide_accumulators.py gives bf16 products an
f32 result, hlo/narrow_operands.py gives an f32 product of an f16 operand
mixed operands): the partials and their sum are in the result's type, so an
f32 accumulation stays f32 to the end.

Not split (logged): B as [N, K] (the view of B would put the batch dim in
the middle, and IREE would copy the whole weight to move it), and a K with
no such divisor.
"""

from iree.compiler import ir

from ..frontend import location_text
from ..strategies import matmul
from ..targets import Target
from .argminmax import splice, tensor_text
from .ops import SPLIT_STEP, dot_numbers, shape_of, sole_convert

MAX_SPLIT = 16
# When the partials are f32 sums of bf16 products converted back at the
# end: with 16 of them, IREE's formation cut the sum-and-convert in two
# dispatches (1x4096x4096 bf16 on cuda-sm90); 8 is one.
MAX_SPLIT_CONVERTED = 8
MIN_K_CHUNK = 256
# Rows of A, at most: decode shapes. A taller matmul with a short grid needs
# smaller tiles, not a split (the split adds a copy of A and the sum).
MAX_M = 16


def _dots(func: ir.Operation) -> list[ir.Operation]:
    return [
        o.operation
        for o in func.regions[0].blocks[0].operations
        if o.operation.name in ("stablehlo.dot_general", "stablehlo.dot")
    ]


def split_factor(k: int, workgroups: int, target: Target, max_split: int = MAX_SPLIT) -> int | None:
    """S for a K loop whose matmul has `workgroups` workgroups, or None."""
    divisors = [s for s in range(2, max_split + 1) if k % s == 0 and k // s >= MIN_K_CHUNK]
    if not divisors:
        return None
    filling = [s for s in divisors if workgroups * s >= target.multiprocessors]
    return filling[0] if filling else divisors[-1]


def plan(op: ir.Operation, target: Target) -> tuple[str | None, dict]:
    """(None, the split) if `op` is split; else (why not, {}), '' when it is
    no candidate at all (nothing to log)."""
    if not target.multiprocessors:
        return "", {}
    lhs, rhs = (shape_of(v.type) for v in op.operands)
    out = shape_of(op.results[0].type)
    operand_types = {str(ir.ShapedType(v.type).element_type) for v in op.operands}
    result_type = str(ir.ShapedType(op.results[0].type).element_type)
    numbers = dot_numbers(op)
    if (
        lhs is None
        or rhs is None
        or len(lhs) != 2
        or len(rhs) != 2
        or numbers["lhs_batching_dimensions"]
        or len(numbers["lhs_contracting_dimensions"]) != 1
    ):
        return "", {}
    (ca,), (cb,) = numbers["lhs_contracting_dimensions"], numbers["rhs_contracting_dimensions"]
    k, m, n = lhs[ca], lhs[1 - ca], rhs[1 - cb]
    if m > MAX_M:
        return "", {}
    workgroups = matmul.workgroups(m, n, target)
    if workgroups is None or workgroups >= target.multiprocessors:
        return "", {}
    grid = f"{workgroups} workgroups for {target.multiprocessors} multiprocessors"
    types = f"{'/'.join(sorted(operand_types))} -> {result_type}"
    if not operand_types <= {"f32", "f16", "bf16"}:
        return f"{types} (split-K takes f32, f16 or bf16 operands)", {}
    if result_type != "f32" and operand_types != {result_type}:
        return f"{types} (split-K takes a result of the operands' type or f32)", {}
    if cb != 0:
        return f"{grid}, but B is [N, K] (its view would copy the weight)", {}
    most = MAX_SPLIT_CONVERTED if operand_types != {result_type} else MAX_SPLIT
    s = split_factor(k, workgroups, target, most)
    if s is None:
        return f"{grid}, but K={k} has no divisor up to {most} leaving {MIN_K_CHUNK}", {}
    split = {"m": m, "n": n, "k": k, "s": s, "ca": ca, "out": out, "grid": grid}
    elements = [str(ir.ShapedType(v.type).element_type) for v in op.operands]
    return None, {**split, "operands": elements, "element": result_type}


def _template(op: ir.Operation, split: dict, narrow: str | None) -> str:
    """The split as a func.func of A and B; `narrow`: the type the sum is
    converted to (the convert after an f32-accumulated
    product), so that the convert is elementwise on the sum and fuses."""
    m, n, k, s, ca = (split[key] for key in ("m", "n", "k", "s", "ca"))
    a_type, b_type = (str(v.type) for v in op.operands)
    lhs = shape_of(op.operands[0].type)
    a3 = lhs[:ca] + [s, k // s] + lhs[ca + 1 :]
    b3 = [s, k // s, n]
    partial, one, out = [s, m, n], [1, m, n], [m, n]
    loc = str(op.location)

    def t(shape):  # the partial products and their sum: the result's type
        return tensor_text(shape, split["element"])

    def a_in(shape):  # the operands' views, each in its own type
        return tensor_text(shape, split["operands"][0])

    def b_in(shape):
        return tensor_text(shape, split["operands"][1])

    lines = [
        f"%a3 = stablehlo.reshape %a : ({a_type}) -> {a_in(a3)}",
        f"%b3 = stablehlo.reshape %b : ({b_type}) -> {b_in(b3)}",
        (
            f"%p = stablehlo.dot_general %a3, %b3, batching_dims = [{ca}] x [0], "
            f"contracting_dims = [{ca + 1}] x [1] : ({a_in(a3)}, {b_in(b3)}) -> {t(partial)}"
        ),
    ]
    # Each partial is viewed as the result's shape before the sum, so that
    # the sum and the matmul's epilogue after it are one elementwise chain
    # over [M, N] (a reshape after the sum split the two into two ops, and
    # the loop kernel fuses only a root's direct producers).
    terms = []
    for i in range(s):
        lines.append(
            f"%s{i} = stablehlo.slice %p [{i}:{i + 1}, 0:{m}, 0:{n}] : ({t(partial)}) -> {t(one)}"
        )
        lines.append(f"%v{i} = stablehlo.reshape %s{i} : ({t(one)}) -> {t(out)}")
        terms.append(f"%v{i}")
    level = 0
    while len(terms) > 1:  # a pairwise tree: log2(S) adds deep, not S
        paired = []
        for j in range(0, len(terms) - 1, 2):
            name = f"%t{level}_{j // 2}"
            lines.append(f"{name} = stablehlo.add {terms[j]}, {terms[j + 1]} : {t(out)}")
            paired.append(name)
        terms = paired + ([terms[-1]] if len(terms) % 2 else [])
        level += 1
    total = terms[0]
    if narrow:
        lines.append(f"%c = stablehlo.convert {total} : ({t(out)}) -> {tensor_text(out, narrow)}")
        total, t = "%c", (lambda shape: tensor_text(shape, narrow))
    body = "\n".join(f"  {line} {loc}" for line in lines)
    return (
        f"func.func @split(%a: {a_type}, %b: {b_type}) -> {t(out)} {{\n{body}\n"
        f"  return {total} : {t(out)} {loc}\n}}"
    )


def rewrite_function(func: ir.Operation, target: Target) -> list[str]:
    """Split K of every matmul of `func` the target wants split, in place;
    one log line per candidate (split, or why not)."""
    log = []
    for op in _dots(func):
        why, split = plan(op, target)
        if why == "":
            continue
        where = location_text(op.location)
        if why:
            log.append(f"matmul at {where} not split in K: {why}")
            continue
        # An f32-accumulated product's convert back to bf16 goes into the
        # split, on the sum: the sum's dispatch does it.
        convert = sole_convert(op)
        narrow = str(ir.ShapedType(convert.results[0].type).element_type) if convert else None
        template = _template(op, split, narrow)
        moved = splice(convert or op, template, list(op.operands), result=0)
        # The sum of the partials is a dispatch of its own; so is IREE's copy
        # of `a` with the batch dim moved first, when M > 1 rows precede it.
        steps = moved[-1:]  # the sum's last op
        if split["ca"] == 1 and split["m"] > 1:
            steps.append(moved[0])
        for step in steps:
            step.attributes[SPLIT_STEP] = ir.UnitAttr.get(step.context)
        s, k = split["s"], split["k"]
        log.append(
            f"matmul at {where} split in K: {split['m']}x{k} @ {k}x{split['n']} as {s} "
            f"products of K={k // s}, then their sum ({split['grid']} unsplit)"
        )
    return log


__all__ = ["plan", "rewrite_function", "split_factor"]
