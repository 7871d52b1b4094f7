import sys

import pytest
import torch

from seba.core import runtime
from seba.core.runtime import atomic_path, cgroup_free_bytes, derive_seed, format_seconds, repo_root


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


def test_atomic_path_syncs_the_new_bytes_before_the_rename_and_the_rename_before_it_returns(tmp_path, monkeypatch):
    """A machine that goes down mid-write leaves the earlier file or the new one, whole: the new
    file's bytes are flushed to the disk before it is renamed over the old, and the folder (the
    rename) before the write returns. A disk that fails the flush is an OutputError, old file kept;
    a folder that cannot be synced is no error."""
    import errno
    import os

    from seba.core.errors import OutputError

    events = []
    real_fsync, real_replace, real_chmod = os.fsync, os.replace, os.chmod

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(dst)))
        real_replace(src, dst)

    def chmod(path, mode):
        events.append(("chmod", str(path)))
        real_chmod(path, mode)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "chmod", chmod)
    target = tmp_path / "result.csv"
    target.write_text("old")
    with atomic_path(target) as tmp:
        tmp.write_text("new")
        temporary = str(tmp)
    # the flush opens the file for writing: before its mode is set, which a umask may make read-only
    assert events == [("fsync", temporary), ("chmod", temporary), ("replace", str(target)), ("fsync", str(tmp_path))]

    def failing(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(OutputError, match="cannot write .*result.csv: Input/output error \\(the earlier version is kept"):
        with atomic_path(target) as tmp:
            tmp.write_text("newer")
    assert target.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["result.csv"]

    def folder_unsynced(fd):  # a file system that cannot sync a folder: the file is in place by then
        if os.readlink(f"/proc/self/fd/{fd}") == str(tmp_path):
            raise OSError(errno.EINVAL, "Invalid argument")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", folder_unsynced)
    with atomic_path(target) as tmp:
        tmp.write_text("newest")
    assert target.read_text() == "newest"


def test_atomic_path_gives_the_file_a_new_files_mode(tmp_path):
    """mkstemp makes its file private (0600): a report written through it would not be readable by
    the group and others as the committed one was; the file gets the mode the umask gives a new file."""
    import os
    import seba.core.runtime as runtime

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

    from seba.core import runtime

    cpu, cuda = torch.device("cpu"), torch.device("cuda")  # a device object needs no GPU
    monkeypatch.setattr(runtime, "native_bf16", lambda device: True)
    assert runtime.resolve_precision("auto", cpu) == "bf16"
    assert runtime.resolve_precision("auto", cuda) == "fp32"  # measured slower on an H100
    assert runtime.resolve_precision("bf16", cuda) == "bf16"  # asked for explicitly
    monkeypatch.setattr(runtime, "native_bf16", lambda device: False)
    assert runtime.resolve_precision("auto", cpu) == "fp32"
    assert runtime.resolve_precision("fp32", cpu) == "fp32"
    for mode in ("tf32", "tf32_fp32_search"):  # TF32 modes are CUDA's: fp32 elsewhere
        assert runtime.resolve_precision(mode, cpu) == "fp32" and runtime.resolve_precision(mode, cuda) == mode


def test_matmul_precision_sets_tf32_for_the_tf32_modes_and_full_fp32_for_fp32():
    import torch

    from seba.core.runtime import matmul_precision

    before = torch.get_float32_matmul_precision()
    seen = {}
    for mode in ("fp32", "tf32", "tf32_fp32_search", "bf16"):
        with matmul_precision(mode):
            seen[mode] = torch.get_float32_matmul_precision()
            with matmul_precision("fp32"):  # nested: a product kept in fp32 inside a TF32 mode
                inner = torch.get_float32_matmul_precision()
            assert inner == "highest" and torch.get_float32_matmul_precision() == seen[mode]
        assert torch.get_float32_matmul_precision() == before
    assert seen == {"fp32": "highest", "tf32": "high", "tf32_fp32_search": "high", "bf16": before}


def test_lazy_module_missing_names_the_module():
    """A package that is not installed fails as an import does, naming it (a stage run outside the
    project's environment), not with an AttributeError from inside the lazy loader."""
    from seba.core.runtime import lazy_module

    with pytest.raises(ModuleNotFoundError, match="no_such_module_for_seba"):
        lazy_module("no_such_module_for_seba")
    assert "no_such_module_for_seba" not in sys.modules


def _cgroup_files(folder, **files):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("_", ".", 1)).write_text(text)


