"""Read the executable sources IREE wrote in phase 1: one record per dispatch.

Each dispatch is a func.func inside hal.executable / variant / builtin.module.
The strategy chooser needs its root (the op whose results are stored), the
root's iteration space, and which other ops sit in the dispatch.
"""

import math
from dataclasses import dataclass, field

from iree.compiler import ir
from iree.compiler.dialects import linalg

from ..fusion.graph import value_key
from ..fusion.indexing import IndexingMap, stride
from ..irutil import context, defining_op, iterator_types, symbol_name, walk

STORE = "iree_tensor_ext.dispatch.tensor.store"
LOAD = "iree_tensor_ext.dispatch.tensor.load"
SUBSPAN = "hal.interface.binding.subspan"
# Ops that carry no computation of their own inside a dispatch.
PLUMBING = {
    "arith.constant",
    SUBSPAN,
    "hal.interface.constant.load",
    "tensor.empty",
    LOAD,
    STORE,
    "func.return",
}


@dataclass
class Operand:
    shape: list[int]  # -1 for a dynamic size
    element_type: str  # "f32", "bf16", "i32", ...
    bits: int


@dataclass
class OpSummary:
    """One computing op of a dispatch (strategies that transform every op, not
    only the root, check them: e.g. the softmax kernel)."""

    name: str
    iterator_types: list[str] = field(default_factory=list)  # [] if not structured
    combiners: list[str | None] = field(default_factory=list)  # see Dispatch.combiners
    result_bits: list[int] = field(default_factory=list)  # element width per result
    loop_ranges: list[int] = field(default_factory=list)  # as Dispatch.loop_ranges
    # Some input of rank >= 2 is not read along the innermost loop (a
    # transposed read: strided on the rows the kernel walks).
    strided_input: bool = False
    # Its body reads a loop index (linalg.index: an iota, a one-hot).
    indexes: bool = False


@dataclass
class Contraction:
    """The one contraction of a dispatch (matmul, batch_matmul, or a generic
    that is one), as linalg's contraction interface reads it."""

    op: str  # linalg.matmul, linalg.batch_matmul, linalg.generic, ...
    batch: list[int]  # extent of each batch loop, then of each M, N, K loop
    m: list[int]
    n: list[int]
    k: list[int]
    lhs: Operand
    rhs: Operand
    result: Operand
    # The innermost (contiguous) axis of each operand is a K loop (lhs: A is
    # [M, K]; rhs: B is [N, K], a transposed B) or an M / N loop.
    lhs_k_inner: bool
    rhs_k_inner: bool
    result_n_inner: bool  # the result is [.., M, N] (not transposed)
    init: str | None  # the op making its accumulator (linalg.fill), None if loaded
    # Its loops are ordered batch, M, N, K (as linalg.matmul's and
    # batch_matmul's are): tile sizes of the result then apply to it as is.
    loops_bmnk: bool = False
    # It is the op whose result the dispatch stores (a bare contraction),
    # not an epilogue's input. Not read from op names: an epilogue and a
    # contraction IREE leaves generic (a batched vector-matrix product) are
    # both linalg.generic.
    is_root: bool = False
    # Per operand (lhs, rhs): it is computed in the dispatch by a prologue,
    # an elementwise linalg.generic of loads read by the contraction alone
    # (IREE's formation fuses a dequantization, convert(w) * scale, into
    # the dispatch of the contraction that reads it).
    prologues: tuple[bool, bool] = (False, False)


