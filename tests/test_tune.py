"""Tuned choices (strategies/tuning.py, `tilefuse tune`): a compile takes
the choice the cache names for its dispatch, says so, and computes the same
result; a choice that does not fit is ignored with a note; the tuner times
candidates on lavapipe and writes an entry the next compile reads."""

import json

import numpy as np
import tilefuse
from test_matmul import program, reference
from tilefuse.bench.tune import tune
from tilefuse.strategies import tuning

SIGNATURE = "B[]M[64]N[128]K[64] f32xf32->f32 AkBn epilogue"


def write_cache(path, choice):
    entry = {"choice": choice, "seconds": 1.0, "default_seconds": 2.0, "device": "test"}
    tuning.record(path, "vulkan", "matmul", SIGNATURE, entry)


def run(module, m=64, k=64, n=128):
    rng = np.random.default_rng(0)
    a, b = (
        rng.standard_normal((m, k)).astype(np.float32),
        rng.standard_normal((k, n)).astype(np.float32),
    )
    c, r = rng.standard_normal(n).astype(np.float32), rng.standard_normal((m, n)).astype(np.float32)
    err = np.max(np.abs(module.main(a, b, c, r) - reference(a, b, c, r, "bias_relu")))
    assert err <= 1e-4 * np.sqrt(k), err


def test_a_compile_takes_the_tuned_choice(tmp_path):
    cache = tmp_path / "tuning.json"
    write_cache(cache, {"thread_tile": [4, 8], "threads": [16, 4]})
    result = tilefuse.compile_program(program(64, 64, 128), "vulkan", tuning=cache)
    (report,) = result.reports
    assert report.params.startswith("tile=[16, 128] thread=[4, 8]"), report.line()
    assert f"(tuned: {cache})" in report.reason
    run(tilefuse.CompiledModule(result.vmfb, "vulkan"))
    # Without the cache: the chooser's own pick.
    (default,) = tilefuse.compile_program(program(64, 64, 128), "vulkan").reports
    assert "thread=[8, 8]" in default.params and "tuned" not in default.reason


def test_a_choice_that_does_not_fit_is_ignored_with_a_note(tmp_path):
    cache = tmp_path / "tuning.json"
    write_cache(cache, {"thread_tile": [3, 8], "threads": [16, 4]})
    (report,) = tilefuse.compile_program(program(64, 64, 128), "vulkan", tuning=cache).reports
    assert report.status == "applied" and "thread=[8, 8]" in report.params
    assert "does not fit: ignored" in report.reason


def test_tune_writes_an_entry_the_next_compile_reads(tmp_path):
    model = tmp_path / "mm.mlir"
    model.write_text(program(64, 64, 128))
    cache = tmp_path / "tuning.json"
    (tuned,) = tune(model, "vulkan", cache_path=cache, max_candidates=3, repeats=2, warmup=1)
    assert tuned.signature == SIGNATURE and len(tuned.seconds) == 3, tuned
    entry = json.loads(cache.read_text())["entries"][f"vulkan|matmul|{SIGNATURE}"]
    assert entry["choice"] == tuned.choices[tuned.winner]
    assert len(entry["candidates"]) == 3 and entry["default_seconds"] == tuned.seconds[0]
    (report,) = tilefuse.compile_program(program(64, 64, 128), "vulkan", tuning=cache).reports
    assert "(tuned:" in report.reason, report.line()
