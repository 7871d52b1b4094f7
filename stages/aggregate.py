"""DVC stage `aggregate`: results tables, summary metrics and figures for the datasets in params."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's seba before an installed one (docs/ablations.md)

from seba.core.cli import run_stage  # first: hands the stage to a warm worker (seba/core/worker.py)

import dataclasses

from seba.core import paths
from seba.core.config import load_params
from seba.report import write_reports
from seba.core.runtime import log, repo_root
from seba.core.tracking import Tracker


def main() -> None:
    params = load_params()
    root = repo_root()
    metrics, run_info = write_reports(params, root)
    log(paths.report(root, "results.md").read_text())
    with Tracker("aggregate", "aggregate", params={"datasets": list(params.datasets), **run_info,
                 "pretrain": dataclasses.asdict(params.pretrain)}, root=root) as tracker:
        tracker.log_metrics(metrics)
        for name in ("results.md", "results.csv", "comparison.csv", "summary.json", "params_used.yaml"):
            tracker.log_artifacts(paths.report(root, name))
        tracker.log_artifacts(paths.report(root, "figures"), "figures")


if __name__ == "__main__":
    run_stage("aggregate", main)
