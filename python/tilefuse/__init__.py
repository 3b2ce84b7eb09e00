"""tilefuse: StableHLO to CUDA and Vulkan kernels through transform-dialect strategies.

import tilefuse
module = tilefuse.compile("samples/gelu_f32.mlir", target="vulkan")
out = module.main(x)          # numpy in, numpy out
f = tilefuse.jit(jax_function, target="vulkan")   # a JAX function in, arrays out
"""

from . import frontend
from .driver import CompileResult, compile_program
from .errors import TilefuseError
from .jax_jit import jit
from .kernel import verify
from .runtime import CompiledModule, load
from .targets import Target, load_target, target_names


def compile(
    source,
    target: str = "vulkan",
    device: str | None = None,
    dump_dir=None,
    fusion: bool = True,
    strategies_dir=None,
    strict: bool = False,
):
    """Compile a StableHLO program (path, text or bytecode) and load it.

    `device` defaults to the target's runtime driver (vulkan, cuda, local-task).
    `fusion=False` lets IREE form dispatches instead of tilefuse's fusion planner.
    `strategies_dir`: user strategies tried before the built-ins (default
    $TILEFUSE_STRATEGIES; strategies/user.py). `strict`: a strategy or
    fusion failure is an error, not a fallback.
    """
    result = compile_program(
        source,
        target,
        dump_dir=dump_dir,
        fusion=fusion,
        strategies_dir=strategies_dir,
        strict=strict,
    )
    return CompiledModule(result.vmfb, device or result.target.runtime_driver, result.reports)


__all__ = [
    "CompileResult",
    "CompiledModule",
    "Target",
    "TilefuseError",
    "compile",
    "compile_program",
    "frontend",
    "jit",
    "load",
    "load_target",
    "target_names",
    "verify",
]
