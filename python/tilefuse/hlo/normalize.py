"""IREE's input conventions, applied before fusion planning.

The planner sees StableHLO the way IREE's own input pipeline would hand it
on: private functions reached by `func.call` inlined, CHLO ops (JAX's
`chlo.erf`, `chlo.square`, `chlo.broadcast_add`, ...) expanded into
StableHLO, f64 demoted to f32 (IREE's default: `--iree-input-demote-f64-to-f32`,
so the compiled function takes and returns f32). IREE runs the same
conversions later, but not inside a `flow.dispatch.region`: a CHLO op in a
region stays unconverted and an f64 region crashes iree-compile, so they must
happen before outlining.

Each step is a pass IREE registers, run through the MLIR Python bindings, and
only when the module holds what it converts; each applied step is one log line.
"""

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from iree.compiler import ir, passmanager

from ..errors import TilefuseError
from ..irutil import walk


@dataclass(frozen=True)
class Step:
    what: str  # the log line's text
    pipeline: str  # a pass pipeline on builtin.module
    needed: Callable[[ir.Operation], bool]


def _has_op(prefix: str) -> Callable[[ir.Operation], bool]:
    return lambda module: any(op.name.startswith(prefix) for op in walk(module))


def _is_f64(type_: ir.Type) -> bool:
    try:
        type_ = ir.ShapedType(type_).element_type
    except (ValueError, TypeError):
        pass
    return type_.typeid == ir.F64Type.static_typeid


def _has_f64(module: ir.Operation) -> bool:
    for op in walk(module):
        if op.name == "func.func":
            signature = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            if any(map(_is_f64, [*signature.inputs, *signature.results])):
                return True
        if any(_is_f64(v.type) for v in [*op.operands, *op.results]):
            return True
    return False


STEPS = [
    Step(
        "private functions reached by func.call inlined",
        "inline, symbol-dce",
        _has_op("func.call"),
    ),
    Step(
        "CHLO ops expanded into StableHLO (chlo-legalize-to-stablehlo)",
        "func.func(chlo-legalize-to-stablehlo)",
        _has_op("chlo."),
    ),
    Step(
        "f64 demoted to f32, as IREE does by default: the function takes and returns f32",
        "iree-input-conversion-demote-f64-to-f32",
        _has_f64,
    ),
]


def normalize(module: ir.Module) -> list[str]:
    """Apply the input conventions to `module` in place; one line per step."""
    log = []
    for step in STEPS:
        if not step.needed(module.operation):
            continue
        pm = passmanager.PassManager.parse(f"builtin.module({step.pipeline})", module.context)
        with _quiet_stderr():  # the demotion pass warns about the signature
            try:
                pm.run(module.operation)
            except ir.MLIRError as e:
                raise TilefuseError(f"input conversion failed ({step.what}): {e}") from None
        log.append(step.what)
    return log


class _quiet_stderr:
    """Swallow what C++ passes print on file descriptor 2."""

    def __enter__(self):
        self._saved = os.dup(2)
        self._sink = tempfile.TemporaryFile()
        os.dup2(self._sink.fileno(), 2)

    def __exit__(self, *exc):
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._sink.close()
