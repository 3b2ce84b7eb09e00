"""Compile here, run there: `tilefuse bench --bundle DIR` writes everything a
device run needs into one directory.

    DIR/manifest.json               target, device, commit, per model: entry
                                    function, how to make its inputs, bytes
                                    floor, repeat counts, dispatch counts, files
    DIR/models/<name>/*.vmfb        tilefuse's and plain IREE's module, and each
                                    one's timing module (dispatches repeated)
    DIR/models/<name>/program.mlir  the StableHLO, for the peers (XLA through JAX)
    DIR/references.py               samples/references.py (inputs, numpy references)
    DIR/torch_peers.py              samples/torch_peers.py (each sample in PyTorch,
                                    for the torch.compile peer)
    DIR/tilefuse_run/               the runner: bench/gpu.py with runtime.py and
                                    errors.py, which need only numpy and iree.runtime
                                    (and bench/tune_runner.py, tune bundles' runner)

Inputs are not stored: the runner makes them from seed 0 as `tilefuse bench`
does (a sample's own inputs, else random ones of the signature), which keeps
a bundle of large models small. A bundle must fit in BUNDLE_LIMIT bytes,
what the GPU machine takes in one call.
"""

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..errors import TilefuseError
from ..frontend import load_program
from ..paths import ROOT, SAMPLES, shown
from ..targets import load_target
from .costmodel import io_floor
from .gpu import MANIFEST, TORCH_PEERS
from .gpus import gpu_names, load_gpu
from .measure import compile_iree, compile_tilefuse
from .run import (
    BenchOptions,
    entry_function,
    input_signature,
    resolve_models,
    samples_module,
    timing_repeat,
)

BUNDLE_LIMIT = 64 * 2**20
PACKAGE = "tilefuse_run"
# Files of the runners (bench bundles: bench/gpu.py; tune bundles, bench/tune.py:
# bench/tune_runner.py), as the package `tilefuse_run` (same relative imports).
RUNNER_FILES = ("errors.py", "runtime.py", "bench/gpu.py", "bench/tune_runner.py")
PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def source_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def write_runner(out: Path) -> None:
    for name in RUNNER_FILES:
        target = out / PACKAGE / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PACKAGE_ROOT / name, target)
    for init in (out / PACKAGE / "__init__.py", out / PACKAGE / "bench" / "__init__.py"):
        init.write_text('"""A copy of tilefuse\'s bundle runner (see bench/gpu.py)."""\n')


def _inputs_entry(path: Path, program, function: str) -> dict:
    """How the runner makes the inputs: a sample's own, else random ones."""
    folder = path.resolve().parent
    samples = (SAMPLES.resolve(), (SAMPLES / "small").resolve())
    if folder in samples and path.stem in samples_module().SAMPLES:
        return {"sample": path.stem, "small": folder != SAMPLES.resolve()}
    return {"signature": [[list(s), d] for s, d in input_signature(program, function)]}


