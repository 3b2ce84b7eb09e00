"""Indexing maps: which element of each operand an output element reads.

Seed 003 (XLA's indexing analysis). An indexing map of an op's operand is an
affine map from the output's index (dims d0..) and, where the op reads many
elements per output element, symbols (s0..: a reduce's reduced dims, a dot's
contracted ones) to the operand's index, with the range of every dim and
symbol and constraints, expressions that must fall in a range for the read
to happen at all (a pad's interior holes, a concatenate's operand):

    pad [0, 2, 1] of tensor<4>: (d0) -> ((d0 - 2) floordiv 2),
        d0 in [0, 9], (d0 - 2) mod 2 in [0, 0], d0 - 2 in [0, 6]

A constraint the ranges already imply is dropped: a pad with no low and no
interior padding reads its source through the identity map, with
`d in [0, n - 1]` (the source's extent) on each dim it pads.

Maps compose: an op's map read through its consumer's is the map from the
consumer's output to the op's operand, so the map from a group's output to
each member and each input is the composition along every path
(`group_maps.py`), simplified by MLIR's affine simplifier as each expression is
built and by the ranges (`simplify`). The planner reads these maps for what
it would otherwise derive from attributes: how often a group evaluates an op
(index safety, safety.py), which dims a reduction keeps (`reduction_dims`,
groups.py) and how a kernel reads through a pad (pads.py).

`coalescing` reads a composed map the way a thread mapping does: threads
with consecutive values of the root's innermost dim (the lanes of a
subgroup), does each read touch consecutive elements (stride 1), one element
(stride 0: a broadcast read, one transaction), or elements some stride
apart, which is what a transposed read or write costs.
"""

from dataclasses import dataclass, field

from iree.compiler import ir

from ..hlo.ops import dot_numbers, node_class, shape_of


@dataclass(frozen=True)
class Constraint:
    expr: ir.AffineExpr
    lo: int
    hi: int  # inclusive

    def __str__(self) -> str:
        return f"{self.expr} in [{self.lo}, {self.hi}]"


@dataclass(frozen=True)
class IndexingMap:
    """Output index (dims) and symbols -> operand index, with ranges."""

    map: ir.AffineMap
    dim_ranges: tuple[tuple[int, int], ...]  # inclusive [lo, hi] per dim
    symbol_ranges: tuple[tuple[int, int], ...] = ()
    constraints: tuple[Constraint, ...] = field(default=())

    def __str__(self) -> str:
        parts = [str(self.map)]
        parts += [f"d{i} in [{lo}, {hi}]" for i, (lo, hi) in enumerate(self.dim_ranges)]
        parts += [f"s{i} in [{lo}, {hi}]" for i, (lo, hi) in enumerate(self.symbol_ranges)]
        parts += [str(c) for c in self.constraints]
        return ", ".join(parts)

    def then(self, inner: "IndexingMap") -> "IndexingMap":
        """The map of `inner`'s operand read through this one: this map goes
        from an output to an op's result, `inner` from that result to its
        operand. Symbols: this map's, then `inner`'s."""
        own = len(self.symbol_ranges)
        with self.map.context:
            outer = self.map.results
            symbols = [ir.AffineSymbolExpr.get(own + i) for i in range(len(inner.symbol_ranges))]
            # Substitution map: inner dims -> outer results, inner symbols shifted.
            total = own + len(inner.symbol_ranges)
            subst = ir.AffineMap.get(self.map.n_dims, total, list(outer))

            def compose(e: ir.AffineExpr) -> ir.AffineExpr:
                shifted = _replace_symbols(e, symbols)
                return shifted.compose(subst)

            all_symbols = self.symbol_ranges + inner.symbol_ranges
            results = [
                simplify(compose(e), self.dim_ranges, all_symbols) for e in inner.map.results
            ]
            constraints = self.constraints + _needed(
                [Constraint(compose(c.expr), c.lo, c.hi) for c in inner.constraints],
                self.dim_ranges,
                all_symbols,
            )
            composed = ir.AffineMap.get(self.map.n_dims, total, results)
        return IndexingMap(
            composed, self.dim_ranges, self.symbol_ranges + inner.symbol_ranges, constraints
        )

    def at(self, index: list[int], symbols: list[int] = ()) -> list[int] | None:
        """The operand index read at output index `index`, or None where a
        constraint masks the read (a pad's padding, another concatenated
        operand)."""
        if any(not c.lo <= evaluate(c.expr, index, symbols) <= c.hi for c in self.constraints):
            return None
        return [evaluate(e, index, symbols) for e in self.map.results]

    def is_identity(self) -> bool:
        """Output index i reads operand index i, wherever the read happens."""
        results = list(self.map.results)
        with self.map.context:
            return results == [_dim(i) for i in range(self.map.n_dims)]


