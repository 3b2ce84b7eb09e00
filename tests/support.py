"""Helpers the test modules share (they import from here, never from each other)."""

import subprocess
import sys

from filecheck.finput import FInput  # noqa: F401  (ensures the package is there)
from iree.compiler import ir
from tilefuse.fusion import fuse
from tilefuse.irutil import walk
from tilefuse.strategies import catalogue
from tilefuse.targets import load_target


def filecheck(text: str, checks: str, tmp_path) -> None:
    """LLVM FileCheck (the Python port) of `text` against `checks`."""
    check_file = tmp_path / "checks.txt"
    check_file.write_text(checks)
    proc = subprocess.run(
        ["filecheck", str(check_file)], input=text, capture_output=True, check=False, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def fusion_plan(body: str, args: str, result: str, target: str = "vulkan"):
    """The fusion plan of `func.func @main(args) -> result { body }`, and the text."""
    text = f"func.func @main({args}) -> {result} {{\n{body}\n}}\n"
    return fuse(text, load_target(target), catalogue()), text


def kernel_ops(kernel: str):
    """Every op of a printed kernel, and the module that keeps them alive."""
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    module = ir.Module.parse(kernel, ctx)
    return [module.operation, *walk(module.operation)], module


def run_cli(*args):
    """The tilefuse command in a subprocess; never a traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "tilefuse.cli", *args], capture_output=True, text=True, check=False
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


# Each one-dispatch sample and the strategy that must compile it.
SAMPLE_STRATEGIES = [
    ("gelu_bf16", "loop"),
    ("gelu_f32", "loop"),
    ("bias_scale_chain", "loop"),
    ("pad_relu_f32", "loop"),
    ("softmax_f32", "softmax"),  # rows of 1000: not a multiple of a 32-lane warp
    ("rmsnorm_f32", "row_warp"),  # rows of 1024 and 768: 32 and 24 per lane
    ("layernorm_f32", "row_warp"),
    ("column_sum_f16", "column_reduction"),
    ("column_sum_small", "column_reduction"),
    ("row_sum_f32", "row_reduction"),
    ("argmax_f32", "softmax"),
]