def write_bundle(models: list[str], options: BenchOptions, out: Path, progress=None) -> Path:
    """Compile every model with both compilers for options.target and write
    the bundle to `out` (which must not exist or be empty). Returns `out`."""
    if out.exists() and any(out.iterdir()):
        raise TilefuseError(f"{out} exists and is not empty")
    target = load_target(options.target)
    tf32 = target.backend == "cuda" and target.tf32
    paths = resolve_models(models, options.small)
    # Built beside `out` and moved into place at the end: a failed bundle
    # leaves nothing behind.
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".bundle-", dir=out.parent) as tmp:
        staging, work = Path(tmp) / "bundle", Path(tmp) / "work"
        staging.mkdir()
        entries = []
        for i, path in enumerate(paths):
            if progress:
                progress(i, len(paths), path.stem, "compiling with both compilers")
            program = load_program(path)
            function = entry_function(program)
            floor = io_floor(program.text, function)
            repeat = timing_repeat(floor, options.dispatch_repeat)
            runs = {
                "tilefuse": compile_tilefuse(
                    program, target, work / path.stem / "tilefuse", options.fusion, repeat, 1
                ),
            }
            # A program plain iree-compile rejects is still bundled, for
            # tilefuse alone: that IREE fails on it is itself a result.
            baseline = {}
            try:
                runs["iree"] = compile_iree(program, target, work / path.stem / "iree", repeat, 1)
            except TilefuseError as e:
                baseline["baseline_error"] = str(e)
                if progress:
                    progress(i, len(paths), path.stem, f"plain IREE failed: {e}")
            folder = staging / "models" / path.stem
            folder.mkdir(parents=True)
            inputs = _inputs_entry(path, program, function)
            # A program folder's own torch_peers.py (benchmarks/gpu/ has
            # one): the inductor peer's function for it, by its name.
            peers = {}
            own_peers = path.resolve().parent / TORCH_PEERS
            if "sample" not in inputs and own_peers.is_file():
                shutil.copyfile(own_peers, folder / TORCH_PEERS)
                peers["torch_peers"] = f"models/{path.stem}/{TORCH_PEERS}"
            # The program itself, for the peers (XLA compiles the same StableHLO).
            (folder / "program.mlir").write_text(program.text)
            files = {"stablehlo": f"models/{path.stem}/program.mlir"}
            for compiler, run in runs.items():
                for key, data in ((compiler, run.vmfb), (f"{compiler}_timing", run.timing_vmfb)):
                    name = f"{key}.vmfb"
                    (folder / name).write_bytes(data)
                    files[key] = f"models/{path.stem}/{name}"
            entries.append(
                {
                    "name": path.stem,
                    "source": shown(path),
                    "function": function,
                    "floor_bytes": floor,
                    # Tensor-core contraction work, for the fraction of
                    # the tensor-core peak (0 for programs with none):
                    # f16/bf16, and f32 where the target runs it as TF32.
                    "tensor_core_flops": sum(
                        d.tensor_core_flops + (d.f32_contraction_flops if tf32 else 0)
                        for d in runs["tilefuse"].costs.dispatches
                    ),
                    # f32 contraction work: XLA's default precision runs it
                    # as TF32, so the runner's tolerance against XLA is TF32's.
                    "tf32_flops": sum(
                        d.f32_contraction_flops for d in runs["tilefuse"].costs.dispatches
                    ),
                    "repeat": {c: r.timing_repeat for c, r in runs.items()},
                    "dispatches": {c: r.dispatch_count for c, r in runs.items()},
                    "tilefuse_kernels": runs["tilefuse"].notes,
                    "files": files,
                    **baseline,
                    **peers,
                    **inputs,
                }
            )
        if any("sample" in e for e in entries):
            shutil.copyfile(SAMPLES / "references.py", staging / "references.py")
            shutil.copyfile(SAMPLES / TORCH_PEERS, staging / TORCH_PEERS)
        write_runner(staging)
        manifest = {
            "target": target.name,
            "device": options.device or target.runtime_driver,
            "commit": source_commit(),
            "run": f"cd BUNDLE && python -m {PACKAGE}.bench.gpu . [--device D]",
            # HBM peaks (pipelines/hardware/gpus.toml) the runner matches
            # against the device JAX names, for the fraction of peak.
            "hbm_bytes_per_second": {
                name: load_gpu(name).bandwidth_bytes_per_s for name in gpu_names()
            },
            "tensor_flops": {name: load_gpu(name).tensor_flops for name in gpu_names()},
            "models": entries,
        }
        publish(staging, out, MANIFEST, manifest, "the bundle", "bundle fewer models")
    return out


def publish(staging: Path, out: Path, name: str, manifest: dict, what: str, fewer: str) -> None:
    """Write `manifest` as staging/`name`, check the size against
    BUNDLE_LIMIT (`what` would hold too much: `fewer` says what to drop),
    and move `staging` to `out`: a bundle is complete or absent."""
    (staging / name).write_text(json.dumps(manifest, indent=2))
    size = sum(f.stat().st_size for f in staging.rglob("*") if f.is_file())
    if size > BUNDLE_LIMIT:
        raise TilefuseError(
            f"{what} would hold {size / 2**20:.1f} MiB, over the "
            f"{BUNDLE_LIMIT // 2**20} MiB a device run takes: {fewer}"
        )
    if out.exists():
        out.rmdir()
    shutil.move(str(staging), str(out))
