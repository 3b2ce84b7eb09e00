"""The op graph of each StableHLO function, read through the MLIR Python bindings.

One Node per op of a function's body (in program order), with its op class and
the nodes it reads from and is read by. Values that come from outside the
body's ops (function arguments) are inputs, not nodes. Ops tilefuse does not
know (custom calls, other dialects, func.call) get the class "other" and are
never fused: they stay where they are and IREE handles them.
"""

from dataclasses import dataclass, field
from functools import cached_property

from iree.compiler import ir

from ..hlo.ops import bytes_of, node_class, shape_of, try_cast
from ..irutil import symbol_name
from .indexing import IndexingMap, Unsupported, operand_maps


def _int_list(op: ir.Operation, attr: str) -> list[int]:
    if attr not in op.attributes:
        return []
    a = op.attributes[attr]
    dense = try_cast(ir.DenseI64ArrayAttr, a)
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

    @cached_property
    def maps(self) -> list[IndexingMap] | None:
        """The indexing map of each operand (indexing.py), or None where the
        op has none (a gather, a convolution, dynamic shapes)."""
        try:
            return operand_maps(self.op)
        except Unsupported:
            return None

    @property
    def is_splat_constant(self) -> bool:
        if self.cls != "constant" or "value" not in self.op.attributes:
            return False
        try:
            value = self.op.attributes["value"]
        except TypeError:  # the bindings cannot read some (a complex dense attr)
            return False
        dense = try_cast(ir.DenseElementsAttr, value)
        return dense is not None and dense.is_splat


@dataclass
class FuncGraph:
    func: ir.Operation
    name: str
    nodes: list[Node]
    called: bool = False  # some func.call in the module calls this function

    def outputs_of(self, members: set[int]) -> list[int]:
        """The members whose results are returned or read outside `members`."""
        return [
            i
            for i in sorted(members)
            if self.nodes[i].returned or set(self.nodes[i].users) - members
        ]

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
