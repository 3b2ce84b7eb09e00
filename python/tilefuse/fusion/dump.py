"""Views of a fusion plan for people.

- `outlined_functions`: the ByteIR-style view (`--dump-fusion`): every group
  becomes a private function carrying its kind and hero as attributes, and
  the caller calls them in a dependence order.
- `to_dot` / `render`: a Graphviz picture of the op graph with each group a
  cluster coloured by kind.
- `describe`: the text `tilefuse explain --fusion` prints.

The planner is deterministic, so these views re-plan the original text
instead of undoing the regions of the outlined module.
"""

import shutil
import subprocess
from pathlib import Path

from iree.compiler import ir

from ..errors import TilefuseError
from ..irutil import context
from ..targets import Target
from . import plan_module
from .catalogue import KernelCatalogue
from .graph import FuncGraph
from .groups import Group
from .outline import HERO_ATTR, KIND_ATTR, clone_splat_operands, schedule

COLOURS = {
    "loop": "#cfe8ff",
    "row-reduction": "#ffe0b3",
    "column-reduction": "#ffd1dc",
    "softmax-like": "#d9f2d0",
    "transpose": "#efd9ff",
    "matmul": "#fff3b0",
    "other": "#e0e0e0",
}


def _parse(text: str) -> ir.Module:
    ctx = context(unregistered=True)
    return ir.Module.parse(text, ctx)


def _outline_group(module: ir.Module, graph: FuncGraph, group: Group, before) -> None:
    nodes = graph.nodes
    members = set(group.members)
    inputs = graph.values_from_outside(members)
    outputs = [
        r
        for i in group.members
        for r in nodes[i].op.results
        if nodes[i].returned or set(nodes[i].users) - members
    ]
    ctx = module.context
    with ir.Location.unknown(ctx):
        ftype = ir.FunctionType.get([v.type for v in inputs], [v.type for v in outputs])
        attrs = {
            "sym_name": ir.StringAttr.get(group.name),
            "function_type": ir.TypeAttr.get(ftype),
            "sym_visibility": ir.StringAttr.get("private"),
            KIND_ATTR: ir.StringAttr.get(group.kind),
            HERO_ATTR: ir.StringAttr.get(group.hero_op),
        }
        if not group.outlined:
            attrs["tilefuse.left_to_iree"] = ir.StringAttr.get(group.why_not_outlined)
        func = ir.Operation.create("func.func", attributes=attrs, regions=1)
        module.body.append(func)
        block = func.regions[0].blocks.append(*[v.type for v in inputs])
        with ir.InsertionPoint(before):
            call = ir.Operation.create(
                "func.call",
                results=[v.type for v in outputs],
                operands=inputs,
                attributes={"callee": ir.FlatSymbolRefAttr.get(group.name)},
            )
    clones = {}
    for i in group.members:
        op = nodes[i].op
        op.detach_from_parent()
        block.append(op)
        clone_splat_operands(graph, i, members, block, clones)
    for v, arg in zip(inputs, block.arguments):
        for i in group.members:
            nodes[i].op.replace_uses_of_with(v, arg)
    with ir.InsertionPoint(block), ir.Location.unknown(ctx):
        ret = ir.Operation.create("func.return", operands=outputs)
    inside = [nodes[i].op for i in group.members] + [ret]
    for v, r in zip(outputs, call.results):
        v.replace_all_uses_except(r, inside)


def outlined_functions(text: str, target: Target, kernels: KernelCatalogue) -> str:
    """The ByteIR-style view: one private func per group, the caller calls them."""
    module = _parse(text)
    plan = plan_module(module, target, kernels)
    for graph in plan.graphs:
        groups = plan.groups.get(graph.name)
        if groups is None:
            continue
        all_as_outlined = [_as_outlined(g) for g in groups]
        by_first = {g.members[0]: g for g in groups}
        terminator = graph.nodes[-1].op
        for unit in schedule(graph, all_as_outlined):
            g = by_first.get(unit[0])
            if g is not None and g.members == unit:
                _outline_group(module, graph, g, terminator)
            elif graph.nodes[unit[0]].op != terminator:
                graph.nodes[unit[0]].op.move_before(terminator)
        for n in graph.nodes:
            if n.is_splat_constant and not list(n.op.results[0].uses):
                n.op.erase()
    module.operation.verify()
    return module.operation.get_asm()


