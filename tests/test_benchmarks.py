"""benchmarks/gpu: the GPU programs, their generators and their PyTorch peers.

The committed .mlir files are what the generators write (make_matmuls.py
here; make_memory_bound.py needs JAX and is checked by name); the two
matmul tables agree; every program has a PyTorch function. Each function's
semantics is checked against its program's: the same program written
small (make_matmuls.program, or the JAX function lowered at a small shape)
is compiled by tilefuse and run on lavapipe, and the function, run eagerly
on the CPU on the same inputs, must agree (bf16: 3e-2, f16: 5e-3, f32: 1e-5,
relative to the largest output). A bundle of a program from such a folder
carries the folder's torch_peers.py, and the inductor peer finds the
function by the program's name.
"""

import importlib.util
import json

import numpy as np
import pytest
import tilefuse
import torch
from tilefuse.bench.bundle import write_bundle
from tilefuse.bench.gpu import TorchOptions, from_torch, inductor_peer, to_torch
from tilefuse.bench.run import BenchOptions
from tilefuse.paths import ROOT
from tilefuse.runtime import DTYPES

GPU = ROOT / "benchmarks" / "gpu"
TOLERANCE = {"bf16": 3e-2, "f16": 5e-3, "f32": 1e-5}


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", GPU / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKE = _module("make_matmuls")
PEERS = _module("torch_peers")


def test_the_matmul_files_are_what_the_generator_writes():
    for name, spec in MAKE.MATMULS.items():
        assert (GPU / f"{name}.mlir").read_text() == MAKE.program(*spec), name
    assert PEERS.MATMULS == MAKE.MATMULS


def test_every_program_has_a_torch_function():
    programs = {p.stem for p in GPU.glob("*.mlir")}
    assert set(PEERS.PROGRAMS) == programs


def _agree(text: str, fn, inputs, t: str):
    result = tilefuse.compile_program(text, "vulkan")
    assert all(r.status == "applied" for r in result.reports), [r.line() for r in result.reports]
    want = np.asarray(tilefuse.runtime.CompiledModule(result.vmfb, "vulkan").main(*inputs))
    with torch.no_grad():
        got = from_torch(fn(*[to_torch(a, "cpu") for a in inputs]))
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    scale = max(float(np.max(np.abs(want.astype(np.float64)))), 1.0)
    error = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
    assert error <= TOLERANCE[t] * scale, (error, scale)


@pytest.mark.parametrize(
    "name",
    ["matmul_bias_1024_bf16", "mlp_up_gelu_f16", "mlp_down_residual_bf16", "decode_m1_nk_bf16"],
)
def test_matmul_peers_compute_their_programs(name):
    *_, epilogue, t = MAKE.MATMULS[name]
    m, k, n = 8, 64, 32
    rng = np.random.default_rng(0)
    shapes = (
        [(m, k), (n, k) if "b_nk" in epilogue else (k, n)]
        + [(n,)] * ("bias" in epilogue)
        + [(m, n)] * ("residual" in epilogue)
    )
    inputs = [(rng.standard_normal(s) / 4).astype(DTYPES[t]) for s in shapes]
    _agree(MAKE.program(m, k, n, epilogue, t), PEERS.PROGRAMS[name], inputs, t)


# Small shapes for programs whose arguments are not rows and row vectors.
SMALL = {"decode_attention_bf16": [(2, 2, 1, 16), (2, 2, 64, 16), (2, 2, 64, 16)]}


@pytest.mark.parametrize(
    "name",
    [
        "softmax_8192_f32",
        "layernorm_8192_f32",
        "rmsnorm_8192_bf16",
        "gelu_8192_bf16",
        "decode_attention_bf16",
    ],
)
def test_memory_bound_peers_compute_their_programs(name):
    jax = pytest.importorskip("jax")
    make = _module("make_memory_bound")
    fn, args = make.PROGRAMS[name]
    shapes = SMALL.get(name) or [(16, 256)[-len(a.shape) :] for a in args]
    small = [jax.ShapeDtypeStruct(s, a.dtype) for s, a in zip(shapes, args)]
    text = jax.jit(fn).lower(*small).as_text()
    t = name.rsplit("_", 1)[1]
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(a.shape).astype(DTYPES[t]) for a in small]
    _agree(text, PEERS.PROGRAMS[name], inputs, t)


def test_a_bundle_carries_the_folders_peers(tmp_path):
    """A program beside a torch_peers.py: the bundle copies the file, and the
    inductor peer (eager here: no compiler needed) runs the function named
    after the program, checked against the reference it is given."""
    folder = tmp_path / "progs"
    folder.mkdir()
    (folder / "twice_f32.mlir").write_text(
        "func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {\n"
        "  %y = stablehlo.add %x, %x : tensor<64xf32>\n  return %y : tensor<64xf32>\n}\n"
    )
    (folder / "torch_peers.py").write_text("PROGRAMS = {'twice_f32': lambda x: x + x}\n")
    out = write_bundle(
        [str(folder / "twice_f32.mlir")], BenchOptions(target="vulkan"), tmp_path / "b"
    )
    (model,) = json.loads((out / "manifest.json").read_text())["models"]
    assert (out / model["torch_peers"]).is_file()
    x = np.arange(64, dtype=np.float32)
    peer = inductor_peer(
        out, model, [x], [2 * x], 1e-6, [2 * x], 1, 1, 0, TorchOptions("cpu", "eager")
    )
    assert peer["status"] == "ok" and peer["numerics"] == "ok", peer