@dataclass
class Dispatch:
    name: str  # the dispatch function's name (also the export name)
    executable: str
    location: str
    ops: list[str]  # names of the computing ops, in program order
    root_op: str | None = None
    iterator_types: list[str] = field(default_factory=list)
    loop_ranges: list[int] = field(default_factory=list)
    inputs: list[Operand] = field(default_factory=list)
    outputs: list[Operand] = field(default_factory=list)
    output_maps_identity: bool = False
    input_producers: list[str | None] = field(default_factory=list)  # op per root input
    problem: str | None = None  # why no root could be identified
    # The tilefuse fusion group this dispatch was formed from (None: IREE's own).
    group_name: str | None = None
    group_kind: str | None = None  # loop, row-reduction, softmax-like, matmul, ...
    group_hero: str | None = None  # the hero's StableHLO op name
    # Loop dim each root input reads along its innermost (contiguous) axis;
    # None when that axis is not indexed by a plain loop dim.
    input_inner_dims: list[int | None] = field(default_factory=list)
    # Ops of the root's body that combine into the result (e.g. arith.addf for
    # a sum), one per result; None when a result is not such a combine.
    combiners: list[str | None] = field(default_factory=list)
    # Every computing op, in program order (the same ops as `ops`).
    op_summaries: list[OpSummary] = field(default_factory=list)
    # Root inputs produced by a tensor.pad: position -> why a kernel cannot
    # read through that pad with masked loads, or None when it can.
    pad_inputs: dict[int, str | None] = field(default_factory=dict)
    # The root's body reads a tensor by tensor.extract at computed indices (a
    # gather: embedding lookups, RoPE's rotate_half after IREE's rewrites).
    root_gathers: bool = False
    # The bytes every binding's offset into its buffer is a multiple of (the
    # gcd of their constant offsets; 0: all at offset 0). A concatenate's
    # piece is written at an offset: 24 bytes for [6 x f32, 12 x f32].
    offset_alignment: int = 0
    # The root's inputs computed by an arith op on a whole tensor (a bool
    # input's arith.trunci from the i8 IREE stores it as), by op name.
    arith_producers: list[str] = field(default_factory=list)
    # Some op sign-extends an integer narrower than 32 bits (arith.extsi:
    # an i8 -> i16 convert) or truncates a 16-bit one to 8 bits (arith.trunci:
    # a ui16 -> ui8 convert), which limits SPIR-V vectors
    # (Target.vector_elements).
    repacks_narrow_ints: bool = False
    # Each root input is read in the root's loop order (identity map).
    input_maps_identity: list[bool] = field(default_factory=list)
    # Per root loop, per root operand ("in0", .., "out0", ..): the element
    # strides between consecutive values of that loop (fusion/indexing.py):
    # (1,) coalesced, (0,) one element for all lanes, anything else strided.
    # Which loop a subgroup's lanes walk is the strategy's (Strategy.lane_loop;
    # the innermost for most kernels).
    lane_strides_by_loop: list[list[tuple[str, tuple[int, ...]]]] = field(default_factory=list)
    # The root's indexing maps (inputs, then outputs); [] for a named root.
    root_maps: list[ir.AffineMap] = field(default_factory=list)
    # Every contraction among the computing ops (a matmul group has one).
    contractions: list[Contraction] = field(default_factory=list)
    # The stored value is this arith op applied to a whole tensor (IREE
    # widens a comparison's i1 result to i8 so); the record then describes
    # the all-parallel linalg.generic that convert-elementwise-to-linalg
    # writes for it, which only the loop kernel makes (its step "root_cast").
    root_cast: str | None = None
    # The root_cast widens a linalg.generic that reads nothing (a causal
    # mask built from linalg.index): step "tensor_arith" fuses the two, and
    # the root it leaves has no inputs whose producers could fuse.
    cast_of_no_inputs: bool = False
    # Every tensor the dispatch loads (what fused producers read too).
    loaded: list[Operand] = field(default_factory=list)
    # The first complex element type among the dispatch's values
    # ("complex<f32>"), None if it has none: no kernel vectorizes them.
    complex_type: str | None = None
    # The first integer type of 2 to 7 bits among the stored tensors ("i4",
    # or "i1 (packed)" for i1 under IREE's packed_storage encoding), None if
    # none: IREE packs them, and on SPIR-V only its own codegen emulates a
    # packed store (a kernel's vector store of i4 fails there).
    sub_byte_store: str | None = None
    # The first op with regions inside a computing op's body ("scf.for":
    # StableHLO's integer power is a loop over the exponent's bits), None if
    # none: IREE's vectorizer does not take such a body, so no kernel does.
    body_loop: str | None = None
    # A value computed from a reduction in this dispatch and read by a later
    # op through a permutation that moves the innermost dim (what read, how):
    # IREE 3.13's SPIR-V codegen computes such a dispatch wrong.
    transposed_reduction_read: str | None = None
    # The root is elementwise on one reduction's result (an epilogue: a
    # mean's division): that reduction, described as if it were the root
    # (its `epilogue_operand`: the root's input it produces); else None.
    reduction_hero: "Dispatch | None" = None
    epilogue_operand: int | None = None
    # Some root input is indexed by a sum over a reduction loop (a
    # convolution's window: x[w + kw]), which no kernel's tiling of the
    # reduction handles.
    window_reads: bool = False

    @property
    def lane_strides(self) -> list[tuple[str, tuple[int, ...]]]:
        """The strides along the innermost loop."""
        return self.lane_strides_by_loop[-1] if self.lane_strides_by_loop else []

    @property
    def kind(self) -> str:
        if self.root_op is None:
            return "unknown"
        if self.root_op in ("linalg.matmul", "linalg.batch_matmul") or (
            "reduction" in self.iterator_types
            and len(self.inputs) == 2
            and self.root_op == "linalg.generic"
            and _looks_like_contraction(self)
        ):
            return "matmul"
        if "reduction" in self.iterator_types:
            return "reduction"
        if self.root_op == "linalg.generic":
            return "elementwise"
        return "other"

    def generic_root_problem(
        self, converts_casts: bool = False, takes_gathers: bool = False
    ) -> str | None:
        """Why this dispatch has no linalg.generic root a strategy can tile,
        or None: the opening check of every strategy's chooser.
        `converts_casts`: the strategy writes a root_cast as a generic.
        `takes_gathers`: the strategy vectorizes tensor.extract in the root's
        body (vectorize_nd_extract; the loop kernel)."""
        if self.problem:
            return self.problem
        if self.root_cast and not converts_casts:
            return f"root op is {self.root_cast} on a tensor, not linalg.generic"
        if self.root_op != "linalg.generic":
            return f"root op is {self.root_op}, not linalg.generic"
        if self.window_reads:
            # A 1-D depthwise convolution (x[w + kw, c] * k[kw, c]) looked
            # like a column reduction, and its kernel's split of kw read the
            # wrong elements (relative error 1.1).
            return (
                "an input is read at a sum of loop indices over a reduction loop "
                "(a convolution's window), which no kernel's tiling handles"
            )
        if self.root_gathers and not takes_gathers:
            # Measured on the corpus (embedding, llama's RoPE): the other
            # strategies' vectorize steps fail on it ("Attempted to
            # vectorize, but failed"); the loop kernel takes such a root.
            return (
                "root's body gathers by tensor.extract, which only the loop kernel "
                "vectorizes (vectorize_nd_extract)"
            )
        return None


