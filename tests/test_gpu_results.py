"""docs/gpu-results.md's tables are generated from docs/gpu-runs (bench/gpu_results.py)."""

import json

from tilefuse.bench import gpu_results


def test_the_page_is_up_to_date():
    assert gpu_results.main(["--check"]) == 0, "run python -m tilefuse.bench.gpu_results"


def test_render_reads_every_table(tmp_path):
    """One results file with a timed model (plain IREE failed on it), a
    contraction and ncu kernel times: each lands in its table, with the
    folder's copy reference and HBM peak for the fractions."""
    run = {
        "device": "cuda", "date": "2026-11-26", "commit": "abc", "target": "cuda-sm90",
        "repeats": 10, "warmup": 2, "peers": ["xla"], "ncu": None,
        "copy": {"status": "ok", "device_kind": "NVIDIA H200", "bytes_per_second": 4e12},
        "hbm_peak": {"gpu": "H200", "bytes_per_second": 4.8e12},
        "models": [
            {
                "name": "mm", "numerics": "ok", "seconds": {"tilefuse": 2e-3},
                "floor_bytes": 1000, "floor_bytes_per_second": {"tilefuse": 5e5},
                "iree_error": "failed to distribute", "tensor_core_flops": 2e12,
                "fraction_of_tensor_peak": 0.5,
                "xla": {"status": "ok", "seconds": 1e-3},
            },
        ],
    }  # fmt: skip
    ncu = {
        **run, "peers": [], "ncu": "ncu", "copy": None, "hbm_peak": None,
        "models": [
            {
                "name": "big", "numerics": "ok (agree)", "seconds": {"tilefuse": 1, "iree": 1},
                "floor_bytes": 4e8,
                "kernels": {
                    c: {"status": "ok", "seconds_per_call": t,
                        "dispatches": [{"per_call": 1.0}, {"per_call": 1.0}]}
                    for c, t in (("tilefuse", 1e-4), ("iree", 2e-4))
                },
            }
        ],
    }  # fmt: skip
    folder = tmp_path / "run-1"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(run))
    (folder / "b.json").write_text(json.dumps(ncu))
    text = gpu_results.render(tmp_path)
    assert "| mm | 2000.0 | - | - | 1000.0 | 2.00 |" in text, text
    assert "plain IREE did not compile it" in text
    # 2 TFLOP over 2 ms; XLA's over 1 ms; half the tensor-core peak.
    assert "| mm | 1000.0 | - | 2000.0 | - | 50 |" in text, text
    # 4e8 bytes over 100 us = 4000 GB/s: 100% of the folder's copy, 83% of HBM.
    assert "| big | 100.0 | 200.0 | 0.50 | 4000 | 100 | 83 | 2 / 2 |" in text, text