def test_cgroup_v2_limit_of_an_ancestor_lowers_the_free_memory(tmp_path, monkeypatch):
    mount = tmp_path / "cg"
    _cgroup_files(mount / "job", memory_max="max", memory_current="100", memory_stat="anon 1\n")
    _cgroup_files(mount / "job" / "step", memory_max="1000000", memory_current="600000",
                  memory_stat="anon 5\ninactive_file 100000\n")
    _cgroup_files(mount, memory_max="3000", memory_current="10")  # the mount itself: not an ancestor here
    proc = tmp_path / "cgroup"
    proc.write_text("0::/job/step\n")
    # limit - usage + the reclaimable cache; the mount's own files count too (it is the root's folder)
    assert cgroup_free_bytes(str(proc), str(mount)) == 2990
    (mount / "memory.max").write_text("max")
    assert cgroup_free_bytes(str(proc), str(mount)) == 1000000 - 600000 + 100000
    (mount / "job" / "step" / "memory.max").write_text("max")
    assert cgroup_free_bytes(str(proc), str(mount)) is None  # no limit anywhere
    assert cgroup_free_bytes(str(tmp_path / "absent"), str(mount)) is None

    # the machine's MemAvailable is lowered to the cgroup's, never raised
    monkeypatch.setattr(runtime, "cgroup_free_bytes", lambda: 1 << 20)
    assert runtime.available_bytes(torch.device("cpu")) == 1 << 20
    monkeypatch.setattr(runtime, "cgroup_free_bytes", lambda: 1 << 62)
    assert runtime.available_bytes(torch.device("cpu")) < 1 << 62


def test_cgroup_v1_memory_controller_and_a_hidden_path(tmp_path):
    mount = tmp_path / "cg"
    memory = mount / "memory"
    _cgroup_files(memory, memory_limit_in_bytes=str(2 << 30), memory_usage_in_bytes=str(1 << 30),
                  memory_stat=f"cache 5\ntotal_inactive_file {1 << 20}\n")
    proc = tmp_path / "cgroup"
    # a container's namespace shows a path that is not under the mount: the mount is its cgroup
    proc.write_text("4:memory:/docker/abc\n3:cpu:/\n0::/\n")
    assert cgroup_free_bytes(str(proc), str(mount)) == (1 << 30) + (1 << 20)
    (memory / "memory.limit_in_bytes").write_text("9223372036854771712")  # v1's "no limit"
    assert cgroup_free_bytes(str(proc), str(mount)) is None


def test_a_cgroup_folder_that_cannot_be_searched_falls_back_to_the_mount(tmp_path, monkeypatch):
    """Path.is_dir raises (it ignores only ENOENT, ENOTDIR, EBADF, ELOOP) where a folder on the way
    to the process's cgroup cannot be searched (EACCES): the free memory is then the mount's,
    never an error that stops the stage's planning."""
    import errno
    from pathlib import Path

    mount = tmp_path / "cg"
    _cgroup_files(mount, memory_max="5000", memory_current="1000")
    proc = tmp_path / "cgroup"
    proc.write_text("0::/job/step\n")
    is_dir = Path.is_dir

    def refused(self):
        if "job" in str(self):
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return is_dir(self)

    monkeypatch.setattr(Path, "is_dir", refused)
    assert cgroup_free_bytes(str(proc), str(mount)) == 4000
