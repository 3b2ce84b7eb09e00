"""A body that reads its own input at its own index by tensor.extract reads
the block argument instead, in the executable sources.

IREE lowers JAX's take_along_axis (cross entropy's `logits[i, labels[i]]`)
to one generic over the labels whose body also extracts the label it
already receives, at `linalg.index`:

    linalg.generic ins(%labels) ... {
    ^bb0(%label: i32, %out: f32):
      %i = linalg.index 0 : index
      %same = tensor.extract %labels[%i]        // == %label
      %x = tensor.extract %logits[%i, clamp(%same)]

On CUDA the loop kernel's tiling then clones the load of %labels into the
body, and Linalg's vectorizer fails on it ("Attempted to vectorize, but
failed": the dispatch ran on IREE's codegen, reported as a FALLBACK; on
SPIR-V it vectorized). An extract of an input whose indexing map is the
identity, at the loop indices in order, is that input's block argument:
replacing it leaves the one real gather.
"""

from iree.compiler import ir

from ..irutil import defining_op, symbol_name, walk


def _identity(map_attr: ir.Attribute) -> bool:
    m = ir.AffineMapAttr(map_attr).value
    return m == ir.AffineMap.get_identity(m.n_dims, m.context)


def _loop_index(v: ir.Value) -> int | None:
    op = defining_op(v)
    if op is None or op.name != "linalg.index":
        return None
    return ir.IntegerAttr(op.attributes["dim"]).value


def _own_extracts(generic: ir.Operation) -> int:
    """Replace the extracts of `generic`'s body that read an identity-mapped
    input at the loop indices by that input's block argument; how many."""
    maps = list(ir.ArrayAttr(generic.attributes["indexing_maps"]))
    inputs = len(generic.operands) - len(generic.results)
    block = generic.regions[0].blocks[0]
    replaced = 0
    for op in [o.operation for o in block.operations]:
        if op.name != "tensor.extract":
            continue
        source, indices = op.operands[0], list(op.operands[1:])
        if [_loop_index(v) for v in indices] != list(range(len(indices))):
            continue
        for k in range(inputs):
            if generic.operands[k] == source and _identity(maps[k]):
                op.results[0].replace_all_uses_with(block.arguments[k])
                op.erase()
                replaced += 1
                break
    return replaced


def own_extracts_in(module: ir.Module) -> tuple[bool, list[str]]:
    """The rewrite on the parsed sources, in place; one line per dispatch it
    changed."""
    log = []
    for func in walk(module.operation):
        if func.name != "func.func":
            continue
        count = sum(_own_extracts(op) for op in walk(func) if op.name == "linalg.generic")
        if count:
            log.append(
                f"{symbol_name(func)}: {count} extract(s) of a body's own input at its own "
                "index read as the block argument"
            )
    return bool(log), log
