"""Reading and rewriting IREE's executable sources (phase 1 output).

read.py           one Dispatch record per dispatch function (root, loops, operands)
own_extracts.py   a body's tensor.extract of its own input at its own index read as
                  the block argument (JAX's take_along_axis)
fuse_broadcasts.py elementwise ops a reduction reads through a broadcast (or in
                  another order) fused into it
collapse.py       column reductions: merge the loops IREE leaves uncollapsed
fuse_roots.py     a chain of elementwise roots merged into one op
fold_reshapes.py  reshapes of loads and stores folded into the bindings

Each rewrite takes the parsed module and says whether it changed it;
rewrite_sources parses the sources once, runs them in order and prints the
module once.
"""

from collections.abc import Callable

from iree.compiler import ir

from ..irutil import context

# A rewrite of the parsed sources, in place -> (changed, one line per decision)
Rewrite = Callable[[ir.Module], tuple[bool, list[str]]]


def rewrite_sources(sources: str, *rewrites: Rewrite) -> tuple[str, list[str]]:
    """The sources after `rewrites`, in order (the same string if none
    changed anything), and their log lines."""
    module = ir.Module.parse(sources, context(unregistered=True))
    changed, log = False, []
    for rewrite in rewrites:
        did, lines = rewrite(module)
        changed, log = changed or did, log + lines
    if not changed:
        return sources, log
    module.operation.verify()
    return module.operation.get_asm(enable_debug_info=True), log
