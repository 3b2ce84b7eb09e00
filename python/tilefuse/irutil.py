"""Small helpers over the MLIR Python bindings, shared by every stage."""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from iree.compiler import ir

PARAM_TAG = "tilefuse.param"


def element_bits(type_: ir.Type) -> int | None:
    """Bit width of a scalar type, or of a shaped type's elements; None for
    types of no width (index)."""
    try:
        type_ = ir.ShapedType(type_).element_type
    except (ValueError, TypeError):
        pass
    for cls in (ir.IntegerType, ir.FloatType):
        try:
            return cls(type_).width
        except (ValueError, TypeError):
            continue
    return None


def walk(op):
    """Every operation nested in `op` (pre-order), as ir.Operation."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner = inner.operation
                yield inner
                yield from walk(inner)


def map_dims(amap: ir.AffineMap) -> list[int] | None:
    """The loop dim of each result of `amap`, or None when a result is not
    a plain dim (a constant, a sum, ...)."""
    dims = []
    for expr in amap.results:
        expr = expr.maybe_downcast()
        if not isinstance(expr, ir.AffineDimExpr):
            return None
        dims.append(expr.position)
    return dims


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The op whose result `value` is, or None for a block argument."""
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def user_op(use) -> ir.Operation:
    """The op that makes a use (an OpOperand) of a value."""
    owner = use.owner
    return owner.operation if hasattr(owner, "operation") else owner


def holds(op: ir.Operation, name: str) -> bool:
    """Some op nested in `op` is named `name`."""
    return any(inner.name == name for inner in walk(op))


def symbol_name(op) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def set_tagged(op, setters: dict[str, dict[str, ir.Attribute]]) -> set[str]:
    """Set attributes on the ops under `op` tagged `tilefuse.param = <tag>`.

    `setters` maps a tag to {attribute name: value}; returns the tags found.
    """
    seen = set()
    for inner in walk(op):
        if PARAM_TAG in inner.attributes:
            tag = ir.StringAttr(inner.attributes[PARAM_TAG]).value
            for attr, value in setters.get(tag, {}).items():
                inner.attributes[attr] = value
            seen.add(tag)
    return seen


def iterator_types(op: ir.Operation) -> list[str]:
    """A linalg op's iterator types, "parallel" or "reduction" per loop."""
    return [
        "reduction" if "reduction" in str(a) else "parallel"
        for a in ir.ArrayAttr(op.attributes["iterator_types"])
    ]


# One MLIR context per kind for the length of one compile (one_context_per_
# compile): creating a context loads every dialect, which costs (measured in
# docs/findings.md, 'MLIR contexts'). Outside such a scope each call gets a
# fresh context, so nothing (large constants among it) outlives the compile
# that parsed it.
_SCOPE: ContextVar[dict | None] = ContextVar("tilefuse_mlir_contexts", default=None)


@contextmanager
def one_context_per_compile() -> Iterator[None]:
    token = _SCOPE.set({})
    try:
        yield
    finally:
        _SCOPE.reset(token)


def context(unregistered: bool = False) -> ir.Context:
    """An MLIR context; `unregistered` allows ops of dialects it does not
    know (executable sources and printed kernels carry IREE's)."""
    scope = _SCOPE.get()
    if scope is not None and unregistered in scope:
        return scope[unregistered]
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = unregistered
    if scope is not None:
        scope[unregistered] = ctx
    return ctx


def translation_launch(func: ir.Operation) -> tuple[tuple[int, int, int], int]:
    """(workgroup size padded to three dims, subgroup size; 0 when unset) of
    a finished kernel's `translation_info`, read through IREE's attribute
    bindings."""
    from iree.compiler.dialects import iree_codegen

    info = iree_codegen.TranslationInfoAttr(func.attributes["translation_info"])
    size = (list(info.workgroup_size) + [1, 1, 1])[:3]
    return (size[0], size[1], size[2]), info.subgroup_size or 0


def file_positions(loc) -> Iterator[tuple[str, int, int]]:
    """(file, line, column) of every file location in `loc`, through callsite
    (inlined calls), fused and named locations."""
    if hasattr(loc, "filename"):
        yield loc.filename, loc.start_line, loc.start_col
    elif hasattr(loc, "callee"):
        yield from file_positions(loc.callee)
        yield from file_positions(loc.caller)
    elif hasattr(loc, "locations"):
        for inner in loc.locations:
            yield from file_positions(inner)
    elif hasattr(loc, "child_loc"):
        yield from file_positions(loc.child_loc)
