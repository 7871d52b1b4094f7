from mlflow.tracking import MlflowClient

from seba.tracking import Tracker


def test_tracker_logs_runs_children_and_long_curves(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    curve = [(step, 1.0 / step) for step in range(1, 2501)]  # more than one log_batch call
    with Tracker("pretrain", "pretrain toy", params={"pretrain": {"lr": 0.001}}, tags={"dataset": "toy"},
                 root=tmp_path) as tracker:
        child = tracker.child("seed 0", params={"seed": 0})
        tracker.log_series({"val_loss": curve}, child)
        tracker.log_metrics({"best_epoch": 3}, child)
        tracker.end_child(child)
    client = MlflowClient(tracking_uri=uri)
    parent = client.get_run(tracker.run_id)
    assert parent.data.params["pretrain.lr"] == "0.001" and parent.data.tags["dataset"] == "toy"
    assert parent.info.status == "FINISHED"
    history = client.get_metric_history(child, "val_loss")
    assert len(history) == 2500
    assert client.get_run(child).data.tags["mlflow.parentRunId"] == tracker.run_id


def test_tracker_failure_is_a_warning(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////proc/seba-no-such-dir/mlflow.db")
    with Tracker("fetch", "fetch toy", root=tmp_path) as tracker:
        tracker.log_metrics({"rows": 3})
        assert tracker.child("seed 0") is None
    assert "WARNING: MLflow start failed" in capsys.readouterr().err


def test_a_locked_store_is_a_warning_and_the_work_goes_on(tmp_path, monkeypatch, capsys):
    """Another process holds the SQLite store's write lock for the whole stage: the stage warns
    (after the driver's busy timeout) instead of failing or hanging."""
    import sqlite3
    import time

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    with Tracker("fetch", "create the store", root=tmp_path):
        pass  # creates the schema
    holder = sqlite3.connect(tmp_path / "mlflow.db", timeout=0.1)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        start = time.perf_counter()
        with Tracker("fetch", "fetch while locked", root=tmp_path) as tracker:
            tracker.log_metrics({"rows": 3})
        assert time.perf_counter() - start < 120
    finally:
        holder.rollback()
        holder.close()
    assert "WARNING: MLflow" in capsys.readouterr().err
