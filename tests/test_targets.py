"""Targets come from pipelines/*.toml: every key is known (a typo is an error,
not a kernel silently turned off), workarounds live in their own table, and
the limits strategies share are answered in one place."""

import pytest
from tilefuse import targets
from tilefuse.errors import TilefuseError
from tilefuse.targets import load_target, target_names

MINIMAL = """description = "test"
backend = "spirv"
runtime_driver = "vulkan"
compile_flags = ["--iree-hal-target-device=vulkan"]
subgroup_size = 8
shared_memory_bytes = 32768
max_threads = 1024
preferred_threads = 128
vector_bits = 128
max_workgroup_count = [100, 10, 10]
"""


@pytest.fixture
def pipelines(tmp_path, monkeypatch):
    monkeypatch.setattr(targets, "PIPELINES", tmp_path)
    return tmp_path


def test_every_shipped_target_loads():
    for name in target_names():
        assert load_target(name).name == name


def test_unknown_key_is_an_error_naming_the_file(pipelines):
    (pipelines / "t.toml").write_text(MINIMAL + "row_register_elemnts = 128\n")
    with pytest.raises(TilefuseError, match=r"t\.toml: unknown keys \['row_register_elemnts'\]"):
        load_target("t")


def test_workaround_outside_its_table_is_an_error(pipelines):
    (pipelines / "t.toml").write_text(MINIMAL + "float_minmax_as_keys = true\n")
    with pytest.raises(TilefuseError, match="unknown keys"):
        load_target("t")
    (pipelines / "t.toml").write_text(MINIMAL + "[workarounds]\nfloat_minmax_as_keys = true\n")
    assert load_target("t").float_minmax_as_keys
    (pipelines / "t.toml").write_text(MINIMAL + "[workarounds]\nsubgroup_size = 4\n")
    with pytest.raises(TilefuseError, match=r"unknown \[workarounds\] keys"):
        load_target("t")


def test_missing_key_is_an_error(pipelines):
    (pipelines / "t.toml").write_text(MINIMAL.replace("vector_bits = 128\n", ""))
    with pytest.raises(TilefuseError, match=r"missing keys \['vector_bits'\]"):
        load_target("t")


def test_vector_elements_and_grid_refusal(pipelines):
    (pipelines / "t.toml").write_text(MINIMAL + "[workarounds]\nbf16_vector_elements = 2\n")
    t = load_target("t")
    assert t.vector_elements(32) == 4
    assert t.vector_elements(16) == 8  # loads: IREE splits them
    assert t.vector_elements(16, native=True) == 4  # one SPIR-V vector
    assert t.vector_elements(16, bf16=True) == 2
    assert t.vector_elements(256) == 1
    assert t.grid_refusal((100, 10, 10)) is None
    assert t.grid_refusal((100, 11)) == "grid y would be 11 > 10 workgroups"


def test_native_vectors_are_capped_on_spirv_only():
    assert load_target("vulkan").vector_elements(16, native=True) == 4
    assert load_target("cuda").vector_elements(16, native=True) == 8


def test_fields_overridden_after_the_name():
    """`NAME,FIELD=VALUE,...` overrides fields of a target file for one run
    (a switch tried without a new target file); a typo, a missing value or a
    value of the wrong type is an error naming the override."""
    target = load_target("cuda-sm90,iree_mma=false,multiprocessors=114")
    assert (target.iree_mma, target.multiprocessors) == (False, 114)
    assert target.name == "cuda-sm90,iree_mma=false,multiprocessors=114"
    assert load_target("cuda-sm90").iree_mma is True
    flags = load_target('cuda-sm90,compile_flags=["--a=1", "--b"],tf32=true')
    assert flags.compile_flags == ("--a=1", "--b") and flags.tf32 is True
    for bad, why in [
        ("cuda-sm90,iree_mmx=true", "iree_mmx.: no such field of a target"),
        ("cuda-sm90,iree_mma", "expected FIELD=VALUE"),
        ("cuda-sm90,iree_mma=yes", "not a TOML value"),
        ("cuda-sm90,iree_mma=1", "iree_mma is a bool, not a int"),
    ]:
        with pytest.raises(TilefuseError, match=why):
            load_target(bad)
