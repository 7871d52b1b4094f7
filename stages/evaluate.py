"""DVC stage `evaluate@<dataset>`: few-shot episodes for every ratio encoder and the ensemble."""

import argparse
import dataclasses

import numpy as np
import pandas as pd
import torch

from seba.cli import run_stage
from seba.config import load_params, ratio_tag
from seba.data import EncodedTable, load_split, scale
from seba.evaluate import ENSEMBLE, evaluate_in_groups, summarise
from seba.pretrain import encode
from seba.runtime import atomic_path, available_bytes, configure_threads, log, repo_root, select_device, write_json
from seba.tracking import Tracker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    args = parser.parse_args()
    params = load_params()
    cfg = params.evaluate
    root = repo_root()
    device = select_device(params.pretrain.device)
    configure_threads(params.pretrain.threads)
    table = EncodedTable.load(root / "data" / "processed" / f"{args.dataset}.npz")
    members = [ratio_tag(r) for r in params.pretrain.ratios]
    frames = []
    tracked = {"dataset": args.dataset, "seeds": list(params.seeds), "ratios": list(params.pretrain.ratios),
               "evaluate": dataclasses.asdict(cfg)}
    def load_seed(seed: int) -> tuple[torch.Tensor, np.ndarray]:
        """The ratio encoders' features [M, N, F] on the seed's test part, and its labels."""
        split = load_split(root / "data" / "splits" / f"{args.dataset}.npz", seed)
        X_test = scale(table, split.train)[split.test]
        features = []
        for ratio in params.pretrain.ratios:
            path = root / "data" / "models" / args.dataset / ratio_tag(ratio) / f"seed{seed}.pt"
            checkpoint = torch.load(path, map_location="cpu", weights_only=True)
            features.append(encode(checkpoint["encoder"], checkpoint["model_config"], X_test, device))
        return torch.stack(features), table.y[split.test]

    with Tracker("evaluate", f"evaluate {args.dataset}", params=tracked, tags={"dataset": args.dataset},
                 root=root) as tracker:
        for seed, episodes, seconds, together in evaluate_in_groups(
                load_seed, list(params.seeds), members, len(table.classes), cfg, args.dataset,
                budget_bytes=min(8 << 30, available_bytes(device) // 4)):
            frames.append(episodes)
            seed_summary = summarise(episodes)
            child = tracker.child(f"seed {seed}", params={"seed": seed}, tags={"seed": seed})
            tracker.log_metrics({**{f"{r.shot}shot_{r.member}_accuracy": r.accuracy
                                    for r in seed_summary.itertuples()}, "seconds": seconds}, child)
            tracker.log_series({  # one point per episode (step = episode index)
                f"{shot}shot_{member}_episode_accuracy": list(zip(group["episode"], group["accuracy"]))
                for (shot, member), group in episodes.groupby(["shot", "member"], sort=False)}, child)
            tracker.end_child(child)
            ens = seed_summary[seed_summary["member"] == ENSEMBLE]
            log(f"[evaluate {args.dataset} seed {seed}] " + ", ".join(
                f"{r.shot}-shot {r.accuracy:.2f}" for r in ens.itertuples()) +
                f" (ensemble; {seconds:.1f}s" + (f" per seed, {together} seeds together)" if together > 1 else ")"))
        episodes = pd.concat(frames, ignore_index=True)
        with atomic_path(root / "reports" / "episodes" / f"{args.dataset}.csv") as tmp:
            episodes.to_csv(tmp, index=False, float_format="%.4f")
        summary = summarise(episodes)
        metrics = {f"{r.shot}shot_{r.member}": round(float(r.accuracy), 4) for r in summary.itertuples()}
        metrics.update({f"{r.shot}shot_{r.member}_balanced": round(float(r.balanced_accuracy), 4)
                        for r in summary.itertuples()})
        write_json(root / "reports" / "metrics" / f"{args.dataset}.json", metrics)
        tracker.log_metrics(metrics)
        tracker.log_artifacts(root / "reports" / "episodes" / f"{args.dataset}.csv")


if __name__ == "__main__":
    run_stage("evaluate", main)
