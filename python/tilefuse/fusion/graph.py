"""The op graph of each StableHLO function, read through the MLIR Python bindings.

One Node per op of a function's body (in program order), with its op class and
the nodes it reads from and is read by. Values that come from outside the
body's ops (function arguments) are inputs, not nodes. Ops tilefuse does not
know (custom calls, other dialects, func.call) get the class "other" and are
never fused: they stay where they are and IREE handles them.
"""

from dataclasses import dataclass, field

from iree.compiler import ir

from ..irutil import symbol_name

ELEMENTWISE = {
    "stablehlo." + n
    for n in [
        "abs",
        "add",
        "and",
        "atan2",
        "cbrt",
        "ceil",
        "clamp",
        "compare",
        "complex",
        "convert",
        "cosine",
        "divide",
        "exponential",
        "exponential_minus_one",
        "floor",
        "imag",
        "is_finite",
        "log",
        "log_plus_one",
        "logistic",
        "maximum",
        "minimum",
        "multiply",
        "negate",
        "not",
        "or",
        "popcnt",
        "power",
        "real",
        "remainder",
        "round_nearest_afz",
        "round_nearest_even",
        "rsqrt",
        "select",
        "shift_left",
        "shift_right_arithmetic",
        "shift_right_logical",
        "sign",
        "sine",
        "sqrt",
        "subtract",
        "tan",
        "tanh",
        "xor",
    ]
}
# Elementwise ops that cost a transcendental evaluation per element: never
# duplicated by the planner (index-safety rule).
EXPENSIVE = {
    "stablehlo." + n
    for n in [
        "atan2",
        "cbrt",
        "cosine",
        "divide",
        "exponential",
        "exponential_minus_one",
        "log",
        "log_plus_one",
        "logistic",
        "power",
        "remainder",
        "rsqrt",
        "sine",
        "sqrt",
        "tan",
        "tanh",
    ]
}
INDEX_ONLY = {
    "stablehlo." + n
    for n in [
        "broadcast_in_dim",
        "broadcast",
        "reshape",
        "transpose",
        "slice",
        "concatenate",
        "pad",
        "reverse",
        "iota",
    ]
}
REDUCE = {"stablehlo.reduce"}
CONTRACTION = {"stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution"}
GATHER_SCATTER = {"stablehlo.gather", "stablehlo.scatter"}
CONSTANT = {"stablehlo.constant", "arith.constant"}
TERMINATOR = {"func.return", "stablehlo.return"}


def op_class(name: str) -> str:
    """elementwise, index, reduce, contraction, gather, constant, terminator or other."""
    for cls, names in (
        ("elementwise", ELEMENTWISE),
        ("index", INDEX_ONLY),
        ("reduce", REDUCE),
        ("contraction", CONTRACTION),
        ("gather", GATHER_SCATTER),
        ("constant", CONSTANT),
        ("terminator", TERMINATOR),
    ):
        if name in names:
            return cls
    return "other"


def node_class(op: ir.Operation) -> str:
    """op_class, except that a bitcast_convert between types of one width
    (same shape) is elementwise; one that changes the width adds or drops a
    dim and stays "other"."""
    if op.name == "stablehlo.bitcast_convert":
        shapes = [shape_of(v.type) for v in (op.operands[0], op.results[0])]
        if shapes[0] is not None and shapes[0] == shapes[1]:
            return "elementwise"
    return op_class(op.name)


def _cast(cls, value):
    try:
        return cls(value)
    except (ValueError, TypeError):
        return None


def shape_of(t: ir.Type) -> list[int] | None:
    """Static shape of a ranked tensor type; None when dynamic or not a tensor."""
    st = _cast(ir.RankedTensorType, t)
    if st is None or not st.has_static_shape:
        return None
    return list(st.shape)


def element_type(t: ir.Type) -> ir.Type:
    st = _cast(ir.ShapedType, t)
    return st.element_type if st is not None else t


def element_bits(t: ir.Type) -> int:
    """Width of a tensor's (or scalar's) element type; 32 when it has none."""
    et = element_type(t)
    for cls in (ir.IntegerType, ir.FloatType):
        typed = _cast(cls, et)
        if typed is not None:
            return typed.width
    return 32


