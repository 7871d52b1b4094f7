"""Process-level plumbing: repository root, devices, threads, seeds, atomic writes, checkpoints,
progress, and stage processes that end with the `dvc repro` that started them."""

from __future__ import annotations

import contextlib
import errno
import glob
import io
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

import numpy as np

from seba.core.errors import ConfigError, OutputError


def lazy_module(name: str):
    """``name`` imported on first use of one of its attributes (``importlib.util.LazyLoader``):
    a stage that never touches it does not pay its import (pandas: about 0.3 s)."""
    import importlib.util

    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None:  # as a plain import says it, not an AttributeError on the missing spec
        raise ModuleNotFoundError(f"No module named '{name}' (install the project: pip install -e .)", name=name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def repo_root(start: Path | None = None) -> Path:
    """The directory holding dvc.yaml, searched upwards from ``start`` (default: cwd)."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "dvc.yaml").exists():
            return candidate
    return here


def derive_seed(*parts: int | float | str) -> int:
    """A 32-bit seed that depends on every part (seed, ratio, shot, ...), stable across runs."""
    words = []
    for part in parts:
        if isinstance(part, float):
            words.append(int(round(part * 1_000_000)))
        elif isinstance(part, str):
            words.extend(part.encode())
        else:
            words.append(int(part))
    return int(np.random.SeedSequence(words).generate_state(1)[0])


def select_device(name: str = "auto", key: str = "pretrain.device"):
    """The torch device for ``name`` (auto | cpu | cuda); ``key`` names the setting in errors."""
    import torch

    if name == "cuda" and not torch.cuda.is_available():
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        raise ConfigError(f"params.yaml: '{key}' is 'cuda' but torch {torch.__version__} ({build}) sees no "
                          f"CUDA device; use auto (CUDA when present) or cpu")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def available_bytes(device) -> int:
    """Free memory on ``device``: the GPU's free memory, or the machine's available memory
    (``MemAvailable``), lowered to what this process's cgroup limit leaves (a container's
    ``--memory``, a SLURM job's allocation: ``cgroup_free_bytes``)."""
    if device.type == "cuda":
        import torch

        return int(torch.cuda.mem_get_info(device)[0])
    free = None
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
                break
    except OSError:
        pass
    limited = cgroup_free_bytes()
    if limited is not None:
        free = limited if free is None else min(free, limited)
    return 8 << 30 if free is None else free


# pretrain.precision's TensorFloat-32 modes (CUDA): every product in TF32, or all but the
# target-view neighbour search's (benchmarks/neighbour_search.py: TF32 distances pick a wrong
# positive for 8 % of income's rows)
TF32_MODES = ("tf32", "tf32_fp32_search")
_UNLIMITED = 1 << 60  # cgroup v1 writes "no limit" as a page-rounded 2**63 - 1


def cgroup_free_bytes(proc_cgroup: str = "/proc/self/cgroup", mount: str = "/sys/fs/cgroup") -> int | None:
    """The memory this process's cgroup and its ancestors leave free, the least over those with a
    limit: limit - usage + the inactive page cache (reclaimable, as ``MemAvailable`` counts it);
    cgroup v2 (``memory.max``) or v1 (``memory/memory.limit_in_bytes``). None without a limit or
    where the files cannot be read."""
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        return None
    v2, v1 = None, None
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            v2 = path
        elif "memory" in controllers.split(","):
            v1 = path
    if v1 is not None:
        base, limit_file, usage_file, cache_key = Path(mount) / "memory", "memory.limit_in_bytes", \
            "memory.usage_in_bytes", "total_inactive_file"
        own = v1
    elif v2 is not None:
        base, limit_file, usage_file, cache_key = Path(mount), "memory.max", "memory.current", "inactive_file"
        own = v2
    else:
        return None
    # the process's own folder and its ancestors up to the mount (in a container whose cgroup
    # namespace hides the path, the mount itself is the process's cgroup)
    folder = base / own.strip("/")
    try:  # (is_dir raises where a folder on the way cannot be searched: EACCES)
        folders = [folder, *folder.parents] if folder.is_dir() else [base]
    except OSError:
        folders = [base]
    least = None
    for where in folders:
        if not str(where).startswith(str(base)):
            break
        try:
            limit_text = (where / limit_file).read_text().strip()
            usage = int((where / usage_file).read_text().strip())
        except (OSError, ValueError):
            continue
        if limit_text == "max" or not limit_text.isdigit() or int(limit_text) >= _UNLIMITED:
            continue
        cache = 0
        try:
            for line in (where / "memory.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == cache_key:
                    cache = int(value)
        except (OSError, ValueError):
            pass
        free = max(0, int(limit_text) - usage + cache)
        least = free if least is None else min(least, free)
    return least


def native_bf16(device) -> bool:
    """Whether ``device`` multiplies bf16 natively: CUDA with bf16 support, or an x86 CPU with
    AVX512-BF16 / AMX-BF16 (elsewhere bf16 is emulated and slower than fp32)."""
    import torch

    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


def resolve_precision(name: str, device) -> str:
    """``pretrain.precision``: auto -> bf16 on a CPU with native bf16 (1.5-1.65x faster per
    step on this project's CPU), fp32 elsewhere. On CUDA too: these models are too small for
    bf16 to pay there, its casts add kernels, and on an H100 a bf16 step took 1.06-2.23x as
    long as an fp32 one in 11 of 12 measured pairs (benchmarks/speed.py --device cuda;
    docs/performance.md). ``tf32`` (fp32 weights, TensorFloat-32 products) and
    ``tf32_fp32_search`` (the same, but the target-view neighbour search in fp32) are CUDA modes:
    elsewhere they are fp32."""
    if name == "auto":
        return "bf16" if device.type == "cpu" and native_bf16(device) else "fp32"
    if name in TF32_MODES and device.type != "cuda":
        return "fp32"
    return name


@contextlib.contextmanager
def matmul_precision(precision: str) -> Iterator[None]:
    """fp32 products as TensorFloat-32 on CUDA while ``precision`` is a TF32 mode (torch's "high"
    float32 matmul precision), full fp32 products while it is ``fp32`` (torch's "highest"),
    restored afterwards; other precisions leave the setting as it is."""
    if precision not in TF32_MODES and precision != "fp32":
        yield
        return
    import torch

    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if precision in TF32_MODES else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def count_cuda_syncs(fn, sites=None) -> tuple[int, object]:
    """(host synchronisations with the CUDA device while ``fn()`` ran, its result), counted with
    torch's sync debug mode (each synchronising call warns). With a ``collections.Counter`` as
    ``sites``, each synchronisation is also counted under its call site (the last five frames)."""
    import traceback
    import warnings

    import torch

    count = 0

    def seen(message, *args, **kwargs) -> None:
        nonlocal count
        if "synchroniz" not in str(message):
            return
        count += 1
        if sites is not None:
            stack = [f for f in traceback.extract_stack()[:-1] if "warnings" not in f.filename]
            sites[" <- ".join(f"{Path(f.filename).name}:{f.lineno}:{f.name}" for f in reversed(stack[-5:]))] += 1

    torch.cuda.synchronize()
    previous_always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = seen
            result = fn()
    finally:
        torch.cuda.set_sync_debug_mode("default")
        torch.set_warn_always(previous_always)
    return count, result


def configure_threads(threads: int) -> int:
    import torch

    n = threads if threads > 0 else (os.cpu_count() or 1)
    torch.set_num_threads(n)
    return n


# write failures that are the machine's, not the code's: they become an OutputError naming the file
# (EACCES, EPERM: a folder or file this user may not write, e.g. one a container's root made)
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO})


