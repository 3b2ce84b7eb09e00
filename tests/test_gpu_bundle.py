"""Compile here, run there (#21): `tilefuse bench --bundle` and the runner
it carries (bench/gpu.py), which must work with only numpy and the IREE
runtime (and JAX for the XLA peer, torch for the Inductor peer). No GPU
here: a Vulkan bundle runs on lavapipe through the same runner, in a process
where tilefuse and iree.compiler cannot be imported, with XLA on JAX's CPU
backend and torch.compile (Inductor's C++ kernels) on the CPU as the peers,
and a stand-in for ncu that runs the runner's --single-call child (also
without the compiler) and prints a CSV as ncu does; a CUDA bundle is checked
for what it holds."""

import json
import subprocess
import sys

import numpy as np
import pytest
from iree.compiler import ir
from support import run_cli
from tilefuse.bench import bundle as bundle_module
from tilefuse.bench.bundle import write_bundle
from tilefuse.bench.costmodel import dispatch_cost
from tilefuse.bench.gpu import add_fractions, hbm_peak, xla_verdict
from tilefuse.bench.gpus import gpu_names, load_gpu
from tilefuse.bench.run import BenchOptions
from tilefuse.errors import TilefuseError

ADD = """func.func @main(%a: tensor<1000xf32>, %b: tensor<1000xf32>) -> tensor<1000xf32> {
  %0 = stablehlo.add %a, %b : tensor<1000xf32>
  return %0 : tensor<1000xf32>
}
"""

# The GPU machine has no IREE compiler and no tilefuse: block both.
BLOCK = """
import importlib.abc, runpy, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "tilefuse" or name.startswith("iree.compiler"):
            raise ImportError("not on the device machine: " + name)
sys.meta_path.insert(0, Block())
"""
RUN_WITHOUT_COMPILER = (
    BLOCK
    + """
sys.argv = ["gpu", ".", "--device", "vulkan", "--repeats", "2", "--warmup", "1",
            "--peers", "xla,inductor", "--inductor-backend", "eager", "--copy-mib", "8",
            "--ncu", sys.argv[1]]
runpy.run_module("tilefuse_run.bench.gpu", run_name="__main__")
"""
)

# Stands in for ncu: checks the options the runner gives it, runs the
# runner's child (the bundle's copy, --single-call) with tilefuse and the
# compiler blocked, and prints what `ncu --csv` would around its output:
# two launches of one kernel named after the model and the compiler.
FAKE_NCU = f"""#!{sys.executable}
import subprocess, sys
args = sys.argv[1:]
assert args[:5] == ["--csv", "--clock-control", "none", "--metrics", "gpu__time_duration.sum"], args
python, dash_m, module, *rest = args[5:]
assert (dash_m, module) == ("-m", "tilefuse_run.bench.gpu") and "--single-call" in rest, args
sys.exit(1) if subprocess.run([python, "-c", BLOCK_AND_RUN, *rest]).returncode else None
kernel = rest[rest.index("--only") + 1] + "_" + rest[rest.index("--compiler") + 1] + "_dispatch_0"
print("==PROF== Connected to process 7")
print('"ID","Process ID","Process Name","Host Name","Kernel Name","Metric Name",'
      '"Metric Unit","Metric Value"')
for i, value in enumerate(("1,500", "2,500")):
    print(f'"{{i}}","7","python","host","{{kernel}}","gpu__time_duration.sum","nsecond",'
          f'"{{value}}"')
"""
BLOCK_AND_RUN = (
    BLOCK
    + """
sys.argv = ["gpu", *sys.argv[1:]]
runpy.run_module("tilefuse_run.bench.gpu", run_name="__main__")
"""
)


