"""DVC stage `baseline@<method>-<dataset>`: one baseline on SeBA's episodes of one dataset."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's seba before an installed one (docs/ablations.md)

from seba.core.cli import parse_args, run_stage  # first: hands the stage to a warm worker (seba/core/worker.py)

from seba.core import paths
from seba.baselines.base import evaluate_baseline, stage_inputs, stage_method, tracked_params
from seba.core.config import params_for_dataset
from seba.evaluate import summarise
from seba.executor import executor_for, stage_device
from seba.core.runtime import atomic_path, configure_threads, repo_root
from seba.core.tracking import Tracker


def main() -> None:
    args = parse_args(__doc__, method=str, dataset=str)
    params, root = params_for_dataset(args.dataset), repo_root()
    method, cfg = stage_method(params.baselines, args.method)  # both checked first, the method listed
    executor = executor_for(params.executor, params.pretrain.device)  # ray: connected (or a ConfigError) first
    device = stage_device(params.pretrain.device, executor)  # ray: the tasks pick theirs
    configure_threads(params.pretrain.threads)
    table, splits = stage_inputs(params, args.dataset, root)
    tracked = tracked_params(params, args.method, args.dataset, cfg)
    with Tracker("baseline", f"baseline {args.method} {args.dataset}", params=tracked,
                 tags={"dataset": args.dataset, "method": args.method}, root=root) as tracker:
        episodes = evaluate_baseline(method, cfg, table, splits, params.evaluate, args.dataset, device, tracker,
                                     executor, params.pretrain.device)
        with atomic_path(out := paths.episodes(root, args.dataset, args.method)) as tmp:
            episodes.to_csv(tmp, index=False, float_format="%.4f")
        tracker.log_metrics({f"{r.shot}shot_accuracy": float(r.accuracy) for r in summarise(episodes).itertuples()})
        tracker.log_artifacts(out)


if __name__ == "__main__":
    run_stage("baseline", main)
