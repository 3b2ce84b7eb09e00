"""Run a bundle from `tilefuse bench --bundle` where the device is.

The GPU machine has numpy, ml_dtypes and the IREE runtime, but not the
compiler or tilefuse. So this module, tilefuse/runtime.py and
tilefuse/errors.py import nothing else, and the bundle carries a copy of the
three as the package `tilefuse_run` (bundle.py). There:

    cd BUNDLE && python -m tilefuse_run.bench.gpu . --device cuda

Here: `tilefuse bench --run BUNDLE [--device D]`.

For every model in the manifest: both compilers' modules run on the same
inputs and their outputs are checked first (against the sample's numpy
reference, from the bundle's copy of samples/references.py, or against each
other); then each compiler's timing module (every dispatch repeated N times
in one call, IREE's --iree-hal-benchmark-dispatch-repeat-count) is called
alternately with the other's, after warm-up, inputs resident on the device:
time per call = median(call time) / N. The peers, where asked for: XLA
through JAX on the same StableHLO, and torch.compile (Inductor) on the
sample's PyTorch function (the bundle's copy of samples/torch_peers.py).
With --ncu, each compiler's timing module also runs once under Nsight
Compute, in a child process, for the time of every kernel. Writes
results.json into the bundle and prints one line per model.
"""

import argparse
import csv
import functools
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import TilefuseError
from ..runtime import DTYPES, CompiledModule, open_device

MANIFEST = "manifest.json"
RESULTS = "results.json"
COMPILERS = ("tilefuse", "iree")
PEERS = ("xla", "inductor")
# The metric ncu reads for each kernel (--ncu): its time on the GPU.
NCU_METRIC = "gpu__time_duration.sum"
# Seconds one child run under ncu may take (every launch is profiled alone).
NCU_TIMEOUT = 900
# The device-to-device copy timed as the bandwidth reference: the rate a
# memory-bound kernel can hope for on this device (#21: about 3.0 TB/s on
# an H100 SXM against its 3.35 TB/s peak).
COPY_BYTES = 256 * 2**20
# Agreement between the two compilers' outputs when no reference exists,
# relative to the largest output magnitude (numpy dtype name -> tolerance);
# integer outputs must match exactly.
AGREEMENT = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 5e-2}


def random_inputs(signature, rng) -> list[np.ndarray]:
    """Inputs for a model with no sample reference: [(shape, type)] -> arrays."""
    arrays = []
    for shape, dtype in signature:
        if dtype not in DTYPES:
            raise TilefuseError(f"bench cannot make inputs of type {dtype}")
        np_type = DTYPES[dtype]
        if np_type == np.bool_:
            arrays.append(rng.integers(0, 2, shape).astype(np.bool_))
        elif np.issubdtype(np_type, np.integer):
            arrays.append(rng.integers(-100, 100, shape).astype(np_type))
        else:
            arrays.append(rng.standard_normal(shape).astype(np_type))
    return arrays


def max_abs_error(a: np.ndarray, b: np.ndarray) -> float:
    """Largest |a - b|; a NaN on one side only is an infinite error (a NaN
    would otherwise compare as within any tolerance)."""
    # atleast_1d: a 0-d result (a reduction to a scalar) is a numpy scalar
    # after arithmetic, which cannot be indexed by a mask.
    a, b = np.atleast_1d(np.asarray(a, dtype=np.float64)), np.asarray(b, dtype=np.float64)
    diff = np.atleast_1d(np.abs(a - b))
    diff[np.isnan(a) & np.isnan(b)] = 0.0
    diff[np.isnan(diff)] = np.inf
    return float(np.max(diff, initial=0))


def agreement_tolerance(like: list, outs: list, tf32: bool = False) -> float:
    """The tolerance of outputs `outs` against outputs `like` of another
    compiler: AGREEMENT's relative figure for the output type, times the
    largest magnitude of `like` (at least 1). `tf32`: one side multiplied f32
    as TF32, whose operands keep f16's 10 mantissa bits: f32 outputs get
    f16's figure."""
    scale = max((float(np.max(np.abs(o.astype(np.float64)), initial=0)) for o in like), default=0)
    table = {**AGREEMENT, "float32": AGREEMENT["float16"]} if tf32 else AGREEMENT
    rel = max((table.get(str(o.dtype), 0.0) for o in outs), default=0.0)
    return rel * max(scale, 1.0)


def xla_verdict(outputs: dict[str, list], xla_outs: list, tf32: bool = False) -> dict:
    """Both compilers' outputs against XLA's, for a model with no numpy
    reference: XLA is an independent compiler, so agreement with it is
    evidence that two IREE-based compilers agreeing is not. `tf32`: the
    model has f32 contractions, which XLA's default precision runs as TF32
    on Ampere and later (its reference is TF32-rounded, the reference
    named "xla (tf32)")."""
    tol = agreement_tolerance(xla_outs, outputs["tilefuse"], tf32)
    verdict = numerics_verdict(outputs, xla_outs, tol)
    verdict["reference"] = "xla (tf32)" if tf32 else "xla"
    return verdict