def _as_outlined(g: Group) -> Group:
    """The same group, scheduled as one unit even if IREE forms it."""
    return Group(g.name, g.kind, g.hero, g.members, outlined=True)


def describe(plan) -> list[str]:
    """Lines for `tilefuse explain --fusion`."""
    lines = []
    for graph in plan.graphs:
        for g in plan.groups.get(graph.name, []):
            ops = " ".join(graph.nodes[i].short for i in g.members)
            where = "" if g.outlined else f"  (left to IREE: {g.why_not_outlined})"
            lines.append(
                f"{g.name}  kind={g.kind} hero={g.hero_op}  ops=[{ops}]  "
                f"in=({', '.join(g.inputs)}) out=({', '.join(g.outputs)})  "
                f"bytes in={g.bytes_in} out={g.bytes_out}{where}"
            )
    return lines


def _label(node) -> str:
    shape = "x".join(map(str, node.shape)) if node.shape is not None else ""
    return f"{node.short}\\n{shape}" if shape else node.short


def _distinct_operands(node):
    """(operand number, producer) once per producer or argument."""
    seen = set()
    for k, p in enumerate(node.producers):
        key = p if p >= 0 else ("arg", node.arg_numbers[k])
        if key not in seen:
            seen.add(key)
            yield k, p


def to_dot(plan) -> str:
    """Reads only what the plan recorded, so it also works after outlining."""
    out = [
        "digraph fusion {",
        "  rankdir=TB;",
        "  node [shape=box, fontsize=10, style=filled, fillcolor=white];",
    ]
    for graph in plan.graphs:
        f = graph.name
        grouped = set()
        for g in plan.groups.get(graph.name, []):
            style = "filled" if g.outlined else "filled,dashed"
            out.append(f'  subgraph "cluster_{g.name}" {{')
            out.append(
                f'    label="{g.name}\\n{g.kind}"; style="{style}"; '
                f'fillcolor="{COLOURS.get(g.kind, "#ffffff")}"; fontsize=10;'
            )
            for i in g.members:
                grouped.add(i)
                bold = ", penwidth=2" if i == g.hero else ""
                out.append(f'    "{f}.{i}" [label="{_label(graph.nodes[i])}"{bold}];')
            out.append("  }")
        for n in graph.nodes:
            if n.index not in grouped and n.cls not in ("constant",):
                out.append(f'  "{f}.{n.index}" [label="{_label(n)}", shape=ellipse];')
        for n in graph.nodes:
            for k, p in _distinct_operands(n):
                if p >= 0 and graph.nodes[p].cls != "constant":
                    out.append(f'  "{f}.{p}" -> "{f}.{n.index}";')
                elif n.arg_numbers[k] >= 0:
                    arg = f"{f}.arg{n.arg_numbers[k]}"
                    out.append(f'  "{arg}" [shape=plaintext]; "{arg}" -> "{f}.{n.index}";')
    out.append("}")
    return "\n".join(out) + "\n"


def render(plan, stem: Path) -> list[Path]:
    """Write STEM.dot, STEM.svg and STEM.png (the pictures need Graphviz's `dot`)."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    dot_file = stem.with_suffix(".dot")
    dot_file.write_text(to_dot(plan))
    dot = shutil.which("dot")
    if dot is None:
        raise TilefuseError("Graphviz `dot` is not installed (scripts/setup.sh installs it)")
    written = [dot_file]
    for fmt in ("svg", "png"):
        path = stem.with_suffix(f".{fmt}")
        subprocess.run([dot, f"-T{fmt}", str(dot_file), "-o", str(path)], check=True)
        written.append(path)
    return written
