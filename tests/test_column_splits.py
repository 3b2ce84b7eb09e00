"""Column reductions too narrow for the grid, split in two steps (hlo/column_splits.py).

The decision per target (FileCheck-free: the rewrite's log and the
dispatches `explain` reports), and numerics on lavapipe with the split
forced on small inputs (`column_split_bytes = 1` on a copy of the vulkan
target), against numpy in float64 with the tolerances of
test_column_reduction.check_numerics.
"""

import dataclasses

import numpy as np
import pytest
import tilefuse
from conftest import reduce_program
from support import fusion_plan, run_cli
from test_column_reduction import check_numerics
from tilefuse.targets import load_target

# Split from the first byte, and with 8 units to fill (lavapipe's target
# says 2), so that a batch of 2 is split too.
SPLIT_EARLY = dataclasses.replace(load_target("vulkan"), column_split_bytes=1, multiprocessors=8)


def _split_log(plan) -> list[str]:
    return [line for line in plan.log if "over the grid" in line]


def test_cuda_splits_70000x3_into_chunks_per_multiprocessor():
    """One workgroup of the column kernel would cover all 3 columns: CUDA
    (108 multiprocessors) splits the 70000 rows into chunks for the grid, and
    each step is a column-reduction dispatch."""
    text = reduce_program((70000, 3), [0], "f32", "add")
    result = tilefuse.compile_program(text, "cuda")
    assert [(r.strategy, r.status) for r in result.reports] == [
        ("column_reduction", "applied")
    ] * 2, [r.line() for r in result.reports]
    assert [r.shapes for r in result.reports] == ["400x3x175 f32", "3x400 f32"]
    (line,) = _split_log(result.fusion)
    # 4 chunks per multiprocessor wanted: 432; 70000's divisor nearest is 400.
    assert "in 400 chunks" in line and "view [400, 175, 3]" in line, line


def test_lavapipe_keeps_small_inputs_whole():
    """On lavapipe a second launch costs more than it saves below 4 MiB
    (vulkan.toml): 70000x3 f32 (840 KB) stays one dispatch, unlogged."""
    result = tilefuse.compile_program(reduce_program((70000, 3), [0], "f32", "add"), "vulkan")
    assert len(result.reports) == 1 and not _split_log(result.fusion)


def test_wide_or_batched_reductions_are_not_split():
    """Enough kept columns (16384: 128 workgroups of 128 columns) or batch
    rows already give CUDA's 108 multiprocessors a workgroup each: no split,
    whatever the size."""
    for shape, dims in [((4096, 16384), [0]), ((512, 2048, 3), [1])]:
        plan, _ = fusion_plan(
            f"  %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
            f"  %r = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = {dims}"
            f" : ({_t(shape)}, tensor<f32>) -> {_t([s for i, s in enumerate(shape) if i not in dims])}\n"
            f"  return %r : {_t([s for i, s in enumerate(shape) if i not in dims])}",
            f"%x: {_t(shape)}",
            _t([s for i, s in enumerate(shape) if i not in dims]),
            target="cuda",
        )
        assert not _split_log(plan), plan.log


def _t(shape) -> str:
    return f"tensor<{''.join(f'{s}x' for s in shape)}f32>"


def test_a_converted_operand_is_left_whole_with_the_reason():
    """bf16 summed in f32: the convert is a unary op, which IREE keeps below
    the view (docs in hlo/column_splits.py); one dispatch, and the log says why."""
    result = tilefuse.compile_program(reduce_program((70000, 3), [0], "bf16", "add"), "cuda")
    (line,) = _split_log(result.fusion)
    assert "not split" in line and "unary op" in line, line
    assert [r.strategy for r in result.reports] == ["column_reduction"]


def test_a_prime_row_count_is_left_whole_with_the_reason():
    result = tilefuse.compile_program(reduce_program((100003, 3), [0], "f32", "add"), "cuda")
    (line,) = _split_log(result.fusion)
    assert "not split" in line and "no divisor" in line, line
    assert len(result.reports) == 1


@pytest.mark.parametrize(
    "shape,dims,dtype,op",
    [
        ((70000, 3), [0], "f32", "add"),  # the case
        ((6000, 5), [0], "f32", "max"),
        ((4096, 2), [0], "f32", "max"),
        ((16, 512, 3), [0, 1], "f16", "add"),  # two reduced dims: no view, split between them
        ((2, 9000, 4), [1], "f32", "min"),  # a kept outer dim (batch) and a split reduced dim
    ],
)
def test_split_numerics_on_lavapipe(shape, dims, dtype, op):
    module = tilefuse.compile(reduce_program(shape, dims, dtype, op), target=SPLIT_EARLY)
    assert len(module.reports) == 2, [r.line() for r in module.reports]
    assert all((r.strategy, r.status) == ("column_reduction", "applied") for r in module.reports), [
        r.line() for r in module.reports
    ]
    check_numerics(module, shape, dims, dtype, op)


def test_producers_fuse_into_step_one():
    """sum(x * x) over rows: the square is computed in step one (the view
    moves above it); two dispatches."""
    text = """func.func @main(%x: tensor<20000x3xf32>) -> tensor<3xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %sq = stablehlo.multiply %x, %x : tensor<20000x3xf32>
  %r = stablehlo.reduce(%sq init: %z) applies stablehlo.add across dimensions = [0] : (tensor<20000x3xf32>, tensor<f32>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}"""
    module = tilefuse.compile(text, target=SPLIT_EARLY)
    assert len(module.reports) == 2 and all(
        r.strategy == "column_reduction" and r.status == "applied" for r in module.reports
    ), [r.line() for r in module.reports]
    x = np.random.default_rng(0).standard_normal((20000, 3)).astype(np.float32)
    want = np.sum(x.astype(np.float64) ** 2, axis=0)
    np.testing.assert_allclose(module.main(x), want, rtol=1e-5)


def test_explain_says_where_and_how_it_split(tmp_path):
    path = tmp_path / "tall.mlir"
    path.write_text(reduce_program((70000, 3), [0], "f32", "add"))
    proc = run_cli("explain", str(path), "--target", "cuda")
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stdout.splitlines() if line.startswith("note: split:")]
    assert len(notes) == 1 and f"{path}:" in notes[0] and "in 400 chunks" in notes[0], notes
