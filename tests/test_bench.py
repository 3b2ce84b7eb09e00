"""`tilefuse bench`: the bytes model, the roofline and occupancy arithmetic, the
baseline's dispatch count, and the command end to end."""

import json
import subprocess
import sys

import numpy as np
import pytest
from iree.compiler import ir
from tilefuse.bench.costmodel import DispatchCost, ProgramCosts, io_floor, program_costs
from tilefuse.bench.gpu import max_abs_error
from tilefuse.bench.gpus import Gpu, SmLimits, dispatch_seconds, occupancy, program_seconds
from tilefuse.bench.measure import CompilerRun, compile_iree
from tilefuse.bench.report import summary_table, to_json, write_report
from tilefuse.bench.run import ModelResult, timing_repeat
from tilefuse.driver import phase1_executable_sources
from tilefuse.frontend import load_program
from tilefuse.irutil import walk
from tilefuse.kernel.ptx import dynamic_shared_bytes, llvm_type_bytes
from tilefuse.targets import load_target
from tilefuse.toolchain import iree_compile

ADD = """
func.func @main(%a: tensor<1000xf32>, %b: tensor<1000xf32>) -> tensor<1000xf32> {
  %0 = stablehlo.add %a, %b : tensor<1000xf32>
  return %0 : tensor<1000xf32>
}
"""
ROW_SUM = """
func.func @main(%x: tensor<64x1000xf16>) -> tensor<64xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %f = stablehlo.convert %x : (tensor<64x1000xf16>) -> tensor<64x1000xf32>
  %r = stablehlo.reduce(%f init: %z) applies stablehlo.add across dimensions = [1]
    : (tensor<64x1000xf32>, tensor<f32>) -> tensor<64xf32>
  return %r : tensor<64xf32>
}
"""
# Two results of one pre-formed dispatch region: one dispatch, two outputs.
MULTI_OUTPUT = """
func.func @main(%x: tensor<64x128xf32>) -> (tensor<64x128xf32>, tensor<64x128xf32>) {
  %r:2 = flow.dispatch.region -> (tensor<64x128xf32>, tensor<64x128xf32>) {
    %c = stablehlo.constant dense<2.0> : tensor<64x128xf32>
    %a = stablehlo.add %x, %c : tensor<64x128xf32>
    %m = stablehlo.multiply %x, %c : tensor<64x128xf32>
    flow.return %a, %m : tensor<64x128xf32>, tensor<64x128xf32>
  }
  return %r#0, %r#1 : tensor<64x128xf32>, tensor<64x128xf32>
}
"""


def _two_results():
    """MULTI_OUTPUT without the region: IREE makes one dispatch per result."""
    return """
func.func @main(%x: tensor<64x128xf32>) -> (tensor<64x128xf32>, tensor<64x128xf32>) {
  %c = stablehlo.constant dense<2.0> : tensor<64x128xf32>
  %a = stablehlo.add %x, %c : tensor<64x128xf32>
  %m = stablehlo.multiply %x, %c : tensor<64x128xf32>
  return %a, %m : tensor<64x128xf32>, tensor<64x128xf32>
}
"""


def costs_of(text, tmp_path):
    src = tmp_path / "in.mlir"
    src.write_text(text)
    sources = phase1_executable_sources(src, load_target("vulkan"), tmp_path)
    return program_costs(sources.read_text())


def test_bytes_elementwise_add(tmp_path):
    costs = costs_of(ADD, tmp_path)
    [d] = costs.dispatches
    assert (d.read_bytes, d.write_bytes) == (2 * 1000 * 4, 1000 * 4)
    assert d.flops == 1000  # one addf per element
    assert io_floor(ADD, "main") == 3 * 1000 * 4


