"""DVC stage `baseline@<method>-<dataset>`: one baseline on SeBA's episodes of one dataset."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's seba before an installed one (docs/ablations.md)

from seba.cli import parse_args, run_stage  # first: hands the stage to a warm worker (seba/worker.py)

import dataclasses

from seba import paths
from seba.baselines.base import evaluate_baseline, load_method, method_config
from seba.config import load_params
from seba.data import EncodedTable, check_shots, load_split
from seba.evaluate import summarise
from seba.executor import executor_for, stage_device
from seba.runtime import atomic_path, configure_threads, repo_root
from seba.tracking import Tracker


def main() -> None:
    args = parse_args(__doc__, method=str, dataset=str)
    params = load_params()
    method = load_method(args.method)  # (a ConfigError for an unknown one)
    cfg, root = method_config(params.baselines, args.method), repo_root()
    executor = executor_for(params.executor, params.pretrain.device)  # ray: connected (or a ConfigError) first
    device = stage_device(params.pretrain.device, executor)  # ray: the tasks pick theirs
    configure_threads(params.pretrain.threads)
    table = EncodedTable.load(paths.processed(root, args.dataset))
    splits = {seed: load_split(paths.splits(root, args.dataset), seed) for seed in params.seeds}
    for seed, split in splits.items():
        check_shots(table.y[split.test], table.classes, params.evaluate.shots, args.dataset, seed)
    tracked = {"method": args.method, "dataset": args.dataset, "seeds": list(params.seeds),
               "shots": list(params.evaluate.shots), "episodes": params.evaluate.episodes,
               args.method: dataclasses.asdict(cfg), "executor": params.executor.kind}
    with Tracker("baseline", f"baseline {args.method} {args.dataset}", params=tracked,
                 tags={"dataset": args.dataset, "method": args.method}, root=root) as tracker:
        episodes = evaluate_baseline(method, cfg, table, splits, params.evaluate, args.dataset, device, tracker,
                                     executor, params.pretrain.device)
        with atomic_path(paths.episodes(root, args.dataset, args.method)) as tmp:
            episodes.to_csv(tmp, index=False, float_format="%.4f")
        tracker.log_metrics({f"{r.shot}shot_accuracy": float(r.accuracy) for r in summarise(episodes).itertuples()})
        tracker.log_artifacts(paths.episodes(root, args.dataset, args.method))


if __name__ == "__main__":
    run_stage("baseline", main)
