"""DVC stage `analysis` (analyses/dvc.yaml): the paper's two k-NN analyses on every table in
params, from the processed tables, the splits and the trained encoders (seba/analysis.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's seba before an installed one (docs/ablations.md)

from seba.core.cli import run_stage  # first: hands the stage to a warm worker (seba/core/worker.py)

import dataclasses

from seba.core import paths
from seba.analysis import analyse_dataset, check_inputs, write_report
from seba.core.config import load_params, read_params_file
from seba.core.runtime import configure_threads, repo_root
from seba.core.tracking import Tracker


def main() -> None:
    params = load_params()
    root = repo_root()
    configure_threads(params.pretrain.threads)
    check_inputs(params, root)  # all of them, before any table is analysed
    fractions, consistency = [], []
    with Tracker("analysis", "analysis", params={"analysis": dataclasses.asdict(params.analysis), "seeds": list(params.seeds),
                                                 "datasets": list(params.datasets)}, root=root) as tracker:
        for dataset in params.datasets:
            a, b = analyse_dataset(params, dataset, root)
            fractions += a
            consistency += b
        raw = read_params_file(root / "params.yaml")
        table = write_report(fractions, consistency, params, raw, paths.analysis_reports(root))
        tracker.log_metrics({f"{r.dataset}_batch_best_k": r.batch_best_k for r in table.itertuples()})
        tracker.log_artifacts(paths.analysis_reports(root), "analysis")


if __name__ == "__main__":
    run_stage("analysis", main)
