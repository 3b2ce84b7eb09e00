"""Long sorts as a bitonic sorting network of elementwise steps (GPU targets).

IREE 3.13 sorts each row in one GPU invocation, serially: its SPIR-V sort is
a bubble sort of n * (n - 1) compare-swaps (docs/findings.md, 'lavapipe cuts
loops after 65535 iterations'), which lavapipe cuts short past n = 256 (a
16 x 512 sort came back with 4957 of 8192 keys out of place, in plain IREE
and tilefuse alike), and its sort of 2^20 keys asks for 4 MiB of workgroup
memory and fails to compile. A sort along a dim longer than SERIAL_MAX is
rewritten here as Batcher's bitonic network: log2(N) * (log2(N) + 1) / 2
steps for N the length rounded up to a power of two, each an elementwise
program over every element, with no loop in any invocation.

The network is the variant without direction bits: for each merge size
k = 2, 4, ..., N, a flip of each block of k (element t of the block against
element k - 1 - t), then half-cleaners of pairs J = k / 4, ..., 1 apart, all
ascending. One step, on each operand viewed (a reshape, no copy) as

    [P * N / (2 J), 2, J, Q]    P: the dims before the sorted one,
                                Q: the dims after it

reads each element's partner as a reverse of the view: of dims 1 and 2 for a
flip (J = k / 2), of dim 1 for a half-cleaner. The lower place of a pair
(index 0 of dim 1) takes its partner when the partner comes first, the upper
place when it does not:

    take = lt(partner, self) xor in_upper_half
    out  = take ? partner : self

No step depends on k but through J, so the half-cleaners of one J are the
same program in every merge, and IREE keeps one executable for them
(2 log2(N) - 2 distinct steps of log2(N) (log2(N) + 1) / 2).

lt is the sort's own comparator, applied elementwise (its body cloned onto
the view's shape), made a strict total order with the element's original
position as the tie-break: lt(a, b) = comp(a, b) or (not comp(b, a) and
pos(a) < pos(b)). So the network computes exactly the stable sort, which is
what `is_stable` asks for and a valid result where it does not. The position
is an operand that is already an iota along the sorted dim (argsort's,
top_k's) or a new one. A length that is not a power of two is padded up to N;
a padded element (position >= n) is after every real one, whatever the
comparator says, and the padding is sliced off at the end.

IREE forms each step's dispatches (the planner leaves the network's ops out
of its groups: FORMED_BY_IREE), one per result or one for several, and the
loop kernel takes each, reading the partner by tensor.extract. On a GPU a
dispatch per step replaces IREE's O(n^2) loop in one thread per row; its
time there has not been measured.

On CUDA a sort with a result nobody reads (argsort's sorted keys, top_k's
values when only the indices are used) is rewritten at any length: IREE's
CUDA sort keeps that result in a temporary it fails to bufferize ("failed
to bufferize op", from 32 keys on sm_80 and 17 on sm_90).

Left to IREE, with the reason in the log: sorts of SERIAL_MAX elements or
fewer (IREE's serial sort finishes there, in one dispatch), sorts read only
through their first k <= TOP_K_MAX (IREE makes its top-k kernel of them),
comparators with ops other than elementwise ones and constants, or reading
values from outside themselves, and complex operands.
"""

import math

from iree.compiler import ir

from ..frontend import location_text
from ..irutil import defining_op, user_op, walk
from ..targets import Target
from .argminmax import tensor_text
from .ops import (
    FORMED_BY_IREE,
    LEFT_AS_IT_IS,
    erase_with_dead_producers,
    mark_split_steps,
    node_class,
    shape_of,
)

SORT = "stablehlo.sort"
# Up to this length IREE's serial sort is kept: n * (n - 1) compare-swaps
# in one invocation stay within lavapipe's loop budget of 65535, and one
# dispatch beats the network's log2(n) * (log2(n) + 1) / 2 steps.
SERIAL_MAX = 256
# A sort read only through slices of its first k (chlo.top_k's expansion)
# is IREE's top-k kernel, which was right for k = 8 of 32000 on lavapipe
# (and wrong for k = 50): up to this k the sort stays IREE's.
TOP_K_MAX = 8
# The placeholder the step template calls where the comparator is applied;
# each call is replaced by the comparator's body cloned onto the view's shape.
COMPARATOR = "tilefuse_sort_comparator"


