"""seba/core/worker.py: stage processes handed to a warm worker behave as if they ran themselves."""

import contextlib
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from seba.core.worker import code_key

SCRIPT = '''
import seba.core.cli  # first, as every stage script: hands the script to the worker when one runs
import os, sys, time
print("pid", os.getpid(), "torch already imported:", "torch" in sys.modules, flush=True)
print("argv", sys.argv[1:], "cwd", os.getcwd(), "var", os.environ.get("SEBA_TEST_VAR"), flush=True)
print("to stderr", file=sys.stderr, flush=True)
if "--sleep" in sys.argv:
    time.sleep(120)


def square(x):
    return x * x


if __name__ == "__main__":
    if "--pool" in sys.argv:  # as pretraining's CPU workers: spawned processes re-import this script
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(2) as pool:
            # one write: the pool's processes print their own lines meanwhile (each print's
            # pieces are separate writes when PYTHONUNBUFFERED is set), and must not split this one
            sys.stdout.write(f"pool {pool.map(square, [1, 2, 3])}\\n")
            sys.stdout.flush()
    sys.exit(int(sys.argv[1]))
'''


@pytest.fixture()
def stage(tmp_path):
    (tmp_path / "stages").mkdir()
    (tmp_path / "stages" / "probe.py").write_text(SCRIPT)
    env = {**os.environ, "DVC_STAGE": "probe", "SEBA_TEST_VAR": "x1", "SEBA_WORKER_IDLE": "30",
           "SEBA_WORKER_SOCKET": str(tmp_path / "w.sock")}
    env.pop("SEBA_WORKER", None)
    yield tmp_path, env
    for process in psutil.process_iter(["cmdline"]):
        if str(tmp_path / "w.sock") in " ".join(process.info["cmdline"] or []):
            with contextlib.suppress(psutil.NoSuchProcess):  # it may end on its own meanwhile
                process.kill()


