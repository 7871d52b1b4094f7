import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from seba.core.tracking import PENDING_DIR, Tracker, flush


def _records(root):
    return sorted((root / PENDING_DIR).glob("*.json"))


def test_tracker_records_runs_children_and_long_curves_and_track_pushes_them(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    curve = [(step, 1.0 / step) for step in range(1, 2501)]  # more than one log_batch call
    (tmp_path / "table.csv").write_text("a,b\n1,2\n")
    with Tracker("pretrain", "pretrain toy", params={"pretrain": {"lr": 0.001}}, tags={"dataset": "toy"},
                 root=tmp_path) as tracker:
        child = tracker.child("seed 0", params={"seed": 0})
        tracker.log_series({"val_loss": curve}, child)
        tracker.log_metrics({"best_epoch": 3}, child)
        tracker.end_child(child)
        tracker.log_artifacts(tmp_path / "table.csv")
    (tmp_path / "table.csv").write_text("changed after the stage\n")  # the record keeps the stage's copy
    [record] = _records(tmp_path)
    runs = json.loads(record.read_text())["runs"]
    assert [r["name"] for r in runs] == ["pretrain toy", "seed 0"]
    assert runs[0]["start"] <= runs[1]["start"] <= runs[1]["end"] <= runs[0]["end"]

    ids = flush(tmp_path)
    assert _records(tmp_path) == [] and not list((tmp_path / PENDING_DIR).glob("*.files"))
    client = MlflowClient(tracking_uri=uri)
    parent = client.get_run(ids[tracker.run_id])
    assert parent.data.params["pretrain.lr"] == "0.001" and parent.data.tags["dataset"] == "toy"
    assert parent.data.tags["stage"] == "pretrain" and parent.info.status == "FINISHED"
    assert (parent.info.start_time, parent.info.end_time) == (runs[0]["start"], runs[0]["end"])  # the stage's times
    history = client.get_metric_history(ids[child], "val_loss")
    assert len(history) == 2500
    assert client.get_run(ids[child]).data.tags["mlflow.parentRunId"] == parent.info.run_id
    local = client.download_artifacts(parent.info.run_id, "table.csv", str(tmp_path / "download"))
    assert Path(local).read_text() == "a,b\n1,2\n"
    assert flush(tmp_path) == {}  # nothing waits: nothing pushed twice


def test_a_failed_stage_records_a_failed_run(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    with pytest.raises(ValueError, match="boom"):  # the tracker records the failure and lets it through
        with Tracker("fetch", "fetch toy", root=tmp_path) as tracker:
            child = tracker.child("seed 0")
            raise ValueError("boom")
    ids = flush(tmp_path)
    client = MlflowClient(tracking_uri=os.environ["MLFLOW_TRACKING_URI"])
    assert client.get_run(ids[tracker.run_id]).info.status == "FAILED"
    assert client.get_run(ids[child]).info.status == "FAILED"


def test_a_broken_store_is_a_warning_and_the_records_wait_for_the_next_push(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////proc/seba-no-such-dir/mlflow.db")
    with Tracker("fetch", "fetch toy", root=tmp_path) as tracker:
        tracker.log_metrics({"rows": 3})
    assert flush(tmp_path) == {}
    assert "WARNING: MLflow start failed" in capsys.readouterr().err
    assert len(_records(tmp_path)) == 1
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    ids = flush(tmp_path)
    assert MlflowClient(tracking_uri=uri).get_run(ids[tracker.run_id]).data.metrics["rows"] == 3
    assert _records(tmp_path) == []


def test_an_unreadable_record_is_set_aside_and_the_others_are_pushed(tmp_path, monkeypatch, capsys):
    """A record damaged on disk can never be pushed: it is moved to data/tracking/unreadable/ and
    named, and the records after it still reach MLflow (before, every later record waited for ever)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    trackers = []
    for name in ("fetch a", "fetch b", "fetch c"):
        with Tracker("fetch", name, root=tmp_path) as tracker:
            tracker.log_metrics({"rows": 3})
        trackers.append(tracker)
    with Tracker("fetch", "fetch d", root=tmp_path) as tracker:
        tracker.log_metrics({"rows": 3})
    first, second, third, fourth = _records(tmp_path)
    first.write_text(first.read_text()[:40])  # cut short
    second.write_text("[1, 2]")  # JSON, not a record
    record = json.loads(fourth.read_text())
    del record["runs"][0]["params"]  # a record, but not one that can be pushed
    fourth.write_text(json.dumps(record))
    ids = flush(tmp_path)
    assert set(ids) == {trackers[2].run_id} and _records(tmp_path) == []
    aside = tmp_path / PENDING_DIR / "unreadable"
    assert sorted(p.name for p in aside.iterdir()) == sorted([first.name, second.name, fourth.name])
    err = capsys.readouterr().err
    assert f"the stage record {first.name} cannot be read" in err and "moved to data/tracking/unreadable/" in err
    assert "[track] 1 stage run(s) pushed" in err
    assert flush(tmp_path) == {}  # what was set aside is not tried again


def test_an_unwritable_record_is_a_warning(tmp_path, capsys):
    (tmp_path / "data").write_text("a file where the records' directory should be")
    with Tracker("fetch", "fetch toy", root=tmp_path) as tracker:
        tracker.log_metrics({"rows": 3})
    assert "WARNING: MLflow record of 'fetch toy' not written" in capsys.readouterr().err


def test_a_locked_store_is_a_warning_and_nothing_is_half_pushed(tmp_path, monkeypatch, capsys):
    """Another process holds the SQLite store's write lock: the push warns (after the driver's
    busy timeout) instead of failing or hanging, and the record is pushed whole later."""
    import sqlite3

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    with Tracker("fetch", "create the store", root=tmp_path):
        pass
    flush(tmp_path)  # creates the schema
    with Tracker("fetch", "fetch while locked", root=tmp_path) as tracker:
        tracker.log_metrics({"rows": 3})
    holder = sqlite3.connect(tmp_path / "mlflow.db", timeout=0.1)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        assert flush(tmp_path) == {}
    finally:
        holder.rollback()
        holder.close()
    assert "WARNING: MLflow" in capsys.readouterr().err and len(_records(tmp_path)) == 1
    ids = flush(tmp_path)
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("seba").experiment_id],
                              filter_string="attributes.run_name = 'fetch while locked'")
    assert [r.info.run_id for r in runs] == [ids[tracker.run_id]]


def test_a_stage_never_imports_mlflow(tmp_path):
    """MLflow's import and store set-up cost seconds; a stage's Tracker only writes a record."""
    code = ("import sys\nfrom pathlib import Path\nfrom seba.core.tracking import Tracker\n"
            f"with Tracker('split', 'split toy', params={{'a': 1}}, root=Path({str(tmp_path)!r})) as t:\n"
            "    t.log_metrics({'rows': 1}, t.child('seed 0'))\n"
            "assert not any(m.startswith('mlflow') for m in sys.modules), 'mlflow imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "MLFLOW_TRACKING_URI": ""})
    assert len(_records(tmp_path)) == 1


def test_runs_name_the_dvc_experiment_that_made_them(tmp_path, monkeypatch):
    """Every `dvc exp run` pushes into the one MLflow experiment `seba`: each run and its seeds'
    carry the DVC experiment's name and baseline revision (DVC sets them in a stage's environment),
    so that the UI tells one experiment's runs from another's; a plain `dvc repro` sets none."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    made = {}
    for name in ("tiny-a", None):
        if name:
            monkeypatch.setenv("DVC_EXP_NAME", name)
            monkeypatch.setenv("DVC_EXP_BASELINE_REV", "9f7ef93" + "0" * 33)
        else:
            monkeypatch.delenv("DVC_EXP_NAME", raising=False)
            monkeypatch.delenv("DVC_EXP_BASELINE_REV", raising=False)
        with Tracker("evaluate", "evaluate toy", tags={"dataset": "toy"}, root=tmp_path) as tracker:
            tracker.end_child(tracker.child("seed 0", tags={"seed": 0}))
        made[name] = tracker
    ids = flush(tmp_path)
    client = MlflowClient(tracking_uri=uri)
    for run_id in made["tiny-a"].runs:
        tags = client.get_run(ids[run_id]).data.tags
        assert (tags["dvc_experiment"], tags["dvc_baseline_rev"]) == ("tiny-a", "9f7ef93" + "0" * 33)
    for run_id in made[None].runs:
        assert not {"dvc_experiment", "dvc_baseline_rev"} & set(client.get_run(ids[run_id]).data.tags)
    found = client.search_runs([client.get_experiment_by_name("seba").experiment_id],
                               "tags.dvc_experiment = 'tiny-a'")
    assert sorted(run.info.run_name for run in found) == ["evaluate toy", "seed 0"]


def test_dvc_root_names_the_store_of_a_stage_in_a_temporary_copy(tmp_path, monkeypatch):
    from seba.core.tracking import tracking_uri

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    copy, workspace = tmp_path / "copy", tmp_path / "workspace"
    assert tracking_uri(copy) == f"sqlite:///{(copy / 'mlflow.db').resolve()}"
    monkeypatch.setenv("DVC_ROOT", str(workspace))  # a queued experiment's stage (DVC sets it)
    assert tracking_uri(copy) == f"sqlite:///{(workspace / 'mlflow.db').resolve()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////elsewhere.db")
    assert tracking_uri(copy) == "sqlite:////elsewhere.db"