def refusal(op: ir.Operation, cuda: bool = False) -> str | None:
    """Why this sort is left to IREE, or None. `cuda`: for a CUDA target,
    where a short sort with a result nobody reads is rewritten too."""
    shape = shape_of(op.operands[0].type)
    if shape is None:
        return "dynamic shape"
    dim = ir.IntegerAttr(op.attributes["dimension"]).value
    n = shape[dim]
    # IREE's CUDA sort keeps a result nobody reads in a temporary it fails
    # to bufferize (argsort, top_k's indices alone: "failed to bufferize op").
    unread_on_cuda = cuda and n > 1 and _unread_result(op)
    if n <= SERIAL_MAX and not unread_on_cuda:
        return f"{n} elements per sort: IREE's serial sort finishes (at most {SERIAL_MAX})"
    for value in op.operands:
        element = str(ir.ShapedType(value.type).element_type)
        if not element.lstrip("usb").startswith(("i", "f")):
            return f"operand of {element}: only integer and float operands are sorted here"
    k = _top_k(op, dim)
    if k is not None and k <= TOP_K_MAX and not unread_on_cuda:
        return (
            f"only its first {k} of {n} are read (slices): IREE turns that into its top-k "
            f"kernel, right for k up to {TOP_K_MAX} (sweep 18's top-8 of 32000)"
        )
    block = op.regions[0].blocks[0]
    inside: list[ir.Operation] = []  # the comparator's ops seen so far
    for inner in block.operations:
        inner = inner.operation
        if inner.name == "stablehlo.return":
            continue
        if inner.regions and any(r.blocks for r in inner.regions):
            return f"its comparator has a {inner.name} with a region"
        if inner.name != "stablehlo.constant" and node_class(inner) != "elementwise":
            return f"its comparator has a {inner.name}, not an elementwise op"
        for value in inner.operands:
            owner = defining_op(value)
            if owner is None and value.owner != block:
                return "its comparator reads a value from outside it"
            # A constant may sit outside: MLIR's folding hoists them.
            outside = owner is not None and not any(owner == o for o in inside)
            if outside and owner.name != "stablehlo.constant":
                return "its comparator reads a value from outside it"
        inside.append(inner)
    return None


def _unread_result(op: ir.Operation) -> bool:
    """Whether a result of the sort is not read (argsort's sorted keys),
    or read only by ops whose results nobody reads (top_k's dead slice)."""

    def unread(value: ir.Value) -> bool:
        users = [user_op(use) for use in value.uses]
        return all(u.name == "stablehlo.slice" and not list(u.results[0].uses) for u in users)

    return any(unread(result) for result in op.results)


def _top_k(op: ir.Operation, dim: int) -> int | None:
    """k where every use of the sort's results is a slice of its first k
    along `dim` (a top-k, as chlo.top_k expands), else None."""
    k = 0
    for result in op.results:
        for use in result.uses:
            user = user_op(use)
            if user.name != "stablehlo.slice":
                return None
            starts = list(ir.DenseI64ArrayAttr(user.attributes["start_indices"]))
            limits = list(ir.DenseI64ArrayAttr(user.attributes["limit_indices"]))
            strides = list(ir.DenseI64ArrayAttr(user.attributes["strides"]))
            if starts[dim] != 0 or strides[dim] != 1:
                return None
            k = max(k, limits[dim])
    return k or None


def _position_operand(op: ir.Operation, dim: int) -> int | None:
    """The operand that is an iota along the sorted dim (argsort's
    positions), if any: it serves as the tie-break."""
    for i, value in enumerate(op.operands):
        producer = defining_op(value)
        # compared SIGNED, and wide enough to number every element
        if (
            producer is not None
            and producer.name == "stablehlo.iota"
            and ir.IntegerAttr(producer.attributes["iota_dimension"]).value == dim
            and str(ir.ShapedType(value.type).element_type) in ("i32", "i64")
        ):
            return i
    return None