def run(tmp_path, env, *args):
    return subprocess.run([sys.executable, "stages/probe.py", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


def wait_for_worker(sock: Path) -> None:
    deadline = time.time() + 90
    while not sock.exists():
        assert time.time() < deadline, "the worker never started"
        time.sleep(0.2)


def test_a_delegated_stage_runs_as_it_would_alone(stage):
    tmp_path, env = stage
    cold = run(tmp_path, env, "3", "b c")  # no worker yet: runs here, and starts one
    assert cold.returncode == 3 and "torch already imported: False" in cold.stdout
    wait_for_worker(tmp_path / "w.sock")
    warm = run(tmp_path, env, "3", "b c")
    assert "torch already imported: True" in warm.stdout, warm  # forked from the warm worker
    assert warm.returncode == 3
    assert warm.stdout.splitlines()[1:] == cold.stdout.splitlines()[1:]  # argv, cwd, environment
    assert warm.stderr == cold.stderr == "to stderr\n"
    assert run(tmp_path, env, "0").returncode == 0
    off = run(tmp_path, {**env, "SEBA_WORKER": "0"}, "0")
    assert "torch already imported: False" in off.stdout
    pooled = run(tmp_path, env, "0", "--pool")  # a spawn pool inside a delegated run
    assert pooled.returncode == 0 and "pool [1, 4, 9]" in pooled.stdout, pooled


def _limited(fsize=None, umask=None, cpus=None, ionice=None, batch=False, oom=None):
    def apply():
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        if umask is not None:
            os.umask(umask)
        if cpus is not None:  # taskset
            os.sched_setaffinity(0, cpus)
        if ionice is not None:  # ionice -c 3
            psutil.Process().ionice(ionice)
        if batch:  # chrt -b 0
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        if oom is not None:
            Path("/proc/self/oom_score_adj").write_text(str(oom))
    return apply


@pytest.mark.parametrize("limit", [{"fsize": 800 * 1024}, {"umask": 0o077}, {"cpus": {0}},
                                   {"ionice": psutil.IOPRIO_CLASS_IDLE}, {"batch": True}, {"oom": 500}])
def test_a_stage_in_another_process_context_runs_itself(stage, limit):
    """A worker started without a `ulimit -f` (or with another umask) would write a stage's files
    past that limit (or with other modes): such a stage runs itself, with its own limit, and the
    worker of its own context is another socket. So too a `taskset`, `ionice`, `chrt` or OOM
    score of the stage process (a stage served by the worker ran on all its CPUs, at its
    priorities)."""
    if limit.get("cpus") and len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: no other affinity to give")
    tmp_path, env = stage
    run(tmp_path, env, "0")
    wait_for_worker(tmp_path / "w.sock")
    assert "torch already imported: True" in run(tmp_path, env, "0").stdout
    limited = subprocess.run([sys.executable, "stages/probe.py", "4"], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=120, preexec_fn=_limited(**limit))
    assert limited.returncode == 4 and "torch already imported: False" in limited.stdout, limited
    assert "torch already imported: True" in run(tmp_path, env, "0").stdout  # the worker still serves its own
    keys = subprocess.run([sys.executable, "-c", "from seba.core.worker import code_key; print(code_key())"],
                          capture_output=True, text=True, timeout=60, preexec_fn=_limited(**limit), check=True)
    assert keys.stdout.strip() != code_key()


@pytest.mark.parametrize("variable", ["OMP_NUM_THREADS", "PYTHONHASHSEED"])
def test_a_stage_with_other_start_up_variables_runs_itself(stage, variable):
    """OpenBLAS reads its thread count, and the interpreter its hash seed, once at start: a child
    forked from a worker started without ``OMP_NUM_THREADS=1`` ran with the worker's two BLAS
    threads (and its hash seed), whatever the stage's environment said."""
    tmp_path, env = stage
    env.pop(variable, None)
    run(tmp_path, env, "0")
    wait_for_worker(tmp_path / "w.sock")
    assert "torch already imported: True" in run(tmp_path, env, "0").stdout
    other = run(tmp_path, {**env, variable: "1"}, "0")
    assert other.returncode == 0 and "torch already imported: False" in other.stdout, other
    assert "torch already imported: True" in run(tmp_path, env, "0").stdout


def test_killing_the_stage_process_ends_the_delegated_run(stage):
    tmp_path, env = stage
    run(tmp_path, env, "0")
    wait_for_worker(tmp_path / "w.sock")
    client = subprocess.Popen([sys.executable, "stages/probe.py", "0", "--sleep"], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, text=True)
    line = client.stdout.readline()
    assert "torch already imported: True" in line
    child = psutil.Process(int(line.split()[1]))
    assert child.pid != client.pid
    client.send_signal(signal.SIGKILL)  # as when `dvc repro` and its stage are killed
    client.wait()
    child.wait(timeout=15)  # its watchdog sees the stage process gone


def test_signals_reach_the_delegated_run(stage):
    tmp_path, env = stage
    run(tmp_path, env, "0")
    wait_for_worker(tmp_path / "w.sock")
    client = subprocess.Popen([sys.executable, "stages/probe.py", "0", "--sleep"], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert "torch already imported: True" in client.stdout.readline()
    client.send_signal(signal.SIGINT)  # Ctrl-C
    assert client.wait(timeout=30) == 130



TERMINATED = '''
import seba.core.cli
import time

from seba.core.cli import run_stage


def main():
    try:
        print("started", flush=True)
        time.sleep(120)
    finally:
        print("unwound", flush=True)


run_stage("probe", main)
'''


@pytest.mark.parametrize("delegated", [False, True])
def test_sigterm_ends_a_stage_as_ctrl_c_does(stage, delegated):
    """SIGTERM (a batch job's time limit, `timeout`) ended a stage outright: no message, no
    unwinding (its pretrain worker processes, the seeds finished out of order, the FAILED MLflow
    record). It now unwinds as after Ctrl-C and exits 143 with a message, run alone or by the
    warm worker."""
    tmp_path, env = stage
    (tmp_path / "stages" / "term.py").write_text(TERMINATED)
    if delegated:
        run(tmp_path, env, "0")
        wait_for_worker(tmp_path / "w.sock")
    else:
        env = {**env, "SEBA_WORKER": "0"}
    client = subprocess.Popen([sys.executable, "stages/term.py"], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert client.stdout.readline().strip() == "started"
    client.send_signal(signal.SIGTERM)
    out, err = client.communicate(timeout=60)
    assert client.returncode == 143 and "unwound" in out, (client.returncode, out, err)
    assert "stage 'probe' terminated (SIGTERM)" in err


def test_processes_a_stage_spawns_do_not_delegate(tmp_path):
    code = "import sys; sys.argv = ['stages/probe.py']; from seba.core.worker import is_stage_process; print(is_stage_process())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


PATH_LINE = "sys.path.insert(0, str(Path(__file__).resolve().parents[1]))"


def test_every_stage_script_imports_seba_cli_first(root):
    """seba.core.cli hands the stage to the warm worker on import: an import before it (torch, pandas,
    a seba module that loads them) would be paid by every stage process. Before it come only
    ``sys`` and ``pathlib``, to put the script's own checkout first on sys.path."""
    import ast

    for script in sorted((root / "stages").glob("*.py")):
        text = script.read_text()
        imports = [n for n in ast.parse(text).body if isinstance(n, (ast.Import, ast.ImportFrom))]
        first = next(i for i, n in enumerate(imports) if "seba" in ast.dump(n))
        assert {n.names[0].name if isinstance(n, ast.Import) else n.module for n in imports[:first]} <= {
            "sys", "pathlib"}, script.name
        assert isinstance(imports[first], ast.ImportFrom) and imports[first].module == "seba.core.cli", script.name
        assert 0 <= text.find(PATH_LINE) < text.find("from seba.core.cli import"), script.name


def test_a_stage_imports_its_own_checkout(root, tmp_path):
    """A stage script imports the ``seba`` beside its ``stages/`` folder, not another importable
    one (an editable install of the workspace, PYTHONPATH), whether it runs itself or through
    the warm worker: a queued DVC experiment runs in a copy of the repository
    (.dvc/tmp/exps/tmp*) while the install points at the workspace (docs/ablations.md)."""
    import shutil

    other, checkout = tmp_path / "installed", tmp_path / "checkout"
    for folder in (other, checkout):
        shutil.copytree(root / "seba", folder / "seba", ignore=shutil.ignore_patterns("__pycache__"))
    text = (root / "stages" / "split.py").read_text()  # a real stage script's header
    header = text[:text.index("\n", text.index("from seba.core.cli import")) + 1]
    (checkout / "stages").mkdir()
    (checkout / "stages" / "probe.py").write_text(
        header + "print('seba', sys.modules['seba'].__file__, 'warm', 'torch' in sys.modules, flush=True)\n")
    sock = tmp_path / "w.sock"
    env = {**os.environ, "PYTHONPATH": str(other), "DVC_STAGE": "probe", "SEBA_WORKER_IDLE": "30",
           "SEBA_WORKER_SOCKET": str(sock)}
    env.pop("SEBA_WORKER", None)
    expected = f"seba {checkout / 'seba' / '__init__.py'} warm"
    try:
        cold = run(checkout, env)  # runs itself, and starts the worker (in the checkout)
        assert cold.stdout.strip() == f"{expected} False", cold
        wait_for_worker(sock)
        warm = run(checkout, env)
        assert warm.stdout.strip() == f"{expected} True", warm
    finally:
        for process in psutil.process_iter(["cmdline"]):
            if str(sock) in " ".join(process.info["cmdline"] or []):
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.kill()


def test_a_zombie_parent_counts_as_gone():
    """A killed `dvc repro` that its own parent has not reaped yet (a zombie) is dead to a stage's
    watchdog; it used to count as running, and the orphaned stage trained on."""
    from seba.core.runtime import _alive

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    process = psutil.Process(child.pid)
    deadline = time.time() + 30
    while process.status() != psutil.STATUS_ZOMBIE:  # exited, not yet reaped
        assert time.time() < deadline
        time.sleep(0.05)
    assert not _alive(process)
    assert _alive(psutil.Process())
    child.wait()


def test_installing_a_package_changes_the_workers_key(tmp_path, monkeypatch):
    """A `pip install` (or upgrade) between two stages adds and removes *.dist-info folders in
    site-packages: the key changes, so a warm worker never serves the older library."""
    import sysconfig

    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.setattr(sysconfig, "get_path", lambda name, *a, **k: str(site))
    before = code_key(context=[])
    assert code_key(context=[]) == before
    (site / "torch-9.9.9.dist-info").mkdir()
    os.utime(site, ns=(1, 10**18))  # a later modification time, whatever the file system's resolution
    assert code_key(context=[]) != before


def test_a_sandbox_that_refuses_the_scheduling_calls_does_not_stop_a_stage(monkeypatch):
    """A seccomp filter (a sandbox, a restricted container) may refuse ioprio_get or the sched_*
    calls with EPERM: psutil raises its own AccessDenied (not an OSError) and os an OSError. The
    context (read by every stage under `dvc repro`, before its script) must still be read, the
    refused parts left out, instead of every stage failing with a traceback."""
    import seba.core.worker as worker

    def denied(*args, **kwargs):
        raise psutil.AccessDenied(os.getpid())

    def refused(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(psutil.Process, "ionice", denied)
    monkeypatch.setattr(os, "sched_getscheduler", refused)
    monkeypatch.setattr(os, "sched_getaffinity", refused)
    context = worker.process_context()
    assert context[4] == [None, None] and context[5] == []
    assert worker.code_key(context) == worker.code_key(worker.process_context())  # the same key each time
