"""Merge a dispatch's elementwise roots into one op, in the executable sources.

A training step's forward matmul stores what the backward pass reads: the
pre-activation, its square, the activation, 1 - tanh(...) (JAX's GELU
gradient), each yielded by one of a chain of elementwise linalg.generic ops
that read each other. A kernel tiles one root and fuses what it reads; with
stores from several ops there is no one root, and every strategy refused
such a dispatch ("6 results computed by 3 different ops"), leaving IREE's
default codegen to run the matmul. IREE's own formation merges such chains
with its multi-use elementwise fusion, but not inside the regions the fusion
stage pre-forms. This stage runs that pass,
`iree-dispatch-creation-fuse-multi-use-elementwise-producer`, on exactly
those dispatches: the chain becomes one generic yielding every stored value,
which the strategies take as their root.

Only dispatches whose stored values come from two or more linalg.generic
ops, all of them elementwise (every loop parallel), are touched; the log
says which were merged and which were left and why.

IREE stores an i1 value as i8, widened by an `arith.extui` on the whole
tensor after the generic computing it. Converted to a generic of its own,
the pass merged none; so such a widening is folded into the generic that
computes its operand first (one more result, the value widened in its
body), and the roots are merged as above. jnp.take's bounds check (a mask
stored beside the wrapped index it reads) made such a dispatch in every
embedding lookup: a group no kernel took, a retry and a dispatch of IREE's
own (87 in 38 of sweep 17's Hugging Face models). Another arith op on a
whole tensor among the roots leaves the dispatch as it is.
"""

from iree.compiler import ir, passmanager
from iree.compiler.dialects import linalg

from ..irutil import defining_op, iterator_types, symbol_name, walk
from . import rewrite_sources
from .read import LOAD, STORE

PIPELINE = (
    "func.func(iree-dispatch-creation-fuse-multi-use-elementwise-producer, canonicalize, cse)"
)


def _stored_by(func: ir.Operation) -> list[ir.Operation]:
    """The distinct ops whose results the function stores."""
    found = []
    for op in walk(func):
        if op.name != STORE:
            continue
        producer = defining_op(op.operands[0])
        if producer is not None and not any(producer == f for f in found):
            found.append(producer)
    return found


def _elementwise(op: ir.Operation) -> bool:
    return op.name == "linalg.generic" and all(it == "parallel" for it in iterator_types(op))


def fuse_elementwise_roots(sources: str) -> tuple[str, list[str]]:
    """The executable sources with each dispatch's elementwise roots merged,
    and one line per dispatch with several roots."""
    return rewrite_sources(sources, fuse_roots_in)


def fuse_roots_in(module: ir.Module) -> tuple[bool, list[str]]:
    """fuse_elementwise_roots on the parsed sources, in place."""
    targets, log, folded = [], [], False
    for op in walk(module.operation):
        if op.name != "func.func" or not any(inner.name == LOAD for inner in walk(op)):
            continue
        roots = _stored_by(op)
        if len(roots) < 2:
            continue
        name = symbol_name(op)
        if any(r.name == WIDENING for r in roots) and all(
            _elementwise(r) or _foldable_widening(r) for r in roots
        ):
            for r in [r for r in roots if r.name == WIDENING]:
                _fold_widening(r)
            folded = True
            log.append(f"{name}: i1 widenings folded into the generics computing them")
            roots = _stored_by(op)
            if len(roots) < 2:
                continue
        if all(_elementwise(r) for r in roots):
            targets.append((name, op, len(roots)))
        else:
            kinds = sorted({r.name for r in roots if not _elementwise(r)})
            log.append(f"{name}: {len(roots)} roots not merged: not all elementwise ({kinds})")
    changed = folded
    for name, func, count in targets:
        passmanager.PassManager.parse(PIPELINE, module.context).run(func)
        left = len(_stored_by(func))
        if left < count:
            changed = True
            log.append(f"{name}: {count} elementwise roots merged into {left}")
        else:
            log.append(f"{name}: {count} elementwise roots left as they are (the pass merged none)")
    return changed, log


WIDENING = "arith.extui"


def _foldable_widening(op: ir.Operation) -> bool:
    """A widening of a whole tensor computed by an elementwise generic
    without nested regions in its body."""
    if op.name != WIDENING or not isinstance(op.operands[0].type, ir.RankedTensorType):
        return False
    producer = defining_op(op.operands[0])
    return (
        producer is not None
        and _elementwise(producer)
        and not any(len(inner.regions) for inner in producer.regions[0].blocks[0].operations)
    )


def _fold_widening(widening: ir.Operation) -> None:
    """Replace the generic computing `widening`'s operand by one that also
    yields the widened value (through the map of the widened result), and
    the widening by that result."""
    value = widening.operands[0]
    generic = defining_op(value)
    index = ir.OpResult(value).result_number
    body = generic.regions[0].blocks[0]
    inputs = [generic.operands[i] for i in range(_inputs(generic))]
    outputs = list(generic.operands)[len(inputs) :]
    maps = list(ir.ArrayAttr(generic.attributes["indexing_maps"]))
    wide = ir.RankedTensorType(widening.results[0].type)
    with generic.location, ir.InsertionPoint(generic):
        init = ir.Operation.create(
            "tensor.empty", results=[wide], operands=[], attributes={}
        ).results[0]
        merged = linalg.GenericOp(
            [r.type for r in generic.results] + [wide],
            inputs,
            outputs + [init],
            ir.ArrayAttr.get(maps + [maps[len(inputs) + index]]),
            generic.attributes["iterator_types"],
        )
    args = [a.type for a in body.arguments] + [wide.element_type]
    block = merged.regions[0].blocks.append(*args, arg_locs=[generic.location] * len(args))
    # (value of the old body, its value in the new one); Values compare equal
    # across Python wrappers, hashes of their owners do not.
    mapping = list(zip(body.arguments, block.arguments))

    def mapped(v: ir.Value) -> ir.Value:
        return next((new for old, new in mapping if old == v), v)

    with ir.InsertionPoint(block), generic.location:
        for inner in body.operations:
            inner = inner.operation
            if inner.name == "linalg.yield":
                yielded = [mapped(v) for v in inner.operands]
                widened = ir.Operation.create(
                    WIDENING, results=[wide.element_type], operands=[yielded[index]]
                ).results[0]
                ir.Operation.create("linalg.yield", operands=[*yielded, widened])
                continue
            clone = ir.Operation.create(
                inner.name,
                results=[r.type for r in inner.results],
                operands=[mapped(v) for v in inner.operands],
                attributes={name: inner.attributes[name] for name in inner.attributes},
            )
            mapping += list(zip(inner.results, clone.results))
    for old_result, new_result in zip(generic.results, merged.results):
        old_result.replace_all_uses_with(new_result)
    widening.results[0].replace_all_uses_with(merged.results[len(generic.results)])
    widening.erase()
    generic.erase()


def _inputs(generic: ir.Operation) -> int:
    sizes = ir.DenseI32ArrayAttr(generic.attributes["operandSegmentSizes"])
    return sizes[0]
