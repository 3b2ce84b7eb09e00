"""Read the JAX program corpus written by generate.py (numpy, ml_dtypes and json only).

    from corpus.load import load, names   # with tests/ on sys.path
    mlir_path, inputs, outputs, entry = load("gelu_erf_f32")

`entry` is the program's manifest.json record: category, dtype, tolerance (atol, rtol, and
per output), input and output dtypes and shapes, features (`func.call`, `chlo.*`, `i64`, `f64`).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import ml_dtypes
import numpy as np

CORPUS_DIR = Path(__file__).resolve().parent
PROGRAM_DIR = CORPUS_DIR / "programs"
MANIFEST = CORPUS_DIR / "manifest.json"

NUMPY_DTYPES = {
    "bool": np.bool_,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "f16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "f32": np.float32,
    "f64": np.float64,
}


@cache
def manifest() -> dict:
    return json.loads(MANIFEST.read_text())


def entries() -> dict[str, dict]:
    return {e["name"]: e for e in manifest()["programs"]}


def names() -> list[str]:
    """Every program, in manifest order."""
    return [e["name"] for e in manifest()["programs"]]


def _decode(array: np.ndarray, spec: dict) -> np.ndarray:
    """bf16 arrays are stored as their uint16 bit patterns."""
    dtype = NUMPY_DTYPES[spec["dtype"]]
    if dtype is ml_dtypes.bfloat16:
        array = array.view(ml_dtypes.bfloat16)
    if array.dtype != dtype or list(array.shape) != spec["shape"]:
        raise ValueError(f"stored {array.dtype}{list(array.shape)}, manifest says {spec}")
    return array


def load(name: str) -> tuple[Path, list[np.ndarray], list[np.ndarray], dict]:
    """(path of NAME.mlir, inputs, JAX CPU outputs, manifest entry) of one program."""
    entry = entries()[name]
    with np.load(PROGRAM_DIR / f"{name}.npz", allow_pickle=False) as npz:
        inputs = [_decode(npz[f"arg{i}"], s) for i, s in enumerate(entry["inputs"])]
        outputs = [_decode(npz[f"out{i}"], s) for i, s in enumerate(entry["outputs"])]
    return PROGRAM_DIR / f"{name}.mlir", inputs, outputs, entry
