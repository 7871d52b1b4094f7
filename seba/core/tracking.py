"""MLflow mirror of the pipeline: one run per stage instance, nested runs per seed.

DVC outputs are the source of truth. A stage does not import MLflow (its import and store set-up
cost 2-4 s, more than most stages' work): its ``Tracker`` writes the stage's run — params, tags,
metric histories, nested runs, start and end times, copies of its artifacts — as one record in
``data/tracking/``. The ``track`` stage, last in ``dvc.yaml``, pushes the waiting records into the
MLflow store with their own times (``flush``; also ``seba-track`` / ``python -m seba.core.tracking``).
Every failure, writing a record or pushing it, is one warning: a stage always completes its DVC
outputs, and a record that could not be pushed stays for the next ``track``. A queued experiment
runs in a temporary copy that DVC deletes, however the experiment ends: its stages write their
records straight into the workspace's ``data/tracking/`` (``DVC_ROOT``), so that a run killed part-way
(``kill -9``, the OOM killer, a machine that went away) keeps the records of the stages it finished,
and leave a marker in the copy's own, which makes the copy's ``track`` stage run and push them.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from seba.core import paths
from seba.core.errors import OutputError
from seba.core.runtime import atomic_path, log, repo_root, write_text

EXPERIMENT = "seba"
PENDING_DIR = paths.TRACKING  # the records waiting for the track stage (git-ignored but for .gitignore)
SENT = ".sent"  # a temporary copy's marker of a record written to the workspace's spool
UNREADABLE = "unreadable"  # records that cannot be read, set aside in the spool so that the others go on
_BATCH = 1000  # MLflow's limit of metrics per log_batch call
_PARAMS_BATCH = 100  # and of params
# DVC reruns `track` only when data/tracking changes, so a no-op `dvc repro` does not retry a push
RETRY = "it runs when a stage writes a new record; `seba-track` pushes them now"


def store_root(root: Path | None = None) -> Path:
    """Where the MLflow store and its artifacts (``mlartifacts/``) live: the workspace, ``DVC_ROOT``,
    when DVC runs the stage (a queued experiment runs in a temporary copy that DVC deletes
    afterwards, and points DVC_ROOT at the workspace it came from), else ``root``."""
    if os.environ.get("DVC_ROOT"):
        return Path(os.environ["DVC_ROOT"])
    return root or repo_root()


def tracking_uri(root: Path | None = None) -> str:
    """MLFLOW_TRACKING_URI if set, else the SQLite store at an absolute path in the repo
    (``store_root``)."""
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    return f"sqlite:///{(store_root(root) / 'mlflow.db').resolve()}"


def pending_dir(root: Path | None = None) -> Path:
    return paths.tracking(root or repo_root())


def home_spool(root: Path | None = None) -> Path:
    """The spool that stages write their records to and ``flush`` pushes from: ``root``'s, or in a
    queued experiment's temporary copy, the workspace's (``store_root``), which outlives the copy."""
    root = root or repo_root()
    home = store_root(root)
    return pending_dir(root) if home.resolve() == root.resolve() else pending_dir(home)


def _git_commit(root: Path) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=5)
        return out.stdout.strip() or "unknown"
    except Exception:
        return "unknown"


def _experiment_tags() -> dict[str, str]:
    """The DVC experiment a stage runs in (``dvc exp run``, queued or not; DVC sets both variables),
    so that the MLflow UI tells the runs of one experiment from another's: none for ``dvc repro``."""
    names = {"dvc_experiment": "DVC_EXP_NAME", "dvc_baseline_rev": "DVC_EXP_BASELINE_REV"}
    return {tag: os.environ[name] for tag, name in names.items() if os.environ.get(name)}


def _flatten(prefix: str, obj: Any, out: dict[str, str]) -> None:
    if isinstance(obj, dict):
        for key, value in obj.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), value, out)
    else:
        out[prefix] = str(list(obj) if isinstance(obj, tuple) else obj)[:6000]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _first_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"


