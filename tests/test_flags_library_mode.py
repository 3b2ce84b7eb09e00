"""Library mode: `tilefuse flags` + a plain iree-compile, no Python in between."""

import subprocess
import sys

import ml_dtypes
import numpy as np
import tilefuse
from iree.compiler.tools.binaries import find_tool


def test_plain_iree_compile_with_flags_runs_loop_strategy(root, tmp_path):
    flags = subprocess.run(
        [
            sys.executable,
            "-m",
            "tilefuse.cli",
            "flags",
            "--target",
            "vulkan",
            "--library-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "--iree-vulkan-target=llvmpipe" in flags
    assert any(f.startswith("--iree-codegen-transform-dialect-library=") for f in flags)
    out = tmp_path / "gelu.vmfb"
    proc = subprocess.run(
        [find_tool("iree-compile"), str(root / "samples/gelu_bf16.mlir"), *flags, "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    # The strategy prints the kernel it finished: the dispatch really ran it.
    kernels = tilefuse.verify.printed_kernels(proc.stdout)
    assert list(kernels) == ["main_dispatch_0_elementwise_12582912_bf16"]
    assert tilefuse.verify._check_kernel(*next(iter(kernels.items()))) is None

    module = tilefuse.load(out, "vulkan")
    x = np.random.default_rng(0).standard_normal((6, 512, 4096)).astype(ml_dtypes.bfloat16)
    xf = x.astype(np.float64)
    ref = 0.5 * xf * (1 + np.tanh(0.7978845 * (xf + 0.044715 * xf**3)))
    assert np.max(np.abs(module.main(x).astype(np.float64) - ref)) < 2e-2
