"""Load a compiled module on an IREE device and call it with numpy arrays."""

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from iree import runtime as rt

from .errors import TilefuseError

try:  # bf16 and int4 arrays come from ml_dtypes, which iree-base-compiler installs
    import ml_dtypes

    _BF16 = np.dtype(ml_dtypes.bfloat16)
    # 4-bit integers: numpy holds one per byte, IREE two per byte (the first
    # in the low nibble); the element type IREE's buffer views carry.
    PACKED = {
        "i4": (np.dtype(ml_dtypes.int4), rt.HalElementType.SINT_4),
        "ui4": (np.dtype(ml_dtypes.uint4), rt.HalElementType.UINT_4),
    }
except ImportError:  # pragma: no cover
    _BF16 = None
    PACKED = {}

DTYPES = {
    "f64": np.dtype(np.float64),
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "i64": np.dtype(np.int64),
    "i32": np.dtype(np.int32),
    "i16": np.dtype(np.int16),
    "i8": np.dtype(np.int8),
    "i1": np.dtype(np.bool_),
    "ui8": np.dtype(np.uint8),
    "ui16": np.dtype(np.uint16),
    "ui32": np.dtype(np.uint32),
    "ui64": np.dtype(np.uint64),
    "complex<f32>": np.dtype(np.complex64),
    "complex<f64>": np.dtype(np.complex128),
}
if _BF16 is not None:
    DTYPES["bf16"] = _BF16
DTYPES.update({name: dtype for name, (dtype, _) in PACKED.items()})
# IREE's element type numbers of the packed types (a signless i4 result
# carries INT_4), to the numpy dtype they unpack to.
_UNPACKED = {int(rt.HalElementType.INT_4): PACKED.get("i4", (None,))[0]}
_UNPACKED.update({int(element): dtype for dtype, element in PACKED.values()})

DRIVERS = {"vulkan": "vulkan", "cuda": "cuda", "local-task": "local-task", "cpu": "local-task"}


@dataclass
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str

    def __str__(self):
        return f"tensor<{'x'.join(map(str, self.shape)) + 'x' if self.shape else ''}{self.dtype}>"


# One argument or result of an ABI declaration: its type, then the type the
# program declared where IREE stores it as another (`tensor<4xi8>
# {iree.abi.encoding = tensor<4xui8>}` for an unsigned tensor). Types nest
# angle brackets (`tensor<4xcomplex<f32>>`): _tensor_types reads them.
_ARGUMENT = re.compile(r"%\w+: (?=tensor<)")
_ENCODING = " {iree.abi.encoding = "


def _balanced(text: str, start: int) -> int:
    """The index after the `>` closing the `<` of the type at `start`."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "<":
            depth += 1
        elif text[i] == ">":
            depth -= 1
            if depth == 0:
                return i + 1
    raise TilefuseError(f"unbalanced type in the module's ABI declaration: {text[start:]}")


def _tensor_types(text: str) -> list[str]:
    """The declared type of each tensor argument (or result) in `text`, the
    body inside `tensor<...>`: the ABI encoding's where there is one."""
    found = []
    for m in _ARGUMENT.finditer(text):
        end = _balanced(text, m.end())
        body = text[m.end() + len("tensor<") : end - 1]
        if text.startswith(_ENCODING + "tensor<", end):
            start = end + len(_ENCODING)
            body = text[start + len("tensor<") : _balanced(text, start) - 1]
        found.append(body)
    return found


def _parse_spec(text: str) -> TensorSpec:
    # The element type is all after the last dim: "4xcomplex<f32>" holds an x.
    dims = []
    while (m := re.match(r"(\d+|\?)x", text)) is not None:
        dims.append(int(m.group(1)) if m.group(1) != "?" else -1)
        text = text[m.end() :]
    return TensorSpec(tuple(dims), text)


def signature(function: rt.VmFunction) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """Argument and result types from the function's ABI declaration."""
    decl = function.reflection.get("iree.abi.declaration", "")
    args_text, _, results_text = decl.partition("->")
    return (
        [_parse_spec(t) for t in _tensor_types(args_text)],
        [_parse_spec(t) for t in _tensor_types(results_text)],
    )


def _to_numpy(device: rt.HalDevice, value) -> np.ndarray:
    """Copy a result to the host through a mappable staging buffer.

    `to_host()` imports a numpy allocation, which lavapipe refuses unless it is
    4096-byte aligned; a staging copy works on every driver.
    """
    view = value._buffer_view if hasattr(value, "_buffer_view") else value
    source = view.get_buffer()
    staging = device.allocator.allocate_buffer(
        memory_type=int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE),
        allowed_usage=int(rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED),
        allocation_size=source.byte_length(),
    )
    sem = device.create_semaphore(0)
    device.queue_copy(
        source,
        staging,
        wait_semaphores=rt.HalFence.create_at(sem, 0),
        signal_semaphores=rt.HalFence.create_at(sem, 1),
    )
    rt.HalFence.create_at(sem, 1).wait()
    unpacked = _UNPACKED.get(int(view.element_type))
    if unpacked is not None:
        return _unpack(
            staging.map().asarray([source.byte_length()], np.dtype(np.uint8)), view.shape, unpacked
        )
    dtype = rt.HalElementType.map_to_dtype(view.element_type)
    return staging.map().asarray(view.shape, np.dtype(dtype)).copy()


