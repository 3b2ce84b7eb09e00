"""JAX's Shardy annotations, dropped: tilefuse compiles for one device.

Since JAX 0.7, `jax.jit(f).lower(...)` and `jax.export` write shardings in
the Shardy dialect (`sdy`) whenever a program names a mesh: a
`with_sharding_constraint`, `in_shardings`/`out_shardings`, a `reshard`.
IREE's compiler registers no `sdy` dialect, so plain `iree-compile` cannot
even parse such a program. A sharding says where values live, never what
they are, so on one device the program without its annotations computes the
same arrays. This module removes them, reading the program with JAX's own
MLIR (which knows `sdy`), before the program is parsed for IREE:

- `sdy.mesh` declarations and `sdy.*` attributes (on functions' arguments and
  results, and on ops) are dropped;
- `sdy.sharding_constraint`, `sdy.reshard` and `sdy.propagation_barrier`
  become their operand, `sdy.sharding_group` goes;
- `sdy.named_computation`, and an `sdy.manual_computation` (shard_map) whose
  per-device values are the whole arrays (every mesh axis it splits over has
  size 1), are inlined.

Anything else in `sdy` (a shard_map that really splits its arrays, with the
collectives between the pieces) is a TilefuseError at the user's line.

Programs lowered with the older GSPMD partitioner
(`jax_use_shardy_partitioner=False`, and what such JAX versions exported)
say the same in StableHLO itself, which IREE parses but cannot lower:
`custom_call @Sharding` (a sharding constraint) becomes its operand, and so
do `@SPMDFullToShardShape` / `@SPMDShardToFullShape` where the piece is the
whole array (drop_gspmd). `mhlo.sharding` attributes stay: IREE ignores them.
"""

from iree.compiler import ir as iree_ir

from .errors import TilefuseError
from .irutil import walk

_PASS_THROUGH = ("sdy.sharding_constraint", "sdy.reshard", "sdy.propagation_barrier")
_INLINED = ("sdy.named_computation", "sdy.manual_computation")
_ERASED = ("sdy.mesh", "sdy.sharding_group")
# Why a shard_map that splits its arrays is refused, in both dialects.
ONE_DEVICE = (
    "tilefuse compiles for one device, so a shard_map must run on a mesh whose "
    "axes it splits over have size 1"
)
# GSPMD's custom calls: an annotation, and the two ends of a shard_map.
_GSPMD_ANNOTATION = "Sharding"
_GSPMD_SHARD_MAP = ("SPMDFullToShardShape", "SPMDShardToFullShape")


def uses_shardy(data: bytes) -> bool:
    """Whether the program may use the `sdy` dialect: a cheap look for its
    name before parsing it with JAX (text and bytecode both spell it)."""
    return b"sdy." in data


def drop_shardings(data: bytes, name: str) -> bytes:
    """The program as MLIR text without Shardy annotations (the module
    docstring); `data` unchanged if it has none."""
    try:
        from jax._src.interpreters import mlir as jax_mlir
        from jaxlib.mlir import ir
    except ImportError:
        raise TilefuseError(
            "the program has Shardy (sdy) sharding annotations: reading them needs "
            "JAX (pip install 'tilefuse[jax]'), or lower the function without a mesh",
            name,
        ) from None
    said: list[str] = []
    with jax_mlir.make_ir_context() as ctx:
        ctx.attach_diagnostic_handler(lambda d: said.append(str(d)) or True)
        try:
            module = ir.Module.parse(data)
        except Exception:  # noqa: BLE001 -- the IREE parse says what is wrong
            return data
        ops = []
        module.operation.walk(lambda op: ops.append(op) or ir.WalkResult.ADVANCE)
        # An sdy.return goes with the computation it ends.
        sdy_ops = [op for op in ops if op.name.startswith("sdy.") and op.name != "sdy.return"]
        sdy_attrs = [op for op in ops if _has_sdy_attributes(op, ir)]
        if not sdy_ops and not sdy_attrs:
            return data
        for op in sdy_attrs:
            _drop_sdy_attributes(op, ir)
        # Innermost first, so that an inlined body's own sdy ops are gone
        # before it moves (walk lists an op after the ops it holds).
        for op in sdy_ops:
            _drop_op(op, name, ir)
        return module.operation.get_asm(enable_debug_info=True).encode()


