"""The JAX corpus (tests/corpus/): nothing plain IREE compiles and runs right may
fail in tilefuse, and tilefuse never returns a wrong result.

Each program is compiled by plain iree-compile and by tilefuse for the same
Vulkan target, run on lavapipe, and compared with JAX's CPU outputs
(tests/corpus/run.py; `python tests/corpus/run.py --write` regenerates the
table in docs/corpus.md from the same functions).
"""

import os

import pytest
from corpus.load import names
from corpus.run import run, save

# With TILEFUSE_CORPUS_OUT=DIR each test also saves its outcomes there, and
# `python tests/corpus/run.py --write --from DIR` makes the tables from them.
OUT = os.environ.get("TILEFUSE_CORPUS_OUT")


@pytest.mark.parametrize("name", names())
def test_never_worse_than_iree(name):
    iree = run(name, "iree")
    ours = run(name, "tilefuse")
    if OUT:
        save(OUT, name, iree, ours)
    assert ours.status != "wrong", f"tilefuse: {ours.detail}"
    if iree.passed:
        assert ours.passed, f"IREE passes, tilefuse: {ours.status}: {ours.detail}"
