import sys

import pytest

from seba.runtime import atomic_path, derive_seed, format_seconds, repo_root


def test_atomic_path_never_leaves_a_half_written_file(tmp_path):
    target = tmp_path / "out" / "result.csv"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert not target.exists() and list(target.parent.iterdir()) == []
    target.write_text("old")
    with atomic_path(target) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new" and len(list(target.parent.iterdir())) == 1


def test_atomic_path_gives_the_file_a_new_files_mode(tmp_path):
    """mkstemp makes its file private (0600): a report written through it would not be readable by
    the group and others as the committed one was; the file gets the mode the umask gives a new file."""
    import os
    import seba.runtime as runtime

    target = tmp_path / "report.md"
    with atomic_path(target) as tmp:
        tmp.write_text("x")
    assert target.stat().st_mode & 0o777 == 0o666 & ~runtime._UMASK
    assert runtime._UMASK == os.umask(runtime._UMASK)  # read without changing it


def test_derived_seeds_are_stable_and_distinct():
    assert derive_seed(0, 0.1) == derive_seed(0, 0.1)
    seeds = {derive_seed(s, r) for s in range(5) for r in (0.1, 0.2, 0.3)}
    assert len(seeds) == 15
    assert derive_seed(1, 5, "episodes") != derive_seed(1, 5, "probe")


def test_repo_root_and_format(root):
    assert repo_root(root / "seba") == root
    assert format_seconds(59) == "59s" and format_seconds(61) == "1m01s" and format_seconds(3700) == "1h01m"


def test_auto_precision_is_bf16_only_on_a_cpu_with_native_bf16(monkeypatch):
    import torch

    from seba import runtime

    cpu, cuda = torch.device("cpu"), torch.device("cuda")  # a device object needs no GPU
    monkeypatch.setattr(runtime, "native_bf16", lambda device: True)
    assert runtime.resolve_precision("auto", cpu) == "bf16"
    assert runtime.resolve_precision("auto", cuda) == "fp32"  # measured slower on an H100
    assert runtime.resolve_precision("bf16", cuda) == "bf16"  # asked for explicitly
    monkeypatch.setattr(runtime, "native_bf16", lambda device: False)
    assert runtime.resolve_precision("auto", cpu) == "fp32"
    assert runtime.resolve_precision("fp32", cpu) == "fp32"


def test_lazy_module_missing_names_the_module():
    """A package that is not installed fails as an import does, naming it (a stage run outside the
    project's environment), not with an AttributeError from inside the lazy loader."""
    from seba.runtime import lazy_module

    with pytest.raises(ModuleNotFoundError, match="no_such_module_for_seba"):
        lazy_module("no_such_module_for_seba")
    assert "no_such_module_for_seba" not in sys.modules