def _looks_like_contraction(d: Dispatch) -> bool:
    return len(d.iterator_types) >= 3 and d.iterator_types.count("reduction") == 1


def _cast(cls, t):
    try:
        return cls(t)
    except (ValueError, TypeError):
        return None


def _element(t: ir.Type) -> tuple[str, int]:
    shaped = _cast(ir.ShapedType, t)
    et = shaped.element_type if shaped is not None else t
    for cls in (ir.IntegerType, ir.FloatType):
        typed = _cast(cls, et)
        if typed is not None:
            return str(et), typed.width
    return str(et), 64


def _lane_strides(maps, operands, num_inputs: int, loop_ranges: list[int], lane_loop: int):
    if not loop_ranges or any(n <= 0 for n in loop_ranges):
        return []
    ranges = tuple((0, n - 1) for n in loop_ranges)
    found = []
    for i, (amap, value) in enumerate(zip(maps, operands)):
        shape = _operand(value).shape
        if any(n < 0 for n in shape):
            return []
        name = f"in{i}" if i < num_inputs else f"out{i - num_inputs}"
        steps = stride(IndexingMap(amap, ranges), shape, lane_loop)
        found.append((name, tuple(sorted(steps))))
    return found


def coalescing_text(lane_strides) -> str:
    """`in0 coalesced, in1 broadcast, out0 strided (3400)`."""
    words = []
    for name, steps in lane_strides:
        if steps == (1,):
            words.append(f"{name} coalesced")
        elif steps == (0,):
            words.append(f"{name} broadcast")
        else:
            words.append(f"{name} strided ({', '.join(map(str, steps))})")
    return ", ".join(words)


