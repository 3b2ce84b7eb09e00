"""The JAX corpus (tests/corpus/): nothing plain IREE compiles and runs right may
fail in tilefuse, and tilefuse never returns a wrong result.

Each program is compiled by tilefuse for Vulkan, run on lavapipe and compared
with JAX's CPU outputs (tests/corpus/run.py). What plain iree-compile (3.13.0,
pinned, same target) does with it is in tests/corpus/iree_baseline.json,
written by `python tests/corpus/run.py --write` from a run of both compilers;
TILEFUSE_CORPUS_IREE=1 runs plain IREE here too instead (twice the time).
"""

import os

import pytest
from corpus.load import names
from corpus.run import Outcome, baseline, run, save

# With TILEFUSE_CORPUS_OUT=DIR each test also saves its outcomes there, and
# `python tests/corpus/run.py --write --from DIR` makes the tables from them.
OUT = os.environ.get("TILEFUSE_CORPUS_OUT")
LIVE_IREE = os.environ.get("TILEFUSE_CORPUS_IREE") == "1"


# The transformer pieces (#20's evidence): every dispatch on a tilefuse
# kernel, with the planner's reasons when one is not.
EVERY_DISPATCH_OURS = {
    "gpt2_block_f32",
    "llama_block_f32",
    "attention_causal_f32",
    "attention_causal_f16",
    "attention_causal_bf16",
    "mlp_f32",
    "mlp_f16",
    "mlp_bf16",
    "layernorm_f32",
    "layernorm_f16",
    "layernorm_bf16",
}


@pytest.mark.parametrize("name", names())
def test_never_worse_than_iree(name):
    iree = run(name, "iree") if LIVE_IREE else Outcome(**baseline()[name])
    ours = run(name, "tilefuse")
    if OUT:
        save(OUT, name, iree, ours)
    assert ours.status != "wrong", f"tilefuse: {ours.detail}"
    if iree.passed:
        assert ours.passed, f"IREE passes, tilefuse: {ours.status}: {ours.detail}"
    if name in EVERY_DISPATCH_OURS:
        assert ours.strategies and not any(s.startswith("IREE") for s in ours.strategies), (
            ours.strategies,
            ours.notes,
        )


def test_every_dispatch_ours_names_corpus_programs():
    assert EVERY_DISPATCH_OURS <= set(names())