def test_vulkan_bundle_runs_without_the_compiler(tmp_path):
    add = tmp_path / "add_f32.mlir"
    add.write_text(ADD)
    out = write_bundle(["softmax_f32", str(add)], BenchOptions(target="vulkan"), tmp_path / "b")
    ncu = tmp_path / "ncu"
    ncu.write_text(FAKE_NCU.replace("BLOCK_AND_RUN", repr(BLOCK_AND_RUN)))
    ncu.chmod(0o755)
    run = subprocess.run(
        [sys.executable, "-c", RUN_WITHOUT_COMPILER, str(ncu)],
        check=False,
        cwd=out,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    by_name = {m["name"]: m for m in results["models"]}
    # softmax_f32 is a sample: checked against its numpy reference; the
    # other program has none, so both compilers are checked against XLA's
    # output (the peer ran), an independent compiler.
    assert by_name["softmax_f32"]["reference"] == "numpy"
    assert by_name["add_f32"]["reference"] == "xla"
    assert by_name["add_f32"]["max_error"]["tilefuse"] <= by_name["add_f32"]["tolerance"]
    for m in results["models"]:
        assert m["numerics"].startswith("ok"), m
        assert all(s > 0 for s in m["seconds"].values()), m
        # The dispatches' time, the plain call's and the amortized figure.
        assert m["call_seconds"].keys() == m["amortized_seconds"].keys() == {"tilefuse", "iree"}
        # The peer: XLA through JAX (its CPU backend here) on the same StableHLO.
        assert m["xla"]["status"] == "ok" and m["xla"]["seconds"] > 0, m["xla"]
    assert by_name["softmax_f32"]["xla"]["numerics"] == "ok"
    # The second peer: torch.compile, on the CPU here, on the sample's
    # function from the bundle's torch_peers.py; the other program has none.
    # Its eager backend: Inductor's own compile takes 15 s on the CPU, and
    # test_torch_peers runs it.
    inductor = by_name["softmax_f32"]["inductor"]
    assert inductor["status"] == "ok" and inductor["seconds"] > 0, inductor
    assert (inductor["backend"], inductor["device"], inductor["numerics"]) == (
        "eager",
        "cpu",
        "ok",
    )
    assert by_name["add_f32"]["inductor"] == {
        "status": "unavailable: not a sample, no PyTorch function"
    }
    # ncu (the stand-in) ran each compiler's timing module once, in a child
    # process per model and compiler: its kernels per dispatch.
    assert results["ncu"] == str(ncu)
    for m in results["models"]:
        for compiler in ("tilefuse", "iree"):
            kernels = m["kernels"][compiler]
            assert kernels["status"] == "ok", kernels
            (dispatch,) = kernels["dispatches"]
            assert dispatch["kernel"] == f"{m['name']}_{compiler}_dispatch_0"
            assert dispatch["median_seconds"] == pytest.approx(2e-6)
            repeat = json.loads((out / "manifest.json").read_text())["models"]
            repeat = next(r for r in repeat if r["name"] == m["name"])["repeat"][compiler]
            assert kernels["seconds_per_call"] == pytest.approx(4e-6 / repeat)
    assert "kernel times (ncu)" in run.stdout
    assert "softmax_f32" in run.stdout and "add_f32" in run.stdout
    # The bandwidth reference: a copy through JAX here, where torch has no
    # CUDA device (8 MiB read, 8 written), and each model's rate as a
    # fraction of it; a CPU names no HBM peak.
    copy = results["copy"]
    assert (
        copy["status"] == "ok" and copy["bytes"] == 2 * 8 * 2**20 and copy["bytes_per_second"] > 0
    )
    assert copy["through"] == "jax" and "no CUDA device" in copy["torch_status"], copy
    assert all(m["fraction_of_copy"] > 0 for m in results["models"])
    assert "hbm_peak" not in results and "copy reference:" in run.stdout


@pytest.mark.parametrize(
    "kind,gpu", [("NVIDIA H100 80GB HBM3", "H100-SXM"), ("NVIDIA H200", "H200"), ("cpu", None)]
)
def test_the_runner_finds_the_hbm_peak_by_device_name(kind, gpu):
    """The manifest carries pipelines/hardware/gpus.toml's peaks (checked in
    the CUDA bundle's test); the runner picks the entry whose first word is
    in JAX's device name."""
    peaks = {name: load_gpu(name).bandwidth_bytes_per_s for name in gpu_names()}
    found = hbm_peak(kind, peaks)
    assert (found[0] if found else None) == gpu


def test_cuda_bundle_holds_both_compilers_modules(tmp_path):
    out = write_bundle(["softmax_f32"], BenchOptions(target="cuda-sm90"), tmp_path / "b")
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["target"], manifest["device"]) == ("cuda-sm90", "cuda")
    assert manifest["hbm_bytes_per_second"]["H100-SXM"] == 3.35e12
    (model,) = manifest["models"]
    assert model["sample"] == "softmax_f32" and model["source"] == "samples/softmax_f32.mlir"
    assert set(model["files"]) == {
        "tilefuse",
        "tilefuse_timing",
        "iree",
        "iree_timing",
        "stablehlo",
    }
    for name in model["files"].values():
        assert (out / name).stat().st_size > 0
    # The timing modules repeat every dispatch; the real ones do not.
    assert model["repeat"]["tilefuse"] > 1 and model["repeat"]["iree"] > 1
    assert (out / "references.py").is_file() and (out / "torch_peers.py").is_file()
    assert (out / "tilefuse_run" / "bench" / "gpu.py").is_file()


