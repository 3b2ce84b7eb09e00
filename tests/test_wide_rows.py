"""Wide row normalizations (softmax, layernorm, RMSNorm over rows of thousands
to tens of thousands of elements) on the GPU targets: how many threads a row
gets (the target's softmax_vectors_per_thread), their PTX, and the same
GPU-sized schedules run on lavapipe through target overrides.

There is no GPU here: the CUDA evidence is the PTX (threads per block, global
loads, loops) and ptxas (registers, spills); the numerics are lavapipe's,
with the Vulkan target told to size rows as the GPU targets do.
"""

import math
import re
import shutil

import pytest
import tilefuse
from conftest import cpu_hypothesis
from hypothesis import given
from hypothesis import strategies as st
from rowcases import check_normalization, program
from support import filecheck, kernel_ops
from tilefuse.kernel import ptx
from tilefuse.strategies import softmax
from tilefuse.strategies.sizes import next_pow2
from tilefuse.targets import load_target

GPU_TARGETS = ["cuda", "cuda-sm90", "vulkan-nvidia", "vulkan-amd"]
CUDA_TARGETS = ["cuda", "cuda-sm90"]
needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")


def test_lavapipe_keeps_its_threads_per_row():
    """lavapipe's rows get the threads they had before the figure was a
    target field: 64 vectors per thread, between one subgroup (8) and 64
    (its preferred 128 threads and 8**2, as the old cap read)."""
    vulkan = load_target("vulkan")
    assert vulkan.softmax_vectors_per_thread == 64
    for n in [*range(2, 3000, 7), 4000, 8192, 8193, 32000, 50257, 70000]:
        for bits in (16, 32):
            threads, vector = softmax.layout(n, bits, vulkan)
            old = min(max(next_pow2(math.ceil(n / (vector * 64))), 8), min(128, 1024, 64))
            assert threads == old, (n, bits)


@pytest.mark.parametrize("name", GPU_TARGETS)
def test_gpu_rows_get_many_threads(name):
    """A GPU row gets about N / (4 V) threads, up to 1024 (32**2): 8192 f32
    512 threads of 4 4-vectors (it was one 32-lane warp over 64 chunks),
    32000 and 50257 the full 1024 (50257 is odd: scalars)."""
    target = load_target(name)
    assert target.softmax_vectors_per_thread == 4
    assert softmax.layout(8192, 32, target) == (512, 4)
    assert softmax.layout(2048, 32, target) == (128, 4)
    assert softmax.layout(32000, 32, target) == (1024, 4)
    assert softmax.layout(50257, 32, target) == (1024, 1)
    assert softmax.layout(1000, 32, target) == (64, 4)


def test_threads_shrink_to_fit_the_accumulators():
    """Each reduction keeps a T*V f32 accumulator in workgroup memory:
    vulkan-nvidia's 48 KiB holds two of 1024 x 4 but not three, so a row
    of three reductions gets 512 threads."""
    target = load_target("vulkan-nvidia")
    assert softmax.layout(32000, 32, target, reductions=2) == (1024, 4)
    assert softmax.layout(32000, 32, target, reductions=3) == (512, 4)
    assert softmax.shared_bytes(32000, 3, 32, target) <= target.shared_memory_bytes


def test_the_figure_is_a_target_override():
    target = load_target("cuda-sm90,softmax_vectors_per_thread=64")
    assert softmax.layout(8192, 32, target) == (32, 4)


# The chunked kernel with GPU-sized rows, run on lavapipe: its 8-lane
# subgroups cap T at 64, so 4 vectors per thread give 64 threads from rows of
# 1024 on (lavapipe's own 64 vectors: 8 threads up to 2048). The register
# kernel is off (row_register_elements = 0) so the chunked kernel runs.
CHUNKED_GPU_SIZED = "vulkan,softmax_vectors_per_thread=4,row_register_elements=0"
CHUNKED_CASES = [
    ("softmax", 16, 2048, "f32"),  # 8 chunks of 64 x 4
    ("softmax", 8, 1000, "f32"),  # 3 chunks of 256 and one of 232
    ("layernorm", 4, 8193, "f32"),  # odd: scalars, 128 chunks of 64 and one of 1
    ("rmsnorm", 8, 1536, "f16"),
]


@pytest.mark.parametrize(
    "kind,rows,n,dtype", CHUNKED_CASES, ids=["-".join(map(str, c)) for c in CHUNKED_CASES]
)
def test_gpu_sized_chunked_kernel_on_lavapipe(kind, rows, n, dtype):
    check_normalization(
        kind, rows, n, dtype, target=load_target(CHUNKED_GPU_SIZED), params="wg=[64, 1, 1]"
    )


