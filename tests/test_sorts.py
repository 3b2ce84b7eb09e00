"""Sorts longer than SERIAL_MAX as a bitonic network of elementwise steps
(hlo/sorts.py). Numerics on Vulkan (lavapipe) against JAX on the CPU,
exact: a sort moves values, and the network computes the stable order (ties
by original position), which is what JAX's sorts return.

The network is the same for every length, and its compile time grows with
its steps (log2(N) * (log2(N) + 1) / 2), so most tests lower SERIAL_MAX to
SHORT and sort rows of 50 (padded to 64: 21 steps); top_k sorts 300 with
the real threshold."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import tilefuse
from tilefuse import TilefuseError
from tilefuse.hlo import sorts
from tilefuse.hlo.sorts import SERIAL_MAX
from tilefuse.targets import load_target
from tilefuse.toolchain import iree_compile

RNG = np.random.default_rng(0)
SHORT = 32


@pytest.fixture
def short(monkeypatch):
    monkeypatch.setattr(sorts, "SERIAL_MAX", SHORT)


def keys(shape, dtype=np.float32, distinct=1000):
    """Keys with many ties (values drawn from `distinct` ones)."""
    return (RNG.integers(0, distinct, shape) / 7).astype(dtype)


def exact(got, want):
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))


def compiled(fn, *args, target="vulkan"):
    """tilefuse's program for fn(*args), and its sort log lines."""
    f = tilefuse.jit(fn, target=target, strict=True)
    result = f._compiled(args, {})[0].result
    return f, [line for line in result.fusion.log if "sort at" in line]


def test_premise_plain_iree_sorts_rows_of_512_wrong_on_lavapipe(tmp_path):
    """What the rewrite corrects there: IREE's one-invocation sort of 512
    keys runs past lavapipe's loop budget and stops part way."""
    x = keys((16, 512), distinct=50)
    path = tmp_path / "sort.mlir"
    path.write_text(jax.jit(lambda x: jnp.sort(x, axis=1)).lower(x).as_text())
    out = tmp_path / "plain.vmfb"
    iree_compile([str(path), "--iree-hal-target-backends=vulkan-spirv", "-o", str(out)], "plain")
    got = tilefuse.load(out, "vulkan").main(x)
    assert (got != np.sort(x, axis=1)).sum() > 1000


@pytest.mark.parametrize(
    ("name", "fn", "shape", "dtype"),
    [
        # 50: padded to 64; NaN and -0.0 order as JAX's comparator says
        ("sort_f32_nan", lambda x: jnp.sort(x, axis=-1), (4, 50), np.float32),
        # argsort: its iota operand is the tie-break, ties kept in order; along
        # a middle dim (Q > 1), descending
        (
            "argsort_middle",
            lambda x: jnp.argsort(x, axis=1, descending=True),
            (3, 50, 4),
            np.float32,
        ),
        ("top_k", lambda x: jax.lax.top_k(x, 10), (4, 300), np.float32),
    ],
)
def test_long_sorts_match_jax(name, fn, shape, dtype, monkeypatch):
    if name != "top_k":
        monkeypatch.setattr(sorts, "SERIAL_MAX", SHORT)
    x = keys(shape, dtype)
    if name == "sort_f32_nan":
        x.ravel()[[5, 17, 101, 190]] = np.nan
        x.ravel()[[6, 7, 150]] = [-0.0, 0.0, -0.0]
    f, log = compiled(fn, x)
    assert log and "rewritten as a bitonic network" in log[0], log
    exact(f(x), jax.jit(fn)(x))
    assert all(r.status == "applied" for r in f.reports(x) if "memcpy" not in r.name), [
        r.line() for r in f.reports(x) if r.status != "applied"
    ]


def test_a_key_and_a_payload(short):
    """lax.sort of bf16 keys (many ties) and an int payload, stable, as JAX
    sorts them."""
    a = keys((2, 50), ml_dtypes.bfloat16, distinct=8)
    payload = RNG.integers(-100, 100, (2, 50)).astype(np.int32)

    def fn(a, payload):
        return jax.lax.sort((a, payload), dimension=1, is_stable=True, num_keys=1)

    f, log = compiled(fn, a, payload)
    # 50 padded to 64: 6 * 7 / 2 steps; two operands and the network's own
    # positions: three dispatches a step
    assert "21 elementwise steps over 3 operands, 10 distinct" in log[0], log
    exact(f(a, payload), jax.jit(fn)(a, payload))