def test_bytes_row_reduction(tmp_path):
    costs = costs_of(ROW_SUM, tmp_path)
    [d] = costs.dispatches
    # f16 input read once (2 bytes an element), f32 row sums written once.
    assert (d.read_bytes, d.write_bytes) == (64 * 1000 * 2, 64 * 4)
    # Per element: convert + add; plus the 64-element fill of the accumulator.
    assert d.flops == 64 * 1000 * 2 + 64
    assert io_floor(ROW_SUM, "main") == 64 * 1000 * 2 + 64 * 4


def test_bytes_multi_output_dispatch(tmp_path):
    costs = costs_of(MULTI_OUTPUT, tmp_path)
    [d] = costs.dispatches
    assert (d.read_bytes, d.write_bytes) == (64 * 128 * 4, 2 * 64 * 128 * 4)
    # The same program without the region: two dispatches, the input read twice.
    split = costs_of(_two_results(), tmp_path)
    assert [(d.read_bytes, d.write_bytes) for d in split.dispatches] == [(32768, 32768)] * 2
    assert split.bytes == costs.bytes + 64 * 128 * 4


GPU = Gpu("test", "sm_80", bandwidth_bytes_per_s=1e12, fp32_flops=1e13, tensor_flops=1e14,
          launch_seconds=1e-6)  # fmt: skip


def test_roofline_memory_bound():
    # 1 MB at 1 TB/s = 1 us; 1 Mflop at 10 Tflop/s = 0.1 us; + 1 us launch.
    d = DispatchCost("d", read_bytes=600_000, write_bytes=400_000, flops=1_000_000,
                     tensor_core_flops=0)  # fmt: skip
    assert dispatch_seconds(d, GPU) == pytest.approx(2e-6)


def test_roofline_compute_bound_and_tensor_cores():
    # 1 Gflop: 100 us on CUDA cores, 10 us on tensor cores; bytes need 1 us.
    d = DispatchCost("d", 1_000_000, 0, flops=10**9, tensor_core_flops=0)
    assert dispatch_seconds(d, GPU) == pytest.approx(100e-6 + 1e-6)
    t = DispatchCost("t", 1_000_000, 0, flops=10**9, tensor_core_flops=10**9)
    assert dispatch_seconds(t, GPU) == pytest.approx(10e-6 + 1e-6)
    assert program_seconds([d, t], GPU) == pytest.approx(112e-6)


SM80 = SmLimits(max_threads=2048, max_blocks=32, registers=65536, register_unit=256,
                shared_memory_bytes=167936, shared_memory_reserved_per_block=1024)  # fmt: skip


@pytest.mark.parametrize(
    "threads, registers, smem, expected",
    [
        (256, 32, 0, 1.0),  # 8 warps x 8 blocks fill the 64 warp slots
        (32, 16, 0, 0.5),  # one-warp blocks: 32 blocks at most, 32 of 64 warps
        (256, 47, 0, 40 / 64),  # 47 regs -> 1536 per warp -> 42 warps -> 5 blocks
        (256, 32, 48 * 1024, 24 / 64),  # 49 KiB per block -> 3 blocks
        (1024, 255, 0, 0.0),  # 255 regs x 1024 threads does not fit one SM
    ],
)
def test_occupancy(threads, registers, smem, expected):
    assert occupancy(threads, registers, smem, SM80) == pytest.approx(expected)


def test_numerics_error_counts_one_sided_nan_as_infinite():
    a = np.array([1.0, np.nan, 3.0], np.float32)
    assert max_abs_error(a, np.array([1.0, np.nan, 3.5])) == 0.5  # NaN on both sides agrees
    assert max_abs_error(a, np.array([1.0, 2.0, 3.0])) == np.inf


def test_numerics_error_of_scalar_results():
    # A reduction to a scalar returns 0-d arrays (this used to crash bench).
    assert max_abs_error(np.array(2.0, np.float32), np.float64(2.5)) == 0.5
    assert max_abs_error(np.array(np.nan, np.float32), np.float64(np.nan)) == 0.0
    assert max_abs_error(np.array(np.nan, np.float32), np.float64(1.0)) == np.inf


