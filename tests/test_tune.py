"""Tuned choices (strategies/tuning.py, `tilefuse tune`): a compile takes
the choice the cache names for its dispatch, says so, and computes the same
result; a choice that does not fit is ignored with a note; the tuner times
candidates on lavapipe and writes an entry the next compile reads."""

import json
import subprocess
import sys

import numpy as np
import tilefuse
from support import run_cli
from test_gpu_bundle import BLOCK
from test_matmul import program, reference
from tilefuse.bench.tune import Candidates, record, tune, winner
from tilefuse.strategies import matmul, tuning
from tilefuse.targets import load_target

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


RAGGED_SIGNATURE = "B[]M[100]N[101]K[99] f32xf32->f32 AkBn epilogue"


def test_ragged_tilings_are_candidates_and_a_tuned_one_is_taken(tmp_path):
    """100x99x101 has no exact tiling worth keeping: the ragged tilings are
    the candidates (the chooser's 8x8 per thread first, then 4x4 and half
    the threads), the exact ones after them; a cache naming 4x4 gets it."""
    result = tilefuse.compile_program(
        program(100, 99, 101), "vulkan", tuning=tmp_path / "none.json"
    )
    (choice,) = result.compilation.choices
    options = matmul.candidates(choice.dispatch, load_target("vulkan"))
    choices = [matmul.choice_of(p) for p in options]
    assert choices[0] == {"thread_tile": [8, 8], "threads": [8, 8], "ragged": True}, choices
    assert {"thread_tile": [4, 4], "threads": [8, 8], "ragged": True} in choices
    assert any("ragged" not in c for c in choices)  # the exact tilings too
    cache = tmp_path / "tuning.json"
    entry = {
        "choice": choices[choices.index({"thread_tile": [4, 4], "threads": [8, 8], "ragged": True})]
    }
    tuning.record(cache, "vulkan", "matmul", RAGGED_SIGNATURE, {**entry, "seconds": 1.0})
    result = tilefuse.compile_program(program(100, 99, 101), "vulkan", tuning=cache)
    (report,) = result.reports
    assert "thread=[4, 4] ragged" in report.params and "(tuned:" in report.reason, report.line()
    run(tilefuse.CompiledModule(result.vmfb, "vulkan"), m=100, k=99, n=101)


def test_ragged_grid_fills_the_gpu_first():
    """On a target that names its multiprocessors the chooser's ragged
    tiling is the first whose grid has a workgroup for each (197x768 in
    64x64 tiles is 48 workgroups, 32x32 tiles 168 of sm_80's 108)."""
    result = tilefuse.compile_program(program(197, 768, 768), "vulkan")
    (choice,) = result.compilation.choices
    cuda = load_target("cuda")
    (first, *_) = matmul.candidates(choice.dispatch, cuda)
    grid = first.launch.grid
    assert first.ragged and grid[0] * grid[1] >= cuda.multiprocessors > 48, matmul.describe(first)
    (on_vulkan, *_) = matmul.candidates(choice.dispatch, load_target("vulkan"))
    assert on_vulkan.thread_tile == (8, 8)  # lavapipe names none: the largest tile


# The GPU machine has no IREE compiler and no tilefuse: the tune runner is
# run with both blocked (test_gpu_bundle's BLOCK), from the bundle's own
# copy (tilefuse_run).
RUN_TUNE_WITHOUT_COMPILER = (
    BLOCK
    + """
sys.argv = ["tune_runner", ".", "--device", "vulkan", "--repeats", "2", "--warmup", "1"]
runpy.run_module("tilefuse_run.bench.tune_runner", run_name="__main__")
"""
)


def test_a_tune_bundle_is_timed_without_the_compiler_and_recorded_here(tmp_path):
    """`tune --bundle` compiles the candidates here; the bundle's runner
    times them with tilefuse and the compiler blocked, checking each one's
    outputs against the chooser's pick; `tune --record` writes the cache
    entry the next compile reads."""
    model = tmp_path / "mm.mlir"
    model.write_text(program(64, 64, 128))
    proc = run_cli("tune", str(model), "--target", "vulkan", "--bundle", str(tmp_path / "b"),
                   "--candidates", "3")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    bundle = tmp_path / "b"
    manifest = json.loads((bundle / "tune.json").read_text())
    (d,) = manifest["dispatches"]
    assert d["signature"] == SIGNATURE and len(d["files"]) == 3 and d["default_first"]
    assert (bundle / "tilefuse_run" / "bench" / "tune_runner.py").is_file()
    run = subprocess.run(
        [sys.executable, "-c", RUN_TUNE_WITHOUT_COMPILER],
        cwd=bundle, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads((bundle / "tune_results.json").read_text())
    (timed,) = results["dispatches"]
    assert timed["agrees"] == [True, True, True] and all(s > 0 for s in timed["seconds"])
    cache = tmp_path / "tuning.json"
    proc = run_cli("tune", "--record", str(bundle), "--cache", str(cache))
    assert proc.returncode == 0, proc.stderr
    entry = json.loads(cache.read_text())["entries"][f"vulkan|matmul|{SIGNATURE}"]
    assert entry["choice"] in d["choices"] and entry["device"] == "vulkan"
    assert [c["seconds"] for c in entry["candidates"]] == timed["seconds"]
    (report,) = tilefuse.compile_program(program(64, 64, 128), "vulkan", tuning=cache).reports
    assert "(tuned:" in report.reason, report.line()


def test_a_candidate_that_disagrees_never_wins(tmp_path):
    """The fastest candidate computes something else than the chooser's
    pick (the runner marked it): the next fastest that agrees is recorded."""
    c = Candidates("d", "matmul", SIGNATURE, [{"a": 0}, {"a": 1}, {"a": 2}], [], True, [])
    cache = tmp_path / "tuning.json"
    tuned = record(cache, "vulkan", c, [3.0, 1.0, 2.0], "test", "m", [True, False, True])
    assert tuned.winner == 2
    entry = json.loads(cache.read_text())["entries"][f"vulkan|matmul|{SIGNATURE}"]
    assert entry["choice"] == {"a": 2} and entry["disagreeing"] == [{"a": 1}]
    # Within MARGIN of the default: the default stays.
    assert winner([1.0, 0.99, 2.0], True, [True, True, True]) == 0


def test_record_refuses_a_file_that_is_not_a_tune_result(tmp_path):
    bad = tmp_path / "r.json"
    bad.write_text("{}")
    proc = run_cli("tune", "--record", str(bad))
    assert proc.returncode != 0
    assert "not a tune bundle's results file" in proc.stderr and "Traceback" not in proc.stderr
