"""The tiny pipeline the end-to-end tests share: `dvc repro` on a tiny params override in a
temporary git copy of the repository, built once per test session (tests/conftest.py,
fixture ``tiny_pipeline``). Tests that change it put it back as they found it."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from conftest import committed_params

TINY = {
    "seeds": [0],
    "datasets": ["diabetes", "cmc"],
    "ratios": [0.2, 0.5],
    "pretrain": {"max_epochs": 4, "patience": 2},
    "evaluate": {"episodes": 3},
    "baselines": {"methods": ["knn"]},
    "theorem": {"dims": [16], "separations": [4, 64], "trials": 1000, "batch_size": 64, "masks": 2},
}


def run(cmd, cwd, env, check=True, timeout=2400):
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def stages_run(output: str) -> set[str]:
    return set(re.findall(r"Running stage '([^']+)'", output))


def set_params(repo: Path, updates: dict) -> None:
    params = yaml.safe_load((repo / "params.yaml").read_text())
    for key, value in updates.items():
        if isinstance(value, dict):
            params[key].update(value)
        else:
            params[key] = value
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def build(root: Path, work: Path, params: dict | None = None, repro: bool = True) -> tuple[Path, dict, str]:
    """(repository, environment, output of its first `dvc repro`): a git repository of the working
    tree's files, its params.yaml the committed one (HEAD's, not the workspace's) with ``params``
    (default ``TINY``) over it; ``repro=False`` runs nothing (output '')."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=root, capture_output=True,
                           text=True, check=True).stdout.split()
    for name in files:
        src = root / name
        if src.is_file():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, work / name)
    (work / "params.yaml").write_text(committed_params(root))
    for stale in ("dvc.lock", "reports"):
        path = work / stale
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    set_params(work, TINY if params is None else params)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "DVC_NO_ANALYTICS": "1", "MLFLOW_DISABLE_TELEMETRY": "true",
           "SEBA_WORKER_IDLE": "30"}  # the stages' warm worker (seba/core/worker.py) ends soon after the tests
    env.pop("MLFLOW_TRACKING_URI", None)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "tiny"]):
        run(cmd, work, env)
    if not repro:
        return work, env, ""
    first = run(["dvc", "repro"], work, env)
    return work, env, first.stdout + first.stderr


def start_long_repro(work: Path, env: dict, log_name: str) -> tuple[subprocess.Popen, Path]:
    """`dvc repro` started in the background, in a process group of its own, with pretraining
    long enough to be interrupted (restore params.yaml afterwards); its output goes to a log."""
    set_params(work, {"pretrain": {"lr": 0.002, "max_epochs": 300, "patience": 300}})
    log_path = work.parent / log_name
    with open(log_path, "w") as log:
        process = subprocess.Popen(["dvc", "repro"], cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    return process, log_path


def stop_repro(process: subprocess.Popen) -> None:
    """Kill a `dvc repro` from `start_long_repro` and everything in its process group, and reap it:
    a killed but unreaped `dvc repro` is a zombie whose PID still exists, and DVC takes the lock
    it left (.dvc/tmp/rwlock) for a live one, failing every later `dvc repro` in the repository."""
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


def descendants(pid: int, needle: str) -> list:
    """The live processes under `pid` whose command line holds `needle`. Processes that end (or
    turn zombie) while they are looked at are skipped: DVC and process pools start and reap short
    subprocesses all the time."""
    import psutil

    found = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE and needle in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found