def _disk_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and (exc.errno in DISK_ERRNOS or "No space left on device" in str(exc))


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _umask()  # this process's file-creation mask, read once (reading it means setting it)


def _fsync(path: Path, directory: bool = False) -> None:
    """Flush ``path``'s data (a folder: its entries, e.g. a rename in it) to the disk. A folder that
    cannot be opened or synced (a file system or platform without it) leaves the rename to the file
    system's own ordering: the file is in place by then."""
    try:
        fd = os.open(path, os.O_RDONLY if directory else os.O_RDWR)
    except OSError:
        if directory:
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not directory:
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it into place only if the block succeeds.

    A stage killed halfway therefore never leaves a half-written file under the final name (the
    temporary file it leaves is removed by the next write of ``path``: in a folder that is an
    output, such as reports/figures, it would be recorded and copied with it), and a full disk (or
    a file size limit, a read-only file system, a folder or file it may not write) is an
    ``OutputError`` naming the file, with the earlier version of it kept. The new bytes reach the
    disk (fsync) before the rename, and the rename before the block returns, so a machine that goes
    down at any point leaves under ``path`` the earlier version or the new one, whole.
    """
    path = Path(path)
    tmp_path = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for stale in path.parent.glob(f".{glob.escape(path.name)}.{'?' * 8}.tmp"):  # a killed write's
            with contextlib.suppress(OSError):
                stale.unlink()
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        tmp_path = Path(tmp)
        yield tmp_path
        _fsync(tmp_path)  # (before the mode: a umask may leave the file read-only to its owner)
        os.chmod(tmp_path, 0o666 & ~_UMASK)  # mkstemp's file is private (0600); give it a new file's mode
        os.replace(tmp_path, path)
        _fsync(path.parent, directory=True)
    except OSError as exc:
        if not _disk_error(exc):
            raise
        reason = exc.strerror or str(exc).strip().splitlines()[0]
        kept = "the earlier version is kept" if path.exists() else "nothing was written"
        raise OutputError(f"cannot write {path}: {reason} ({kept}; rerun once it can be written)") from None
    finally:
        if tmp_path is not None and tmp_path.exists():
            tmp_path.unlink()


def save_checkpoint(obj, path: str | Path) -> None:
    """``torch.save(obj)`` to ``path``, atomically, with bytes that depend on ``obj`` alone.

    torch.save names the records inside its zip archive after the file it writes to, and an
    atomic write goes through a random temporary name, so saving straight to it gives different
    bytes for identical weights (and DVC a new cache object on every rerun). Saved to memory the
    archive is always called "archive" (what torch.load expects of any name), then written."""
    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    with atomic_path(path) as tmp:
        tmp.write_bytes(buffer.getbuffer())


def write_json(path: str | Path, obj) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def exit_with_parent(poll_seconds: float = 1.0, of: int | None = None) -> bool:
    """End this process (and the processes it started) soon after the process that started it
    dies, as when only `dvc repro` is killed (``kill -9`` of its pid): a stage left running would
    go on writing its outputs beside the next `dvc repro`. A daemon thread checks the parent (and,
    when the parent is the shell DVC ran the command with, the shell's parent) every
    ``poll_seconds``. A process whose parent is already gone when this starts (it was re-parented
    to PID 1), or that ends while this looks at it, ends at once. ``of``: a process to watch instead of
    the parent, with its own parent (a stage run by seba.core.worker watches the stage process it
    runs for). Started once per process; returns whether it was started now."""
    import psutil

    global _WATCHDOG
    if _WATCHDOG is not None:
        return False
    me = psutil.Process()
    watched: list = []
    try:
        start = me if of is None else psutil.Process(of)
        if of is not None:
            watched.append(start)
        parent = start.parent()
        while parent is not None and len(watched) < (2 if of is None else 3):
            watched.append(parent)
            if parent.name() not in ("sh", "bash", "dash", "zsh", "fish", "ksh"):
                break
            parent = parent.parent()
        gone = False
    except psutil.NoSuchProcess:  # a process of the chain ended (or is a zombie) while it was looked at
        gone = True

    def orphaned_already() -> bool:
        if not watched or watched[0].pid != 1:
            return False
        try:  # PID 1 is our parent legitimately only when it is DVC itself (`docker run ... dvc repro`)
            return "dvc" not in " ".join(watched[0].cmdline())
        except psutil.Error:
            return False

    def watch() -> None:
        if not gone and not orphaned_already():
            while all(_alive(p) for p in watched):
                time.sleep(poll_seconds)
        children = me.children(recursive=True)
        for child in children:
            with contextlib.suppress(psutil.Error):
                child.kill()
        psutil.wait_procs(children, timeout=5)
        print(f"[{os.environ.get('DVC_STAGE', 'stage')}] the process that started this one is gone; "
              f"stopping (no output is written)", file=sys.stderr, flush=True)
        os._exit(143)

    _WATCHDOG = threading.Thread(target=watch, name="exit-with-parent", daemon=True)
    _WATCHDOG.start()
    return True


_WATCHDOG: threading.Thread | None = None


def _alive(process) -> bool:
    """Running, and not a zombie: a killed `dvc repro` whose own parent has not reaped it yet
    (it may be waiting for the very output pipes this stage holds) is dead. ``is_running`` also
    catches a reused pid."""
    import psutil

    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def log(message: str) -> None:
    """One line on stderr, flushed (DVC shows it live)."""
    print(message, file=sys.stderr, flush=True)


class Throttle:
    """True at most once per ``seconds`` (for progress lines that must not flood the terminal)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.last = -float("inf")

    def ready(self) -> bool:
        now = time.monotonic()
        if now - self.last >= self.seconds:
            self.last = now
            return True
        return False


def format_seconds(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
