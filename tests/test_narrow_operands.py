"""f32 contractions read f16/bf16 operands before their converts (hlo/narrow_operands.py).

IR checks of the rewrite (a convert read through and gone, one with another
reader kept, converts that do not widen a float to f32 left), then numerics
on lavapipe: mixed f16 x f32 and bf16 x f32 products, exact and ragged
tiles, with an epilogue, and bf16 x bf16 products written as two converts,
each as one dispatch on the matmul kernel (plain IREE forms one too; the
convert was a dispatch of its own before), within 1e-5 of the largest
|output| against float64 numpy (f32 sums of exactly widened operands). On
CUDA a mixed decode product is split in K (hlo/split_k.py, mixed views)
and assembles without spills.
"""

import dataclasses

import ml_dtypes
import numpy as np
import pytest
import tilefuse
from iree.compiler import ir
from support import filecheck
from tilefuse.hlo import narrow_operands
from tilefuse.runtime import CompiledModule
from tilefuse.targets import load_target

NUMPY = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def _program(m, k, n, a="f16", b="f32", convert_b=False, epilogue=False) -> str:
    """convert(A [m, k] of `a`) @ B [k, n] of `b` (converted too when
    `convert_b`), in f32; + bias, tanh when `epilogue`."""
    args = [f"%a: tensor<{m}x{k}x{a}>", f"%b: tensor<{k}x{n}x{b}>"]
    lines = [f"%a32 = stablehlo.convert %a : (tensor<{m}x{k}x{a}>) -> tensor<{m}x{k}xf32>"]
    rhs = "%b"
    if convert_b:
        lines.append(f"%b32 = stablehlo.convert %b : (tensor<{k}x{n}x{b}>) -> tensor<{k}x{n}xf32>")
        rhs = "%b32"
    r = f"tensor<{m}x{n}xf32>"
    lines.append(
        f"%r = stablehlo.dot_general %a32, {rhs}, contracting_dims = [1] x [0]"
        f" : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> {r}"
    )
    out = "%r"
    if epilogue:
        args.append(f"%bias: tensor<{n}xf32>")
        lines += [
            f"%bb = stablehlo.broadcast_in_dim %bias, dims = [1] : (tensor<{n}xf32>) -> {r}",
            f"%s = stablehlo.add %r, %bb : {r}",
            f"%y = stablehlo.tanh %s : {r}",
        ]
        out = "%y"
    body = "\n".join(f"  {line}" for line in lines)
    return f"func.func @main({', '.join(args)}) -> {r} {{\n{body}\n  return {out} : {r}\n}}\n"


def _rewrite(text: str) -> tuple[str, list[str]]:
    module = ir.Module.parse(text, ir.Context())
    log = narrow_operands.rewrite_function(module.body.operations[0].operation)
    return str(module), log


def test_a_widened_operand_is_read_narrow_and_its_convert_goes(tmp_path):
    text, log = _rewrite(_program(8, 64, 16, a="bf16", b="f16", convert_b=True))
    assert len(log) == 1 and "reads its lhs as bf16, rhs as f16" in log[0], log
    assert "stablehlo.convert" not in text, text
    filecheck(
        text,
        """
CHECK: stablehlo.dot_general %arg0, %arg1, {{.*}} : (tensor<8x64xbf16>, tensor<64x16xf16>) -> tensor<8x16xf32>
""",
        tmp_path,
    )


def test_a_convert_with_another_reader_stays(tmp_path):
    text = """func.func @main(%a: tensor<8x64xf16>, %b: tensor<64x16xf32>)
    -> (tensor<8x16xf32>, tensor<8x64xf32>) {
  %a32 = stablehlo.convert %a : (tensor<8x64xf16>) -> tensor<8x64xf32>
  %r = stablehlo.dot_general %a32, %b, contracting_dims = [1] x [0]
      : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %r, %a32 : tensor<8x16xf32>, tensor<8x64xf32>
}
"""
    text, log = _rewrite(text)
    assert len(log) == 1, log
    filecheck(
        text,
        """
CHECK: %[[C:.*]] = stablehlo.convert %arg0
CHECK: stablehlo.dot_general %arg0, %arg1
CHECK: return %{{.*}}, %[[C]]
""",
        tmp_path,
    )


@pytest.mark.parametrize(
    "source,wide",
    [
        ("i8", "f32"),  # an integer: not a float widening (signedness, rounding)
        ("f16", "f16"),  # no widening at all (an identity convert)
        ("f32", "f32"),
    ],
)
def test_other_converts_are_left(source, wide):
    text = f"""func.func @main(%a: tensor<8x64x{source}>, %b: tensor<64x16x{wide}>)
    -> tensor<8x16x{wide}> {{
  %a2 = stablehlo.convert %a : (tensor<8x64x{source}>) -> tensor<8x64x{wide}>
  %r = stablehlo.dot_general %a2, %b, contracting_dims = [1] x [0]
      : (tensor<8x64x{wide}>, tensor<64x16x{wide}>) -> tensor<8x16x{wide}>
  return %r : tensor<8x16x{wide}>
}}
"""
    text, log = _rewrite(text)
    assert log == [] and "stablehlo.convert" in text, text


@pytest.mark.parametrize(
    "m,k,n,a,b,convert_b,epilogue",
    [
        (64, 128, 64, "f16", "f32", False, False),  # exact tiles
        (33, 64, 20, "f16", "f32", False, False),  # ragged (JAX's x_f16 @ w_f32)
        (37, 96, 52, "bf16", "f32", False, True),  # ragged, bias + tanh
        (64, 256, 32, "bf16", "bf16", True, True),  # both converted: bf16 x bf16 -> f32
    ],
)
def test_mixed_products_are_one_matmul_dispatch_on_lavapipe(m, k, n, a, b, convert_b, epilogue):
    result = tilefuse.compile_program(_program(m, k, n, a, b, convert_b, epilogue), "vulkan")
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    assert [(r.strategy, r.status) for r in module.reports] == [("matmul", "applied")], [
        r.line() for r in module.reports
    ]
    rng = np.random.default_rng(0)
    args = [
        rng.standard_normal((m, k)).astype(NUMPY[a]),
        rng.standard_normal((k, n)).astype(NUMPY[b]),
    ]
    want = args[0].astype(np.float64) @ args[1].astype(np.float64)
    if epilogue:
        bias = rng.standard_normal(n).astype(np.float32)
        args.append(bias)
        want = np.tanh(want + bias)
    got = module.main(*args).astype(np.float64)
    assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want))


def test_mixed_split_k_on_lavapipe_and_cuda():
    """A 4x4096 f16 x 4096x512 f32 decode product: split in K with f16 and
    f32 views (forced on lavapipe by a target claiming 64 multiprocessors:
    numerics), and on CUDA every kernel assembles without spills."""
    text = _program(4, 4096, 512)
    gpu_like = dataclasses.replace(load_target("vulkan"), multiprocessors=64)
    result = tilefuse.compile_program(text, gpu_like)
    assert any("split in K" in line for line in result.fusion.splits), result.fusion.splits
    module = CompiledModule(result.vmfb, "vulkan", result.reports)
    assert all(r.status == "applied" for r in module.reports), [r.line() for r in module.reports]
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 4096)).astype(np.float16)
    b = rng.standard_normal((4096, 512)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    got = module.main(a, b)
    assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want))
    cuda = tilefuse.compile_program(text, "cuda")
    assert any("split in K" in line for line in cuda.fusion.splits), cuda.fusion.splits
    assert all(r.strategy and r.spill_bytes == 0 for r in cuda.reports), [
        r.line() for r in cuda.reports
    ]