class Tracker:
    """Context manager around one stage instance's run, written as a record on exit.

    ``run_id`` and the ids ``child`` returns name runs inside the record; ``flush`` maps them to
    MLflow's run ids (the runs carry them as the tag ``seba.record_run``).
    """

    def __init__(self, stage: str, run_name: str, params: dict | None = None,
                 tags: dict | None = None, root: Path | None = None):
        self.root = root or repo_root()
        self.stage = stage
        self.run_name = run_name
        self.params = params or {}
        self.tags = tags or {}
        self.run_id: str | None = None
        self.runs: dict[str, dict] = {}
        self.artifacts: list[tuple[Path, str | None]] = []

    def _new_run(self, name: str, tags: dict, parent: str | None) -> str:
        run_id = uuid.uuid4().hex
        self.runs[run_id] = {"id": run_id, "parent": parent, "name": name,
                             "tags": {k: str(v) for k, v in tags.items()}, "params": {}, "metrics": [],
                             "start": _now_ms(), "end": None, "status": None, "artifacts": []}
        return run_id

    # ------------------------------------------------------------------ runs
    def __enter__(self) -> "Tracker":
        self._start()
        return self

    def _start(self) -> None:
        tags = {"stage": self.stage, "git_commit": _git_commit(self.root), **_experiment_tags(), **self.tags}
        self.run_id = self._new_run(self.run_name, tags, None)
        self.log_params(self.params)

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.run_id is None:
            return
        status = "FINISHED" if exc_type is None else "FAILED"
        for run in self.runs.values():
            if run["end"] is None:
                run["end"], run["status"] = _now_ms(), status
        try:
            self._write()
        except Exception as error:  # a full or read-only disk: the stage's outputs matter, not this
            log(f"WARNING: MLflow record of '{self.run_name}' not written ({_first_line(error)}); "
                f"its DVC outputs are unaffected")

    def _write(self) -> None:
        """The record and copies of its artifacts, made visible in one rename, in the spool the
        pushes read: the workspace's, in a queued experiment's temporary copy (``home_spool``), with a
        marker ``<record>.sent`` in the copy's own spool (the dependency of its ``track`` stage); the
        copy's own spool if the workspace's cannot be written (``_wait`` moves it there later)."""
        name = f"{self.runs[self.run_id]['start']:013d}-{self.run_id}"
        local, home = pending_dir(self.root), home_spool(self.root)
        if home == local:
            self._write_to(local, name)
            return
        try:
            self._write_to(home, name)
        except (OSError, OutputError) as exc:
            log(f"WARNING: MLflow record of '{self.run_name}' not written to the workspace's {home} "
                f"({_first_line(exc)}); it waits in this temporary copy")
            self._write_to(local, name)
            return
        write_text(local / f"{name}{SENT}", f"{home / name}.json\n")

    def _write_to(self, spool: Path, name: str) -> None:
        spool.mkdir(parents=True, exist_ok=True)
        files = spool / f"{name}.files"
        artifacts = []
        for n, (path, artifact_path) in enumerate(self.artifacts):
            copy = files / str(n) / path.name
            copy.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if path.is_dir() else shutil.copy2)(path, copy)
            artifacts.append([str(copy.relative_to(spool)), artifact_path])
        self.runs[self.run_id]["artifacts"] = artifacts
        record = {"version": 1, "stage": self.stage, "runs": list(self.runs.values())}
        write_text(spool / f"{name}.json", json.dumps(record))

    def child(self, run_name: str, params: dict | None = None, tags: dict | None = None) -> str | None:
        """A nested run (e.g. one per seed); returns its id (None if tracking is off)."""
        if self.run_id is None:
            return None
        all_tags = {"mlflow.parentRunId": self.run_id, "stage": self.stage, **_experiment_tags(), **self.tags,
                    **(tags or {})}
        run_id = self._new_run(run_name, all_tags, self.run_id)
        if params:
            self.log_params(params, run_id)
        return run_id

    def end_child(self, run_id: str | None, failed: bool = False) -> None:
        if run_id is not None and run_id in self.runs:
            self.runs[run_id]["end"] = _now_ms()
            self.runs[run_id]["status"] = "FAILED" if failed else "FINISHED"

    # ------------------------------------------------------------------ logging
    def _run(self, run_id: str | None) -> dict | None:
        return self.runs.get(run_id or self.run_id) if (run_id or self.run_id) else None

    def log_params(self, params: dict, run_id: str | None = None) -> None:
        run = self._run(run_id)
        if run is not None:
            _flatten("", params, run["params"])

    def log_metrics(self, metrics: dict[str, float], run_id: str | None = None, step: int = 0) -> None:
        self.log_series({k: [(step, v)] for k, v in metrics.items()}, run_id)

    def log_series(self, series: dict[str, list[tuple[int, float]]], run_id: str | None = None) -> None:
        """Whole metric histories (e.g. a loss curve)."""
        run = self._run(run_id)
        if run is None:
            return
        now = _now_ms()
        run["metrics"].extend([key, float(value), int(step), now] for key, points in series.items()
                              for step, value in points)

    def log_artifacts(self, path: Path, artifact_path: str | None = None) -> None:
        """A file or directory, copied into the record when the stage ends."""
        if self.run_id is not None:
            self.artifacts.append((Path(path), artifact_path))


