"""MLflow mirror of the pipeline: one run per stage instance, nested runs per seed.

DVC outputs are the source of truth. Every MLflow call goes through ``Tracker``, which turns
any MLflow failure (store unwritable, locked, missing) into one warning and carries on, so a
stage always completes its DVC outputs.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from seba.runtime import log, repo_root

EXPERIMENT = "seba"
_BATCH = 1000  # MLflow's limit of metrics per log_batch call


def tracking_uri(root: Path | None = None) -> str:
    """MLFLOW_TRACKING_URI if set, else the SQLite store at an absolute path in the repo."""
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    root = root or repo_root()
    return f"sqlite:///{(root / 'mlflow.db').resolve()}"


def _git_commit(root: Path) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=5)
        return out.stdout.strip() or "unknown"
    except Exception:
        return "unknown"


def _flatten(prefix: str, obj: Any, out: dict[str, str]) -> None:
    if isinstance(obj, dict):
        for key, value in obj.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), value, out)
    else:
        out[prefix] = str(list(obj) if isinstance(obj, tuple) else obj)[:6000]


class Tracker:
    """Context manager around one stage instance's MLflow run."""

    def __init__(self, stage: str, run_name: str, params: dict | None = None,
                 tags: dict | None = None, root: Path | None = None):
        self.root = root or repo_root()
        self.stage = stage
        self.run_name = run_name
        self.params = params or {}
        self.tags = tags or {}
        self.client = None
        self.run_id: str | None = None
        self.experiment_id: str | None = None
        self.enabled = True

    # ------------------------------------------------------------------ failure policy
    def _guard(self, what: str, fn, *args, **kwargs):
        if not self.enabled:
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # MLflow raises many kinds; none may stop the stage
            self.enabled = False
            log(f"WARNING: MLflow {what} failed ({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}); "
                f"tracking is off for the rest of this stage, its DVC outputs are unaffected")
            return None

    # ------------------------------------------------------------------ runs
    def __enter__(self) -> "Tracker":
        self._guard("start", self._start)
        return self

    def _start(self) -> None:
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
        os.environ.setdefault("DO_NOT_TRACK", "true")
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=tracking_uri(self.root))
        experiment = self.client.get_experiment_by_name(EXPERIMENT)
        if experiment is None:
            artifacts = (self.root / "mlartifacts").resolve().as_uri()
            self.experiment_id = self.client.create_experiment(EXPERIMENT, artifact_location=artifacts)
        else:
            self.experiment_id = experiment.experiment_id
        tags = {"stage": self.stage, "git_commit": _git_commit(self.root), **self.tags}
        run = self.client.create_run(self.experiment_id, run_name=self.run_name,
                                     tags={k: str(v) for k, v in tags.items()})
        self.run_id = run.info.run_id
        self.log_params(self.params)

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.run_id is not None:
            status = "FINISHED" if exc_type is None else "FAILED"
            self._guard("end run", self.client.set_terminated, self.run_id, status)

    def child(self, run_name: str, params: dict | None = None, tags: dict | None = None) -> str | None:
        """Create a nested run (e.g. one per seed); returns its id (None if tracking is off)."""
        def create():
            all_tags = {"mlflow.parentRunId": self.run_id, "stage": self.stage, **self.tags, **(tags or {})}
            run = self.client.create_run(self.experiment_id, run_name=run_name,
                                         tags={k: str(v) for k, v in all_tags.items()})
            if params:
                self.log_params(params, run.info.run_id)
            return run.info.run_id
        if self.run_id is None:
            return None
        return self._guard("create nested run", create)

    def end_child(self, run_id: str | None, failed: bool = False) -> None:
        if run_id is not None:
            self._guard("end nested run", self.client.set_terminated, run_id,
                        "FAILED" if failed else "FINISHED")

    # ------------------------------------------------------------------ logging
    def log_params(self, params: dict, run_id: str | None = None) -> None:
        flat: dict[str, str] = {}
        _flatten("", params, flat)
        if not flat:
            return

        def send():
            from mlflow.entities import Param

            items = [Param(k, v) for k, v in flat.items()]
            for i in range(0, len(items), 100):
                self.client.log_batch(run_id or self.run_id, params=items[i:i + 100])
        self._guard("log params", send)

    def log_metrics(self, metrics: dict[str, float], run_id: str | None = None, step: int = 0) -> None:
        self.log_series({k: [(step, v)] for k, v in metrics.items()}, run_id)

    def log_series(self, series: dict[str, list[tuple[int, float]]], run_id: str | None = None) -> None:
        """Log whole metric histories (e.g. a loss curve) in batches of 1000 points."""
        def send():
            from mlflow.entities import Metric

            now = int(time.time() * 1000)
            items = [Metric(key, float(value), now, int(step))
                     for key, points in series.items() for step, value in points]
            for i in range(0, len(items), _BATCH):
                self.client.log_batch(run_id or self.run_id, metrics=items[i:i + _BATCH])
        if run_id is None and self.run_id is None:
            return
        self._guard("log metrics", send)

    def log_artifacts(self, path: Path, artifact_path: str | None = None) -> None:
        if self.run_id is None:
            return
        if Path(path).is_dir():
            self._guard("log artifacts", self.client.log_artifacts, self.run_id, str(path), artifact_path)
        else:
            self._guard("log artifact", self.client.log_artifact, self.run_id, str(path), artifact_path)