def _operand(v: ir.Value) -> Operand:
    name, bits = _element(v.type)
    shape = []
    st = _cast(ir.ShapedType, v.type)
    if st is not None:
        shape = [-1 if st.is_dynamic_dim(i) else st.get_dim_size(i) for i in range(st.rank)]
    return Operand(shape=shape, element_type=name, bits=bits)


def _loop_ranges(maps, operands: list[Operand], rank: int) -> list[int]:
    """Size of each loop, read off the operands that index it directly."""
    ranges = [-1] * rank
    for amap, operand in zip(maps, operands):
        for i, expr in enumerate(amap.results):
            dim = _cast(ir.AffineDimExpr, expr)
            if dim is not None and i < len(operand.shape) and operand.shape[i] >= 0:
                ranges[dim.position] = operand.shape[i]
    return ranges


def defining_op_name(v: ir.Value) -> str | None:
    op = defining_op(v)
    return op.name if op is not None else None


PUSH_CONSTANT_SOURCES = ("hal.interface.constant.load", "arith.constant")


def _push_constant_scalars(top: list[ir.Operation]) -> list[ir.Operation]:
    """The ops among `top` that compute scalars from push constants alone
    (hal.interface.constant.load, constants, other such ops): a binding's
    offset when IREE dispatches a slice of a larger buffer, a runtime flag
    (an i32 truncated to i1) that a body reads. Uniform per dispatch, no
    work of the kernel's: the strategies transform the linalg ops around
    them, which read their results as captured scalars."""
    found: list[ir.Operation] = []
    for op in top:  # producers come first
        if op.name in PLUMBING or op.regions or not op.results:
            continue
        scalar = all(not isinstance(r.type, ir.ShapedType) for r in op.results)
        sources = [defining_op(v) for v in op.operands]
        if (
            scalar
            and sources
            and all(
                src is not None and (src.name in PUSH_CONSTANT_SOURCES or src in found)
                for src in sources
            )
        ):
            found.append(op)
    return found


def _analyse(func, executable: str) -> Dispatch:
    name = symbol_name(func)
    top = [op.operation for op in func.regions[0].blocks[0].operations]
    uniform = _push_constant_scalars(top)
    work = [op for op in top if op.name not in PLUMBING and op not in uniform]
    d = Dispatch(
        name=name,
        executable=executable,
        location=str(func.location),
        ops=[op.name for op in work],
    )
    d.op_summaries = [_summary(op) for op in work]
    d.loaded = [_operand(op.results[0]) for op in top if op.name == LOAD]
    d.complex_type = _complex_type(func)
    d.body_loop = _body_loop(func)
    d.transposed_reduction_read = _transposed_reduction_read(work)
    d.offset_alignment = _offset_alignment(top)
    contraction_ops = [(op, c) for op in top if (c := _contraction(op)) is not None]
    d.contractions = [c for _, c in contraction_ops]
    stores = [op for op in top if op.name == STORE]
    d.sub_byte_store = _sub_byte_type([s.operands[0] for s in stores])
    if not stores:
        d.problem = "dispatch stores no result"
        return d
    roots = {}
    for s in stores:
        owner = s.operands[0].owner
        roots[str(owner.operation) if hasattr(owner, "operation") else "arg"] = owner
    if len(roots) != 1:
        d.problem = f"{len(stores)} results computed by {len(roots)} different ops"
        return d
    root = next(iter(roots.values()))
    if not hasattr(root, "operation"):
        d.problem = "stored value is not computed by an op"
        return d
    root = root.operation
    for op, c in contraction_ops:
        c.is_root = op == root
    if tensor_arith(root):
        return _describe_root_cast(d, root)
    _describe_root(d, root, func)
    d.reduction_hero = _reduction_hero(d, root, work, func)
    return d


