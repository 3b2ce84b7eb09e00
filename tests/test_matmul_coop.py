"""The cooperative-matrix matmul kernel (strategies/matmul_coop.py,
transform_scripts/matmul_coop.mlir) on the Vulkan targets that have
cooperative matrices (vulkan-nvidia, vulkan-amd). No device here runs them
(lavapipe has none), so these are compile checks: the strategy applies, its
finished kernel holds the gpu.subgroup_mma ops, and the SPIR-V IREE makes of
it holds spirv.KHR.CooperativeMatrix{Load,MulAdd,Store}. Not numerics."""

import re

import pytest
import tilefuse
from iree.compiler import ir
from test_matmul import program
from test_matmul_mma import FORMS, f16_program
from tilefuse import strategies
from tilefuse.irutil import context
from tilefuse.kernel import verify
from tilefuse.strategies import matmul_coop
from tilefuse.targets import load_target
from tilefuse.toolchain import iree_compile

TARGETS = ["vulkan-nvidia", "vulkan-amd"]


def spirv_of(dump, target) -> str:
    """The SPIR-V modules (as MLIR) of phase 3's spliced sources: the
    translated executables, before serialization."""
    out = dump / "spirv.mlir"
    flags = load_target(target).compile_flags
    args = [str(dump / "executable_sources_spliced.mlir"), *flags]
    args += ["--compile-from=executable-sources", "--compile-to=executable-targets"]
    iree_compile([*args, "-o", str(out)], "SPIR-V of the finished kernels")
    return out.read_text()


def coop_counts(text: str) -> dict[str, int]:
    return {
        op: len(re.findall(rf"spirv\.KHR\.CooperativeMatrix{op}\b", text))
        for op in ("Load", "MulAdd", "Store")
    }


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form", list(FORMS))
def test_cooperative_matrix_kernel_builds(form, target, tmp_path):
    result = tilefuse.compile_program(FORMS[form], target, dump_dir=tmp_path, strict=True)
    (report,) = [r for r in result.reports if r.strategy == "matmul_coop"]
    assert report.status == "applied", report.line()
    assert result.vmfb
    kernel = (tmp_path / "phase2.log").read_text()
    assert "gpu.subgroup_mma_compute" in kernel
    assert "vector.contract" not in kernel
    counts = coop_counts(spirv_of(tmp_path, target))
    assert all(counts.values()), counts
    # 64x64 workgroup tiles on 2 x 2 subgroups of 2 x 2 matrices, K steps of
    # 32: 8 multiply-adds per step.
    assert counts["MulAdd"] == 8, counts


def dispatch_of(text, target):
    """The compile's one contraction dispatch and its report."""
    result = tilefuse.compile_program(text, target)
    (choice,) = result.compilation.choices
    (report,) = result.reports
    return choice.dispatch, report


def test_lavapipe_takes_the_fma_kernel_with_the_reason():
    """lavapipe (`vulkan`) has no cooperative matrices: matmul_coop refuses,
    the FMA matmul kernel takes the f16 contraction."""
    d, report = dispatch_of(f16_program(128, 128, 128), "vulkan")
    assert (report.strategy, report.status) == ("matmul", "applied"), report.line()
    params, why = matmul_coop.plan(d, load_target("vulkan"))
    assert params is None and "no cooperative matrices" in why


@pytest.mark.parametrize(
    "text,target,why",
    [
        (f16_program(128, 128, 128), "cuda", "SPIR-V only"),
        (f16_program(50, 64, 64), "vulkan-nvidia", "no tile configuration divides 50x64x64"),
        (f16_program(64, 40, 64), "vulkan-amd", "no tile configuration divides 64x64x40"),
        (program(64, 64, 64), "vulkan-nvidia", "f32 operands (f16 only)"),
        (program(64, 64, 64).replace("f32", "bf16"), "vulkan-nvidia", "bf16 operands (f16 only)"),
    ],
    ids=["cuda", "M=50", "K=40", "f32", "bf16"],
)
def test_refusals_carry_the_reason_explain_prints(text, target, why):
    """Refused, the next strategy takes the dispatch (the FMA matmul kernel
    here); where every strategy refuses, explain prints each one's reason
    (strategies._first), matmul_coop's among them."""
    # (The CUDA case reads the dispatch of a lavapipe compile: the FMA kernel's.)
    d, report = dispatch_of(text, "vulkan" if target == "cuda" else target)
    assert report.strategy != "matmul_coop", report.line()
    choice = strategies._first(d, load_target(target), (matmul_coop.STRATEGY,))
    assert choice.strategy is None
    assert choice.reason.startswith("matmul_coop: ") and why in choice.reason, choice.reason


def test_tile_choice():
    shared = load_target("vulkan-nvidia").shared_memory_bytes
    cfg = matmul_coop._config(256, 256, 256, True, "f16", shared)
    assert (cfg.tm, cfg.tn, cfg.wm, cfg.wn, cfg.kt, cfg.threads) == (64, 64, 32, 32, 32, 128)
    assert cfg.shared == 64 * 64 * 2
    assert matmul_coop._config(50, 64, 64, False, "f16", shared) is None  # M % 16
    assert matmul_coop._config(64, 64, 40, False, "f16", shared) is None  # K % 16
    small = matmul_coop._config(16, 48, 16, False, "f32", shared)
    assert (small.tm, small.tn, small.threads) == (16, 16, 32)


def test_kernels_without_cooperative_matrices_are_refused():
    """kernel/verify.py asks the strategy after every build (an applied
    report above means it passed); a kernel whose contraction did not reach
    cooperative matrices is refused."""
    func = ir.Module.parse("func.func @k() {\n  return\n}", ir.Context()).body.operations[0]
    assert "no gpu.subgroup_mma_compute" in matmul_coop.kernel_refusal(func.operation, None)


def test_kernel_without_a_barrier_before_the_epilogue_is_refused(tmp_path):
    """The real kernel passes; the same kernel with the barrier between the
    accumulators' stores to the C tile and the epilogue's reads removed (what
    the script built before it synchronized the K loop) is refused."""
    result = tilefuse.compile_program(
        f16_program(128, 128, 128), "vulkan-nvidia", dump_dir=tmp_path
    )
    (choice,) = result.compilation.choices
    (text,) = verify.printed_kernels((tmp_path / "phase2.log").read_text()).values()

    def refusal(kernel_text):
        module = ir.Module.parse(kernel_text, context(unregistered=True))
        return matmul_coop.kernel_refusal(module.body.operations[0].operation, choice.params)

    assert refusal(text) is None
    lines = text.splitlines()
    last_store = max(i for i, line in enumerate(lines) if "subgroup_mma_store_matrix" in line)
    assert lines[last_store + 1].strip() == "gpu.barrier"
    del lines[last_store + 1]
    assert "no barrier" in refusal("\n".join(lines))