def numerics_verdict(outputs: dict[str, list], refs, tol) -> dict:
    """Both compilers' outputs against the reference (or each other):
    reference, tolerance, max_error per compiler, max_difference, numerics."""
    tf, iree = outputs["tilefuse"], outputs.get("iree")
    verdict = {"reference": "none", "max_error": {}}
    if iree is not None:
        diffs = (max_abs_error(a, b) for a, b in zip(tf, iree))
        verdict["max_difference"] = max(diffs, default=0.0)
    if refs is not None:
        verdict["reference"], verdict["tolerance"] = "numpy", tol
        for compiler, outs in outputs.items():
            verdict["max_error"][compiler] = max(max_abs_error(o, r) for o, r in zip(outs, refs))
        bad = [c for c in outputs if verdict["max_error"][c] > tol]
        if "tilefuse" in bad:
            verdict["numerics"] = f"FAIL: {', '.join(bad)} over {tol:g}"
        else:  # a wrong baseline is reported, not an error of tilefuse's
            verdict["numerics"] = "ok" + "".join(f"; {c} over {tol:g}" for c in bad)
        return verdict
    if iree is None:
        verdict["numerics"] = "unchecked: no reference, and plain IREE did not compile it"
        return verdict
    verdict["tolerance"] = agreement_tolerance(iree, tf)
    ok = verdict["max_difference"] <= verdict["tolerance"]
    diff = verdict["max_difference"]
    verdict["numerics"] = "ok (agree)" if ok else f"FAIL: compilers differ by {diff:g}"
    return verdict


def time_interleaved(functions, device_args, repeat_counts, repeats: int, warmup: int):
    """Per function, `repeats` times per call (seconds / its repeat count),
    the functions called alternately so that drift hits all alike. Each call
    is synchronous: it returns when the device work is done."""
    for _ in range(warmup):
        for f, args in zip(functions, device_args):
            f.invoke(args)
    times = [[] for _ in functions]
    for _ in range(repeats):
        for f, args, count, out in zip(functions, device_args, repeat_counts, times):
            start = time.perf_counter()
            f.invoke(args)
            out.append((time.perf_counter() - start) / count)
    return times


def kernel_seconds(compilers, counts, timing_times, call_times) -> dict:
    """Per compiler, from the wall times of calls of its timing module (every
    dispatch N times) and of its plain module (once): `seconds`, the device
    time of one call's dispatches, (timing - plain) / (N - 1), which cancels
    what a call costs besides its dispatches (on an H200 a call of a program
    with 128 MiB of output cost several times its kernels: the runtime's
    allocations and submission); `call_seconds`, a plain call as a user sees
    it; `amortized_seconds`, the timing call over N (the figure before the
    subtraction). Where noise makes the difference non-positive, or N is 1,
    `seconds` is the amortized figure."""
    result = {"seconds": {}, "call_seconds": {}, "amortized_seconds": {}, "all_seconds": {}}
    for c, n, many, once in zip(compilers, counts, timing_times, call_times):
        t_n, t_1 = statistics.median(many), statistics.median(once)
        amortized = t_n / n
        kernels = (t_n - t_1) / (n - 1) if n > 1 else amortized
        result["seconds"][c] = kernels if kernels > 0 else amortized
        result["call_seconds"][c] = t_1
        result["amortized_seconds"][c] = amortized
        result["all_seconds"][c] = [t / n for t in many]
    return result


@functools.cache
def _references(bundle: Path):
    """The bundle's copy of samples/references.py, as a module (loaded once
    per run, not once per model)."""
    spec = importlib.util.spec_from_file_location("tilefuse_references", bundle / "references.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def model_inputs(bundle: Path, model: dict):
    """(inputs, references or None, tolerance or None), made as `tilefuse
    bench` makes them: seed 0, the sample's own inputs where it is one."""
    rng = np.random.default_rng(0)
    if "sample" in model:
        return getattr(_references(bundle), model["sample"])(rng, small=model.get("small", False))
    signature = [(tuple(shape), dtype) for shape, dtype in model["signature"]]
    return random_inputs(signature, rng), None, None


def xla_peer(text: str, inputs, refs, tol, count: int, repeats: int, warmup: int) -> dict:
    """XLA (through the JAX installed beside this runner) on the same
    StableHLO and inputs, on JAX's default device: numerics against the
    reference, and time per call over `count` back-to-back calls (they queue
    on the device; the last is waited for), median over `repeats`.

    It compiles the module text with the client's compile_and_load, an API
    below jax's public one (it held on JAX 0.10); any failure is reported
    as the peer's status, never as the run's."""
    try:
        import jax
        from jax._src.lib import xla_client

        device = jax.devices()[0]
        executable = device.client.compile_and_load(text, [device], xla_client.CompileOptions())
        buffers = [jax.device_put(a, device) for a in inputs]

        def call():
            outs = executable.execute(buffers)
            for o in outs:
                o.block_until_ready()
            return outs

        outputs = [np.asarray(o) for o in call()]
        for _ in range(warmup):
            call()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(count - 1):
                executable.execute(buffers)
            call()
            times.append((time.perf_counter() - start) / count)
    except Exception as e:  # noqa: BLE001 -- a peer's failure is a finding, not a crash
        return {"status": f"unavailable: {type(e).__name__}: {str(e)[:300]}"}
    peer = {"status": "ok", "device": str(device), "seconds": statistics.median(times)}
    peer["outputs"] = outputs  # popped by run_model (not JSON)
    if refs is not None:
        peer["max_error"] = max(max_abs_error(o, r) for o, r in zip(outputs, refs))
        peer["numerics"] = "ok" if peer["max_error"] <= tol else f"over {tol:g}"
    return peer


TORCH_PEERS = "torch_peers.py"


@dataclass(frozen=True)
class TorchOptions:
    """How the inductor peer compiles and where it runs."""

    device: str | None = None  # torch's device; None: cuda where torch has one, else cpu
    backend: str = "inductor"  # torch.compile's backend ("eager": no code generated)
    mode: str | None = None  # torch.compile's mode (None: default; reduce-overhead: CUDA graphs)


@functools.cache
def _torch_peers(bundle: Path, path: str = TORCH_PEERS):
    """A torch_peers.py of the bundle as a module (it imports torch: loaded
    only when the inductor peer runs): samples/torch_peers.py by default,
    else the copy of another program folder's (a model's `torch_peers`)."""
    path = bundle / path
    if not path.is_file():
        raise FileNotFoundError(f"no {path.name} in the bundle")
    name = "tilefuse_torch_peers_" + path.parent.name.replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def to_torch(array: np.ndarray, device):
    """A numpy array (bf16 from ml_dtypes too) as a torch tensor on `device`."""
    import torch

    array = np.require(array, requirements="C")  # keeps 0-d arrays 0-d
    if "bf16" in DTYPES and array.dtype == DTYPES["bf16"]:
        # torch reads no ml_dtypes array: the same bits, as int16, viewed as bf16.
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16).to(device)
    return torch.from_numpy(array).to(device)