def reduction_under(root: ir.Operation) -> tuple[int, ir.Operation] | None:
    """The one reduction an all-parallel linalg.generic root of one result
    reads (its epilogue's input: a mean's division of a sum, a norm's
    sqrt), with that input's position; None if it reads none or several."""
    if root.name != "linalg.generic" or "reduction" in iterator_types(root):
        return None
    if len(root.results) != 1:
        return None
    num_inputs = ir.DenseI32ArrayAttr(root.attributes["operandSegmentSizes"])[0]
    found = [
        (i, op)
        for i, op in enumerate(defining_op(v) for v in root.operands[:num_inputs])
        if op is not None and op.name == "linalg.generic" and "reduction" in iterator_types(op)
    ]
    return found[0] if len(found) == 1 else None


def _reduction_hero(d: Dispatch, root, work: list, func) -> "Dispatch | None":
    """The reduction under the root (reduction_under), described as the
    root of the dispatch without the epilogue (ops: the others)."""
    under = reduction_under(root)
    if under is None:
        return None
    index, hero = under
    others = [i for i, op in enumerate(work) if op != root]
    described = Dispatch(
        name=d.name,
        executable=d.executable,
        location=d.location,
        ops=[d.ops[i] for i in others],
    )
    described.op_summaries = [d.op_summaries[i] for i in others]
    described.loaded = d.loaded
    described.offset_alignment = d.offset_alignment
    _describe_root(described, hero, func)
    described.epilogue_operand = index
    return described


def _describe_root(d: Dispatch, root, func) -> None:
    """The root's fields of `d`: its op, loops, operands, producers, maps."""
    d.root_op = root.name
    attrs = root.attributes
    if "iterator_types" in attrs:
        d.iterator_types = iterator_types(root)
    elif root.name.startswith("linalg.") and root.name != "linalg.generic":
        d.problem = f"named op {root.name} (generalize it first)"
    num_inputs = 0
    if "operandSegmentSizes" in attrs:
        num_inputs = ir.DenseI32ArrayAttr(attrs["operandSegmentSizes"])[0]
    operands = list(root.operands)
    d.inputs = [_operand(v) for v in operands[:num_inputs]]
    d.outputs = [_operand(v) for v in root.results]
    d.input_producers = [defining_op_name(v) for v in operands[:num_inputs]]
    producers = {defining_op(v) for v in operands[:num_inputs]} - {None}
    d.arith_producers = sorted(p.name for p in producers if tensor_arith(p))
    if "indexing_maps" in attrs and "iterator_types" in attrs:
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(attrs["indexing_maps"])]
        identity = ir.AffineMap.get_identity(len(d.iterator_types), func.context)
        d.output_maps_identity = all(m == identity for m in maps[num_inputs:])
        d.loop_ranges = _loop_ranges(maps, [_operand(v) for v in operands], len(identity.results))
        d.input_inner_dims = [_inner_dim(m) for m in maps[:num_inputs]]
        d.input_maps_identity = [m == identity for m in maps[:num_inputs]]
        reductions = {i for i, it in enumerate(d.iterator_types) if it == "reduction"}
        d.window_reads = any(
            _expression_dims(e) & reductions
            for m in maps[:num_inputs]
            for e in m.results
            if _cast(ir.AffineDimExpr, e) is None
        )
        d.lane_strides_by_loop = [
            _lane_strides(maps, operands, num_inputs, d.loop_ranges, loop)
            for loop in range(len(d.loop_ranges))
        ]
        d.root_maps = maps
        d.pad_inputs = {
            i: _pad_problem(v.owner.operation, maps[i] == identity)
            for i, v in enumerate(operands[:num_inputs])
            if defining_op_name(v) == "tensor.pad"
        }
    d.combiners = _combiners(root, num_inputs)
    d.root_gathers = any(op.name == "tensor.extract" for op in walk(root))
    d.repacks_narrow_ints = any(_repacks_narrow_ints(op) for op in walk(func))
    if not d.loop_ranges:
        # A named contraction root (a bare matmul) has no iterator_types:
        # its loops, for explain, are the contraction's.
        for c in d.contractions:
            if c.op == root.name:
                d.loop_ranges = [*c.batch, *c.m, *c.n, *c.k]