def _needed(constraints, dims, symbols) -> tuple[Constraint, ...]:
    """The constraints the ranges do not already imply."""
    out = []
    for c in constraints:
        lo, hi = bounds(c.expr, dims, symbols)
        if not c.lo <= lo <= hi <= c.hi:
            out.append(c)
    return tuple(out)


def _replace_symbols(e: ir.AffineExpr, symbols: list[ir.AffineExpr]) -> ir.AffineExpr:
    """`e` with symbol i replaced by symbols[i] (dims untouched)."""
    e = e.maybe_downcast()
    if isinstance(e, ir.AffineSymbolExpr):
        return symbols[e.position]
    for cls, build in _BINARY.items():
        if isinstance(e, cls):
            return build(_replace_symbols(e.lhs, symbols), _replace_symbols(e.rhs, symbols))
    return e


_BINARY = {
    ir.AffineAddExpr: lambda a, b: a + b,
    ir.AffineMulExpr: lambda a, b: a * b,
    ir.AffineModExpr: ir.AffineModExpr.get,
    ir.AffineFloorDivExpr: ir.AffineFloorDivExpr.get,
    ir.AffineCeilDivExpr: ir.AffineCeilDivExpr.get,
}


def bounds(e: ir.AffineExpr, dims, symbols) -> tuple[int, int]:
    """Inclusive [lo, hi] of `e` over the dims' and symbols' ranges (interval
    arithmetic: exact for sums of distinct variables, wider otherwise)."""
    e = e.maybe_downcast()
    if isinstance(e, ir.AffineDimExpr):
        return dims[e.position]
    if isinstance(e, ir.AffineSymbolExpr):
        return symbols[e.position]
    if isinstance(e, ir.AffineConstantExpr):
        return e.value, e.value
    (alo, ahi), (blo, bhi) = bounds(e.lhs, dims, symbols), bounds(e.rhs, dims, symbols)
    if isinstance(e, ir.AffineAddExpr):
        return alo + blo, ahi + bhi
    if isinstance(e, ir.AffineMulExpr):
        products = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
        return min(products), max(products)
    if blo != bhi or blo <= 0:  # mod and div by a non-constant: unknown
        return -(2**62), 2**62
    if isinstance(e, ir.AffineModExpr):
        return (alo, ahi) if 0 <= alo and ahi < blo else (0, blo - 1)
    if isinstance(e, ir.AffineFloorDivExpr):
        return alo // blo, ahi // blo
    return -(-alo // blo), -(-ahi // blo)


def simplify(e: ir.AffineExpr, dims, symbols) -> ir.AffineExpr:
    """`e` with what the ranges decide folded: `x floordiv c` is 0 and
    `x mod c` is x where x lies in [0, c - 1] (a reshape's index arithmetic
    over dims that do not carry). MLIR's simplifier knows no ranges."""
    e = e.maybe_downcast()
    for cls, build in _BINARY.items():
        if isinstance(e, cls):
            lhs, rhs = simplify(e.lhs, dims, symbols), simplify(e.rhs, dims, symbols)
            rhs_c = rhs.maybe_downcast()
            if isinstance(rhs_c, ir.AffineConstantExpr) and rhs_c.value > 0:
                lo, hi = bounds(lhs, dims, symbols)
                if 0 <= lo and hi < rhs_c.value:
                    if cls is ir.AffineModExpr:
                        return lhs
                    if cls is ir.AffineFloorDivExpr:
                        return _const(0)
                if cls is ir.AffineFloorDivExpr:
                    # (a * c + b) floordiv c = a + b floordiv c
                    split = _split_multiple(lhs, rhs_c.value)
                    if split is not None:
                        whole, rest = split
                        return simplify(whole + ir.AffineFloorDivExpr.get(rest, rhs), dims, symbols)
            return build(lhs, rhs)
    return e


def _split_multiple(e: ir.AffineExpr, c: int):
    """(a, b) with e = a * c + b when e is a sum with a term that is a
    multiple of c, else None."""
    terms = _terms(e)
    whole = [t for t in terms if _multiple_of(t, c) is not None]
    if not whole:
        return None
    rest = [t for t in terms if _multiple_of(t, c) is None]
    total = _const(0)
    for t in whole:
        total = total + _multiple_of(t, c)
    remainder = _const(0)
    for t in rest:
        remainder = remainder + t
    return total, remainder


def _terms(e: ir.AffineExpr) -> list[ir.AffineExpr]:
    e = e.maybe_downcast()
    if isinstance(e, ir.AffineAddExpr):
        return _terms(e.lhs) + _terms(e.rhs)
    return [e]


def _multiple_of(t: ir.AffineExpr, c: int):
    """t / c when t is a product with a constant factor that c divides."""
    t = t.maybe_downcast()
    if isinstance(t, ir.AffineConstantExpr):
        return _const(t.value // c) if t.value % c == 0 else None
    if isinstance(t, ir.AffineMulExpr):
        factor = t.rhs.maybe_downcast()
        if isinstance(factor, ir.AffineConstantExpr) and factor.value % c == 0:
            return t.lhs * (factor.value // c)
    return None


def evaluate(e: ir.AffineExpr, dims: list[int], symbols: list[int] = ()) -> int:
    e = e.maybe_downcast()
    if isinstance(e, ir.AffineDimExpr):
        return dims[e.position]
    if isinstance(e, ir.AffineSymbolExpr):
        return symbols[e.position]
    if isinstance(e, ir.AffineConstantExpr):
        return e.value
    a, b = evaluate(e.lhs, dims, symbols), evaluate(e.rhs, dims, symbols)
    if isinstance(e, ir.AffineAddExpr):
        return a + b
    if isinstance(e, ir.AffineMulExpr):
        return a * b
    if isinstance(e, ir.AffineModExpr):
        return a % b
    if isinstance(e, ir.AffineFloorDivExpr):
        return a // b
    return -(-a // b)  # ceildiv


def _ranges(shape: list[int]) -> tuple[tuple[int, int], ...]:
    return tuple((0, n - 1) for n in shape)


def _const(v: int) -> ir.AffineExpr:
    return ir.AffineConstantExpr.get(v)


def _dim(i: int) -> ir.AffineExpr:
    return ir.AffineDimExpr.get(i)


def _linear(indices: list[ir.AffineExpr], shape: list[int]) -> ir.AffineExpr:
    """Row-major offset of `indices` in `shape`."""
    offset = _const(0)
    for index, extent in zip(indices, shape):
        offset = offset * extent + index
    return offset


def _delinear(offset: ir.AffineExpr, shape: list[int]) -> list[ir.AffineExpr]:
    out = []
    stride = 1
    for extent in reversed(shape):
        out.append(
            ir.AffineModExpr.get(ir.AffineFloorDivExpr.get(offset, _const(stride)), _const(extent))
        )
        stride *= extent
    return out[::-1]


def _ints(op: ir.Operation, name: str) -> list[int]:
    attr = op.attributes[name]
    try:
        return list(ir.DenseI64ArrayAttr(attr))
    except (ValueError, TypeError):
        return [int(x) for x in ir.DenseIntElementsAttr(attr)]


class Unsupported(Exception):
    """No static indexing map for this op (gather, dynamic shapes, ...)."""


def operand_maps(op: ir.Operation) -> list[IndexingMap]:
    """The indexing map of each operand of `op` (an op of a fusion group),
    from its first result's index. Raises Unsupported."""
    out = shape_of(op.results[0].type) if len(op.results) else None
    shapes = [shape_of(v.type) for v in op.operands]
    if out is None or any(s is None for s in shapes):
        raise Unsupported(f"{op.name}: dynamic or unranked shapes")
    with op.context:
        return _operand_maps(op, out, shapes)


def _operand_maps(op: ir.Operation, out: list[int], shapes: list[list[int]]) -> list[IndexingMap]:
    rank = len(out)
    dims = [_dim(i) for i in range(rank)]
    ranges = _ranges(out)
    name = op.name

    def plain(results, symbols=(), constraints=()) -> IndexingMap:
        results = [simplify(e, ranges, symbols) for e in results]
        amap = ir.AffineMap.get(rank, len(symbols), results)
        return IndexingMap(amap, ranges, tuple(symbols), _needed(constraints, ranges, symbols))

    if name in ELEMENTWISE_LIKE or _is_elementwise(op):
        return [plain(dims if s else []) for s in shapes]
    if name == "stablehlo.broadcast_in_dim":
        (operand,) = shapes
        bdims = _ints(op, "broadcast_dimensions")
        return [
            plain(
                [
                    _const(0) if operand[i] == 1 and out[d] != 1 else dims[d]
                    for i, d in enumerate(bdims)
                ]
            )
        ]
    if name == "stablehlo.broadcast":  # new leading dims
        lead = rank - len(shapes[0])
        return [plain(dims[lead:])]
    if name == "stablehlo.transpose":
        perm = _ints(op, "permutation")  # output dim i is operand dim perm[i]
        return [plain([dims[perm.index(j)] for j in range(rank)])]
    if name == "stablehlo.reshape":
        return [plain(_delinear(_linear(dims, out), shapes[0]))]
    if name == "stablehlo.reverse":
        rev = set(_ints(op, "dimensions"))
        return [plain([_const(out[i] - 1) - dims[i] if i in rev else dims[i] for i in range(rank)])]
    if name == "stablehlo.slice":
        start, step = _ints(op, "start_indices"), _ints(op, "strides")
        return [plain([dims[i] * step[i] + start[i] for i in range(rank)])]
    if name == "stablehlo.pad":
        low, interior = _ints(op, "edge_padding_low"), _ints(op, "interior_padding")
        results, constraints = [], []
        for i, extent in enumerate(shapes[0]):
            shifted = dims[i] - low[i]
            every = interior[i] + 1
            results.append(
                ir.AffineFloorDivExpr.get(shifted, _const(every)) if every > 1 else shifted
            )
            if every > 1:
                constraints.append(Constraint(ir.AffineModExpr.get(shifted, _const(every)), 0, 0))
            constraints.append(Constraint(shifted, 0, (extent - 1) * every))
        # The padding value: read wherever the operand is not.
        return [plain(results, constraints=constraints), plain([])]
    if name == "stablehlo.concatenate":
        axis = ir.IntegerAttr(op.attributes["dimension"]).value
        maps, offset = [], 0
        for shape in shapes:
            results = [dims[i] - offset if i == axis else dims[i] for i in range(rank)]
            constraint = Constraint(dims[axis], offset, offset + shape[axis] - 1)
            maps.append(plain(results, constraints=[constraint]))
            offset += shape[axis]
        return maps
    if name == "stablehlo.iota" or name == "stablehlo.constant":
        return []
    if name == "stablehlo.reduce":
        reduced = _ints(op, "dimensions")
        inputs = len(op.operands) // 2
        operand = shapes[0]
        kept = [i for i in range(len(operand)) if i not in reduced]
        results = [
            dims[kept.index(i)] if i in kept else ir.AffineSymbolExpr.get(reduced.index(i))
            for i in range(len(operand))
        ]
        symbols = tuple((0, operand[i] - 1) for i in reduced)
        return [plain(results, symbols)] * inputs + [plain([])] * inputs
    if name in ("stablehlo.dot_general", "stablehlo.dot"):
        numbers = dot_numbers(op)
        maps, free_at = [], 0
        lhs_batch = numbers["lhs_batching_dimensions"]
        contracted = [shapes[0][i] for i in numbers["lhs_contracting_dimensions"]]
        symbols = tuple((0, n - 1) for n in contracted)
        frees = []
        for side, shape in zip(("lhs", "rhs"), shapes):
            batch = numbers[f"{side}_batching_dimensions"]
            contract = numbers[f"{side}_contracting_dimensions"]
            free = [i for i in range(len(shape)) if i not in batch and i not in contract]
            frees.append((side, batch, contract, free))
        free_at = len(lhs_batch)
        for side, batch, contract, free in frees:
            results = []
            for i in range(len(shapes[0 if side == "lhs" else 1])):
                if i in batch:
                    results.append(dims[batch.index(i)])
                elif i in contract:
                    results.append(ir.AffineSymbolExpr.get(contract.index(i)))
                else:
                    results.append(dims[free_at + free.index(i)])
            free_at += len(free)
            maps.append(plain(results, symbols))
        return maps
    raise Unsupported(f"{name}: no indexing map")


ELEMENTWISE_LIKE = {
    "stablehlo.convert",
    "stablehlo.select",
    "stablehlo.clamp",
    "stablehlo.bitcast_convert",
}


def _is_elementwise(op: ir.Operation) -> bool:
    return node_class(op) == "elementwise"


def reduction_dims(read: IndexingMap) -> tuple[list[int], list[int]]:
    """(kept, reduced) dims of a reduce's input, from the input's map: the
    dims read through an output dim (in output order) and those read through
    a symbol (in symbol order, the order of the reduce's `dimensions`)."""
    kept, reduced = [], {}
    for i, e in enumerate(read.map.results):
        e = e.maybe_downcast()
        if isinstance(e, ir.AffineSymbolExpr):
            reduced[e.position] = i
        else:
            kept.append(i)
    return kept, [reduced[j] for j in sorted(reduced)]


def reduce_result_map(read: IndexingMap) -> IndexingMap:
    """A reduce's result index from its input's index (the reduction's
    iteration space), given the input's map: the kept dims. A broadcast with
    this map puts the reduced values back over the dims they were reduced
    over (softmax's max, layernorm's mean)."""
    kept, _ = reduction_dims(read)
    ranges = []
    for e in read.map.results:
        e = e.maybe_downcast()
        own = read.symbol_ranges if isinstance(e, ir.AffineSymbolExpr) else read.dim_ranges
        ranges.append(own[e.position])
    with read.map.context:
        amap = ir.AffineMap.get(len(ranges), 0, [_dim(i) for i in kept])
    return IndexingMap(amap, tuple(ranges))


def identity_map(shape: list[int], context: ir.Context) -> IndexingMap:
    with context:
        return IndexingMap(ir.AffineMap.get_identity(len(shape)), _ranges(shape))


def _variables(exprs) -> tuple[set[int], list[int]]:
    """(dims, symbols in order of first appearance) that `exprs` read."""
    dims, symbols = set(), []
    stack = list(reversed(exprs))
    while stack:
        e = stack.pop().maybe_downcast()
        if isinstance(e, ir.AffineDimExpr):
            dims.add(e.position)
        elif isinstance(e, ir.AffineSymbolExpr):
            if e.position not in symbols:
                symbols.append(e.position)
        elif isinstance(e, ir.AffineBinaryExpr):
            stack += [e.rhs, e.lhs]
    return dims, symbols


def bind_symbols(m: IndexingMap, first: int) -> IndexingMap:
    """`m` with each symbol from `first` on that ranges like a dim `m` does
    not read renamed to that dim (in order of appearance), and the symbols
    it does not read dropped. A reduction read back over the dims it
    reduced, or read in its own reduced space, is one iteration space with
    the row: the kernel's loop over the row is the reduction's."""
    exprs = list(m.map.results) + [c.expr for c in m.constraints]
    used_dims, used = _variables(exprs)
    free = [d for d in range(m.map.n_dims) if d not in used_dims]
    with m.map.context:
        subst, symbols = {}, []
        for j in used:
            match = None
            if j >= first:
                match = next((d for d in free if m.dim_ranges[d] == m.symbol_ranges[j]), None)
            if match is None:
                subst[j] = ir.AffineSymbolExpr.get(len(symbols))
                symbols.append(m.symbol_ranges[j])
            else:
                free.remove(match)
                subst[j] = _dim(match)
        if len(symbols) == len(m.symbol_ranges):
            return m
        table = [subst.get(j, _const(0)) for j in range(len(m.symbol_ranges))]
        results = [_replace_symbols(e, table) for e in m.map.results]
        constraints = tuple(
            Constraint(_replace_symbols(c.expr, table), c.lo, c.hi) for c in m.constraints
        )
        amap = ir.AffineMap.get(m.map.n_dims, len(symbols), results)
    return IndexingMap(amap, m.dim_ranges, tuple(symbols), constraints)


def stride(read_map: IndexingMap, shape: list[int], lane_dim: int) -> set[int]:
    """Element strides between consecutive values of output dim `lane_dim`,
    sampled at a few points of the domain (a map with floordiv or mod can
    change stride across it): {1} coalesced, {0} broadcast."""
    found = set()
    dims_hi = [hi for _, hi in read_map.dim_ranges]
    if dims_hi[lane_dim] < 1:
        return {0}
    symbols = [lo for lo, _ in read_map.symbol_ranges]
    for base in _samples(dims_hi, lane_dim):
        nxt = list(base)
        nxt[lane_dim] += 1
        a = [evaluate(e, base, symbols) for e in read_map.map.results]
        b = [evaluate(e, nxt, symbols) for e in read_map.map.results]
        found.add(_offset(b, shape) - _offset(a, shape))
    return found


def _samples(dims_hi: list[int], lane_dim: int) -> list[list[int]]:
    zero = [0] * len(dims_hi)
    mid = [hi // 2 for hi in dims_hi]
    mid[lane_dim] = max(0, min(mid[lane_dim], dims_hi[lane_dim] - 1))
    return [zero, mid]


def _offset(index: list[int], shape: list[int]) -> int:
    offset = 0
    for i, n in zip(index, shape):
        offset = offset * n + i
    return offset