def _steps(length: int) -> list[tuple[int, bool]]:
    """(J, flip) of each step of the network over `length` (a power of two)
    elements: for each merge size k, a flip of blocks of k (J = k / 2), then
    half-cleaners of pairs J = k / 4, ..., 1 apart."""
    steps, k = [], 2
    while k <= length:
        steps.append((k // 2, True))
        j = k // 4
        while j >= 1:
            steps.append((j, False))
            j //= 2
        k *= 2
    return steps


def _template(shape, dim, elements, position, loc) -> tuple[str, list[tuple[int, bool]]]:
    """The network as a func.func taking the sort's operands and returning
    its results, with `func.call @COMPARATOR` where the comparator applies;
    and its steps (_steps). `position`: the operand that is an iota along
    `dim`, or None (then the network carries one more, its own)."""
    n, rank = shape[dim], len(shape)
    big = 1 << max(1, math.ceil(math.log2(n)))
    before, after = math.prod(shape[:dim]), math.prod(shape[dim + 1 :])
    padded = [*shape[:dim], big, *shape[dim + 1 :]]
    types = [tensor_text(shape, e) for e in elements]
    zeros = ", ".join("0" for _ in shape)
    high = ", ".join(str(big - n if d == dim else 0) for d in range(rank))
    pos_element = elements[position] if position is not None else "i32"
    declarations = []  # one comparator signature per step: the template parses
    lines = [f"%pos = stablehlo.iota dim = {dim} : {tensor_text(padded, pos_element)}"]
    carried = []  # (value, element type) of every operand the steps carry
    for i, element in enumerate(elements):
        value = f"%x{i}"
        if i == position:
            value = "%pos"  # the same positions, over the padded length
        elif big > n:
            scalar = tensor_text([], element)
            zero = "false" if element == "i1" else ("0.0" if element[0] in "fb" else "0")
            lines += [
                f"%zero{i} = stablehlo.constant dense<{zero}> : {scalar}",
                (
                    f"%pad{i} = stablehlo.pad %x{i}, %zero{i}, low = [{zeros}], high = [{high}],"
                    f" interior = [{zeros}] : ({types[i]}, {scalar})"
                    f" -> {tensor_text(padded, element)}"
                ),
            ]
            value = f"%pad{i}"
        carried.append((value, element))
    pos_at = position
    if position is None:
        carried.append(("%pos", pos_element))
        pos_at = len(carried) - 1
    steps = _steps(big)
    m = len(elements)
    for s, (j, flip) in enumerate(steps):
        view = [before * big // (2 * j), 2, j, after]
        vb, v32 = tensor_text(view, "i1"), tensor_text(view, "i32")
        # each carried operand's type on the padded and view shapes
        texts = [(tensor_text(padded, e), tensor_text(view, e)) for _, e in carried]
        selves, partners = [], []
        for i, ((value, _), (full, v)) in enumerate(zip(carried, texts)):
            # An element's partner: the mirror in its block (flip) or the
            # same place in the other half.
            reversed_dims = "1, 2" if flip else "1"
            lines += [
                f"%v{s}_{i} = stablehlo.reshape {value} : ({full}) -> {v}",
                f"%p{s}_{i} = stablehlo.reverse %v{s}_{i}, dims = [{reversed_dims}] : {v}",
            ]
            selves.append((f"%v{s}_{i}", v))
            partners.append((f"%p{s}_{i}", v))
        own = ", ".join(v for _, v in selves[:m] for _ in range(2))
        declarations.append(f"func.func private @{COMPARATOR}_{s}({own}) -> {vb}")
        lt_lines, before_self = _lt(
            f"_{s}",
            f"@{COMPARATOR}_{s}",
            partners[:m] + [partners[pos_at]],
            selves[:m] + [selves[pos_at]],
            m,
            n,
            big,
            vb,
            tensor_text(view, pos_element),
        )
        lines += lt_lines
        # The lower place takes its partner when the partner comes first,
        # the upper one when it does not.
        lines += [
            f"%half{s} = stablehlo.iota dim = 1 : {v32}",
            f"%one{s} = stablehlo.constant dense<1> : {v32}",
            f"%inhi{s} = stablehlo.compare EQ, %half{s}, %one{s}, SIGNED : ({v32}, {v32}) -> {vb}",
            f"%take{s} = stablehlo.xor {before_self}, %inhi{s} : {vb}",
        ]
        for i, ((_, element), (full, v)) in enumerate(zip(carried, texts)):
            lines += [
                f"%o{s}_{i} = stablehlo.select %take{s}, %p{s}_{i}, %v{s}_{i} : {vb}, {v}",
                f"%n{s}_{i} = stablehlo.reshape %o{s}_{i} : ({v}) -> {full}",
            ]
            carried[i] = (f"%n{s}_{i}", element)
    results = []
    for i, element in enumerate(elements):
        value = carried[i][0]
        if big > n:
            limits = ", ".join(f"0:{n if d == dim else e}" for d, e in enumerate(shape))
            lines.append(
                f"%r{i} = stablehlo.slice {value} [{limits}]"
                f" : ({tensor_text(padded, element)}) -> {types[i]}"
            )
            value = f"%r{i}"
        results.append(value)
    args = ", ".join(f"%x{i}: {t}" for i, t in enumerate(types))
    body = "\n".join(f"  {line} {loc}" for line in lines)
    return (
        "\n".join(declarations) + "\n"
        f"func.func @sort({args}) -> ({', '.join(types)}) {{\n{body}\n"
        f"  return {', '.join(results)} : {', '.join(types)} {loc}\n}}",
        steps,
    )


def _lt(tag, callee, a, b, m, n, big, hb, hp) -> tuple[list[str], str]:
    """Lines computing lt(a, b) on a step's view (`hb`, `hp`: its i1 and
    position types), and its name: the
    comparator on the sort's own `m` operands, ties broken by position (the
    last of `a` and `b`), padding (position >= n) after every real element."""
    own = list(zip(a[:m], b[:m]))
    types = ", ".join(f"{x[1]}, {y[1]}" for x, y in own)
    pairs = ", ".join(f"{x[0]}, {y[0]}" for x, y in own)
    swapped = ", ".join(f"{y[0]}, {x[0]}" for x, y in own)
    pa, pb = a[-1][0], b[-1][0]
    lines = [
        f"%cab{tag} = func.call {callee}({pairs}) : ({types}) -> {hb}",
        f"%cba{tag} = func.call {callee}({swapped}) : ({types}) -> {hb}",
        f"%ncba{tag} = stablehlo.not %cba{tag} : {hb}",
        f"%first{tag} = stablehlo.compare LT, {pa}, {pb}, SIGNED : ({hp}, {hp}) -> {hb}",
        f"%tie{tag} = stablehlo.and %ncba{tag}, %first{tag} : {hb}",
        f"%real{tag} = stablehlo.or %cab{tag}, %tie{tag} : {hb}",
    ]
    if big == n:
        return lines, f"%real{tag}"
    return lines + [
        f"%n{tag} = stablehlo.constant dense<{n}> : {hp}",
        f"%pada{tag} = stablehlo.compare GE, {pa}, %n{tag}, SIGNED : ({hp}, {hp}) -> {hb}",
        f"%padb{tag} = stablehlo.compare GE, {pb}, %n{tag}, SIGNED : ({hp}, {hp}) -> {hb}",
        f"%pad{tag} = stablehlo.or %pada{tag}, %padb{tag} : {hb}",
        f"%lt{tag} = stablehlo.select %pad{tag}, %first{tag}, %real{tag} : {hb}, {hb}",
    ], f"%lt{tag}"


def _splice(op: ir.Operation, template: str) -> list[ir.Operation]:
    """Replace the sort `op` by the body of the template's @sort, which
    returns its results; the ops moved in, in order."""
    helper = ir.Module.parse(template, op.context)
    sort = next(
        f.operation
        for f in helper.body.operations
        if ir.StringAttr(f.operation.attributes["sym_name"]).value == "sort"
    )
    block = sort.regions[0].blocks[0]
    for argument, value in zip(block.arguments, op.operands):
        argument.replace_all_uses_with(value)
    inner = [o.operation for o in block.operations]
    for moved in inner[:-1]:
        moved.move_before(op)
    for result, value in zip(op.results, inner[-1].operands):
        result.replace_all_uses_with(value)
    return inner[:-1]


def _apply_comparator(call: ir.Operation, comparator: ir.Block) -> list[ir.Operation]:
    """Replace a placeholder call by the comparator's body on the call's
    shape: its arguments are the call's operands (lhs_0, rhs_0, lhs_1, ...),
    each op recreated elementwise, each constant broadcast. Returns the
    ops created."""
    shape = shape_of(call.results[0].type)
    ip, loc = ir.InsertionPoint(call), call.location
    pairs = list(zip(comparator.arguments, call.operands))
    created = []

    def broadcast(scalar: ir.Value) -> ir.Value:
        element = ir.ShapedType(scalar.type).element_type
        new = ir.Operation.create(
            "stablehlo.broadcast_in_dim",
            results=[ir.RankedTensorType.get(shape, element)],
            operands=[scalar],
            attributes={"broadcast_dimensions": ir.DenseI64ArrayAttr.get([])},
            loc=loc,
            ip=ip,
        )
        created.append(new)
        return new.results[0]

    def lookup(value):
        found = next((new for old, new in pairs if old == value), None)
        if found is None:  # a constant hoisted out of the comparator (refusal)
            owner = defining_op(value)
            assert owner is not None and owner.name == "stablehlo.constant", value
            found = broadcast(value)
            pairs.append((value, found))
        return found

    for inner in comparator.operations:
        inner = inner.operation
        if inner.name == "stablehlo.return":
            call.results[0].replace_all_uses_with(lookup(inner.operands[0]))
            break
        element = ir.ShapedType(inner.results[0].type).element_type
        wide = ir.RankedTensorType.get(shape, element)
        if inner.name == "stablehlo.constant":
            scalar = inner.clone(ip=ip)
            created.append(scalar)
            pairs.append((inner.results[0], broadcast(scalar.results[0])))
            continue
        named = inner.attributes
        new = ir.Operation.create(
            inner.name,
            results=[wide],
            operands=[lookup(v) for v in inner.operands],
            attributes={named[i].name: named[i].attr for i in range(len(named))},
            loc=loc,
            ip=ip,
        )
        pairs.append((inner.results[0], new.results[0]))
        created.append(new)
    call.erase()
    return created


def _is_step_output(op: ir.Operation) -> bool:
    """A step's select of an operand's new values ([rows, 2, J, after]):
    one dispatch each."""
    shape = shape_of(op.results[0].type) if op.name == "stablehlo.select" else None
    return shape is not None and len(shape) == 4 and shape[1] == 2


def rewrite_function(func: ir.Operation, target: Target) -> list[str]:
    """Rewrite every sort of `func` longer than SERIAL_MAX in place (and on
    CUDA every one with a result nobody reads); one log line per sort
    (rewritten, or why not)."""
    log = []
    sorts = [op for op in walk(func) if op.name == SORT]
    for op in sorts:
        where = location_text(op.location)
        why = refusal(op, target.backend == "cuda")
        if why:
            if not why.endswith(f"(at most {SERIAL_MAX})"):
                log.append(f"sort at {where} {LEFT_AS_IT_IS}: {why}")
            continue
        shape = shape_of(op.operands[0].type)
        dim = ir.IntegerAttr(op.attributes["dimension"]).value
        elements = [str(ir.ShapedType(v.type).element_type) for v in op.operands]
        position = _position_operand(op, dim)
        template, steps = _template(shape, dim, elements, position, str(op.location))
        comparator = op.regions[0].blocks[0]
        with op.context, op.location:
            moved = _splice(op, template)
            mark_split_steps([o for o in moved if _is_step_output(o)], "stablehlo.select")
            network = [o for o in moved if o.name != "func.call"]
            for call in [o for o in moved if o.name == "func.call"]:
                network += _apply_comparator(call, comparator)
            for network_op in network:
                network_op.attributes[FORMED_BY_IREE] = ir.UnitAttr.get()
        erase_with_dead_producers(op)
        carried = len(elements) + (position is None)
        # A flip of pairs 1 apart is the half-cleaner of J = 1.
        distinct = len({(j, flip and j > 1) for j, flip in steps})
        log.append(
            f"sort at {where} of {shape[dim]} elements along dim {dim} rewritten as a bitonic "
            f"network: {len(steps)} elementwise steps over {carried} operands, "
            f"{distinct} distinct (IREE sorts serially in one invocation per row)"
        )
    return log


__all__ = ["SERIAL_MAX", "refusal", "rewrite_function"]
