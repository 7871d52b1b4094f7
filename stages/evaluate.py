"""DVC stage `evaluate@<dataset>`: few-shot episodes for every ratio encoder and the ensemble."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's seba before an installed one (docs/ablations.md)

from seba.core.cli import parse_args, run_stage  # first: hands the stage to a warm worker (seba/core/worker.py)

import dataclasses

from seba.core import paths
from seba.core.config import params_for_dataset
from seba.core.data import EncodedTable
from seba.evaluate_stage import evaluate_all, record_seed, write_results
from seba.executor import executor_for, stage_device
from seba.core.runtime import configure_threads, repo_root
from seba.core.tracking import Tracker


def main() -> None:
    args = parse_args(__doc__, dataset=str)
    params, root = params_for_dataset(args.dataset), repo_root()
    executor = executor_for(params.executor, params.pretrain.device)  # ray: connected (or a ConfigError) first
    device = stage_device(params.pretrain.device, executor)  # ray: the tasks pick theirs
    configure_threads(params.pretrain.threads)
    table = EncodedTable.load(paths.processed(root, args.dataset))
    tracked = {"dataset": args.dataset, "seeds": list(params.seeds), "ratios": list(params.ratios),
               "evaluate": dataclasses.asdict(params.evaluate), "executor": params.executor.kind}
    frames = []
    with Tracker("evaluate", f"evaluate {args.dataset}", params=tracked, tags={"dataset": args.dataset},
                 root=root) as tracker:
        for seed, episodes, seconds, together in evaluate_all(params, args.dataset, table, root, device, executor):
            frames.append(episodes)
            record_seed(args.dataset, seed, episodes, seconds, together, tracker)
        write_results(args.dataset, frames, root, tracker)


if __name__ == "__main__":
    run_stage("evaluate", main)