def drop_gspmd(module, name: str) -> bool:
    """Replace GSPMD's sharding custom calls in `module` (parsed in IREE's
    context) by their operands; whether any was. A shard_map end whose piece
    is not the whole array is a TilefuseError at its line."""
    calls = []
    for op in walk(module.operation):
        if op.name != "stablehlo.custom_call":
            continue
        target = iree_ir.StringAttr(op.attributes["call_target_name"]).value
        if target == _GSPMD_ANNOTATION or target in _GSPMD_SHARD_MAP:
            calls.append((op, target))
    for op, target in calls:
        if len(op.operands) != 1 or len(op.results) != 1:
            raise TilefuseError(
                f"custom_call @{target} with {len(op.operands)} operands: not a GSPMD "
                "sharding annotation tilefuse knows",
                _where(op, name),
            )
        operand, result = op.operands[0], op.results[0]
        if operand.type != result.type:
            raise TilefuseError(
                f"custom_call @{target} turns a {operand.type} into {result.type} over a mesh: "
                + ONE_DEVICE,
                _where(op, name),
            )
        result.replace_all_uses_with(operand)
        op.erase()
    return bool(calls)


def _sdy_keys(attributes, ir) -> list[str]:
    """The `sdy.*` names among an op's attributes (which iterate as names)
    or in one argument's or result's dictionary (as named attributes)."""
    names = [n if isinstance(n, str) else n.name for n in attributes]
    return [n for n in names if n.startswith("sdy.")]


def _has_sdy_attributes(op, ir) -> bool:
    if _sdy_keys(op.attributes, ir):
        return True
    return any(
        _sdy_keys(ir.DictAttr(d), ir)
        for key in ("arg_attrs", "res_attrs")
        if key in op.attributes
        for d in ir.ArrayAttr(op.attributes[key])
    )


def _drop_sdy_attributes(op, ir) -> None:
    for key in _sdy_keys(op.attributes, ir):
        del op.attributes[key]
    for key in ("arg_attrs", "res_attrs"):
        if key in op.attributes:
            kept = [
                ir.DictAttr.get(
                    {n.name: n.attr for n in ir.DictAttr(d) if not n.name.startswith("sdy.")}
                )
                for d in ir.ArrayAttr(op.attributes[key])
            ]
            op.attributes[key] = ir.ArrayAttr.get(kept)


def _drop_op(op, name: str, ir) -> None:
    kind = op.name
    if kind in _PASS_THROUGH:
        op.results[0].replace_all_uses_with(op.operands[0])
        op.erase()
    elif kind in _ERASED:
        op.erase()
    elif kind in _INLINED:
        _inline(op, name, ir)
    else:
        raise TilefuseError(
            f"{kind}: tilefuse compiles for one device and cannot drop this "
            "Shardy op (it is not a sharding annotation)",
            _where(op, name),
        )


def _inline(op, name: str, ir) -> None:
    """Move the body of a named or manual computation in front of it: its
    block's arguments become the op's operands, its results what the body
    returns. Only where each per-device value is the whole array."""
    block = op.regions[0].blocks[0]
    for arg, operand in zip(block.arguments, op.operands):
        if arg.type != operand.type:
            raise TilefuseError(
                f"{op.name} splits a {operand.type} into {arg.type} pieces over a mesh: "
                + ONE_DEVICE,
                _where(op, name),
            )
        arg.replace_all_uses_with(operand)
    body = list(block.operations)
    terminator = body[-1]
    for result, value in zip(op.results, terminator.operands):
        if result.type != value.type:
            raise TilefuseError(
                f"{op.name} assembles a {result.type} from {value.type} pieces over a mesh: "
                "tilefuse compiles for one device",
                _where(op, name),
            )
        result.replace_all_uses_with(value)
    for inner in body[:-1]:
        inner.move_before(op)
    op.erase()


def _where(op, name: str) -> str:
    from .frontend import location_text

    return location_text(op.location, name)
