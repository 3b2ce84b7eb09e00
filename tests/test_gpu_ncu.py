"""The bundle runner's kernel times from Nsight Compute (#21, `--ncu`): the
parser of what `ncu --csv --metrics gpu__time_duration.sum` prints, the
per-dispatch summary, and the status without ncu. (The child process ncu
runs, --single-call, is run by tests/test_gpu_bundle.py.)"""

import pytest
from tilefuse.bench import gpu
from tilefuse.bench.gpu import dispatch_times, ncu_kernels, parse_ncu_csv

HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
    '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
    '"Metric Value"'
)


def row(launch: int, kernel: str, metric: str, unit: str, value: str) -> str:
    return (
        f'"{launch}","4242","python3.11","gpu-host","{kernel}","1","13","(256, 1, 1)",'
        f'"(64, 1, 1)","0","9.0","Command line profiler metrics","{metric}","{unit}","{value}"'
    )


SOFTMAX = "main_dispatch_0_softmax_256x1000_f32"
SUM = "main_dispatch_1_reduction_512x2048_f32"
# As ncu prints it: its own ==PROF== lines and the program's output around
# the CSV, times with thousands separators, a second metric to skip, and a
# kernel name with commas inside its quotes.
CSV = "\n".join(
    [
        "==PROF== Connected to process 4242 (/usr/bin/python3.11)",
        '==PROF== Profiling "main_dispatch_0_softmax_256x1000_f32" - 0: 0%....50%....100% - 1 pass',
        "some line the program printed",
        HEADER,
        row(0, SOFTMAX, "gpu__time_duration.sum", "usecond", "1,234.50"),
        row(0, SOFTMAX, "dram__bytes.sum", "Mbyte", "2,048.00"),
        row(1, SOFTMAX, "gpu__time_duration.sum", "nsecond", "1,230,000"),
        row(2, SOFTMAX, "gpu__time_duration.sum", "ns", "1240000"),
        row(3, SUM, "gpu__time_duration.sum", "msecond", "0.01"),
        row(4, "void iree_fill<float, 4>(float*, int)", "gpu__time_duration.sum", "us", "2"),
        "==PROF== Disconnected from process 4242",
    ]
)


def test_ncu_csv_gives_each_launch_its_time_in_seconds():
    launches = parse_ncu_csv(CSV)
    assert [(x["id"], x["kernel"]) for x in launches] == [
        (0, SOFTMAX),
        (1, SOFTMAX),
        (2, SOFTMAX),
        (3, SUM),
        (4, "void iree_fill<float, 4>(float*, int)"),
    ]
    seconds = [x["seconds"] for x in launches]
    assert seconds == pytest.approx([1234.5e-6, 1.23e-3, 1.24e-3, 1e-5, 2e-6])


def test_ncu_output_without_a_csv_has_no_launches():
    assert parse_ncu_csv("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission") == []


def test_a_time_in_an_unknown_unit_is_an_error():
    with pytest.raises(ValueError, match="'cycle', not a time unit"):
        parse_ncu_csv(HEADER + "\n" + row(0, SOFTMAX, "gpu__time_duration.sum", "cycle", "12"))


def test_a_csv_without_the_metric_columns_is_an_error():
    with pytest.raises(ValueError, match="no column Metric Name, Metric Unit, Metric Value"):
        parse_ncu_csv('"ID","Process ID","Kernel Name","gpu__time_duration.sum"\n"0","1","k","5"')


def test_launches_of_a_timing_call_per_dispatch():
    """A timing module's call runs every dispatch `repeat` times: per kernel
    its launches, launches per call of the real module, median, smallest and
    total; the kernels' time per real call is the total over `repeat`."""
    times = dispatch_times(parse_ncu_csv(CSV), repeat=3)
    assert times["launches"] == 5
    assert times["seconds_per_call"] == pytest.approx((3.7045e-3 + 1e-5 + 2e-6) / 3)
    softmax, total, fill = times["dispatches"]
    assert (softmax["kernel"], softmax["launches"], softmax["per_call"]) == (SOFTMAX, 3, 1.0)
    assert softmax["median_seconds"] == pytest.approx(1.234500e-3)
    assert softmax["min_seconds"] == pytest.approx(1.23e-3)
    assert softmax["total_seconds"] == pytest.approx(3.7045e-3)
    assert (total["kernel"], total["launches"], total["per_call"]) == (SUM, 1, pytest.approx(1 / 3))
    assert fill["kernel"].startswith("void iree_fill")


def test_without_ncu_the_status_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a folder with no ncu in it
    model = {"name": "softmax_f32", "repeat": {"tilefuse": 3, "iree": 3}}
    kernels = ncu_kernels(tmp_path, model, "tilefuse", "cuda")
    assert kernels == {"status": "unavailable: ncu not found (not on PATH; --ncu PATH names it)"}


def test_kernel_seconds_cancel_the_per_call_cost():
    """A timing module of N = 4 repeats taking 1.0 ms a call against 0.4 ms
    for the plain module: 3 extra dispatch rounds cost 0.6 ms, so 0.2 ms per
    call of the dispatches (the amortized figure would say 0.25). When noise
    makes the timing call the shorter, the amortized figure is kept."""
    times = gpu.kernel_seconds(
        ["tilefuse", "iree"], [4, 4], [[1.0e-3] * 3, [0.3e-3] * 3], [[0.4e-3] * 3, [0.35e-3] * 3]
    )
    assert abs(times["seconds"]["tilefuse"] - 0.2e-3) < 1e-12
    assert times["amortized_seconds"]["tilefuse"] == 0.25e-3
    assert times["call_seconds"]["tilefuse"] == 0.4e-3
    assert times["seconds"]["iree"] == 0.3e-3 / 4
