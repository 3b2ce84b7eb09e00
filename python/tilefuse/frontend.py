"""Load a StableHLO program (text, bytecode, or a string) and check it.

What `jax.export` writes is read too: a serialized `Exported`
(`exported.serialize()`) and a StableHLO portable artifact
(`exported.mlir_module_serialized`, VHLO bytecode); both are turned into
StableHLO with JAX's own reader, so they need the `jax` extra.

Every problem becomes one TilefuseError that names the file and line, so the
CLI never shows a traceback.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from iree.compiler import ir

from . import shardings
from .errors import TilefuseError
from .irutil import context

BYTECODE_MAGIC = b"ML\xefR"


@dataclass
class Program:
    text: str  # MLIR text of the whole module
    name: str  # how messages refer to it (a path or "<string>")
    path: Path | None  # the file it came from, if any
    functions: list[str]  # public functions, the callable entry points
    # Whether `text` says something other than the file (annotations
    # dropped, shardings.py): then phase 1 must read `text`, not `path`.
    edited: bool = False


def location_text(loc: ir.Location, name: str | None = None) -> str:
    """`name:line:col` of a file location (`name` defaults to its file), or
    `name` (else the location as printed) if it has no file position."""
    # Python bindings print a file location as loc("file":line:col), and an
    # op inlined from a call (a while body's) as loc(callsite("file":line:col
    # at ...)): its own position comes first.
    m = re.match(r'loc\((?:callsite\()?"([^"]*)":(\d+):(\d+)', str(loc))
    if not m:
        return name or str(loc)
    return f"{name or m.group(1)}:{m.group(2)}:{m.group(3)}"


def _looks_like_path(source: str) -> bool:
    return (
        "\n" not in source
        and len(source) < 4096
        and not source.lstrip().startswith(("module", "func.func", "#", "//"))
    )


def load_program(source: str | Path | bytes) -> Program:
    """`source` is a path, MLIR text, or MLIR bytecode."""
    path = None
    if isinstance(source, Path) or (isinstance(source, str) and _looks_like_path(source)):
        path = Path(source)
        if path.is_dir():
            raise TilefuseError(f"{path} is a directory, not a program file")
        if not path.is_file():
            raise TilefuseError(f"no such file: {path}")
        data = path.read_bytes()
        name = str(path)
    elif isinstance(source, bytes):
        data, name = source, "<bytes>"
    else:
        data, name = source.encode(), "<string>"

    exported = _from_jax_export(data, name)
    if exported is not data:
        # iree-compile cannot read what jax.export serialized: phase 1 reads
        # the StableHLO text instead (driver.phase1_input).
        data, path = exported, None
    edited = False
    if shardings.uses_shardy(data):
        # IREE registers no Shardy dialect; on one device its annotations
        # change nothing (shardings.py).
        dropped = shardings.drop_shardings(data, name)
        edited, data = dropped is not data, dropped
    ctx = context()
    if data.startswith(BYTECODE_MAGIC):
        asm: str | bytes = data
    else:
        try:
            asm = data.decode()
        except UnicodeDecodeError:
            raise TilefuseError("not MLIR text or bytecode (not UTF-8)", name) from None
    try:
        module = ir.Module.parse(asm, ctx)
    except ir.MLIRError as e:
        diags = e.error_diagnostics
        if diags:
            d = diags[0]
            raise TilefuseError(d.message, location_text(d.location, name)) from None
        raise TilefuseError(f"cannot parse: {e}", name) from None

    functions = []
    for op in module.body.operations:
        if op.operation.name == "func.func":
            attrs = op.operation.attributes
            visibility = attrs["sym_visibility"].value if "sym_visibility" in attrs else "public"
            if visibility == "public" and len(op.operation.regions[0].blocks) > 0:
                functions.append(ir.StringAttr(attrs["sym_name"]).value)
    if not functions:
        raise TilefuseError("no public function to compile (expected a func.func)", name)
    # IREE parses GSPMD's sharding custom calls but cannot lower them.
    edited = shardings.drop_gspmd(module, name) or edited
    text = module.operation.get_asm(enable_debug_info=True)
    if path is not None:
        # Keep the user's file name in locations, for IREE's error messages.
        text = text.replace('loc("-":', f'loc("{path}":')
    return Program(text=text, name=name, path=path, functions=functions, edited=edited)


def _from_jax_export(data: bytes, name: str) -> bytes:
    """StableHLO text for what jax.export serializes; other input unchanged."""
    # The bytecode's producer string (after the magic and a version number).
    portable = data.startswith(BYTECODE_MAGIC) and b"StableHLO_v" in data[:32]
    exported = not data.startswith(BYTECODE_MAGIC) and _is_flatbuffer(data)
    if not (portable or exported):
        return data
    what = "a StableHLO portable artifact" if portable else "a jax.export serialization"
    try:
        import jax.export
        from jax._src.interpreters import mlir as jax_mlir
        from jaxlib.mlir.dialects import stablehlo
    except ImportError:
        raise TilefuseError(
            f"{what}: reading it needs JAX (pip install 'tilefuse[jax]'), "
            "or give the StableHLO as text (exported.mlir_module())",
            name,
        ) from None
    said: list[str] = []
    try:
        if exported:
            return jax.export.deserialize(bytearray(data)).mlir_module().encode()
        # JAX's context: the artifact may hold Shardy ops (shardings.py).
        with jax_mlir.make_ir_context() as ctx:
            # Keep the reader's diagnostics for the one error line.
            ctx.attach_diagnostic_handler(lambda d: said.append(str(d)) or True)
            module = stablehlo.deserialize_portable_artifact(ctx, data)
            return module.operation.get_asm(enable_debug_info=True).encode()
    except Exception as e:  # noqa: BLE001 -- JAX's reader errors, said once
        why = said[0] if said else str(e)
        raise TilefuseError(f"{what} that JAX cannot read: {why}", name) from None


def _is_flatbuffer(data: bytes) -> bool:
    """A jax.export serialization: a flatbuffer (a little-endian root offset
    into the buffer), not UTF-8 text."""
    if len(data) < 8:
        return False
    try:
        data[:256].decode()
        return False
    except UnicodeDecodeError:
        pass
    root = int.from_bytes(data[:4], "little")
    return 8 <= root < len(data)