def test_timing_repeat_shrinks_for_big_models():
    assert timing_repeat(2_000_000, 200) == 200  # small: the limit
    assert timing_repeat(16_400_384, 200) == 66  # ~1 GiB per timed call
    assert timing_repeat(823_000_000, 200) == 2
    assert timing_repeat(2_000_000_000, 200) == 1  # already long: no timing build


def test_dynamic_shared_memory_from_llvm_ir(tmp_path):
    """IREE packs workgroup allocations into dynamic shared memory (ptxas -v
    reports 0): bench sums the addrspace(3) globals, each aligned."""
    assert llvm_type_bytes("[1 x [128 x float]]") == 512
    assert llvm_type_bytes("<4 x half>") == 8
    ll = tmp_path / "k.linked.ll"
    ll.write_text(
        "@__dynamic_shared_memory__ = external addrspace(3) global [0 x i8], align 16\n"
        "@__shared_memory___0 = private addrspace(3) global [1 x float] undef, align 64\n"
        "@__shared_memory__ = private addrspace(3) global [2 x [8 x float]] undef, align 64\n"
        "@other = private addrspace(1) global [4 x float] undef, align 16\n"
    )
    assert dynamic_shared_bytes(ll) == 64 + 64  # 4 B and 64 B, each padded to 64


def flow_dispatch_count(path, target, tmp_path) -> int:
    out = tmp_path / "flow.mlir"
    iree_compile([str(path), *target.compile_flags, "--compile-to=flow", "-o", str(out)], "flow")
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    module = ir.Module.parse(out.read_text(), ctx)
    return sum(op.name == "flow.dispatch" for op in walk(module.operation))


@pytest.mark.parametrize(
    "name, text", [("add", ADD), ("row_sum", ROW_SUM), ("two_results", _two_results())]
)
def test_baseline_dispatch_count_matches_flow(name, text, tmp_path):
    src = tmp_path / f"{name}.mlir"
    src.write_text(text)
    target = load_target("vulkan")
    run = compile_iree(load_program(src), target, tmp_path / "iree")
    assert run.dispatch_count == flow_dispatch_count(src, target, tmp_path)
    assert run.dispatch_count == len(run.costs.dispatches)


# The report tests bench a few samples, one per kind of kernel (a loop
# group, a row kernel with workgroup memory, a softmax group, a bf16 small
# variant): every sample's numerics are checked by test_samples.py, and
# docs/results is the report over all of them (`tilefuse bench --report`).
REPORT_SAMPLES = ["bias_scale_chain", "row_sum_f32", "softmax_f32", "gelu_bf16"]