def _offset_alignment(top: list[ir.Operation]) -> int:
    """The gcd of the bindings' constant byte offsets (an offset passed as
    a push constant, unknown here, is left out)."""
    alignment = 0
    for op in top:
        if op.name != "hal.interface.binding.subspan" or not op.operands:
            continue
        offset = defining_op(op.operands[0])
        if offset is not None and offset.name == "arith.constant":
            alignment = math.gcd(alignment, ir.IntegerAttr(offset.attributes["value"]).value)
    return alignment


def _repacks_narrow_ints(op: ir.Operation) -> bool:
    # (arith.extsi and trunci take integers only: their widths are the question.)
    if op.name == "arith.extsi":
        return _element(op.operands[0].type)[1] < 32
    if op.name == "arith.trunci":
        return (_element(op.operands[0].type)[1], _element(op.results[0].type)[1]) == (16, 8)
    return False


def _complex_type(func) -> str | None:
    for op in walk(func):
        for value in op.results:
            t = value.type
            element = t.element_type if isinstance(t, ir.ShapedType) else t
            if isinstance(element, ir.ComplexType):
                return str(element)
    return None


def _body_loop(func) -> str | None:
    for op in walk(func):
        if op.name.startswith("linalg."):
            for inner in walk(op):
                if len(inner.regions):
                    return inner.name
    return None


def _transposed_reduction_read(work: list[ir.Operation]) -> str | None:
    """The first read of a value computed from a reduction of the same
    dispatch through a map that is not row-aligned: one whose results are
    not the op's outer loops in order, so that the reduction's rows meet
    the op's inner loops (a softmax read transposed by the head mask's
    multiply; row sums broadcast along columns; a column sum dividing its
    columns). IREE tiles such a dispatch by the reduction's rows, and the
    read needs other rows' results."""
    reduced: set = set()  # the values a reduction's result flows into
    for op in work:
        if not op.name.startswith("linalg."):
            continue
        reads = [value_key(v) in reduced for v in op.operands]
        if op.name == "linalg.generic" and "indexing_maps" in op.attributes:
            maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
            for read, amap in zip(reads, maps):
                dims = [_cast(ir.AffineDimExpr, e) for e in amap.results]
                aligned = [d.position if d else None for d in dims] == list(range(len(dims)))
                if read and not aligned:
                    return f"{op.name} reads a reduction's result through {amap}"
        reduces = op.name == "linalg.softmax" or (
            "iterator_types" in op.attributes and "reduction" in iterator_types(op)
        )
        if reduces or any(reads):
            reduced.update(value_key(r) for r in op.results)
    return None


def _sub_byte_type(values) -> str | None:
    for value in values:
        element = ir.ShapedType(value.type).element_type
        if isinstance(element, ir.IntegerType) and 1 < element.width < 8:
            return str(element)
        # i1 is stored a byte each, unless an encoding packs it
        # (#iree_encoding.packed_storage: eight to a byte).
        if isinstance(element, ir.IntegerType) and element.width == 1:
            encoding = ir.RankedTensorType(value.type).encoding
            if encoding is not None and "packed_storage" in str(encoding):
                return "i1 (packed)"
    return None


