"""Wide row normalizations (softmax, layernorm, RMSNorm over rows of thousands
to tens of thousands of elements) on the GPU targets: how many threads a row
gets (the target's softmax_vectors_per_thread), their PTX, and the same
GPU-sized schedules run on lavapipe through target overrides.

There is no GPU here: the CUDA evidence is the PTX (threads per block, global
loads, loops) and ptxas (registers, spills); the numerics are lavapipe's,
with the Vulkan target told to size rows as the GPU targets do.
"""

import math
import shutil

import pytest
import tilefuse
from rowcases import check_normalization, program
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