def from_torch(tensor) -> np.ndarray:
    """A torch tensor as a numpy array on the host (bf16 as ml_dtypes')."""
    import torch

    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(DTYPES["bf16"])
    return tensor.numpy()


def _torch_seconds(torch, device, call, count: int) -> float:
    """Seconds per call over `count` back-to-back calls: between two CUDA
    events on CUDA (the calls queue on the stream; the last is waited for),
    else by the wall clock around calls that return when done."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(count):
            call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / count  # elapsed_time is in ms
    start = time.perf_counter()
    for _ in range(count):
        call()
    return (time.perf_counter() - start) / count


def peer_numerics(outputs: list, refs, tol, like: list) -> dict:
    """A peer's outputs against the program's own (`like`: the tilefuse
    module's, for count, shapes and element types) and the reference:
    max_error and numerics. A PyTorch function is written by hand, so it
    can return another type or shape than the StableHLO program."""
    if len(outputs) != len(like):
        return {"numerics": f"FAIL: {len(outputs)} outputs, the program returns {len(like)}"}
    for i, (o, want) in enumerate(zip(outputs, like)):
        if o.shape != want.shape or o.dtype != want.dtype:
            return {
                "numerics": f"FAIL: output {i} is {o.dtype}{list(o.shape)}, "
                f"the program returns {want.dtype}{list(want.shape)}"
            }
    if refs is None:
        return {}
    error = max(max_abs_error(o, r) for o, r in zip(outputs, refs))
    return {"max_error": error, "numerics": "ok" if error <= tol else f"over {tol:g}"}


def inductor_peer(
    bundle: Path,
    model: dict,
    inputs,
    refs,
    tol,
    like: list,
    count: int,
    repeats: int,
    warmup: int,
    options: TorchOptions = TorchOptions(),
) -> dict:
    """torch.compile (Inductor by default) on the sample's PyTorch function
    from the bundle's torch_peers.py, on the same inputs moved to torch's
    device: numerics against the reference (and the program's output types),
    and time per call over `count` back-to-back calls, median over
    `repeats`, as xla_peer times. No torch, no function for the model, or a
    compile error: the peer's status says so; the run goes on."""
    if "sample" not in model and "torch_peers" not in model:
        return {"status": "unavailable: not a sample, no PyTorch function"}
    stage = "unavailable"
    try:
        import torch

        if "sample" in model:
            fn = _torch_peers(bundle).SAMPLES.get(model["sample"])
        else:  # a program folder's torch_peers.py, by the program's name
            fn = _torch_peers(bundle, model["torch_peers"]).PROGRAMS.get(model["name"])
        if fn is None:
            key = model.get("sample", model["name"])
            return {"status": f"unavailable: no PyTorch function for {key}"}
        device = torch.device(options.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        args = [to_torch(a, device) for a in inputs]
        stage = "failed"
        torch.compiler.reset()  # each model compiles afresh, with its own shapes
        compiled = torch.compile(
            fn, backend=options.backend, mode=options.mode, fullgraph=True, dynamic=False
        )

        def call():
            return compiled(*args)

        with torch.no_grad():
            out = call()
            out = list(out) if isinstance(out, (tuple, list)) else [out]
            outputs = [from_torch(o) for o in out]
            for _ in range(warmup):
                call()
            times = [_torch_seconds(torch, device, call, count) for _ in range(repeats)]
    except Exception as e:  # noqa: BLE001 -- a peer's failure is a finding, not a crash
        return {"status": f"{stage}: {type(e).__name__}: {' '.join(str(e).split())[:300]}"}
    peer = {
        "status": "ok",
        "device": str(device),
        "torch": torch.__version__,
        "backend": options.backend,
        "mode": options.mode or "default",
        "timer": "cuda events" if device.type == "cuda" else "wall clock",
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "seconds": statistics.median(times),
    }
    peer.update(peer_numerics(outputs, refs, tol, like))
    return peer


# ncu's time units (older releases spell them out, newer ones abbreviate).
NCU_UNITS = {
    "nsecond": 1e-9,
    "ns": 1e-9,
    "usecond": 1e-6,
    "us": 1e-6,
    "msecond": 1e-3,
    "ms": 1e-3,
    "second": 1.0,
    "s": 1.0,
}


def parse_ncu_csv(text: str, metric: str = NCU_METRIC) -> list[dict]:
    """What `ncu --csv --metrics METRIC` prints (one row per kernel launch
    and metric: "ID","Process ID","Process Name","Host Name","Kernel Name",
    ...,"Metric Name","Metric Unit","Metric Value"), with ncu's ==PROF==
    lines and the program's own output around it, as one entry per launch
    in ncu's order: {"id", "kernel", "seconds"}. Values may carry thousands
    separators ("1,234.5"). No header: no launches. A time in a unit it does
    not know is a ValueError."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = list(csv.reader(lines))
    header = next((i for i, r in enumerate(rows) if r[:1] == ["ID"] and "Kernel Name" in r), None)
    if header is None:
        return []
    names = rows[header]
    needed = ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")
    missing = [n for n in needed if n not in names]
    if missing:
        raise ValueError(f"ncu's CSV has no column {', '.join(missing)}")
    col = {n: names.index(n) for n in needed}
    launches = []
    for row in rows[header + 1 :]:
        if len(row) != len(names) or row[col["Metric Name"]] != metric:
            continue  # another metric, or a line that is not ncu's
        unit = row[col["Metric Unit"]].strip()
        if unit not in NCU_UNITS:
            raise ValueError(f"{metric} in unit {unit!r}, not a time unit")
        value = float(row[col["Metric Value"]].replace(",", "")) * NCU_UNITS[unit]
        launches.append(
            {"id": int(row[col["ID"]]), "kernel": row[col["Kernel Name"]], "seconds": value}
        )
    return launches


def dispatch_times(launches: list[dict], repeat: int) -> dict:
    """Launches of a timing module's one call (every dispatch `repeat` times)
    per kernel, in the order each first ran: launches, per_call (launches /
    repeat: how often one call of the real module runs it), the median,
    smallest and total seconds; and seconds_per_call, the kernels' time in
    one call of the real module (total / repeat)."""
    by_kernel: dict[str, list[float]] = {}
    for launch in launches:
        by_kernel.setdefault(launch["kernel"], []).append(launch["seconds"])
    return {
        "launches": len(launches),
        "seconds_per_call": sum(launch["seconds"] for launch in launches) / repeat,
        "dispatches": [
            {
                "kernel": kernel,
                "launches": len(times),
                "per_call": len(times) / repeat,
                "median_seconds": statistics.median(times),
                "min_seconds": min(times),
                "total_seconds": sum(times),
            }
            for kernel, times in by_kernel.items()
        ],
    }


def ncu_kernels(
    bundle: Path, model: dict, compiler: str, device: str, ncu: str = "ncu", timeout=NCU_TIMEOUT
) -> dict:
    """The compiler's timing module for `model`, called once in a child
    process (this runner with --single-call) under `ncu --csv --metrics
    NCU_METRIC`: each kernel's time on the GPU, per dispatch (dispatch_times).
    ncu missing or failing: the status says so."""
    exe = shutil.which(ncu)
    if exe is None:
        return {"status": f"unavailable: {ncu} not found (not on PATH; --ncu PATH names it)"}
    package = __package__ or "tilefuse_run.bench"
    root = Path(__file__).resolve().parents[len(package.split("."))]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH")) if p)
    command = [
        # --clock-control none: the clocks the timed run had, not ncu's
        # default of locking them to base (the device tool's METHOD.md).
        exe, "--csv", "--clock-control", "none", "--metrics", NCU_METRIC,
        sys.executable, "-m", f"{package}.gpu", str(bundle.resolve()),
        "--only", model["name"], "--compiler", compiler, "--single-call", "--device", device,
    ]  # fmt: skip
    try:
        proc = subprocess.run(
            command, check=False, capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired:
        return {"status": f"failed: ncu ran over {timeout} s"}
    errors = [
        line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("==ERROR==")
    ]
    if proc.returncode != 0 or errors:
        why = "; ".join(errors) or proc.stderr.strip()[-300:]
        return {"status": f"failed: ncu exit status {proc.returncode}: {why[:300]}"}
    try:
        launches = parse_ncu_csv(proc.stdout)
    except ValueError as e:
        return {"status": f"failed: {e}"}
    if not launches:
        return {"status": f"failed: ncu profiled no kernel: {proc.stdout.strip()[-300:]}"}
    return {"status": "ok", **dispatch_times(launches, model["repeat"][compiler])}


def single_call(bundle: Path, name: str, compiler: str, device: str | None) -> None:
    """One call of `compiler`'s timing module for model `name`, the inputs
    on the device first: what ncu profiles (--single-call)."""
    manifest = json.loads((bundle / MANIFEST).read_text())
    model = next((m for m in manifest["models"] if m["name"] == name), None)
    if model is None:
        raise TilefuseError(f"no model {name} in the bundle")
    if compiler not in COMPILERS:
        raise TilefuseError(f"unknown compiler {compiler}; known: {', '.join(COMPILERS)}")
    inputs, _, _ = model_inputs(bundle, model)
    config = open_device(device or manifest["device"])
    timing = CompiledModule(
        (bundle / model["files"][f"{compiler}_timing"]).read_bytes(),
        device or manifest["device"],
        config=config,
    )[model["function"]]
    timing.invoke(timing.to_device(*inputs))


# Copies queued back to back per timed sample of the copy reference: one
# copy per sample counted the host's dispatch latency (about 30 us through
# JAX) into a 230 us copy, and read 2.3 TB/s on an H200 that copies at 4.3.
COPY_QUEUE = 10


def copy_reference(nbytes: int, repeats: int, warmup: int) -> dict:
    """A device-to-device copy of `nbytes`, timed as the bandwidth reference:
    through PyTorch (`copy_` into a buffer allocated once, CUDA events around
    COPY_QUEUE copies) where it has a CUDA device, else through JAX. The
    JAX copy allocates its result every time and is timed on the host: on
    an H200 it read 3.5-3.6 TB/s, below what tilefuse's own kernels reached
    (docs/gpu-results.md), where a torch copy reads about 4.3. The result
    says which copy it is (`through`) and why torch's was not used. Any
    failure is its status, never the run's."""
    torch_copy = _torch_copy(nbytes, repeats, warmup)
    if torch_copy["status"] == "ok":
        return torch_copy
    result = _jax_copy(nbytes, repeats, warmup)
    result["torch_status"] = torch_copy["status"]
    return result


def _torch_copy(nbytes: int, repeats: int, warmup: int) -> dict:
    try:
        import torch

        if not torch.cuda.is_available():
            return {"status": "unavailable: torch has no CUDA device"}
        source = torch.zeros(nbytes // 4, dtype=torch.float32, device="cuda")
        target = torch.empty_like(source)
        for _ in range(warmup):
            target.copy_(source)
        torch.cuda.synchronize()
        times = []
        for _ in range(repeats):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(COPY_QUEUE):
                target.copy_(source)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3 / COPY_QUEUE)  # ms -> s
        name = torch.cuda.get_device_name()
    except Exception as e:  # noqa: BLE001 -- a reference's failure is a finding, not a crash
        return {"status": f"unavailable: {type(e).__name__}: {str(e)[:300]}"}
    return _copy_result("torch (CUDA events)", name, name, nbytes, statistics.median(times))


def _jax_copy(nbytes: int, repeats: int, warmup: int) -> dict:
    """The copy through JAX on its default device (XLA copies a returned
    argument that is not donated into a new buffer), timed as xla_peer
    times, COPY_QUEUE copies back to back."""
    try:
        import jax

        device = jax.devices()[0]
        x = jax.device_put(np.zeros(nbytes // 4, np.float32), device)
        copy = jax.jit(lambda a: a)
        y = copy(x)
        y.block_until_ready()
        if y.unsafe_buffer_pointer() == x.unsafe_buffer_pointer():
            return {"status": "unavailable: XLA returned the argument itself, no copy"}
        for _ in range(warmup):
            copy(x).block_until_ready()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            copies = [copy(x) for _ in range(COPY_QUEUE)]
            copies[-1].block_until_ready()
            times.append((time.perf_counter() - start) / COPY_QUEUE)
            del copies
    except Exception as e:  # noqa: BLE001 -- a reference's failure is a finding, not a crash
        return {"status": f"unavailable: {type(e).__name__}: {str(e)[:300]}"}
    kind = getattr(device, "device_kind", "")
    return _copy_result("jax", str(device), kind, nbytes, statistics.median(times))


def _copy_result(through: str, device: str, kind: str, nbytes: int, seconds: float) -> dict:
    return {
        "status": "ok",
        "through": through,
        "device": device,
        "device_kind": kind,
        "bytes": 2 * nbytes,
        "seconds": seconds,
        "bytes_per_second": 2 * nbytes / seconds,
    }


def hbm_peak(device_kind: str, peaks: dict) -> tuple[str, float] | None:
    """The (name, bytes/s) of the bundle's GPU table entry whose name's first
    word (H100, H200, A100) is in the device's name, or None."""
    for name, rate in peaks.items():
        if name.split("-")[0].lower() in device_kind.lower():
            return name, rate
    return None


def add_fractions(run: dict) -> None:
    """Each model's tilefuse bytes-floor rate as a fraction of the copy rate
    and of the HBM peak, where those are known."""
    copy = run.get("copy", {})
    peak = run.get("hbm_peak")
    tensor = run.get("tensor_peak")
    for r in run["models"]:
        rates = flop_rates(r)
        if rates:
            r["tensor_flops_per_second"] = {c: v for c, v in rates.items() if c in r["seconds"]}
            if tensor:
                tf_rate = r["tensor_flops_per_second"].get("tilefuse", 0)
                # Work that is all TF32 (a bundle for a tf32 target) against
                # the TF32 peak: half the f16 one on A100, H100 and H200.
                all_tf32 = r.get("tf32_flops") == r["tensor_core_flops"]
                flop_peak = tensor["flops_per_second"] / (2 if all_tf32 else 1)
                r["fraction_of_tensor_peak"] = tf_rate / flop_peak
        rate = r.get("floor_bytes_per_second", {}).get("tilefuse")
        if rate is None:
            continue
        if copy.get("status") == "ok":
            r["fraction_of_copy"] = rate / copy["bytes_per_second"]
        if peak:
            r["fraction_of_hbm_peak"] = rate / peak["bytes_per_second"]


def run_model(
    bundle: Path,
    model: dict,
    config,
    device: str,
    repeats: int,
    warmup: int,
    peers=(),
    torch_options: TorchOptions = TorchOptions(),
) -> dict:
    inputs, refs, tol = model_inputs(bundle, model)
    function = model["function"]
    outputs = {}
    # Plain IREE fails on some programs (the bundle records why): those run
    # tilefuse alone.
    compilers = [c for c in COMPILERS if c in model["files"]]
    plain = []
    for compiler in compilers:
        module = CompiledModule(
            (bundle / model["files"][compiler]).read_bytes(), device, config=config
        )
        plain.append(module[function])
        out = plain[-1](*inputs)
        outputs[compiler] = list(out) if isinstance(out, tuple) else [out]
    result = {"name": model["name"], **numerics_verdict(outputs, refs, tol)}
    timing = [
        CompiledModule(
            (bundle / model["files"][f"{c}_timing"]).read_bytes(), device, config=config
        )[function]
        for c in compilers
    ]
    counts = [model["repeat"][c] for c in compilers]
    calls = timing + plain
    device_args = [f.to_device(*inputs) for f in calls]
    times = time_interleaved(calls, device_args, [1] * len(calls), repeats, warmup)
    result.update(
        kernel_seconds(compilers, counts, times[: len(compilers)], times[len(compilers) :])
    )
    if "baseline_error" in model:
        result["iree_error"] = model["baseline_error"]
    # The peers' back-to-back calls: as many as IREE's timing module repeats.
    count = model["repeat"].get("iree", model["repeat"]["tilefuse"])
    if "xla" in peers:
        text = (bundle / model["files"]["stablehlo"]).read_text()
        result["xla"] = xla_peer(text, inputs, refs, tol, count, repeats, warmup)
        xla_outs = result["xla"].pop("outputs", None)
        if refs is None and xla_outs is not None:
            result.update(xla_verdict(outputs, xla_outs, bool(model.get("tf32_flops"))))
            # The peers below are checked against XLA too.
            refs, tol = xla_outs, result["tolerance"]
    if "inductor" in peers:
        result["inductor"] = inductor_peer(
            bundle, model, inputs, refs, tol, outputs["tilefuse"], count, repeats, warmup,
            torch_options,
        )  # fmt: skip
    result["floor_bytes"] = model["floor_bytes"]
    result["tensor_core_flops"] = model.get("tensor_core_flops", 0)
    result["tf32_flops"] = model.get("tf32_flops", 0)
    result["floor_bytes_per_second"] = {
        c: model["floor_bytes"] / s for c, s in result["seconds"].items() if s > 0
    }
    return result


def run_bundle(
    bundle: Path,
    device: str | None,
    repeats: int,
    warmup: int,
    peers=None,
    progress=print,
    copy_bytes: int = COPY_BYTES,
    torch_options: TorchOptions = TorchOptions(),
    ncu: str | None = None,
    only=None,
    checkpoint=None,
):
    """`peers`: names of peers timed in the same run (PEERS); None: xla and
    inductor when the device is CUDA (where JAX and torch have the GPU),
    none otherwise. With XLA as a peer, a copy of `copy_bytes` is timed
    first as the bandwidth reference (0: none). `ncu`: the Nsight Compute
    executable that times each model's kernels (ncu_kernels), or None.
    `only`: the names of the models to run (None: all). A model that raises
    (a runtime error on the device) is a FAIL result and the run goes on;
    `checkpoint(run)` is called after each model, so that a run cut short
    still leaves its results."""
    manifest = json.loads((bundle / MANIFEST).read_text())
    device = device or manifest["device"]
    if peers is None:
        peers = ("xla", "inductor") if device == "cuda" else ()
    unknown = set(peers) - set(PEERS)
    if unknown:
        raise TilefuseError(f"unknown peer {', '.join(sorted(unknown))}; known: {', '.join(PEERS)}")
    if "xla" in peers:
        # JAX takes 75% of the GPU's memory when it starts unless told not
        # to; IREE and torch share the GPU with it in this process.
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    config = open_device(device)
    reference = {}
    if "xla" in peers and copy_bytes:
        progress(f"copy of {copy_bytes / 2**20:.0f} MiB: the bandwidth reference")
        reference["copy"] = copy_reference(copy_bytes, repeats, warmup)
        peak = hbm_peak(
            reference["copy"].get("device_kind", ""), manifest.get("hbm_bytes_per_second", {})
        )
        if peak:
            reference["hbm_peak"] = {"gpu": peak[0], "bytes_per_second": peak[1]}
            tensor = manifest.get("tensor_flops", {}).get(peak[0])
            if tensor:
                reference["tensor_peak"] = {"gpu": peak[0], "flops_per_second": tensor}
    results = []
    run = {
        "device": device,
        "host": platform.node(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "target": manifest["target"],
        "commit": manifest.get("commit"),
        "repeats": repeats,
        "warmup": warmup,
        "peers": list(peers),
        "ncu": ncu,
        **reference,
        "models": results,
    }
    for model in manifest["models"]:
        if only and model["name"] not in only:
            continue
        progress(f"{model['name']}: running on {device}")
        try:
            result = run_model(bundle, model, config, device, repeats, warmup, peers, torch_options)
        except Exception as e:  # noqa: BLE001 -- one model's failure must not lose the others'
            progress(f"{model['name']}: FAILED: {type(e).__name__}: {e}")
            result = {"name": model["name"], "numerics": f"FAIL: {type(e).__name__}: {e}"}
        if ncu and "seconds" in result:
            progress(f"{model['name']}: kernel times under ncu")
            result["kernels"] = {
                c: ncu_kernels(bundle, model, c, device, ncu) for c in result["seconds"]
            }
        results.append(result)
        add_fractions(run)
        if checkpoint:
            checkpoint(run)
    return run


def _peer_columns(tf: float, peer: dict | None) -> tuple[str, str]:
    """A peer's time per call (us) and tilefuse's over it, or dashes."""
    seconds = (peer or {}).get("seconds")
    return (f"{seconds * 1e6:.1f}", f"{tf / seconds:.2f}") if seconds else ("-", "-")


def kernel_lines(run: dict) -> list[str]:
    """ncu's kernel times, per model and compiler: the kernels' time per call
    of the real module, then each kernel's median and launches per call."""
    lines = []
    for r in run["models"]:
        for compiler, k in r.get("kernels", {}).items():
            if k["status"] != "ok":
                text = k["status"]
            else:
                text = f"{k['seconds_per_call'] * 1e6:.1f} us:"
                for d in k["dispatches"]:
                    text += f" {d['kernel']} {d['median_seconds'] * 1e6:.1f} us x{d['per_call']:g};"
                text = text.rstrip(";")
            lines.append(f"{r['name']:32} {compiler:9} {text}")
    if lines:
        lines.insert(0, "kernel times (ncu), per call: median per kernel x launches per call")
    return lines


def summary_lines(run: dict) -> list[str]:
    head = f"{'model':32} {'tilefuse us':>12} {'iree us':>10} {'tf/iree':>8}"
    head += f" {'xla us':>10} {'tf/xla':>7} {'ind us':>10} {'tf/ind':>7}"
    head += f" {'tf GB/s':>8} {'%copy':>6} {'%HBM':>5}  numerics"
    lines = []
    copy = run.get("copy")
    if copy:
        rate = f"{copy['bytes_per_second'] / 1e9:.1f} GB/s" if copy["status"] == "ok" else "-"
        through = f", through {copy['through']}" if copy.get("through") else ""
        lines.append(f"copy reference: {rate} ({copy['status']}{through})")
    if run.get("hbm_peak"):
        peak = run["hbm_peak"]
        lines.append(f"HBM peak: {peak['bytes_per_second'] / 1e9:.0f} GB/s ({peak['gpu']})")
    lines.append(head)
    for r in run["models"]:
        if "seconds" not in r:  # the model raised before it was timed
            lines.append(f"{r['name']:32} {'-':>12} {'-':>10} {'-':>8}  {r['numerics']}")
            continue
        tf, iree = r["seconds"]["tilefuse"], r["seconds"].get("iree")
        rate = r["floor_bytes_per_second"].get("tilefuse", 0) / 1e9
        xla_us, xla_ratio = _peer_columns(tf, r.get("xla"))
        ind_us, ind_ratio = _peer_columns(tf, r.get("inductor"))
        of_copy, of_hbm = (
            f"{100 * r[key]:.0f}" if key in r else "-"
            for key in ("fraction_of_copy", "fraction_of_hbm_peak")
        )
        iree_us, iree_ratio = _peer_columns(tf, {"seconds": iree})
        failed_note = "; iree did not compile" if "iree_error" in r else ""
        lines.append(
            f"{r['name']:32} {tf * 1e6:12.1f} {iree_us:>10} {iree_ratio:>8} "
            f"{xla_us:>10} {xla_ratio:>7} {ind_us:>10} {ind_ratio:>7} "
            f"{rate:8.1f} {of_copy:>6} {of_hbm:>5}  {r['numerics']}{failed_note}{peer_notes(r)}"
        )
    return lines + flop_lines(run) + kernel_lines(run)


def flop_rates(r: dict) -> dict[str, float]:
    """A model's f16/bf16 contraction work over each compiler's and each
    peer's time per call, in FLOP/s ({} for a model with none)."""
    flops = r.get("tensor_core_flops", 0)
    if not flops or "seconds" not in r:
        return {}
    rates = {c: flops / t for c, t in r["seconds"].items() if t}
    for peer in PEERS:
        seconds = (r.get(peer) or {}).get("seconds")
        if seconds and r[peer].get("status") == "ok":
            rates[peer] = flops / seconds
    return rates


def flop_lines(run: dict) -> list[str]:
    """Contraction rates (f16/bf16 tensor-core work over each one's time),
    for the models that have any."""
    lines = []
    for r in run["models"]:
        rates = flop_rates(r)
        if not rates:
            continue
        text = "  ".join(f"{c} {v / 1e12:.1f}" for c, v in rates.items())
        if "fraction_of_tensor_peak" in r:
            text += f"  (tilefuse at {100 * r['fraction_of_tensor_peak']:.1f}% of peak)"
        lines.append(f"{r['name']:32} {text}")
    if lines:
        lines.insert(0, "contractions, TFLOP/s (tensor-core work over time per call)")
    return lines


def peer_notes(r: dict) -> str:
    """A peer that did not run, or whose numerics are off, named after the
    model's numerics (its time is left out of the table, or suspect)."""
    notes = []
    for name in PEERS:
        peer = r.get(name)
        if peer is None:
            continue
        if peer["status"] != "ok":
            notes.append(f"{name} {peer['status'].split(':')[0]}")
        elif peer.get("numerics", "ok") != "ok":
            notes.append(f"{name} {peer['numerics']}")
    return "".join(f"; {n}" for n in notes)


def run_and_report(
    bundle: Path,
    device: str | None,
    repeats: int,
    warmup: int,
    peers=None,
    out: Path | None = None,
    copy_bytes: int = COPY_BYTES,
    torch_options: TorchOptions = TorchOptions(),
    ncu: str | None = None,
    only=None,
) -> dict:
    """Run the bundle, write its results (default BUNDLE/results.json) and
    print the table; the run as written."""
    if not (bundle / MANIFEST).is_file():
        raise TilefuseError(f"no {MANIFEST} in {bundle}: not a bundle")
    progress = lambda s: print(s, file=sys.stderr, flush=True)
    out = out or bundle / RESULTS

    def checkpoint(run):
        out.write_text(json.dumps(run, indent=2))

    run = run_bundle(
        bundle, device, repeats, warmup, peers, progress, copy_bytes, torch_options, ncu,
        only, checkpoint,
    )  # fmt: skip
    checkpoint(run)
    print("\n".join(summary_lines(run)))
    print(f"wrote {out}", file=sys.stderr)
    return run


def failed(run: dict) -> list[str]:
    return [r["name"] for r in run["models"] if r["numerics"].startswith("FAIL")]


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options of a bundle run beyond device, repeats and warm-up: this
    module's command line and `tilefuse bench --run` take the same."""
    p.add_argument(
        "--copy-mib",
        type=int,
        default=COPY_BYTES // 2**20,
        help="MiB of the device-to-device copy timed as the bandwidth reference (with the "
        "xla peer; 0: none)",
    )
    p.add_argument(
        "--peers",
        help="comma-separated peers timed in the same run: xla (JAX's XLA on the same "
        "StableHLO), inductor (torch.compile on the sample's function in torch_peers.py); "
        "'' for none. Default: xla,inductor on cuda, none elsewhere",
    )
    p.add_argument(
        "--torch-device", help="torch device of the inductor peer (default: cuda if torch has it)"
    )
    p.add_argument(
        "--inductor-backend",
        default="inductor",
        help="torch.compile backend of the inductor peer (default inductor; eager compiles nothing)",
    )
    p.add_argument(
        "--inductor-mode",
        help="torch.compile mode of the inductor peer (default: torch's; reduce-overhead: CUDA "
        "graphs; max-autotune)",
    )
    p.add_argument(
        "--ncu",
        nargs="?",
        const="ncu",
        metavar="PATH",
        help="also time every kernel: each compiler's timing module runs once under Nsight "
        "Compute (PATH: the ncu executable, default ncu on PATH)",
    )


def run_options(args: argparse.Namespace) -> dict:
    """run_and_report's keyword arguments from add_run_options' options."""
    return {
        "peers": None if args.peers is None else [x for x in args.peers.split(",") if x],
        "copy_bytes": args.copy_mib * 2**20,
        "torch_options": TorchOptions(args.torch_device, args.inductor_backend, args.inductor_mode),
        "ncu": args.ncu,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tilefuse_run.bench.gpu",
        description="run a `tilefuse bench --bundle` directory on this machine's device",
    )
    p.add_argument("bundle", help="the bundle directory (holds manifest.json)")
    p.add_argument("--device", help="IREE runtime device (default: the manifest's)")
    p.add_argument("--repeats", type=int, default=20, help="timed calls per compiler (median)")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls per compiler first")
    p.add_argument("--out", help=f"results file (default: BUNDLE/{RESULTS})")
    add_run_options(p)
    # The child process that --ncu profiles: one call of one timing module.
    p.add_argument("--only", help="comma-separated names of the models to run (default: all)")
    p.add_argument("--compiler", choices=COMPILERS, help=argparse.SUPPRESS)
    p.add_argument("--single-call", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        out = Path(args.out) if args.out else None
        bundle = Path(args.bundle)
        if args.single_call:
            if not (args.only and args.compiler):
                raise TilefuseError("--single-call needs --only MODEL and --compiler C")
            single_call(bundle, args.only, args.compiler, args.device)
            return 0
        only = args.only.split(",") if args.only else None
        run = run_and_report(
            bundle, args.device, args.repeats, args.warmup, out=out, only=only,
            **run_options(args),
        )  # fmt: skip
    except TilefuseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 1 if failed(run) else 0


if __name__ == "__main__":
    sys.exit(main())