def tensor_arith(op: ir.Operation) -> bool:
    """An arith op on whole ranked tensors of one static shape."""
    if not op.name.startswith("arith.") or not op.operands or len(op.results) != 1:
        return False
    types = [v.type for v in (*op.operands, *op.results)]
    shapes = {tuple(t.shape) for t in types if isinstance(t, ir.RankedTensorType)}
    return (
        all(isinstance(t, ir.RankedTensorType) for t in types)
        and len(shapes) == 1
        and all(n >= 0 for n in next(iter(shapes)))
    )


def _describe_root_cast(d: Dispatch, op: ir.Operation) -> Dispatch:
    """`d` with its root the all-parallel generic that
    convert-elementwise-to-linalg writes for `op`: the op's operands in,
    its result out, every map the identity."""
    shape = list(ir.RankedTensorType(op.results[0].type).shape)
    rank = len(shape)
    identity = ir.AffineMap.get_identity(rank, op.context)
    operands = [*op.operands, *op.results]
    d.root_cast = op.name
    d.root_op = "linalg.generic"
    d.iterator_types = ["parallel"] * rank
    d.inputs = [_operand(v) for v in op.operands]
    d.outputs = [_operand(v) for v in op.results]
    d.input_producers = [defining_op_name(v) for v in op.operands]
    sources = [defining_op(v) for v in op.operands]
    d.cast_of_no_inputs = all(
        src is not None and src.name == "linalg.generic" and len(src.operands) == len(src.results)
        for src in sources
    )
    d.output_maps_identity = True
    d.root_maps = [identity] * len(operands)
    d.loop_ranges = shape
    d.input_inner_dims = [rank - 1 if rank else None] * len(d.inputs)
    d.input_maps_identity = [True] * len(d.inputs)
    d.lane_strides_by_loop = [
        _lane_strides(d.root_maps, operands, len(d.inputs), d.loop_ranges, loop)
        for loop in range(rank)
    ]
    return d


def _contraction(op) -> Contraction | None:
    if not op.name.startswith("linalg.") or not linalg.isa_contraction_op(op):
        return None
    dims = linalg.infer_contraction_dimensions(op)
    maps = [ir.AffineMapAttr(m).value for m in linalg.get_indexing_maps(op)]
    lhs, rhs, acc = list(op.operands)[:3]
    operands = [_operand(v) for v in (lhs, rhs, acc)]
    ranges = _loop_ranges(maps, operands, maps[0].n_dims)
    k = set(dims.k)
    return Contraction(
        op=op.name,
        batch=[ranges[i] for i in dims.batch],
        m=[ranges[i] for i in dims.m],
        n=[ranges[i] for i in dims.n],
        k=[ranges[i] for i in dims.k],
        lhs=operands[0],
        rhs=operands[1],
        result=_operand(op.results[0]),
        lhs_k_inner=_inner_dim(maps[0]) in k,
        rhs_k_inner=_inner_dim(maps[1]) in k,
        result_n_inner=_inner_dim(maps[2]) in set(dims.n),
        init=defining_op_name(acc),
        loops_bmnk=[*dims.batch, *dims.m, *dims.n, *dims.k] == list(range(maps[0].n_dims)),
        prologues=(_prologue(lhs), _prologue(rhs)),
    )


def _prologue(value: ir.Value) -> bool:
    """`value` is the one result of an elementwise linalg.generic whose
    inputs are all loads and whose only reader is the contraction (see
    Contraction.prologues)."""
    op = defining_op(value)
    if op is None or op.name != "linalg.generic" or len(op.results) != 1:
        return False
    if "reduction" in iterator_types(op) or any(i.name == "linalg.index" for i in walk(op)):
        return False
    if sum(1 for _ in value.uses) != 1:
        return False
    num_inputs = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0]
    return all(defining_op_name(v) == LOAD for v in list(op.operands)[:num_inputs])