def test_a_short_sort_stays_iree_s():
    x = keys((4, SERIAL_MAX))
    f, log = compiled(lambda x: jnp.sort(x, axis=-1), x)
    assert log == []
    (report,) = f.reports(x)
    assert report.status == "fallback" and "sort" in report.line()
    exact(f(x), np.sort(x, axis=-1))


def test_cuda_compiles_every_step_to_a_loop_kernel(short):
    x = keys((2, 50))
    text = jax.jit(lambda x: jnp.argsort(x, axis=-1)).lower(x).as_text()
    result = tilefuse.compile_program(text, "cuda", strict=True)
    assert any("bitonic network" in line for line in result.fusion.log)
    steps = [r for r in result.reports if "memcpy" not in r.name]
    assert steps and all(r.strategy == "loop" and r.status == "applied" for r in steps)
    # 50 padded to 64: 21 steps, 10 distinct, which IREE keeps one
    # executable each of; the first step also reads the padding and the last
    # writes only the positions, so 12 kernels (21 before the steps lost
    # their direction bits).
    kernels = [r for r in steps if r.name.startswith("main_")]
    assert len(kernels) == 12, [r.name for r in kernels]


def test_a_top_8_stays_iree_s():
    """A sort read only through its first 8 (jax.lax.top_k(x, 8)) becomes
    IREE's top-k kernel, right on lavapipe at 32000: left to IREE."""
    x = keys((2, 1000))
    text = jax.jit(lambda x: jax.lax.top_k(x, 8)).lower(x).as_text()
    result = tilefuse.compile_program(text, "vulkan")
    assert not any("bitonic network" in line for line in result.fusion.log)
    assert any("only its first 8 of 1000 are read" in line for line in result.fusion.log)


UNREAD = [
    ("argsort", lambda x: jnp.argsort(x, axis=-1)),
    ("top_k_indices", lambda x: jax.lax.top_k(x, 5)[1]),
]


@pytest.mark.parametrize(("name", "fn"), UNREAD, ids=[u[0] for u in UNREAD])
def test_cuda_sorts_with_a_result_nobody_reads_take_the_network(name, fn, tmp_path):
    """IREE's CUDA sort keeps an unread result (argsort's sorted keys) in a
    temporary it fails to bufferize, at any length past a few dozen (sm_80
    from 32 keys, sm_90 from 17; the rule is the same for both): the
    network sorts those, short as they are, with every step a loop kernel."""
    x = keys((2, 40))
    text = jax.jit(fn).lower(x).as_text()
    path = tmp_path / f"{name}.mlir"
    path.write_text(text)
    flags = [*load_target("cuda").compile_flags, "-o", str(tmp_path / "x.vmfb")]
    with pytest.raises(TilefuseError, match="failed to bufferize"):
        iree_compile([str(path), *flags], "iree-compile")
    result = tilefuse.compile_program(text, "cuda", strict=True)
    assert any("rewritten as a bitonic network" in line for line in result.fusion.log)
    steps = [r for r in result.reports if "memcpy" not in r.name]
    assert all(r.strategy == "loop" and r.status == "applied" for r in steps)


def test_the_network_cuda_takes_for_top_k_indices_matches_jax(monkeypatch):
    """The same rewrite, run on Vulkan (its refusal told the target is
    CUDA), against JAX: top_k's indices alone, whose values are read by a
    slice nobody reads."""
    refusal = sorts.refusal
    monkeypatch.setattr(sorts, "refusal", lambda op, cuda=False: refusal(op, True))
    fn = UNREAD[1][1]
    x = keys((4, 100))
    f, log = compiled(fn, x)
    assert log and "rewritten as a bitonic network" in log[0], log
    exact(f(x), jax.jit(fn)(x))
