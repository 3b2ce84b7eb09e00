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
time per call = median(call time) / N. Writes results.json into the bundle
and prints one line per model.
"""

import argparse
import functools
import importlib.util
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from ..errors import TilefuseError
from ..runtime import DTYPES, CompiledModule, open_device

MANIFEST = "manifest.json"
RESULTS = "results.json"
COMPILERS = ("tilefuse", "iree")
PEERS = ("xla",)
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


def numerics_verdict(outputs: dict[str, list], refs, tol) -> dict:
    """Both compilers' outputs against the reference (or each other):
    reference, tolerance, max_error per compiler, max_difference, numerics."""
    tf, iree = outputs["tilefuse"], outputs["iree"]
    verdict = {
        "reference": "none",
        "max_error": {},
        "max_difference": max((max_abs_error(a, b) for a, b in zip(tf, iree)), default=0.0),
    }
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
    scale = max((float(np.max(np.abs(o.astype(np.float64)), initial=0)) for o in iree), default=0)
    rel = max((AGREEMENT.get(str(o.dtype), 0.0) for o in tf), default=0.0)
    verdict["tolerance"] = rel * max(scale, 1.0)
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
    if refs is not None:
        peer["max_error"] = max(max_abs_error(o, r) for o, r in zip(outputs, refs))
        peer["numerics"] = "ok" if peer["max_error"] <= tol else f"over {tol:g}"
    return peer


def copy_reference(nbytes: int, repeats: int, warmup: int) -> dict:
    """A device-to-device copy of `nbytes` through JAX on its default device
    (XLA copies a returned argument that is not donated into a new buffer),
    timed as xla_peer times: the bytes read and written per second, and the
    device's name. Any failure is its status, never the run's."""
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
            copy(x).block_until_ready()
            times.append(time.perf_counter() - start)
    except Exception as e:  # noqa: BLE001 -- a reference's failure is a finding, not a crash
        return {"status": f"unavailable: {type(e).__name__}: {str(e)[:300]}"}
    seconds = statistics.median(times)
    return {
        "status": "ok",
        "device": str(device),
        "device_kind": getattr(device, "device_kind", ""),
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
    for r in run["models"]:
        rate = r["floor_bytes_per_second"].get("tilefuse")
        if rate is None:
            continue
        if copy.get("status") == "ok":
            r["fraction_of_copy"] = rate / copy["bytes_per_second"]
        if peak:
            r["fraction_of_hbm_peak"] = rate / peak["bytes_per_second"]


def run_model(
    bundle: Path, model: dict, config, device: str, repeats: int, warmup: int, peers=()
) -> dict:
    inputs, refs, tol = model_inputs(bundle, model)
    function = model["function"]
    outputs = {}
    for compiler in COMPILERS:
        module = CompiledModule(
            (bundle / model["files"][compiler]).read_bytes(), device, config=config
        )
        out = module[function](*inputs)
        outputs[compiler] = list(out) if isinstance(out, tuple) else [out]
    result = {"name": model["name"], **numerics_verdict(outputs, refs, tol)}
    timing = [
        CompiledModule(
            (bundle / model["files"][f"{c}_timing"]).read_bytes(), device, config=config
        )[function]
        for c in COMPILERS
    ]
    device_args = [f.to_device(*inputs) for f in timing]
    counts = [model["repeat"][c] for c in COMPILERS]
    times = time_interleaved(timing, device_args, counts, repeats, warmup)
    result["seconds"] = {c: statistics.median(t) for c, t in zip(COMPILERS, times)}
    result["all_seconds"] = dict(zip(COMPILERS, times))
    if "xla" in peers:
        text = (bundle / model["files"]["stablehlo"]).read_text()
        count = model["repeat"]["iree"]
        result["xla"] = xla_peer(text, inputs, refs, tol, count, repeats, warmup)
    result["floor_bytes"] = model["floor_bytes"]
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
):
    """`peers`: names of peers timed in the same run (PEERS); None: xla
    when the device is CUDA (where JAX has the GPU), none otherwise. With
    XLA as a peer, a copy of `copy_bytes` is timed first as the bandwidth
    reference (0: none)."""
    manifest = json.loads((bundle / MANIFEST).read_text())
    device = device or manifest["device"]
    if peers is None:
        peers = ("xla",) if device == "cuda" else ()
    unknown = set(peers) - set(PEERS)
    if unknown:
        raise TilefuseError(f"unknown peer {', '.join(sorted(unknown))}; known: {', '.join(PEERS)}")
    config = open_device(device)
    reference = {}
    if "xla" in peers and copy_bytes:
        progress(f"copy of {copy_bytes / 2**20:.0f} MiB through JAX: the bandwidth reference")
        reference["copy"] = copy_reference(copy_bytes, repeats, warmup)
        peak = hbm_peak(
            reference["copy"].get("device_kind", ""), manifest.get("hbm_bytes_per_second", {})
        )
        if peak:
            reference["hbm_peak"] = {"gpu": peak[0], "bytes_per_second": peak[1]}
    results = []
    for model in manifest["models"]:
        progress(f"{model['name']}: running on {device}")
        results.append(run_model(bundle, model, config, device, repeats, warmup, peers))
    run = {
        "device": device,
        "host": platform.node(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "target": manifest["target"],
        "commit": manifest.get("commit"),
        "repeats": repeats,
        "warmup": warmup,
        "peers": list(peers),
        **reference,
        "models": results,
    }
    add_fractions(run)
    return run


def summary_lines(run: dict) -> list[str]:
    head = f"{'model':32} {'tilefuse us':>12} {'iree us':>10} {'tf/iree':>8}"
    head += f" {'xla us':>10} {'tf/xla':>7} {'tf GB/s':>8} {'%copy':>6} {'%HBM':>5}  numerics"
    lines = []
    copy = run.get("copy")
    if copy:
        rate = f"{copy['bytes_per_second'] / 1e9:.1f} GB/s" if copy["status"] == "ok" else "-"
        lines.append(f"copy reference: {rate} ({copy['status']})")
    if run.get("hbm_peak"):
        peak = run["hbm_peak"]
        lines.append(f"HBM peak: {peak['bytes_per_second'] / 1e9:.0f} GB/s ({peak['gpu']})")
    lines.append(head)
    for r in run["models"]:
        tf, iree = r["seconds"]["tilefuse"], r["seconds"]["iree"]
        xla = r.get("xla", {}).get("seconds")
        rate = r["floor_bytes_per_second"].get("tilefuse", 0) / 1e9
        xla_us, xla_ratio = (f"{xla * 1e6:.1f}", f"{tf / xla:.2f}") if xla else ("-", "-")
        of_copy, of_hbm = (
            f"{100 * r[key]:.0f}" if key in r else "-"
            for key in ("fraction_of_copy", "fraction_of_hbm_peak")
        )
        lines.append(
            f"{r['name']:32} {tf * 1e6:12.1f} {iree * 1e6:10.1f} {tf / iree:8.2f} "
            f"{xla_us:>10} {xla_ratio:>7} {rate:8.1f} {of_copy:>6} {of_hbm:>5}  {r['numerics']}"
        )
    return lines


def run_and_report(
    bundle: Path,
    device: str | None,
    repeats: int,
    warmup: int,
    peers=None,
    out: Path | None = None,
    copy_bytes: int = COPY_BYTES,
) -> dict:
    """Run the bundle, write its results (default BUNDLE/results.json) and
    print the table; the run as written."""
    if not (bundle / MANIFEST).is_file():
        raise TilefuseError(f"no {MANIFEST} in {bundle}: not a bundle")
    run = run_bundle(
        bundle, device, repeats, warmup, peers, lambda s: print(s, file=sys.stderr), copy_bytes
    )
    out = out or bundle / RESULTS
    out.write_text(json.dumps(run, indent=2))
    print("\n".join(summary_lines(run)))
    print(f"wrote {out}", file=sys.stderr)
    return run


def failed(run: dict) -> list[str]:
    return [r["name"] for r in run["models"] if r["numerics"].startswith("FAIL")]


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
        "StableHLO); '' for none. Default: xla on cuda, none elsewhere",
    )
    args = p.parse_args(argv)
    peers = None if args.peers is None else [x for x in args.peers.split(",") if x]
    try:
        out = Path(args.out) if args.out else None
        bundle = Path(args.bundle)
        run = run_and_report(
            bundle, args.device, args.repeats, args.warmup, peers, out, args.copy_mib * 2**20
        )
    except TilefuseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 1 if failed(run) else 0


if __name__ == "__main__":
    sys.exit(main())
