"""`tilefuse.jit`: a JAX function in, arrays out, compiled by tilefuse.

    f = tilefuse.jit(lambda x, w: jax.nn.gelu(x @ w), target="vulkan")
    y = f(x, w)                      # numpy (or JAX) arrays in, numpy arrays out

Like `jax.jit`: arguments and results are pytrees, `static_argnums` and
`static_argnames` name arguments that are Python values baked into the
program, and each new signature (pytree structure, shapes and dtypes of the
array leaves, values of the static arguments) is compiled once and cached.
JAX only traces and lowers the function to StableHLO; tilefuse compiles it
(fusion, strategies, IREE) and IREE's runtime runs it. Nothing falls back to
JAX: an argument tilefuse cannot pass, or a program it cannot compile, is a
TilefuseError.

JAX is an optional dependency (`pip install tilefuse[jax]`).
"""

import functools
import inspect
from dataclasses import dataclass, field

import numpy as np

from .driver import CompileResult, compile_program
from .errors import TilefuseError
from .runtime import CompiledModule


def _jax():
    try:
        import jax
    except ImportError:
        raise TilefuseError("tilefuse.jit needs JAX: pip install 'tilefuse[jax]'") from None
    return jax


@dataclass
class Compiled:
    """One signature's program: what tilefuse built and how to call it."""

    result: CompileResult
    module: CompiledModule
    in_tree: object  # JAX treedef of the dynamic (args, kwargs)
    out_tree: object  # JAX treedef of the results


@dataclass
class Jitted:
    fun: object
    target: str = "vulkan"
    static_argnums: tuple[int, ...] = ()
    static_argnames: tuple[str, ...] = ()
    device: str | None = None
    strict: bool = False
    cache: dict = field(default_factory=dict)  # signature -> Compiled

    @property
    def compiles(self) -> int:
        """How many signatures were compiled (cache misses)."""
        return len(self.cache)

    def __call__(self, *args, **kwargs):
        jax = _jax()
        compiled, arrays = self._compiled(args, kwargs)
        outputs = compiled.module.main(*arrays)
        if not isinstance(outputs, tuple):
            outputs = (outputs,)
        return jax.tree_util.tree_unflatten(compiled.out_tree, outputs)

    def _compiled(self, args, kwargs) -> tuple[Compiled, list[np.ndarray]]:
        """The program for these arguments (compiled on a cache miss), and
        the arguments' array leaves in its input order."""
        jax = _jax()
        static, dynamic_args, dynamic_kwargs = self._split(args, kwargs)
        leaves, tree = jax.tree_util.tree_flatten((dynamic_args, dynamic_kwargs))
        arrays = [_as_array(leaf, i) for i, leaf in enumerate(leaves)]
        key = (static, tree, tuple((a.shape, a.dtype.str, a.dtype.name) for a in arrays))
        compiled = self.cache.get(key)
        if compiled is None:
            compiled = self._compile(args, kwargs)
            self.cache[key] = compiled
        if compiled.in_tree != tree:
            raise TilefuseError(
                f"{_name(self.fun)}: JAX lowered the arguments as {compiled.in_tree}, "
                f"tilefuse flattened them as {tree}"
            )
        return compiled, arrays

    def lower_text(self, *args, **kwargs) -> str:
        """The StableHLO tilefuse compiles for these arguments."""
        return self._lowered(args, kwargs).as_text(debug_info=True)

    def reports(self, *args, **kwargs):
        """The per-dispatch reports (explain's lines) of the program these
        arguments select, compiling it if it is not cached."""
        return self._compiled(args, kwargs)[0].result.reports

    def _split(self, args, kwargs):
        """Static values (hashable, part of the cache key) apart from the
        dynamic arguments JAX passes to the program."""
        n = len(args)
        nums = {i % n if n else i for i in self.static_argnums}
        static = []
        for i in sorted(nums):
            if i < n:
                static.append((i, _hashable(args[i], f"static argument {i}")))
        for name in sorted(self.static_argnames):
            if name in kwargs:
                static.append((name, _hashable(kwargs[name], f"static argument {name!r}")))
        dynamic_args = tuple(a for i, a in enumerate(args) if i not in nums)
        dynamic_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        return tuple(static), dynamic_args, dynamic_kwargs

    def _lowered(self, args, kwargs):
        jax = _jax()
        # keep_unused: the program takes every dynamic argument, so that its
        # inputs are the flattened arguments one for one.
        jitted = jax.jit(
            self.fun,
            static_argnums=self.static_argnums,
            static_argnames=self.static_argnames,
            keep_unused=True,
        )
        try:
            return jitted.lower(*args, **kwargs)
        except TilefuseError:
            raise
        except Exception as e:  # noqa: BLE001 -- JAX's tracing errors, said once
            raise TilefuseError(f"JAX could not trace {_name(self.fun)}: {e}") from None

    def _compile(self, args, kwargs) -> Compiled:
        lowered = self._lowered(args, kwargs)
        text = lowered.as_text(debug_info=True)
        result = compile_program(text, self.target, strict=self.strict)
        device = self.device or result.target.runtime_driver
        module = CompiledModule(result.vmfb, device, result.reports)
        return Compiled(result, module, lowered.in_tree, lowered.out_tree)


def jit(
    fun=None,
    *,
    target: str = "vulkan",
    static_argnums: int | tuple[int, ...] = (),
    static_argnames: str | tuple[str, ...] = (),
    device: str | None = None,
    strict: bool = False,
):
    """Compile `fun` with tilefuse on first call per signature (see the module
    docstring). Usable as `tilefuse.jit(f, ...)` or `@tilefuse.jit(target=...)`.
    `strict`: a strategy or fusion failure is an error, not a fallback."""
    if fun is None:
        return functools.partial(
            jit,
            target=target,
            static_argnums=static_argnums,
            static_argnames=static_argnames,
            device=device,
            strict=strict,
        )
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    names = tuple(names) + _names_of(fun, nums)
    jitted = Jitted(fun, target, nums, tuple(dict.fromkeys(names)), device, strict)
    functools.update_wrapper(jitted, fun, updated=())
    return jitted


def _names_of(fun, nums: tuple[int, ...]) -> tuple[str, ...]:
    """Static positional parameters may also be passed by keyword."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return ()
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD,)]
    return tuple(positional[i] for i in nums if -len(positional) <= i < len(positional))


def _as_array(leaf, index: int) -> np.ndarray:
    """A dynamic leaf as the array the program takes. Python scalars follow
    JAX's defaults (float32, int32, bool), as `jax.jit` lowers them."""
    if isinstance(leaf, bool):
        return np.asarray(leaf, np.bool_)
    if isinstance(leaf, int):
        return np.asarray(leaf, np.int32)
    if isinstance(leaf, float):
        return np.asarray(leaf, np.float32)
    if hasattr(leaf, "__array__") and hasattr(leaf, "dtype") and hasattr(leaf, "shape"):
        array = np.asarray(leaf)
        if array.dtype == np.float64:
            array = array.astype(np.float32)  # JAX's default: no x64
        elif array.dtype == np.int64:
            array = array.astype(np.int32)
        return array
    raise TilefuseError(
        f"argument leaf {index}: tilefuse.jit takes arrays and Python scalars, "
        f"not {type(leaf).__name__} (mark it static with static_argnums/static_argnames)"
    )


def _hashable(value, what: str):
    try:
        hash(value)
    except TypeError:
        raise TilefuseError(f"{what} must be hashable, got {type(value).__name__}") from None
    return value


def _name(fun) -> str:
    return getattr(fun, "__name__", repr(fun))