class NullTracker:
    """A tracker that records nothing: for running a stage's library calls outside the pipeline
    (benchmarks, checks) without an MLflow record."""

    def child(self, run_name: str, params: dict | None = None, tags: dict | None = None) -> None:
        return None

    def end_child(self, run_id: str | None, failed: bool = False) -> None:
        pass

    def log_params(self, params: dict, run_id: str | None = None) -> None:
        pass

    def log_metrics(self, metrics: dict[str, float], run_id: str | None = None, step: int = 0) -> None:
        pass

    def log_series(self, series: dict, run_id: str | None = None) -> None:
        pass

    def log_artifacts(self, path: Path, artifact_path: str | None = None) -> None:
        pass


# ---------------------------------------------------------------------- pushing records
def _search(client, experiment_id: str, filter_string: str) -> list:
    """Every active run of the experiment that ``filter_string`` selects, page by page."""
    runs, token = [], None
    while True:
        page = client.search_runs([experiment_id], filter_string, max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def _pushed_before(client, experiment_id: str, record: dict) -> list:
    """The runs of ``record`` already in the store: an earlier push of it stopped where it could not
    delete what it had made (``kill -9``, SIGTERM, a store lost part-way), or ended but was stopped
    before it removed the record. Found by the tag ``seba.record_run`` of its top runs and, below
    them, by ``mlflow.parentRunId``."""
    depth: dict[str, int] = {}  # parents come before their children in a record
    for run in record["runs"]:
        depth[run["id"]] = 0 if run["parent"] is None else depth[run["parent"]] + 1
    found = []
    for run in record["runs"]:
        if run["parent"] is None:
            found += _search(client, experiment_id, f"tags.`seba.record_run` = '{run['id']}'")
    parents = [run.info.run_id for run in found]
    for _ in range(max(depth.values(), default=0)):  # no search below the record's deepest runs
        if not parents:
            break
        children = [child for parent in parents
                    for child in _search(client, experiment_id, f"tags.`mlflow.parentRunId` = '{parent}'")]
        found += children
        parents = [run.info.run_id for run in children]
    return found


def _push(client, experiment_id: str, record: dict, spool: Path) -> dict[str, str]:
    from mlflow.entities import Metric, Param

    earlier = _pushed_before(client, experiment_id, record)
    if earlier:
        by_id = {run.data.tags.get("seba.record_run"): run for run in earlier}
        # each run is terminated after all its data and before the next one is made: all of them
        # there and terminated is a whole push, not to be made twice
        if (len(earlier) == len(record["runs"]) and set(by_id) == {run["id"] for run in record["runs"]}
                and all(run.info.status != "RUNNING" for run in earlier)):
            return {record_id: run.info.run_id for record_id, run in by_id.items()}
        for run in earlier:  # part of a push: the record is pushed whole again below
            client.delete_run(run.info.run_id)
    ids: dict[str, str] = {}
    try:
        for run in record["runs"]:  # parents come before their children
            tags = dict(run["tags"], **{"seba.record_run": run["id"]})
            if run["parent"] is not None:
                tags["mlflow.parentRunId"] = ids[run["parent"]]
            created = client.create_run(experiment_id, start_time=run["start"], tags=tags,
                                        run_name=run["name"])
            ids[run["id"]] = created.info.run_id
            params = [Param(k, v) for k, v in run["params"].items()]
            for i in range(0, len(params), _PARAMS_BATCH):
                client.log_batch(ids[run["id"]], params=params[i:i + _PARAMS_BATCH])
            metrics = [Metric(key, value, ts, step) for key, value, step, ts in run["metrics"]]
            for i in range(0, len(metrics), _BATCH):
                client.log_batch(ids[run["id"]], metrics=metrics[i:i + _BATCH])
            for local, artifact_path in run["artifacts"]:
                path = spool / local
                if path.is_dir():
                    client.log_artifacts(ids[run["id"]], str(path), artifact_path)
                else:
                    client.log_artifact(ids[run["id"]], str(path), artifact_path)
            client.set_terminated(ids[run["id"]], run["status"], end_time=run["end"])
    except BaseException:
        for run_id in ids.values():  # no half-pushed record: it is pushed whole next time
            try:
                client.delete_run(run_id)
            except Exception:
                pass
        raise
    return ids


def _remove_leftovers(spool: Path, age_seconds: float = 3600) -> None:
    """What a stage killed while writing its record left: a temporary file, or artifact copies
    without their record (an hour old, so that no stage is still writing them)."""
    cutoff = time.time() - age_seconds
    for path in [*spool.glob(".*.tmp"), *spool.glob("*.files")]:
        if path.suffix == ".files" and path.with_suffix(".json").exists():
            continue
        if path.stat().st_mtime < cutoff:
            shutil.rmtree(path) if path.is_dir() else path.unlink()


RUN_KEYS = ("id", "name", "parent", "start", "end", "status", "tags", "params", "metrics", "artifacts")


def _record_problem(record) -> str | None:
    """Why a stage record read from its file is not one that ``_push`` can push, or None."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not a stage record"
    runs = record.get("runs")
    if not isinstance(runs, list) or not runs:
        return "no runs in it"
    for run in runs:
        missing = [k for k in RUN_KEYS if not isinstance(run, dict) or k not in run]
        if missing:
            return f"a run without {', '.join(missing)}"
    return None


def _wait(records: list[Path], root: Path) -> str:
    """Where the records not pushed wait for the next push: where they are, or, in a queued
    experiment's temporary copy (which DVC deletes afterwards), the workspace's spool (DVC_ROOT),
    each record after its artifact copies and made visible there in one rename."""
    target = home_spool(root)
    if target == pending_dir(root):
        return f"{PENDING_DIR}/"
    try:
        target.mkdir(parents=True, exist_ok=True)
        for path in (path for path in records if path.parent != target):  # not the workspace's own
            if path.with_suffix(".files").exists():
                shutil.move(path.with_suffix(".files"), target / path.with_suffix(".files").name)
            with atomic_path(target / path.name) as tmp:
                shutil.copy2(path, tmp)
            path.unlink()
    except (OSError, OutputError) as exc:
        return f"{PENDING_DIR}/ of this temporary copy, which DVC deletes (not moved to {target}: {_first_line(exc)})"
    return f"{target}/"


def keep_for_workspace(root: Path | None = None) -> None:
    """A stage of a queued experiment failed: the experiment ends before its ``track`` stage, and
    DVC deletes its temporary copy. Its records are already in the workspace's spool, where the next
    push finds them (those written to the copy because the workspace's could not be, moved there
    now: ``_wait``); this says how many. In the workspace itself, nothing to do."""
    root = root or repo_root()
    local, home = pending_dir(root), home_spool(root)
    if home == local:
        return
    records = sorted(local.glob("*.json"))
    where = _wait(records, root)
    waiting = len(records) + sum(1 for marker in local.glob(f"*{SENT}")
                                 if (home / marker.name).with_suffix(".json").exists())
    if waiting:
        log(f"[track] {waiting} stage record(s) of this experiment wait in {where} for the next `track` stage "
            f"({RETRY})")


def flush(root: Path | None = None) -> dict[str, str]:
    """Push every waiting record into MLflow, oldest first; returns record run id -> MLflow run id.

    MLflow is imported only when there is something to push. One process at a time (a lock
    file); a failure is a warning, and the records not pushed stay for the next call (in a
    temporary copy, the workspace's: ``_wait``).
    """
    root = root or repo_root()
    ids: dict[str, str] = {}
    for spool in dict.fromkeys((pending_dir(root), home_spool(root))):  # a temporary copy's, then the workspace's
        ids.update(_flush(spool, root))
    return ids


def _flush(spool: Path, root: Path) -> dict[str, str]:
    if spool.is_dir():
        _remove_leftovers(spool)
    if not any(spool.glob("*.json")):
        return {}
    ids: dict[str, str] = {}
    with open(spool / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        records = sorted(spool.glob("*.json"))
        if not records:
            return ids
        try:
            os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
            os.environ.setdefault("DO_NOT_TRACK", "true")
            from mlflow.tracking import MlflowClient

            client = MlflowClient(tracking_uri=tracking_uri(root))
            experiment = client.get_experiment_by_name(EXPERIMENT)
            if experiment is None:
                artifacts = (store_root(root) / "mlartifacts").resolve().as_uri()  # not in a temporary copy
                experiment_id = client.create_experiment(EXPERIMENT, artifact_location=artifacts)
            else:
                experiment_id = experiment.experiment_id
        except Exception as exc:  # MLflow raises many kinds; none may stop the pipeline
            log(f"WARNING: MLflow start failed ({_first_line(exc)}); {len(records)} stage record(s) wait in "
                f"{_wait(records, root)} for the next `track` stage ({RETRY}); the DVC outputs are unaffected")
            return ids
        pushed = 0
        for n, path in enumerate(records):
            try:
                record = json.loads(path.read_text())
                problem = _record_problem(record)
                if problem:
                    raise ValueError(problem)
            except (OSError, UnicodeDecodeError, ValueError) as exc:  # damaged: never pushable, set aside
                aside = spool / UNREADABLE
                aside.mkdir(exist_ok=True)
                path.replace(aside / path.name)
                if path.with_suffix(".files").exists():
                    path.with_suffix(".files").replace(aside / path.with_suffix(".files").name)
                log(f"WARNING: the stage record {path.name} cannot be read ({_first_line(exc)}); moved to "
                    f"{PENDING_DIR}/{UNREADABLE}/ (delete it there), the other records are pushed")
                continue
            try:
                ids.update(_push(client, experiment_id, record, spool))
            except Exception as exc:
                log(f"WARNING: MLflow push of {path.name} failed ({_first_line(exc)}); {len(records) - n} stage "
                    f"record(s) wait in {_wait(records[n:], root)} for the next `track` stage ({RETRY}); the DVC "
                    f"outputs are unaffected")
                return ids
            shutil.rmtree(path.with_suffix(".files"), ignore_errors=True)
            path.unlink()
            pushed += 1
    log(f"[track] {pushed} stage run(s) pushed to MLflow ({tracking_uri(root)})")
    return ids


def main(argv: list[str] | None = None) -> None:
    """``seba-track``: push the stage records waiting in data/tracking/ into the MLflow store (what
    the ``track`` stage does); takes no options but ``--help``."""
    import argparse

    argparse.ArgumentParser(prog="seba-track", description=(
        "Push the stage records waiting in data/tracking/ into the MLflow store (MLFLOW_TRACKING_URI, "
        "default sqlite:///mlflow.db), as the pipeline's last stage, `track`, does. A record that "
        "cannot be pushed stays for the next run.")).parse_args(argv)
    flush()


if __name__ == "__main__":
    sys.exit(main())