def test_a_store_made_from_a_temporary_copy_keeps_its_artifacts_in_the_workspace(tmp_path, monkeypatch):
    """A queued experiment's track stage runs in a copy that DVC deletes afterwards: the store is
    the workspace's (DVC_ROOT), and so is the experiment's artifact location, which every later
    run's artifacts go to."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    copy, workspace = tmp_path / "copy", tmp_path / "workspace"
    copy.mkdir()
    workspace.mkdir()
    monkeypatch.setenv("DVC_ROOT", str(workspace))
    (copy / "table.csv").write_text("a,b\n1,2\n")
    with Tracker("aggregate", "aggregate", root=copy) as tracker:
        tracker.log_artifacts(copy / "table.csv")
    ids = flush(copy)
    client = MlflowClient(tracking_uri=f"sqlite:///{workspace / 'mlflow.db'}")
    assert client.get_experiment_by_name("seba").artifact_location == (workspace / "mlartifacts").resolve().as_uri()
    assert client.get_run(ids[tracker.run_id]).info.artifact_uri.startswith((workspace / "mlartifacts").resolve().as_uri())
    assert not (copy / "mlartifacts").exists() and list(workspace.glob("mlartifacts/*/artifacts/table.csv"))


def test_records_not_pushed_from_a_temporary_copy_wait_in_the_workspace(tmp_path, monkeypatch, capsys):
    """A queued experiment's track stage that cannot push (the store locked by a parallel one,
    say) leaves its records where the workspace's next push finds them, not in the copy that DVC
    deletes."""
    copy, workspace = tmp_path / "copy", tmp_path / "workspace"
    copy.mkdir()
    workspace.mkdir()
    monkeypatch.setenv("DVC_ROOT", str(workspace))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////proc/seba-no-such-dir/mlflow.db")
    (copy / "table.csv").write_text("a,b\n1,2\n")
    with Tracker("aggregate", "aggregate", root=copy) as tracker:
        tracker.log_metrics({"rows": 3})
        tracker.log_artifacts(copy / "table.csv")
    assert flush(copy) == {}
    assert f"1 stage record(s) wait in {workspace / PENDING_DIR}/" in capsys.readouterr().err
    assert _records(copy) == [] and len(_records(workspace)) == 1
    uri = f"sqlite:///{workspace / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("DVC_ROOT")
    ids = flush(workspace)  # the workspace's next track stage
    client = MlflowClient(tracking_uri=uri)
    assert client.get_run(ids[tracker.run_id]).data.metrics["rows"] == 3
    local = client.download_artifacts(ids[tracker.run_id], "table.csv", str(tmp_path / "download"))
    assert Path(local).read_text() == "a,b\n1,2\n" and _records(workspace) == []

def test_a_failed_stage_in_a_temporary_copy_leaves_the_experiments_records_in_the_workspace(
        tmp_path, monkeypatch, capsys):
    """A queued experiment whose stage fails never reaches its track stage, and DVC deletes its
    copy: the failed stage's record and those of the stages before it are in the workspace's spool,
    where the next push finds them (a stage writes its record there, with a marker in the copy)."""
    from seba.core.cli import run_stage
    from seba.core.errors import DataError

    copy, workspace = tmp_path / "copy", tmp_path / "workspace"
    for root in (copy, workspace):
        root.mkdir()
        (root / "dvc.yaml").write_text("stages: {}\n")
    monkeypatch.chdir(copy)
    monkeypatch.setenv("DVC_ROOT", str(workspace))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{workspace / 'mlflow.db'}")

    def split():
        with Tracker("split", "split toy", root=copy) as tracker:
            tracker.log_metrics({"rows": 3})

    def pretrain():
        (copy / "curve.csv").write_text("epoch,loss\n0,1.0\n")
        with Tracker("pretrain", "pretrain toy r=0.2", root=copy) as tracker:
            tracker.log_artifacts(copy / "curve.csv")
            raise DataError("the encoder collapsed")

    run_stage("split", split)
    assert _records(copy) == [] and len(_records(workspace)) == 1
    assert [m.name for m in (copy / PENDING_DIR).glob("*.sent")] == [_records(workspace)[0].stem + ".sent"]
    with pytest.raises(SystemExit) as exc:
        run_stage("pretrain", pretrain)
    assert exc.value.code == 2
    assert _records(copy) == [] and len(_records(workspace)) == 2
    assert f"2 stage record(s) of this experiment wait in {workspace / PENDING_DIR}/" in capsys.readouterr().err
    monkeypatch.delenv("DVC_ROOT")
    ids = flush(workspace)  # the workspace's next track stage
    client = MlflowClient(tracking_uri=os.environ["MLFLOW_TRACKING_URI"])
    statuses = sorted((r.data.tags["mlflow.runName"], r.info.status) for r in map(client.get_run, ids.values()))
    assert statuses == [("pretrain toy r=0.2", "FAILED"), ("split toy", "FINISHED")]
    [failed] = [i for i in ids.values() if client.get_run(i).data.tags["stage"] == "pretrain"]
    local = client.download_artifacts(failed, "curve.csv", str(tmp_path / "download"))
    assert Path(local).read_text() == "epoch,loss\n0,1.0\n"


def test_a_queued_experiment_killed_part_way_keeps_the_records_of_its_finished_stages(tmp_path, monkeypatch):
    """`kill -9` of a queued experiment (the OOM killer, a machine that went away) ends it before
    any handler runs, and DVC deletes its copy: the stages it finished wrote their records into the
    workspace's spool, which the next push reads. An experiment that ends well pushes them from its
    copy's own track stage (its marker is the change that runs it), and nothing waits afterwards."""
    import shutil
    import signal

    copy, workspace = tmp_path / "copy", tmp_path / "workspace"
    for root in (copy, workspace):
        (root / PENDING_DIR).mkdir(parents=True)
    (copy / "curve.csv").write_text("epoch,loss\n0,1.0\n")
    env = {**os.environ, "DVC_ROOT": str(workspace), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    stage = ("import os, signal\nfrom pathlib import Path\nfrom seba.core.tracking import Tracker\n"
             f"with Tracker('split', 'split toy', root=Path({str(copy)!r})) as t:\n"
             "    t.log_metrics({'rows': 3})\n"
             f"    t.log_artifacts(Path({str(copy)!r}) / 'curve.csv')\n"
             f"with Tracker('pretrain', 'pretrain toy', root=Path({str(copy)!r})) as t:\n"
             "    os.kill(os.getpid(), signal.SIGKILL)\n")
    killed = subprocess.run([sys.executable, "-c", stage], env=env, cwd=copy, capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    shutil.rmtree(copy)  # what DVC does with the copy
    [record] = _records(workspace)
    uri = f"sqlite:///{workspace / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    ids = flush(workspace)  # the workspace's next track stage
    client = MlflowClient(tracking_uri=uri)
    [run] = [client.get_run(i) for i in ids.values()]
    assert (run.info.run_name, run.info.status, run.data.metrics["rows"]) == ("split toy", "FINISHED", 3)
    local = client.download_artifacts(run.info.run_id, "curve.csv", str(tmp_path / "download"))
    assert Path(local).read_text() == "epoch,loss\n0,1.0\n" and _records(workspace) == []

    copy.mkdir()
    monkeypatch.setenv("DVC_ROOT", str(workspace))
    with Tracker("evaluate", "evaluate toy", root=copy) as tracker:
        tracker.log_metrics({"accuracy": 0.5})
    assert _records(copy) == [] and len(_records(workspace)) == 1 and len(list((copy / PENDING_DIR).glob("*.sent"))) == 1
    ids = flush(copy)  # the experiment's own track stage
    assert client.get_run(ids[tracker.run_id]).data.metrics["accuracy"] == 0.5 and _records(workspace) == []


def test_stage_times_reads_the_records_where_mlflow_is_not(tmp_path, monkeypatch):
    """benchmarks/stage_times.py --records: a machine without MLflow keeps the records; the stage
    bodies come from them (the latest finished run of each stage instance, children not counted)."""
    import seba.core.tracking as tracking

    clock = iter(range(0, 10**9, 500))  # each reading of the clock is 0.5 s after the last: a run
    # lasts 0.5 s, plus 1 s per child (its start and its end)
    monkeypatch.setattr(tracking, "_now_ms", lambda: next(clock))
    for name, tags, extra in (("pretrain toy r=0.1", {"dataset": "toy", "ratio": "0.1"}, 0),
                              ("pretrain toy r=0.1", {"dataset": "toy", "ratio": "0.1"}, 2),  # rerun: this one
                              ("baseline knn toy", {"dataset": "toy", "method": "knn"}, 1)):
        with Tracker(name.split()[0], name, tags=tags, root=tmp_path) as tracker:
            for _ in range(extra):
                tracker.end_child(tracker.child("seed 0"))
    with pytest.raises(RuntimeError):
        with Tracker("evaluate", "evaluate toy", tags={"dataset": "toy"}, root=tmp_path):
            raise RuntimeError("a failed stage is not timed")
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "stage_times.py"
    out = subprocess.run([sys.executable, str(script), "--records", str(tmp_path / PENDING_DIR),
                          "--csv", str(tmp_path / "times.csv")], check=True, capture_output=True, text=True,
                         env={**os.environ, "MLFLOW_TRACKING_URI": "sqlite:////nonexistent/dir/mlflow.db"}).stdout
    assert (tmp_path / "times.csv").read_text().splitlines() == [
        "stage,method,dataset,ratio,seconds", "pretrain,,toy,0.1,2.5", "baseline,knn,toy,,1.5"]
    assert out.splitlines()[-1].split() == ["==", "total", "(stage", "bodies)", "4.0", "s"]


def test_seba_track_answers_help_and_refuses_unknown_options_without_pushing(monkeypatch, capsys):
    import seba.core.tracking as tracking

    pushed = []
    monkeypatch.setattr(tracking, "flush", lambda: pushed.append(1))
    for argv, code in ((["--help"], 0), (["--bogus"], 2)):
        with pytest.raises(SystemExit) as exc:
            tracking.main(argv)
        assert exc.value.code == code
    assert "data/tracking/" in capsys.readouterr().out and not pushed
    tracking.main([])
    assert pushed == [1]


# a `track` process killed (kill -9) at the given call of the MLflow client, where no cleanup can run
_KILLED_PUSH = """
import os, signal, sys
from pathlib import Path
import mlflow.tracking
import seba.core.tracking
where, at = sys.argv[1], int(sys.argv[2])
owner = seba.core.tracking.shutil if where == "rmtree" else mlflow.tracking.MlflowClient
original, calls = getattr(owner, where), []
def killed(*args, **kwargs):
    calls.append(1)
    if len(calls) == at:
        os.kill(os.getpid(), signal.SIGKILL)
    return original(*args, **kwargs)
setattr(owner, where, killed)
seba.core.tracking.flush(Path(sys.argv[3]))
"""


@pytest.mark.parametrize("where, at", [("log_batch", 3), ("rmtree", 1)], ids=["during the push", "after the push"])
def test_a_push_killed_part_way_leaves_each_run_once_in_the_store(tmp_path, monkeypatch, where, at):
    """A `track` killed while it pushed a record (the runs it had made stay, RUNNING and without
    their metrics), or after it had pushed it but before it removed the record: the next push
    makes every run of the record exactly once, whole (before, the record was pushed again
    beside what the killed push had left, and its runs appeared twice)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    with Tracker("pretrain", "pretrain toy", root=tmp_path) as tracker:
        children = []
        for seed in range(2):
            children.append(tracker.child(f"seed {seed}", params={"seed": seed}))
            tracker.log_series({"val_loss": [(step, 1.0 / step) for step in range(1, 11)]}, children[-1])
            tracker.end_child(children[-1])
        tracker.log_metrics({"seconds": 3.0})
    killed = subprocess.run([sys.executable, "-c", _KILLED_PUSH, where, str(at), str(tmp_path)],
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert killed.returncode == -9 and len(_records(tmp_path)) == 1  # the record waits

    ids = flush(tmp_path)
    assert _records(tmp_path) == []
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("seba").experiment_id])
    assert sorted(r.data.tags["seba.record_run"] for r in runs) == sorted([tracker.run_id, *children])
    assert {r.info.run_id for r in runs} == set(ids.values()) and {r.info.status for r in runs} == {"FINISHED"}
    for child in children:
        assert len(client.get_metric_history(ids[child], "val_loss")) == 10
        assert client.get_run(ids[child]).data.tags["mlflow.parentRunId"] == ids[tracker.run_id]
    assert flush(tmp_path) == {}