def _pad_problem(pad, read_in_place: bool) -> str | None:
    """Why a kernel cannot read the root's input through this tensor.pad with
    masked vector loads (the mask is the source's bounds, the masked-off
    lanes take the padding value), or None."""
    if not read_in_place:
        return "the root reads the pad through a non-identity map"
    source = pad.operands[0]
    if defining_op_name(source) != LOAD:
        return "the pad's source is computed in the dispatch, not loaded"
    # A dynamic low pad shows as a negative sentinel in static_low: nonzero too.
    if any(ir.DenseI64ArrayAttr(pad.attributes["static_low"])):
        return "low padding (only high padding is a bounds check)"
    body = pad.regions[0].blocks[0]
    value = list(body.operations)[-1].operands[0]
    if defining_op_name(value) != "arith.constant":
        return "padding value is not a constant"
    return None


def _summary(op) -> OpSummary:
    attrs = op.attributes
    s = OpSummary(name=op.name, result_bits=[_element(r.type)[1] for r in op.results])
    s.indexes = any(inner.name == "linalg.index" for inner in walk(op))
    if "iterator_types" in attrs:
        s.iterator_types = iterator_types(op)
        num_inputs = 0
        if "operandSegmentSizes" in attrs:
            num_inputs = ir.DenseI32ArrayAttr(attrs["operandSegmentSizes"])[0]
        s.combiners = _combiners(op, num_inputs)
        if "indexing_maps" in attrs:
            maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(attrs["indexing_maps"])]
            operands = [_operand(v) for v in op.operands]
            s.loop_ranges = _loop_ranges(maps, operands, len(s.iterator_types))
            innermost = len(s.iterator_types) - 1
            s.strided_input = any(
                len(amap.results) >= 2 and _inner_dim(amap) != innermost
                for amap in maps[:num_inputs]
            )
    return s


def _expression_dims(expr) -> set[int]:
    """The loop dims an affine expression reads."""
    dim = _cast(ir.AffineDimExpr, expr)
    if dim is not None:
        return {dim.position}
    binary = _cast(ir.AffineBinaryExpr, expr)
    if binary is None:
        return set()
    return _expression_dims(binary.lhs) | _expression_dims(binary.rhs)


def _inner_dim(amap) -> int | None:
    if not amap.results:
        return None
    dim = _cast(ir.AffineDimExpr, amap.results[-1])
    return dim.position if dim is not None else None


def _combiners(root, num_inputs: int) -> list[str | None]:
    """Per yielded value: the op that makes it from the result's block argument."""
    if not root.regions or not root.regions[0].blocks:
        return []
    block = root.regions[0].blocks[0]
    outs = list(block.arguments)[num_inputs:]
    ops = list(block.operations)
    found = []
    for value in ops[-1].operands if ops else []:
        op = defining_op(value)
        uses_out = op is not None and any(o in outs for o in op.operands)
        found.append(op.name if uses_out else None)
    return found


def read_dispatches(sources_text: str) -> list[Dispatch]:
    """Parse `--compile-to=executable-sources` output into Dispatch records."""
    return read_sources(sources_text)[0]


def read_sources(sources_text: str) -> tuple[list[Dispatch], list[str]]:
    """The Dispatch records of `--compile-to=executable-sources` output, and
    the location of each dispatch the host program issues, from one parse.
    IREE shares one executable between identical dispatches, and the
    executable carries one of their locations; a site keeps its own region's."""
    module = ir.Module.parse(sources_text, context(unregistered=True))
    found, sites = [], []
    for op in walk(module.operation):
        if op.name == "stream.cmd.dispatch":
            sites.append(str(op.location))
        if op.name != "hal.executable.variant":
            continue
        executable = symbol_name(op.parent.operation)
        for inner in walk(op):
            if inner.name == "func.func" and inner.parent.operation.name == "builtin.module":
                found.append(_analyse(inner, executable))
    return found, sites


def dispatch_sites(sources_text: str) -> int:
    """How many dispatches the host program issues (its stream.cmd.dispatch
    ops): what one call launches, loops aside."""
    module = ir.Module.parse(sources_text, context(unregistered=True))
    return sum(1 for op in walk(module.operation) if op.name == "stream.cmd.dispatch")