@needs_ptxas
@pytest.mark.parametrize("name", CUDA_TARGETS)
@pytest.mark.parametrize("kind", ["softmax", "layernorm", "rmsnorm"])
def test_vocabulary_rows_get_a_full_workgroup(name, kind):
    """64 rows of GPT-2's 50257 (odd: one element per thread and chunk, the
    chunked kernel): 1024 threads per row (it was 256), no spills."""
    (report,) = tilefuse.compile_program(program(kind, 64, 50257), name, strict=True).reports
    assert (report.strategy, report.status) == ("softmax", "applied"), report.line()
    assert "wg=[1024, 1, 1]" in report.params and "vector=1" in report.params, report.line()
    assert report.spill_bytes == 0, report.line()


# The register kernel (row_warp) on several subgroups.

# 8192 f32 over 512 threads: 16 elements each, 4 chunks of 512 x 4 unrolled.
WIDE = [
    ("softmax", 2048, 8192, "f32"),
    ("layernorm", 2048, 8192, "f32"),
    ("rmsnorm", 2048, 8192, "f32"),
    ("softmax", 512, 8192, "bf16"),
    ("layernorm", 512, 8192, "bf16"),
    ("rmsnorm", 512, 8192, "bf16"),
]
ELEMENT_BYTES = {"f32": 4, "bf16": 2, "f16": 2}
_LOAD = re.compile(r"^\s*ld\.global(?:\.nc)?(?:\.v(\d))?\.[bfu](\d+)\s", re.MULTILINE)
_STORE = re.compile(r"^\s*st\.global(?:\.v(\d))?\.[bfu](\d+)\s", re.MULTILINE)
_LABEL = re.compile(r"^(\$L__\w+):", re.MULTILINE)
_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$L__\w+);")