def test_a_bundle_over_the_limit_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(bundle_module, "BUNDLE_LIMIT", 1000)
    with pytest.raises(TilefuseError, match="over the 0 MiB a device run takes"):
        write_bundle(["softmax_f32"], BenchOptions(target="vulkan"), tmp_path / "b")
    assert list(tmp_path.iterdir()) == []


def test_runner_refuses_a_directory_that_is_not_a_bundle(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "tilefuse.bench.gpu", str(tmp_path)],
        check=False,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1
    assert run.stderr.strip() == f"error: no manifest.json in {tmp_path}: not a bundle"


def test_bench_run_takes_the_runners_options(tmp_path):
    """`tilefuse bench --run` forwards what the runner module takes: here no
    peers and no copy reference (their default on cuda: both)."""
    add = tmp_path / "add_f32.mlir"
    add.write_text(ADD)
    out = write_bundle([str(add)], BenchOptions(target="vulkan"), tmp_path / "b")
    run = run_cli(
        "bench", "--run", str(out), "--device", "vulkan", "--repeats", "1", "--warmup", "0",
        "--peers", "xla", "--copy-mib", "0",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    (model,) = results["models"]
    assert model["numerics"].startswith("ok") and model["xla"]["status"] == "ok", model
    assert "inductor" not in model and "copy" not in results, results


def _model(name, seconds, tensor_core_flops, tf32_flops=0):
    return {
        "name": name,
        "seconds": {"tilefuse": seconds},
        "tensor_core_flops": tensor_core_flops,
        "tf32_flops": tf32_flops,
        "floor_bytes_per_second": {"tilefuse": 1e12},
    }


def test_fractions_put_tf32_work_against_half_the_tensor_peak():
    """A tf32 bundle's contraction work is all TF32, whose peak on A100,
    H100 and H200 is half the f16 one; f16 work takes the f16 peak. The run
    carries both peaks, as a CUDA run with the xla peer does."""
    run = {
        "copy": {"status": "ok", "bytes_per_second": 2e12},
        "hbm_peak": {"gpu": "H100-SXM", "bytes_per_second": 4e12},
        "tensor_peak": {"gpu": "H100-SXM", "flops_per_second": 1000e12},
        "models": [_model("tf32", 1e-3, 100e9, 100e9), _model("f16", 1e-3, 100e9)],
    }
    add_fractions(run)
    tf32, f16 = run["models"]
    assert tf32["fraction_of_tensor_peak"] == pytest.approx(0.2)
    assert f16["fraction_of_tensor_peak"] == pytest.approx(0.1)
    assert tf32["fraction_of_hbm_peak"] == pytest.approx(0.25)
    assert tf32["fraction_of_copy"] == pytest.approx(0.5)


def test_xla_verdict_allows_tf32_rounding_of_f32_contractions():
    """XLA's default precision multiplies f32 as TF32: a model with f32
    contractions is held to f16's relative figure against it, others to
    f32's."""
    ref = [np.full(4, 100.0, np.float32)]
    off = {"tilefuse": [ref[0] + 0.05]}  # 5e-4 of the largest output
    assert xla_verdict(off, ref)["numerics"].startswith("FAIL")
    verdict = xla_verdict(off, ref, tf32=True)
    assert verdict["numerics"] == "ok" and verdict["reference"] == "xla (tf32)"
    assert xla_verdict({"tilefuse": [ref[0] + 2.0]}, ref, tf32=True)["numerics"].startswith("FAIL")


def test_costmodel_counts_f32_contraction_work_apart():
    text = """
func.func @d(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>, %c: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) outs(%c : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}"""
    with ir.Context() as ctx:
        module = ir.Module.parse(text, ctx)
        cost = dispatch_cost(module.body.operations[0])
    assert (cost.flops, cost.tensor_core_flops, cost.f32_contraction_flops) == (1024, 0, 1024)