def bytes_of(t: ir.Type) -> int:
    st = _cast(ir.RankedTensorType, t)
    if st is None or not st.has_static_shape:
        return 0
    count = 1
    for d in st.shape:
        count *= d
    return count * max(element_bits(t), 8) // 8


def _int_list(op: ir.Operation, attr: str) -> list[int]:
    if attr not in op.attributes:
        return []
    a = op.attributes[attr]
    dense = _cast(ir.DenseI64ArrayAttr, a)
    if dense is not None:
        return list(dense)
    return [ir.IntegerAttr(x).value for x in ir.ArrayAttr(a)]


@dataclass
class Node:
    index: int  # position in the function body
    op: ir.Operation
    name: str
    cls: str
    producers: list[int] = field(default_factory=list)  # per operand: node index or -1
    arg_numbers: list[int] = field(default_factory=list)  # per operand: function arg or -1
    users: list[int] = field(default_factory=list)  # distinct consumer nodes, program order
    returned: bool = False  # a result is returned by the function

    @property
    def short(self) -> str:
        return self.name.split(".", 1)[-1]

    def result_type(self, i: int = 0) -> ir.Type:
        return self.op.results[i].type

    @property
    def shape(self) -> list[int] | None:
        return shape_of(self.result_type()) if len(self.op.results) else None

    @property
    def operand_shapes(self) -> list[list[int] | None]:
        return [shape_of(v.type) for v in self.op.operands]

    @property
    def result_bytes(self) -> int:
        return sum(bytes_of(r.type) for r in self.op.results)

    def ints(self, attr: str) -> list[int]:
        return _int_list(self.op, attr)

    @property
    def is_splat_constant(self) -> bool:
        if self.cls != "constant" or "value" not in self.op.attributes:
            return False
        dense = _cast(ir.DenseElementsAttr, self.op.attributes["value"])
        return dense is not None and dense.is_splat


@dataclass
class FuncGraph:
    func: ir.Operation
    name: str
    nodes: list[Node]
    called: bool = False  # some func.call in the module calls this function

    def values_from_outside(self, members: set[int]) -> list[ir.Value]:
        """Values the ops in `members` read that no member produces, first-use
        order. Splat constants are not among them: outlining clones them in."""
        seen, found = set(), []
        for i in sorted(members):
            for v, p in zip(self.nodes[i].op.operands, self.nodes[i].producers):
                if p in members or (p >= 0 and self.nodes[p].is_splat_constant):
                    continue
                key = value_key(v)
                if key not in seen:
                    seen.add(key)
                    found.append(v)
        return found


def value_key(v: ir.Value) -> tuple:
    """A hashable name for an SSA value: (producer op's asm-free identity, result number)."""
    owner = v.owner
    if hasattr(owner, "operation"):
        return ("op", hash(owner.operation), ir.OpResult(v).result_number)
    return ("arg", ir.BlockArgument(v).arg_number)


def build_graph(func: ir.Operation) -> FuncGraph:
    block = func.regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    nodes = [Node(i, op, op.name, node_class(op)) for i, op in enumerate(ops)]
    position = {op: i for i, op in enumerate(ops)}
    for node in nodes:
        for v in node.op.operands:
            owner = v.owner
            is_op = hasattr(owner, "operation")
            producer = position.get(owner.operation, -1) if is_op else -1
            node.producers.append(producer)
            node.arg_numbers.append(-1 if is_op else ir.BlockArgument(v).arg_number)
            if producer >= 0 and node.index not in nodes[producer].users:
                nodes[producer].users.append(node.index)
            if producer >= 0 and node.cls == "terminator":
                nodes[producer].returned = True
    return FuncGraph(func, symbol_name(func), nodes)


def module_graphs(module: ir.Module) -> list[FuncGraph]:
    """One graph per function with a single-block body; called functions are marked."""
    funcs = [op.operation for op in module.body.operations if op.operation.name == "func.func"]
    callees = set()
    for f in funcs:
        for region in f.regions:
            for block in region.blocks:
                for op in block.operations:
                    if op.operation.name == "func.call":
                        callees.add(ir.FlatSymbolRefAttr(op.operation.attributes["callee"]).value)
    graphs = []
    for f in funcs:
        if len(f.regions[0].blocks) != 1:
            continue  # a declaration, or control flow between blocks
        g = build_graph(f)
        g.called = g.name in callees
        graphs.append(g)
    return graphs