def test_bench_vulkan_report(tmp_path):
    """The CI run of the issue: samples on Vulkan, small shapes, a report."""
    out = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, "-m", "tilefuse.cli", "bench", *REPORT_SAMPLES,
         "--target", "vulkan", "--small", "--repeats", "3", "--warmup", "1",
         "--dispatch-repeat", "4", "--compile-timings", "1",
         "--report", str(out), "--json", str(tmp_path / "bench.json")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / "bench.json").read_text())
    assert [m["model"] for m in data["models"]] == REPORT_SAMPLES
    for model in data["models"]:
        assert model["numerics"].startswith("ok"), model
        assert len(model["wall_seconds"]["tilefuse"]) == 3
        assert model["wall_ratio"] > 0 and model["modeled_ratio"] > 0
        assert model["bytes"]["tilefuse"] > 0 and model["floor_bytes"] > 0
    report = (out / "bench-vulkan.md").read_text()
    assert "lavapipe" in report and "![ratios](ratios-vulkan.png)" in report
    assert (out / "ratios-vulkan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "numerics" in proc.stdout and "bytes/floor" in proc.stdout


def test_bench_cuda_report(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "tilefuse.cli", "bench", *REPORT_SAMPLES, "--small",
         "--target", "cuda", "--compile-timings", "1",
         "--report", str(tmp_path), "--json", str(tmp_path / "b.json")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    models = json.loads((tmp_path / "b.json").read_text())["models"]
    assert [m["model"] for m in models] == REPORT_SAMPLES
    for model in models:
        archs = {k["arch"] for k in model["kernels"]["tilefuse"]}
        assert archs == {"sm_80", "sm_90"}, model["model"]
        for k in model["kernels"]["tilefuse"] + model["kernels"]["iree"]:
            assert k["registers"] > 0 and 0 < k["occupancy"] <= 1, (model["model"], k)
        for k in model["kernels"]["tilefuse"]:
            assert k["spill_bytes"] == 0, (model["model"], k)
        assert model["wall_seconds"]["tilefuse"] == []  # no CUDA device to time on
    # The row kernel combines subgroups through workgroup memory, which IREE
    # puts in dynamic shared memory: the figure must include it.
    [row_sum] = [m for m in models if m["model"] == "row_sum_f32"]
    assert all(k["shared_bytes"] > 0 for k in row_sum["kernels"]["tilefuse"])
    assert "## Kernels (ptxas -v)" in (tmp_path / "bench-cuda.md").read_text()


def test_bench_unknown_gpu_is_one_line_error(root):
    proc = subprocess.run(
        [sys.executable, "-m", "tilefuse.cli", "bench", "--gpu", "Z80"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "tilefuse: error: unknown GPU 'Z80'; known: H100-SXM, H200, A100-80GB"
    )


def test_bench_a_directory_of_jax_exports_without_running(tmp_path, root):
    """`--no-run` compiles and counts only; `--keep-going` lists a model a
    compiler cannot compile instead of stopping; the table ends with the sums
    and the geometric mean of bytes/floor."""
    programs = tmp_path / "exports"
    programs.mkdir()
    for name in ("softmax_f32", "rmsnorm_f32"):
        source = root / "tests" / "corpus" / "programs" / f"{name}.mlir"
        (programs / f"{name}.mlir").write_text(source.read_text())
    (programs / "broken.mlir").write_text("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n")
    proc = subprocess.run(
        [sys.executable, "-m", "tilefuse.cli", "bench", str(programs), "--no-run",
         "--keep-going", "--json", str(tmp_path / "b.json"), "--report", str(tmp_path / "r")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "skipped broken:" in proc.stderr
    assert "## Skipped" in (tmp_path / "r" / "bench-vulkan.md").read_text()
    models = {m["model"]: m for m in json.loads((tmp_path / "b.json").read_text())["models"]}
    assert set(models) == {"softmax_f32", "rmsnorm_f32"}
    for m in models.values():
        assert m["numerics"] == "not run (--no-run)" and m["wall_seconds"]["tilefuse"] == []
        assert m["dispatches"]["tilefuse"] <= m["dispatches"]["iree"], m
    ratios = [m["bytes_over_floor"]["tilefuse"] for m in models.values()]
    geomean = float(np.exp(np.mean(np.log(ratios))))
    total = [line for line in proc.stdout.splitlines() if line.startswith("all 2 ")]
    assert total and f"{geomean:.2f}/" in total[0], proc.stdout


# bf16 products: plain iree-compile 3.13 rejects this for cuda-sm90 ("failed
# to distribute") and for Vulkan (it cannot legalize a bf16 vector.bitcast);
# tilefuse compiles it for both.
BF16_MATMUL = """
func.func @main(%a: tensor<64x64xbf16>, %b: tensor<64x64xbf16>) -> tensor<64x64xbf16> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
    : (tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<64x64xbf16>
  return %0 : tensor<64x64xbf16>
}
"""


def _bench_add_and_rejected(tmp_path, target, *options):
    """`tilefuse bench` of ADD and BF16_MATMUL (which plain iree-compile
    rejects) for `target`: (process, JSON models by name, report text)."""
    programs = tmp_path / "programs"
    programs.mkdir()
    (programs / "add.mlir").write_text(ADD)
    (programs / "matmul_bf16.mlir").write_text(BF16_MATMUL)
    proc = subprocess.run(
        [sys.executable, "-m", "tilefuse.cli", "bench", str(programs), "--target", target,
         "--compile-timings", "1", *options,
         "--json", str(tmp_path / "b.json"), "--report", str(tmp_path / "r")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    models = {m["model"]: m for m in json.loads((tmp_path / "b.json").read_text())["models"]}
    assert list(models) == ["add", "matmul_bf16"]
    return proc, models, (tmp_path / "r" / f"bench-{target}.md").read_text()


def _row(stdout: str, model: str) -> list[str]:
    """A model's row of the summary table (the first table printed)."""
    line = next(line for line in stdout.splitlines() if line.startswith(model + " "))
    return line.split("  ")


def test_bench_model_plain_iree_rejects_cuda(tmp_path):
    """A model plain iree-compile rejects keeps tilefuse's figures: IREE's
    are "-" (None in the JSON), with one line giving IREE's first error; the
    summary row counts only the models both compiled."""
    proc, models, report = _bench_add_and_rejected(tmp_path, "cuda-sm90")
    rejected = models["matmul_bf16"]
    line = f"plain iree-compile rejected matmul_bf16: {rejected['baseline_error']}"
    assert line in proc.stdout.splitlines(), proc.stdout
    assert rejected["baseline_error"] == "matmul_bf16.mlir:3:8: 'func.func' op failed to distribute"
    assert str(tmp_path) not in proc.stdout + report
    # tilefuse's figures, none of IREE's, and no ratio.
    assert rejected["dispatches"] == {"tilefuse": 1, "iree": None}
    assert rejected["bytes"]["tilefuse"] == rejected["floor_bytes"] == 3 * 64 * 64 * 2
    assert rejected["bytes"]["iree"] is None and rejected["modeled_us"]["iree"] is None
    assert rejected["modeled_ratio"] is None and rejected["compile_ratio"] is None
    assert rejected["compile_s"]["tilefuse"] > 0 and rejected["compile_s"]["iree"] is None
    assert list(rejected["per_dispatch"]) == list(rejected["kernels"]) == ["tilefuse"]
    assert {k["arch"] for k in rejected["kernels"]["tilefuse"]} == {"sm_80", "sm_90"}
    row = [cell.strip() for cell in _row(proc.stdout, "matmul_bf16") if cell.strip()]
    assert row[1:4] == ["1/-", "0.02/-", "0.02"], row
    assert row[5].startswith("1.0/- (-)") and row[7].endswith("/- (-)"), row
    # The model both compiled is as before; the summary row is over it alone.
    assert models["add"]["baseline_error"] is None
    assert models["add"]["dispatches"] == {"tilefuse": 1, "iree": 1}
    assert models["add"]["modeled_ratio"] > 0 and models["add"]["compile_ratio"] > 0
    total = [cell.strip() for cell in _row(proc.stdout, "all") if cell.strip()]
    assert total[:5] == [
        "all 1 IREE compiled, of 2 (sum; bytes/floor: geomean)", "1/1", "0.01/0.01", "0.01",
        "1.00/1.00",
    ], total  # fmt: skip
    assert f"- {line}" in report.splitlines()
    assert "| matmul_bf16 | 1/- | 0.02/- |" in report
    assert (tmp_path / "r" / "ratios-cuda-sm90.png").is_file()


def test_bench_model_plain_iree_rejects_vulkan_runs_tilefuse(tmp_path):
    """On Vulkan the rejected model still runs for tilefuse (timed, its
    numerics unchecked: no reference and no IREE to compare with); the model
    both compiled is benched as ever."""
    proc, models, report = _bench_add_and_rejected(
        tmp_path, "vulkan", "--repeats", "3", "--warmup", "1", "--dispatch-repeat", "4"
    )
    rejected = models["matmul_bf16"]
    assert rejected["baseline_error"].startswith("matmul_bf16.mlir:"), rejected
    assert f"plain iree-compile rejected matmul_bf16: {rejected['baseline_error']}" in proc.stdout
    assert list(rejected["wall_seconds"]) == ["tilefuse"]
    assert len(rejected["wall_seconds"]["tilefuse"]) == 3
    assert rejected["wall_ms"]["tilefuse"] > 0 and rejected["wall_ms"]["iree"] is None
    assert rejected["wall_ratio"] is None and rejected["max_difference"] is None
    assert rejected["numerics"] == "unchecked: no reference, and plain IREE did not compile it"
    add = models["add"]
    assert add["baseline_error"] is None and add["numerics"] == "ok (agree)"
    assert len(add["wall_seconds"]["iree"]) == 3 and add["wall_ratio"] > 0
    assert add["max_difference"] == 0.0
    assert "(-)" not in " ".join(_row(proc.stdout, "add"))
    assert "(-)" in " ".join(_row(proc.stdout, "matmul_bf16"))
    assert "- plain iree-compile rejected matmul_bf16: matmul_bf16.mlir:" in report


def _result(name, rejected: bool) -> ModelResult:
    """A benched model as bench.run makes it, without compiling: one
    dispatch moving 3000 bytes for each compiler; no "iree" run if rejected."""
    costs = ProgramCosts([DispatchCost("d", 2000, 1000, flops=10, tensor_core_flops=0)], 1)
    runs = {
        c: CompilerRun(c, b"", b"", 1, compile_seconds=1.0, dispatch_count=1, costs=costs)
        for c in (("tilefuse",) if rejected else ("tilefuse", "iree"))
    }
    return ModelResult(
        name, f"{name}.mlir", "vulkan", "main", 3000, runs,
        {"H100-SXM": {c: 2e-6 for c in runs}}, numerics="not run (--no-run)",
        baseline_error=f"{name}.mlir:1:1: no" if rejected else None,
    )  # fmt: skip


def test_report_when_plain_iree_compiled_none(tmp_path):
    """Every model rejected by plain iree-compile: the summary row has no
    sums to compare ("-", not zero), the JSON None, the report no chart."""
    results = [_result("a", True), _result("b", True)]
    table = summary_table(results, "H100-SXM").splitlines()
    assert table[1].split() == [
        "a", "1/-", "0.00/-", "0.00", "1.00/-", "2.0/-", "(-)", "-/-", "(-)", "1.0/-", "(-)",
        "not", "run", "(--no-run)",
    ]  # fmt: skip
    label = "all 0 IREE compiled, of 2 (sum; bytes/floor: geomean)"
    assert table[-1].startswith(label)
    assert set(table[-1][len(label) :].split()) == {"-"}
    data = to_json(results, "H100-SXM")["models"]
    assert data[0]["bytes"] == {"tilefuse": 3000, "iree": None}
    assert data[0]["baseline_error"] == "a.mlir:1:1: no"
    path = write_report(results, "H100-SXM", tmp_path)
    assert "(No chart: plain iree-compile compiled none of the models" in path.read_text()
    assert "- plain iree-compile rejected b: b.mlir:1:1: no" in path.read_text()
    assert not list(tmp_path.glob("*.png"))
    # One of two compiled: its figures alone make the summary row, and the chart.
    mixed = [_result("a", True), _result("b", False)]
    assert (
        summary_table(mixed, "H100-SXM")
        .splitlines()[-1]
        .startswith("all 1 IREE compiled, of 2 (sum; bytes/floor: geomean)  1/1 ")
    )
    write_report(mixed, "H100-SXM", tmp_path / "mixed")
    assert (tmp_path / "mixed" / "ratios-vulkan.png").is_file()
