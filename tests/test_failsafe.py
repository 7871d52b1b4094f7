"""A failed run never costs earlier results (docs/failures.md).

Fast checks of each rule (seba-validate, seba.health, checkpoints, full disks, orphaned stages),
then the same through `dvc repro` on the shared tiny pipeline: after every bad input `git status`
shows nothing deleted or changed, the DVC cache is intact, and the pipeline is back to up to date.
Most bad inputs there stop at the `validate` stage (seconds each); one collapse, one forced
retraining and one killed `dvc repro` run stages beyond it.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch
import yaml

from conftest import committed_params
from seba.core.config import PretrainConfig, parse_params
from seba.core.data import encode_table, load_snapshot, make_split, read_manifest, scale
from seba.core.errors import ConfigError, DataError, EncoderCollapsed, OutputError
from seba.health import PLATEAU_EPOCHS, check_training, loss_problem, output_problem
from seba.pretrain import encode, encoder_config, pretrain_encoder
from seba.core.runtime import atomic_path, save_checkpoint, select_device
from seba.validate import STAMP, STAMP_TEXT, main as validate_main

ROOT = Path(__file__).resolve().parents[1]
NO_CUDA = not torch.cuda.is_available()


# ----------------------------------------------------------------------------- params and names


@pytest.fixture()
def small_repo(tmp_path):
    """A repository root with params.yaml (diabetes only) and diabetes's offline snapshot."""
    params = yaml.safe_load(committed_params())
    params["datasets"] = ["diabetes"]
    params["sources"] = {"diabetes": {"openml_id": 37}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    shutil.copy(ROOT / "dvc.yaml", tmp_path / "dvc.yaml")
    (tmp_path / "data" / "snapshot").mkdir(parents=True)
    for name in ("manifest.json", "diabetes.parquet"):
        shutil.copy(ROOT / "data" / "snapshot" / name, tmp_path / "data" / "snapshot" / name)
    return tmp_path


def _set(dotted: str, value):
    def edit(params):
        *parents, last = dotted.split(".")
        node = params
        for key in parents:
            node = node[key]
        node[last] = value
    return edit


def _add_dataset(name: str):
    def edit(params):
        params["datasets"].append(name)
        params["sources"][name] = {"openml_id": 37}
    return edit


# (case, params edit, fragments of the one error line)
BAD_PARAMS = [
    ("ratios that share a directory", _set("ratios", [0.2, 0.2000001]),
     ["'ratios' values 0.2 and 0.2000001 both name the output directory r0.2"]),
    ("ratio with 7 significant digits", _set("ratios", [0.1234567, 0.5]),
     ["'ratios' value 0.1234567 has more than 6 significant digits", "r0.123457", "r0.1234567"]),
    ("seed beyond numpy's range", _set("seeds", [0, 4294967296]), ["'seeds' must be <= 4294967295"]),
    ("a trillion episodes", _set("evaluate.episodes", 10**12), ["'evaluate.episodes' must be <= 10000"]),
    ("unbounded OpenML retries", _set("fetch.retries", 1000), ["'fetch.retries' must be <= 10"]),
    ("dataset name leaving the repository", _add_dataset("../../../tmp/x"),
     ["dataset name '../../../tmp/x' in 'datasets'", "letters, digits"]),
    ("source name with a slash", _set("sources.a/b", {"openml_id": 37}), ["dataset name 'a/b' in 'sources'"]),
    ("dataset names equal but for case", _add_dataset("Diabetes"),
     ["'datasets' has names that differ only in case: ['Diabetes', 'diabetes']"]),
]
if NO_CUDA:
    BAD_PARAMS += [
        ("cuda without a GPU", _set("pretrain.device", "cuda"), ["'pretrain.device' is 'cuda'", "sees no CUDA device"]),
        ("a dataset's own cuda without a GPU", _set("sources.diabetes.pretrain", {"device": "cuda"}),
         ["'sources.diabetes.pretrain.device' is 'cuda'"]),
    ]


@pytest.mark.parametrize("case, edit, fragments", BAD_PARAMS, ids=[c[0] for c in BAD_PARAMS])
def test_seba_validate_names_each_bad_input(small_repo, capsys, case, edit, fragments):
    params = yaml.safe_load((small_repo / "params.yaml").read_text())
    edit(params)
    (small_repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert validate_main(["--root", str(small_repo), "--stamp"]) == 2
    message = capsys.readouterr().err
    assert "Traceback" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert not (small_repo / STAMP).exists()  # the stage's output is written only when all is well


def test_valid_params_pass_and_the_stamp_never_changes(small_repo, capsys):
    assert validate_main(["--root", str(small_repo), "--stamp"]) == 0
    assert (small_repo / STAMP).read_text() == STAMP_TEXT
    params = yaml.safe_load((small_repo / "params.yaml").read_text())
    params["ratios"] = [0.25, 1e-05, 0.5]  # canonical: DVC spells them as ratio_tag does
    params["seeds"] = [0, 4294967295]
    (small_repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert validate_main(["--root", str(small_repo), "--stamp"]) == 0, capsys.readouterr().err
    assert (small_repo / STAMP).read_text() == STAMP_TEXT
    assert (ROOT / STAMP).read_text() == STAMP_TEXT  # the committed copy is what the stage writes


@pytest.mark.parametrize("manifest, fragment", [
    ("{not json", "cannot be read"),
    ('{"ids": {}}', "is malformed"),
    ('{"openml_ids": {"37": {"file": "../../etc/passwd", "sha256": "0"}}}', "is malformed"),
])
def test_an_invalid_snapshot_manifest_is_named(small_repo, capsys, manifest, fragment):
    (small_repo / "data" / "snapshot" / "manifest.json").write_text(manifest)
    with pytest.raises(DataError, match=f"snapshot manifest .*manifest.json {fragment}"):
        load_snapshot(37, small_repo / "data" / "snapshot")
    assert validate_main(["--root", str(small_repo)]) == 2
    assert f"manifest.json {fragment}" in capsys.readouterr().err


def test_the_committed_manifest_is_valid():
    assert "37" in read_manifest(ROOT / "data" / "snapshot")


@pytest.mark.skipif(not NO_CUDA, reason="needs a machine without CUDA")
def test_cuda_without_a_gpu_is_a_named_error_before_any_stage_runs():
    """The `validate` check (the first stage, and every stage's own check of params.yaml) names each
    key that asks for CUDA; a stage selecting its device names the key it was given."""
    from seba.validate import _check_devices
    raw = yaml.safe_load(committed_params())
    raw["pretrain"]["device"] = "cuda"
    raw["sources"]["cmc"]["pretrain"] = {"device": "cuda"}
    problems = _check_devices(parse_params(raw))
    assert len(problems) == 2, problems
    assert "'pretrain.device' is 'cuda'" in problems[0] and "'sources.cmc.pretrain.device' is 'cuda'" in problems[1]
    with pytest.raises(ConfigError, match="'sources.cmc.pretrain.device' is 'cuda'"):
        select_device("cuda", "sources.cmc.pretrain.device")


def test_the_defaults_are_within_every_new_bound():
    raw = yaml.safe_load(committed_params())
    params = parse_params(copy.deepcopy(raw))
    assert params.fetch.retries <= 10 and params.evaluate.episodes <= 10_000 and max(params.seeds) < 2**32


# ----------------------------------------------------------------------------- collapse and divergence


@pytest.fixture(scope="module")
def diabetes():
    frame, _ = load_snapshot(37, ROOT / "data" / "snapshot")
    table = encode_table(frame)
    split = make_split(table.y, 0, 1 / 6, 0.1)
    X = scale(table, split.train)
    return X[split.train], X[split.val], table.groups


def _train(diabetes, **overrides):
    x_train, x_val, groups = diabetes
    cfg = PretrainConfig(progress_seconds=1e9, **overrides)
    result = pretrain_encoder(x_train, x_val, groups, 0.2, 0, cfg, torch.device("cpu"))
    return result, encode(result.encoder_state, encoder_config(cfg, x_train.shape[1]), x_val, torch.device("cpu"))


def test_an_absurd_learning_rate_is_a_named_error(diabetes):
    """lr 1e6 collapses at the first step: the validation loss is the same float every epoch."""
    result, outputs = _train(diabetes, lr=1e6, max_epochs=3, patience=3)
    assert len(set(result.val_loss)) == 1
    with pytest.raises(EncoderCollapsed, match=r"\[pretrain diabetes r=0.2 seed 0\]: the encoder collapsed or "
                                               r"diverged: its validation loss never went below .* has not moved"
                                               r".*pretrain.lr = 1e\+06"):
        check_training(result.val_loss, outputs, "[pretrain diabetes r=0.2 seed 0]", 1e6)


def test_a_trained_encoder_passes(diabetes):
    result, outputs = _train(diabetes, max_epochs=6, patience=6)
    assert check_training(result.val_loss, outputs, "diabetes") is None  # neither an error nor a warning


def test_every_committed_default_run_passes_the_loss_check(root):
    """The thresholds against real training: 8 tables x 5 ratios x 3 seeds at the defaults."""
    runs = json.loads((root / "reports/experiments/default_3seeds/pretrain_log.json").read_text())
    assert len(runs) == 120
    for name, run in runs.items():
        assert loss_problem(run["val_loss"]) is None, name
        first_better = next(i for i, v in enumerate(run["val_loss"]) if v < run["val_loss"][0])
        assert first_better < PLATEAU_EPOCHS / 1.5, name  # a margin under the plateau rule


def test_each_sign_of_collapse_is_named():
    rng = np.random.default_rng(0)
    healthy = rng.normal(size=(50, 8))
    assert output_problem(healthy) is None
    assert "no longer depend on the input" in output_problem(np.outer(rng.uniform(1, 2, 50), rng.normal(size=8)))
    assert "zero for all 50" in output_problem(np.zeros((50, 8)))
    nan = healthy.copy()
    nan[3, 1] = np.nan
    assert "1 of 50 validation rows have non-finite outputs" in output_problem(nan)
    assert loss_problem([4.0, 4.1, 4.05]) is None  # a short run that has not improved yet is not judged
    assert loss_problem([4.0] + [4.1] * 2) is not None  # ... unless its loss stopped moving
    plateau = [4.0] + list(4.0 + rng.uniform(0.001, 0.1, PLATEAU_EPOCHS))
    assert "in 50 further epochs" in loss_problem(plateau)
    assert loss_problem(plateau[:-1]) is None
    assert loss_problem(plateau + [3.9]) is None
    # a plateau alone, with outputs that still spread the rows, is a warning; with collapsed outputs an error
    assert "warning: its validation loss never went below" in check_training(plateau, healthy, "x")
    with pytest.raises(EncoderCollapsed, match="point the same way"):
        check_training(plateau, np.outer(rng.uniform(1, 2, 50), rng.normal(size=8)), "x")
    assert check_training(plateau + [3.9], healthy) is None


# ----------------------------------------------------------------------------- checkpoints and full disks


def test_identical_weights_give_identical_checkpoint_bytes(tmp_path):
    state = {"encoder": {"w": torch.arange(12.0).reshape(3, 4)}, "seed": 0}
    save_checkpoint(state, tmp_path / "a" / "seed0.pt")
    save_checkpoint(state, tmp_path / "b" / "seed0.pt")
    save_checkpoint(state, tmp_path / "seed1.pt")
    blobs = {p.read_bytes() for p in (tmp_path / "a" / "seed0.pt", tmp_path / "b" / "seed0.pt", tmp_path / "seed1.pt")}
    assert len(blobs) == 1
    assert torch.equal(torch.load(tmp_path / "seed1.pt", weights_only=True)["encoder"]["w"], state["encoder"]["w"])
    torch.save(state, tmp_path / "x.pt")  # what it replaces: the file name is inside the file
    torch.save(state, tmp_path / "y.pt")
    assert (tmp_path / "x.pt").read_bytes() != (tmp_path / "y.pt").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "seed1.pt", "x.pt", "y.pt"]  # no temporaries


def test_a_full_disk_is_a_named_error_and_keeps_the_earlier_file(tmp_path, monkeypatch):
    target = tmp_path / "summary.json"
    target.write_text("earlier")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(OutputError, match=r"cannot write .*summary.json: No space left on device \(the earlier "
                                          r"version is kept"):
        with atomic_path(target) as tmp:
            monkeypatch.setattr(Path, "write_text", full)
            tmp.write_text("new")
    monkeypatch.undo()
    assert target.read_text() == "earlier" and [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_a_write_killed_halfway_leaves_no_temporary_file_after_the_next_write(tmp_path):
    """kill -9 while a report is written leaves its half-written temporary file beside it; in
    reports/figures, a folder output, DVC recorded it with the figures and the tracker copied it
    to MLflow on every later run. The next write of the same file removes it (not another file's)."""
    target = tmp_path / "accuracy.png"
    target.write_bytes(b"earlier")
    other = tmp_path / ".accuracy.png.x.abcdefgh.tmp"  # a temporary file of another name, accuracy.png.x
    other.write_bytes(b"")
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from seba.core.runtime import atomic_path
        with atomic_path(Path({str(target)!r})) as tmp:
            tmp.write_bytes(b"half")
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert subprocess.run([sys.executable, "-c", script], timeout=120).returncode == -signal.SIGKILL
    assert len(list(tmp_path.glob(".accuracy.png.*.tmp"))) == 2 and target.read_bytes() == b"earlier"
    with atomic_path(target) as tmp:
        tmp.write_bytes(b"new")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([target.name, other.name])
    assert target.read_bytes() == b"new"


def test_a_folder_that_cannot_be_written_is_a_named_error_not_a_traceback(tmp_path, monkeypatch, capsys):
    """A reports folder owned by another user (made by a container's root) refuses the temporary
    file with EACCES: the stage's one error line names the file (before, a PermissionError
    traceback), and the earlier file stays."""
    from seba.core.cli import run_stage
    from seba.core.runtime import write_json

    target = tmp_path / "summary.json"
    target.write_text("earlier")

    def refused(*args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(tmp_path / ".summary.json.x.tmp"))

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    with pytest.raises(SystemExit) as exit_:
        run_stage("aggregate", lambda: write_json(target, {"new": 1}))
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"error in stage 'aggregate': cannot write {target}: Permission denied (the earlier version is kept" in err
    assert target.read_text() == "earlier"


def test_a_file_size_limit_at_torch_save_is_a_named_error(tmp_path):
    """A real write failure: the kernel refuses to grow a file past RLIMIT_FSIZE (EFBIG), as it
    refuses a full disk (ENOSPC); the stage's error line names the checkpoint."""
    script = textwrap.dedent(f"""
        import resource, signal, sys, torch
        from seba.core.cli import run_stage
        from seba.core.runtime import save_checkpoint
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        run_stage("pretrain", lambda: save_checkpoint({{"w": torch.zeros(10000)}}, {str(tmp_path / "seed0.pt")!r}))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "error in stage 'pretrain': cannot write" in result.stderr and "seed0.pt: File too large" in result.stderr
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- orphaned stages


def test_a_stage_ends_when_the_process_that_started_it_dies(tmp_path):
    """kill -9 of the parent (DVC) alone: the stage, and the worker it started, exit within seconds."""
    pids = tmp_path / "pids"
    stage = textwrap.dedent(f"""
        import pathlib, subprocess, sys, time
        from seba.core.runtime import exit_with_parent
        exit_with_parent(poll_seconds=0.2)
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        pathlib.Path({str(pids)!r}).write_text(f"{{__import__('os').getpid()}} {{worker.pid}}")
        time.sleep(120)
    """)
    parent = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, "
                                                     f"'-c', {stage!r}])"], start_new_session=True)
    try:
        deadline = time.time() + 60
        while not pids.exists() or len(pids.read_text().split()) < 2:
            assert time.time() < deadline and parent.poll() is None
            time.sleep(0.1)
        children = [psutil.Process(int(pid)) for pid in pids.read_text().split()]
        parent.kill()
        parent.wait()
        gone, alive = psutil.wait_procs(children, timeout=20)
        assert not alive, alive
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(parent.pid, signal.SIGKILL)


def test_a_stage_whose_parent_died_before_it_looked_ends_at_once(tmp_path):
    """The parent may die while the stage is still starting: the stage, re-parented to PID 1 by
    then, ends as soon as it starts watching."""
    ready = tmp_path / "ppid"
    stage = textwrap.dedent(f"""
        import os, pathlib, sys, time
        while os.getppid() != 1 and not pathlib.Path({str(ready)!r} + ".other").exists():
            time.sleep(0.05)
        pathlib.Path({str(ready)!r}).write_text(str(os.getppid()))
        if os.getppid() != 1:
            sys.exit(3)  # orphans go to a subreaper here, not to PID 1
        sys.stderr = open({str(ready)!r} + ".log", "w", buffering=1)
        from seba.core.runtime import exit_with_parent
        exit_with_parent(poll_seconds=0.2)
        time.sleep(60)
        pathlib.Path({str(ready)!r} + ".outlived").write_text("")
    """)
    parent = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys, time; subprocess.Popen([sys.executable, "
                                                     f"'-c', {stage!r}]); time.sleep(0.5)"], start_new_session=True)
    parent.wait(timeout=60)
    deadline = time.time() + 60
    while not ready.exists():
        if time.time() > deadline:
            Path(str(ready) + ".other").write_text("")
            pytest.skip("orphans are not re-parented to PID 1 on this machine")
        time.sleep(0.1)
    if ready.read_text() != "1":
        pytest.skip("orphans are not re-parented to PID 1 on this machine")
    log = Path(str(ready) + ".log")
    while "the process that started this one is gone" not in (log.read_text() if log.exists() else ""):
        assert time.time() < deadline + 30, "the orphaned stage did not end"
        time.sleep(0.1)
    assert not Path(str(ready) + ".outlived").exists()


def test_a_process_to_watch_that_ends_while_it_is_looked_at_ends_the_stage_at_once():
    """The process to watch may be gone before the watch starts (the stage process a warm worker's
    child runs for, killed while its request travelled), or end while its chain of parents is
    read: the stage ends at once with its message, not with a psutil traceback."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its pid no longer exists
    vanishing = ("import psutil\n"
                 "def name(self):\n"
                 "    raise psutil.NoSuchProcess(self.pid)  # the parent ends between parent() and name()\n"
                 "psutil.Process.name = name\n")
    for setup, call in (("", f"exit_with_parent(poll_seconds=0.1, of={gone.pid})"),
                        (vanishing, "exit_with_parent(poll_seconds=0.1)")):
        script = setup + f"from seba.core.runtime import exit_with_parent\n{call}\nimport time\ntime.sleep(60)\n"
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
        assert result.returncode == 143, result.stderr
        assert "the process that started this one is gone" in result.stderr


# ----------------------------------------------------------------------------- through `dvc repro`


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _state(work: Path) -> dict[str, str]:
    """Every workspace file under data/ and reports/, and every DVC cache object, by content."""
    files = {str(p.relative_to(work)): _md5(p) for top in ("data", "reports") for p in sorted((work / top).rglob("*"))
             if p.is_file() and "openml_cache" not in p.parts}
    for obj in sorted((work / ".dvc" / "cache" / "files" / "md5").rglob("*")):
        if obj.is_file():  # an object's name is the md5 of its content: intact or not
            name = obj.parent.name + obj.name.removesuffix(".dir")
            assert _md5(obj) == name, f"DVC cache object {obj} is corrupted"
            files[str(obj.relative_to(work))] = name
    return files


@pytest.fixture(scope="module")
def committed(tiny_pipeline, tmp_path_factory):
    """The tiny pipeline with everything committed (so that `git status` shows what a run changes),
    its state, and an environment whose MLflow runs go to a store of their own."""
    from tiny_pipeline import run

    work, env, _ = tiny_pipeline
    run(["git", "add", "-A"], work, env)
    run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "built", "--allow-empty"], work, env)
    store = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    return work, {**env, "MLFLOW_TRACKING_URI": f"sqlite:///{store}"}, _state(work)


def _outside_snapshot(state: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in state.items() if not k.startswith("data/snapshot/")}


def _git_status(work: Path, env) -> str:
    from tiny_pipeline import run

    return run(["git", "status", "--porcelain"], work, env).stdout


def _back_to_up_to_date(work: Path, env, before: dict) -> None:
    """Put params.yaml and the snapshot back, bring back what DVC removed from the workspace
    (from its cache), rerun what is stale (the `validate` stage, recorded with the bad params),
    and check that nothing is lost, changed or left to do."""
    from tiny_pipeline import run, stages_run

    run(["git", "checkout", "HEAD", "--", "params.yaml", "data/snapshot"], work, env)
    run(["dvc", "checkout"], work, env)
    # `validate` was recorded with the bad params; `track` pushes a failed stage's MLflow record
    assert stages_run(run(["dvc", "repro"], work, env).stdout) <= {"validate", "track"}
    assert stages_run(run(["dvc", "repro", "--dry"], work, env).stdout) == set()
    assert _git_status(work, env) == ""
    assert _state(work) == before


def _params_edit(edit):
    def apply(work: Path) -> None:
        params = yaml.safe_load((work / "params.yaml").read_text())
        edit(params)
        (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return apply


def _append(text: str):
    def apply(work: Path) -> None:
        with open(work / "params.yaml", "a") as fh:
            fh.write(text)
    return apply


def _break_manifest(work: Path) -> None:
    (work / "data" / "snapshot" / "manifest.json").write_text('{"openml_ids": ')


# (case, change, fragment of the error); each is one `dvc repro` that stops at `validate` (or
# earlier, in DVC itself), before any other stage's outputs are removed
DVC_CASES = [
    ("a params typo", _append("foo: 1\n"), "unknown key 'foo'"),
    ("ratios that share a directory", _params_edit(_set("ratios", [0.2, 0.2000001])),
     "both name the output directory r0.2"),
    ("seed beyond range", _params_edit(_set("seeds", [4294967296])), "'seeds' must be <= 4294967295"),
    ("a trillion episodes", _params_edit(_set("evaluate.episodes", 10**12)), "'evaluate.episodes' must be <= 10000"),
    ("an invalid snapshot manifest", _break_manifest, "snapshot manifest"),
    ("a dataset name leaving the repository",
     _params_edit(lambda p: (p["datasets"].append("../../../tmp/x"), p["sources"].update({"../../../tmp/x": 37}))),
     "tmp/x"),  # DVC itself refuses the output path before any stage runs
]
if NO_CUDA:
    DVC_CASES.append(("cuda without a GPU", _params_edit(_set("pretrain.device", "cuda")), "sees no CUDA device"))


@pytest.mark.slow
def test_bad_inputs_stop_dvc_repro_before_it_removes_anything(committed):
    from tiny_pipeline import run, stages_run

    work, env, before = committed
    for case, change, fragment in DVC_CASES:
        change(work)
        result = run(["dvc", "repro"], work, env, check=False)
        output = result.stdout + result.stderr
        assert result.returncode != 0, case
        assert fragment in output, (case, output)
        assert stages_run(output) <= {"validate"}, (case, output)
        status = _git_status(work, env)
        assert all(line[:2].strip() == "M" for line in status.splitlines()), (case, status)  # edits, no deletions
        assert _outside_snapshot(_state(work)) == _outside_snapshot(before), case
        run(["git", "checkout", "HEAD", "--", "params.yaml", "data/snapshot"], work, env)
        assert _git_status(work, env) == "" and _state(work) == before, case
    assert stages_run(run(["dvc", "repro", "--dry"], work, env).stdout) == set()


@pytest.mark.slow
def test_a_collapsed_encoder_fails_its_stage_and_costs_nothing_committed(committed):
    """lr 1e6 passes validation (no bound is justified) and collapses in training: the pretrain
    stage fails with the named error. DVC removed that stage's cached output before running it;
    it stays in the cache, and `dvc checkout` puts it back."""
    from tiny_pipeline import run, stages_run

    work, env, before = committed
    _params_edit(_set("pretrain.lr", 1e6))(work)
    result = run(["dvc", "repro"], work, env, check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "the encoder collapsed or diverged" in output and "pretrain.lr = 1e+06" in output, output
    ran = stages_run(output)
    assert "validate" in ran and len([s for s in ran if s.startswith("pretrain@")]) == 1, ran
    assert not any(s.startswith(("evaluate", "aggregate")) for s in ran)
    status = _git_status(work, env).splitlines()
    assert sorted(line[3:] for line in status) == ["dvc.lock", "params.yaml"], status  # validate's new record
    _back_to_up_to_date(work, env, before)


@pytest.mark.slow
def test_retraining_identical_weights_stores_no_new_checkpoint_object(committed):
    """The checkpoint's bytes, and so its cache object, are the same after retraining; only the
    stage's small log.json (which records timings) and the directory listing are new."""
    from tiny_pipeline import run, stages_run

    work, env, before = committed
    result = run(["dvc", "repro", "--force", "--single-item", "pretrain@diabetes-0.2"], work, env)
    assert stages_run(result.stdout) == {"pretrain@diabetes-0.2"}
    after = _state(work)
    out = "data/models/diabetes/r0.2/"
    assert after[out + "seed0.pt"] == before[out + "seed0.pt"]
    new_objects = {after[k] for k in set(after) - set(before) if k.startswith(".dvc/")}
    assert new_objects <= {after[out + "log.json"], _dir_object(work, out)}, new_objects
    run(["git", "checkout", "HEAD", "--", "dvc.lock"], work, env)  # (DVC staged its new record)
    run(["dvc", "checkout"], work, env)  # the earlier log.json
    run(["dvc", "gc", "--workspace", "--force"], work, env)  # the new log and listing objects
    _back_to_up_to_date(work, env, before)


def _dir_object(work: Path, out: str) -> str:
    lock = yaml.safe_load((work / "dvc.lock").read_text())
    return next(o["md5"] for stage in lock["stages"].values() for o in stage.get("outs", [])
                if o["path"] == out.rstrip("/")).removesuffix(".dir")


@pytest.mark.slow
def test_killing_only_dvc_repro_ends_its_stage(committed):
    from tiny_pipeline import descendants, start_long_repro, stop_repro

    work, env, before = committed
    dvc, log_path = start_long_repro(work, env, "killed_parent.log")
    stage = None
    try:
        deadline = time.time() + 600
        while stage is None:
            assert dvc.poll() is None and time.time() < deadline, log_path.read_text()
            stage = next(iter(descendants(dvc.pid, "stages/pretrain.py")), None)
            time.sleep(0.2)
        time.sleep(2)  # inside the training
        dvc.kill()  # the DVC process only, not its process group
        dvc.wait(timeout=60)
        gone, alive = psutil.wait_procs([stage], timeout=30)
        assert not alive, "the stage outlived `dvc repro`"
        assert "the process that started this one is gone" in log_path.read_text()
    finally:
        stop_repro(dvc)
        if stage is not None:
            with contextlib.suppress(psutil.Error):
                stage.kill()
    _back_to_up_to_date(work, env, before)