def _pack(array: np.ndarray) -> np.ndarray:
    """4-bit integers, one per byte, as IREE stores them: two per byte."""
    nibbles = array.reshape(-1).view(np.uint8) & 0xF
    if nibbles.size % 2:
        nibbles = np.append(nibbles, np.uint8(0))
    return nibbles[0::2] | (nibbles[1::2] << 4)


def _unpack(packed: np.ndarray, shape, dtype: np.dtype) -> np.ndarray:
    count = int(np.prod(shape))
    nibbles = np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(-1)[:count]
    if dtype == PACKED["i4"][0]:
        nibbles = (nibbles.astype(np.int8) ^ 8) - 8  # sign-extend bit 3
    return nibbles.astype(dtype).reshape(shape)


def _device_arg(device: rt.HalDevice, array: np.ndarray, spec: "TensorSpec"):
    """An argument as the compiled function takes it: numpy arrays as they
    are (IREE's invoker copies them), 4-bit integers packed into a buffer
    view of IREE's packed element type."""
    if spec.dtype not in PACKED:
        return array
    buffer = rt.asdevicearray(device, _pack(array))._buffer_view.get_buffer()
    view = rt.HalBufferView(buffer, list(array.shape), PACKED[spec.dtype][1])
    return rt.DeviceArray(device, view)


class Function:
    def __init__(self, module: "CompiledModule", name: str, vm_function: rt.VmFunction):
        self.module = module
        self.name = name
        self.arg_specs, self.result_specs = signature(vm_function)
        # The VM module is named after the MLIR module (`module @jit_f` from
        # JAX, `module` when unnamed), so look it up under its own name.
        self._call = module._context.modules[module.vm_name][name]

    def check_args(self, args) -> list[np.ndarray]:
        if len(args) != len(self.arg_specs):
            raise TilefuseError(
                f"{self.name} takes {len(self.arg_specs)} arguments "
                f"({', '.join(map(str, self.arg_specs))}), got {len(args)}"
            )
        checked = []
        for i, (arg, spec) in enumerate(zip(args, self.arg_specs)):
            arr = np.asarray(arg)
            want = DTYPES.get(spec.dtype)
            if want is None:
                raise TilefuseError(f"argument {i} of {self.name}: unsupported type {spec}")
            if arr.dtype != want:
                raise TilefuseError(
                    f"argument {i} of {self.name}: expected {spec} ({want}), got dtype {arr.dtype}"
                )
            if tuple(arr.shape) != spec.shape and -1 not in spec.shape:
                raise TilefuseError(
                    f"argument {i} of {self.name}: expected {spec}, got shape {tuple(arr.shape)}"
                )
            checked.append(np.require(arr, requirements="C"))  # keeps 0-d arrays 0-d
        return checked

    def to_device(self, *args) -> list:
        """Check the arguments and copy them to the device once, for repeated calls."""
        device = self.module._config.device
        arrays = self.check_args(args)
        device_args = [_device_arg(device, a, s) for a, s in zip(arrays, self.arg_specs)]
        return [
            rt.asdevicearray(device, a) if isinstance(a, np.ndarray) else a for a in device_args
        ]

    def invoke(self, device_args: list):
        """Call with arguments from `to_device`; results stay on the device.

        The compiled function is synchronous, so this returns when the device
        work is done: what `tilefuse bench` times.
        """
        return self._call(*device_args)

    def __call__(self, *args):
        arrays = self.check_args(args)
        device = self.module._config.device
        result = self._call(*[_device_arg(device, a, s) for a, s in zip(arrays, self.arg_specs)])
        if isinstance(result, (tuple, list)):
            return tuple(_to_numpy(device, r) for r in result)
        return _to_numpy(device, result)


def open_device(device: str) -> rt.Config:
    driver = DRIVERS.get(device)
    if driver is None:
        raise TilefuseError(f"unknown device '{device}'; known: {', '.join(DRIVERS)}")
    try:
        return rt.Config(driver)
    except (RuntimeError, ValueError) as e:
        raise TilefuseError(f"cannot open device '{device}': {e}") from None


class CompiledModule:
    """A compiled program on one device; its functions take numpy arrays."""

    def __init__(self, vmfb: bytes, device: str, reports=None, config: rt.Config | None = None):
        """`config` shares one opened device between modules (see `open_device`)."""
        self._config = config or open_device(device)
        self._context = rt.SystemContext(config=self._config)
        try:
            vm_module = rt.VmModule.copy_buffer(self._context.instance, vmfb)
        except (RuntimeError, ValueError) as e:
            raise TilefuseError(f"not a loadable IREE module: {e}") from None
        self._context.add_vm_module(vm_module)
        self.vm_name = vm_module.name
        self.device = device
        self.reports = reports or []
        self.functions = {}
        for name in vm_module.function_names:
            fn = vm_module.lookup_function(name)
            if fn is not None and "iree.abi.declaration" in fn.reflection:
                self.functions[name] = Function(self, name, fn)

    def __getattr__(self, name):
        functions = self.__dict__.get("functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(f"module has no function '{name}' (has: {', '.join(functions)})")

    def __getitem__(self, name) -> Function:
        if name not in self.functions:
            raise TilefuseError(
                f"module has no function '{name}' (has: {', '.join(self.functions)})"
            )
        return self.functions[name]


def load(path: str | Path, device: str = "vulkan") -> CompiledModule:
    path = Path(path)
    if not path.is_file():
        raise TilefuseError(f"no such file: {path}")
    return CompiledModule(path.read_bytes(), device)
