"""samples/torch_peers.py, each sample in PyTorch for the bundle runner's
torch.compile (Inductor) peer (#21), and the peer itself
(bench/gpu.py: inductor_peer). No GPU here: every function runs eagerly on
the CPU against the sample's numpy reference, with the reference's
tolerance, and must return what the sample's @main returns (count, shapes,
element types, a contiguous layout); the peer compiles a sample with the
real Inductor on the CPU (a C++ compiler builds its kernels), and reports a
function that returns the wrong type, a function torch.compile refuses, a
missing function and a missing torch as its status."""

import sys

import numpy as np
import pytest
import torch
from tilefuse.bench.gpu import (
    TorchOptions,
    _references,
    _torch_peers,
    from_torch,
    inductor_peer,
    max_abs_error,
    to_torch,
)
from tilefuse.bench.run import entry_function, signature
from tilefuse.frontend import load_program
from tilefuse.paths import SAMPLES
from tilefuse.runtime import DTYPES

REFERENCES = _references(SAMPLES)
TORCH = _torch_peers(SAMPLES)


def result_types(path) -> list[tuple[tuple[int, ...], np.dtype]]:
    """(shape, numpy dtype) of each result of the sample's entry function."""
    program = load_program(path)
    results = signature(program, entry_function(program), results=True)
    return [(shape, DTYPES[element]) for shape, element in results]


def test_every_sample_has_a_torch_function_under_its_name():
    assert set(TORCH.SAMPLES) == set(REFERENCES.SAMPLES)
    assert all(f.__name__ == name for name, f in TORCH.SAMPLES.items())


@pytest.mark.parametrize("name", sorted(REFERENCES.SAMPLES))
def test_torch_function_matches_the_numpy_reference(name):
    """Eager on the CPU, on references.py's inputs (its small ones where the
    sample has a samples/small/ copy), against its reference and tolerance."""
    small = (SAMPLES / "small" / f"{name}.mlir").is_file()
    path = SAMPLES / "small" / f"{name}.mlir" if small else SAMPLES / f"{name}.mlir"
    inputs, refs, tol = REFERENCES.SAMPLES[name](np.random.default_rng(0), small=small)
    with torch.no_grad():
        out = TORCH.SAMPLES[name](*[to_torch(a, "cpu") for a in inputs])
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    # A permuted view would skip the data movement the program does.
    assert all(o.is_contiguous() for o in outs), name
    arrays = [from_torch(o) for o in outs]
    assert [(a.shape, a.dtype) for a in arrays] == result_types(path)
    errors = [max_abs_error(a, r) for a, r in zip(arrays, refs)]
    assert max(errors) <= tol, (name, errors, tol)


def _softmax():
    inputs, refs, tol = REFERENCES.softmax_f32(np.random.default_rng(0))
    return inputs, refs, tol, [np.zeros((256, 1000), np.float32)]  # the program's output


SOFTMAX = {"name": "softmax_f32", "sample": "softmax_f32"}


def test_the_inductor_peer_compiles_and_times_a_sample_on_the_cpu():
    """The real Inductor (C++ kernels on the CPU): compiled, checked against
    the reference, timed."""
    inputs, refs, tol, like = _softmax()
    peer = inductor_peer(SAMPLES, SOFTMAX, inputs, refs, tol, like, 3, 2, 1, TorchOptions("cpu"))
    assert peer["status"] == "ok", peer
    assert (peer["backend"], peer["device"], peer["timer"]) == ("inductor", "cpu", "wall clock")
    assert peer["numerics"] == "ok" and peer["max_error"] <= tol and peer["seconds"] > 0


def _bundle_with(tmp_path, source: str):
    (tmp_path / "torch_peers.py").write_text("import torch\n\n" + source)
    return tmp_path


EAGER = TorchOptions("cpu", backend="eager")


def test_a_torch_function_of_another_type_fails_its_numerics(tmp_path):
    """Right values in float64: the peer's numerics say the program returns
    float32 (the reference alone would not see it)."""
    bundle = _bundle_with(
        tmp_path,
        "def softmax_f32(x):\n    return torch.softmax(x.double(), dim=1)\n"
        "SAMPLES = {'softmax_f32': softmax_f32}\n",
    )
    inputs, refs, tol, like = _softmax()
    peer = inductor_peer(bundle, SOFTMAX, inputs, refs, tol, like, 1, 1, 0, EAGER)
    assert peer["status"] == "ok", peer
    assert peer["numerics"] == "FAIL: output 0 is float64[256, 1000], the program returns " + (
        "float32[256, 1000]"
    )


def test_a_torch_function_torch_compile_refuses_is_the_peers_status(tmp_path):
    """fullgraph: a graph break (Python branching on a tensor's value) is a
    compile error, reported, not a crash."""
    bundle = _bundle_with(
        tmp_path,
        "def softmax_f32(x):\n    return x if x.sum() > 0 else -x\n"
        "SAMPLES = {'softmax_f32': softmax_f32}\n",
    )
    inputs, refs, tol, like = _softmax()
    peer = inductor_peer(bundle, SOFTMAX, inputs, refs, tol, like, 1, 1, 0, EAGER)
    assert peer["status"].startswith("failed: "), peer


def test_a_sample_without_a_torch_function_or_torch_is_the_peers_status(tmp_path, monkeypatch):
    bundle = _bundle_with(tmp_path, "SAMPLES = {}\n")
    inputs, refs, tol, like = _softmax()
    args = (inputs, refs, tol, like, 1, 1, 0, EAGER)
    peer = inductor_peer(bundle, SOFTMAX, *args)
    assert peer == {"status": "unavailable: no PyTorch function for softmax_f32"}
    peer = inductor_peer(bundle, {"name": "add_f32", "signature": []}, *args)
    assert peer == {"status": "unavailable: not a sample, no PyTorch function"}
    monkeypatch.setitem(sys.modules, "torch", None)  # what `import torch` meets with no torch
    peer = inductor_peer(SAMPLES, SOFTMAX, *args)
    assert peer["status"].startswith("unavailable: ModuleNotFoundError: "), peer


def test_bf16_round_trips_through_torch():
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(DTYPES["bf16"])
    t = to_torch(x, "cpu")
    assert t.dtype == torch.bfloat16
    assert np.array_equal(t.float().numpy(), x.astype(np.float32))
    back = from_torch(t)
    assert back.dtype == x.dtype and np.array_equal(back.view(np.int16), x.view(np.int16))