def _bytes(pattern, text):
    """Bytes one thread moves through the accesses `pattern` matches, each once."""
    return sum(int(v or 1) * int(bits) // 8 for v, bits in pattern.findall(text))


def _loops(text):
    """Branches back to a label above them: the kernel's loops."""
    labels = {m.group(1): m.start() for m in _LABEL.finditer(text)}
    return [
        m.group(1) for m in _BRANCH.finditer(text) if labels.get(m.group(1), 1 << 60) < m.start()
    ]


@needs_ptxas
@pytest.mark.parametrize("name", CUDA_TARGETS)
@pytest.mark.parametrize("kind,rows,n,dtype", WIDE, ids=["-".join(map(str, c)) for c in WIDE])
def test_wide_rows_are_loaded_once(name, kind, rows, n, dtype, tmp_path):
    """One row per 512-thread workgroup (it was 8 one-warp rows per 256
    threads, each warp looping over 64 chunks and reading x once per phase):
    the kernel has no loop, and its global loads, each run once per thread,
    add up to the row's inputs exactly (x, and layernorm's and RMSNorm's f32
    weight rows of n): every element is loaded from global memory once. Its
    stores add up to the output row. No spills."""
    result = tilefuse.compile_program(
        program(kind, rows, n, dtype), name, dump_dir=tmp_path, strict=True
    )
    (report,) = result.reports
    assert (report.strategy, report.status) == ("row_warp", "applied"), report.line()
    assert "wg=[512, 1, 1]" in report.params and "chunks=4" in report.params, report.line()
    assert "16 subgroups per row" in report.reason, report.reason
    assert report.spill_bytes == 0, report.line()
    files = sorted((tmp_path / "binaries").glob("*.ptx"))
    (entry,) = ptx_entries(files)
    text = ptx.entry_text(files, entry)
    threads = ptx.ntid_of(text)
    assert threads == 512
    assert not _loops(text), _loops(text)
    weights = {"softmax": 0, "rmsnorm": 1, "layernorm": 2}[kind]
    row_bytes = n * ELEMENT_BYTES[dtype]
    assert _bytes(_LOAD, text) * threads == row_bytes + weights * n * 4
    assert _bytes(_STORE, text) * threads == row_bytes
    # x's loads are 4-vectors, one per chunk: 4 of them per thread.
    vector_loads = _LOAD.findall(text)
    assert (
        sum(1 for v, bits in vector_loads if v == "4" and bits == str(8 * ELEMENT_BYTES[dtype]))
        >= 4
    )


def ptx_entries(files):
    return [m.group(1) for f in files for m in re.finditer(r"\.entry\s+(\w+)\s*\(", f.read_text())]


@needs_ptxas
@pytest.mark.parametrize("name", CUDA_TARGETS)
@pytest.mark.parametrize("n,threads", [(2048, 128), (4096, 256), (16384, 1024), (32768, 1024)])
def test_register_rows_from_2048_to_32768(name, n, threads):
    """Softmax and layernorm rows of 2048..32768 f32 stay in registers on
    n / 16 threads (at most 1024: 32 elements each at 32768), no spills."""
    for kind in ("softmax", "layernorm"):
        (report,) = tilefuse.compile_program(program(kind, 64, n), name, strict=True).reports
        assert report.strategy == "row_warp" and f"wg=[{threads}, 1, 1]" in report.params, (
            report.line()
        )
        assert report.spill_bytes == 0, report.line()


@pytest.mark.parametrize("name", CUDA_TARGETS)
@pytest.mark.parametrize(
    "n,why",
    [
        (32000, "rows of 32000 do not split evenly over 1024 threads"),
        (2304, "leave a tail after 2 chunks of 1024"),
        (65536, "64 elements per thread of 1024 > the target's 32"),
    ],
)
def test_other_wide_rows_take_the_chunked_kernel(name, n, why, tmp_path):
    """Rows the threads do not split evenly, rows with a tail after the last
    full chunk (layernorm over 1152..2560 spilled with it), rows of more than
    32 elements per thread: the chunked kernel, and row_warp says why."""
    from tilefuse.dispatch.read import read_dispatches
    from tilefuse.strategies import row_warp

    result = tilefuse.compile_program(program("layernorm", 4, n), name, dump_dir=tmp_path)
    (report,) = result.reports
    assert report.strategy == "softmax", report.line()
    (dispatch,) = read_dispatches((tmp_path / "executable_sources.mlir").read_text())
    params, reason = row_warp.plan(dispatch, load_target(name))
    assert params is None and why in reason, reason


# On lavapipe, the Vulkan target sized as the GPU targets are (4 vectors per
# thread, 32 elements per lane in registers): rows of 512..2048 take the
# register kernel on 32 or 64 threads, 4 or 8 of lavapipe's 8-lane subgroups,
# combined through workgroup memory as on a GPU.
GPU_SIZED = "vulkan,softmax_vectors_per_thread=4,row_register_elements=32"
REGISTER_CASES = [
    ("softmax", 64, 2048, "f32", "wg=[64, 1, 1] vector=4 chunk=256 chunks=8"),
    ("softmax", 5, 512, "f32", "wg=[32, 1, 1] vector=4 chunk=128 chunks=4"),
    ("layernorm", 33, 1024, "f32", "wg=[64, 1, 1] vector=4 chunk=256 chunks=4"),
    ("layernorm", 8, 1536, "f16", "wg=[64, 1, 1] vector=4 chunk=256 chunks=6"),
    ("rmsnorm", 16, 1024, "f16", "wg=[64, 1, 1]"),
    ("rmsnorm", 3, 2048, "f32", "wg=[64, 1, 1]"),
]


@pytest.mark.parametrize(
    "kind,rows,n,dtype,params",
    REGISTER_CASES,
    ids=["-".join(map(str, c[:4])) for c in REGISTER_CASES],
)
def test_gpu_sized_register_kernel_on_lavapipe(kind, rows, n, dtype, params):
    check_normalization(kind, rows, n, dtype, load_target(GPU_SIZED), params, strategy="row_warp")


@cpu_hypothesis(6)
@given(
    kind=st.sampled_from(["softmax", "rmsnorm", "layernorm"]),
    rows=st.integers(1, 300),
    chunks=st.integers(4, 8),  # n = 256 * chunks: 64 threads (n / 16, at most 64)
    dtype=st.sampled_from(["f32", "f16"]),
)
def test_gpu_sized_register_kernel_hypothesis(kind, rows, chunks, dtype):
    check_normalization(
        kind,
        rows,
        256 * chunks,
        dtype,
        load_target(GPU_SIZED),
        "wg=[64, 1, 1]",
        strategy="row_warp",
    )


def test_ir_several_subgroups_on_lavapipe(tmp_path):
    """softmax 64x2048, GPU-sized on lavapipe: 64 threads (8 subgroups) per
    row, each loading its 32 elements once (8 4-vectors); each reduction's
    butterfly ends in workgroup memory, one barrier, and a butterfly over the
    8 subgroups' values; no loop."""
    dump = tmp_path / "dump"
    result = tilefuse.compile_program(
        program("softmax", 64, 2048), load_target(GPU_SIZED), dump_dir=dump
    )
    (report,) = result.reports
    assert report.strategy == "row_warp" and "8 subgroups per row" in report.reason, report.line()
    (kernel,) = tilefuse.verify.printed_kernels((dump / "phase2.log").read_text()).values()
    filecheck(
        kernel,
        """
CHECK: func.func @main_dispatch_0
CHECK-SAME: workgroup_size = [64, 1, 1] subgroup_size = 8
CHECK-COUNT-8: vector.transfer_read {{.*}}#hal.descriptor_type<storage_buffer>>, vector<4xf32>
CHECK-NOT: vector.transfer_read {{.*}}#hal.descriptor_type<storage_buffer>>
CHECK: gpu.shuffle xor
CHECK: memref<8xf32, #gpu.address_space<workgroup>>
CHECK: gpu.barrier
CHECK: math.exp
CHECK: gpu.barrier
CHECK-COUNT-8: vector.transfer_write {{.*}}#hal.descriptor_type<storage_buffer>>
CHECK: return
""",
        tmp_path,
    )
    ops, _module = kernel_ops(kernel)
    names = [op.name for op in ops]
    assert "scf.for" not in names and names.count("gpu.barrier") == 2, names.count("gpu.barrier")
