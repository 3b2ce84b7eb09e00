"""The Vulkan targets other than lavapipe compile the samples with their own
subgroup sizes (RDNA3 32, NVIDIA 32; lavapipe's 8 runs in the other tests).
There is no such device here: this checks that the strategies apply and the
SPIR-V legalizes (a shuffle of the wrong width does not), not numerics."""

import pytest
import tilefuse
from support import SAMPLE_STRATEGIES


@pytest.mark.parametrize("target", ["vulkan-amd", "vulkan-nvidia"])
@pytest.mark.parametrize("sample,strategy", SAMPLE_STRATEGIES)
def test_samples_compile_for_other_vulkan_targets(root, target, sample, strategy):
    result = tilefuse.compile_program(root / "samples" / f"{sample}.mlir", target)
    (report,) = result.reports
    assert (report.strategy, report.status) == (strategy, "applied"), report.line()
    assert result.vmfb
