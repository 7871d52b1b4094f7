"""DVC stage `baseline@<method>-<dataset>`: one baseline on SeBA's episodes of one dataset."""

import argparse
import dataclasses
import time

import pandas as pd
import torch

from seba.baselines import METHODS, RepresentationMethod
from seba.cli import run_stage
from seba.config import load_params
from seba.data import EncodedTable, check_shots, load_split, scale
from seba.episodes import sample_episodes
from seba.errors import ConfigError
from seba.evaluate import episode_scores, summarise, support_hash
from seba.runtime import atomic_path, configure_threads, log, repo_root, select_device
from seba.tracking import Tracker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--method", required=True)
    parser.add_argument("--dataset", required=True)
    args = parser.parse_args()
    params = load_params()
    if args.method not in METHODS:
        raise ConfigError(f"unknown baseline '{args.method}'; known: {', '.join(METHODS)}")
    cfg = getattr(params.baselines, args.method)
    root = repo_root()
    device = select_device(params.pretrain.device)
    configure_threads(params.pretrain.threads)
    table = EncodedTable.load(root / "data" / "processed" / f"{args.dataset}.npz")
    splits = {seed: load_split(root / "data" / "splits" / f"{args.dataset}.npz", seed) for seed in params.seeds}
    for seed, split in splits.items():
        check_shots(table.y[split.test], table.classes, params.evaluate.shots, args.dataset, seed)
    n_classes = len(table.classes)
    frames = []
    tracked = {"method": args.method, "dataset": args.dataset, "seeds": list(params.seeds),
               "shots": list(params.evaluate.shots), "episodes": params.evaluate.episodes,
               args.method: dataclasses.asdict(cfg)}
    with Tracker("baseline", f"baseline {args.method} {args.dataset}", params=tracked,
                 tags={"dataset": args.dataset, "method": args.method}, root=root) as tracker:
        for seed, split in splits.items():
            start = time.perf_counter()
            X = scale(table, split.train)
            cls = METHODS[args.method]
            method = (cls(cfg, seed, device, params.evaluate) if issubclass(cls, RepresentationMethod)
                      else cls(cfg, seed, device))
            method.fit(X[split.train], X[split.val], table.groups)
            if getattr(method, "log", None):
                log(f"[baseline {args.method} {args.dataset} seed {seed}] trained: {method.log}")
            x_test, y_test = X[split.test], table.y[split.test]
            y = torch.as_tensor(y_test, device=device)
            for shot in params.evaluate.shots:
                episodes = sample_episodes(y_test, n_classes, shot, params.evaluate.episodes, seed, args.dataset)
                scores = method.scores(x_test, episodes.support, episodes.support_labels, n_classes, shot)
                predictions = scores.to(device).argmax(-1)[None]  # [1, E, N]
                accuracy, balanced = episode_scores(predictions, y, torch.as_tensor(episodes.query, device=device),
                                                    n_classes)
                frames.append(pd.DataFrame({
                    "seed": seed, "shot": shot, "episode": range(params.evaluate.episodes),
                    "member": args.method, "accuracy": 100.0 * accuracy[0].cpu().numpy(),
                    "balanced_accuracy": 100.0 * balanced[0].cpu().numpy(),
                    "support_hash": [support_hash(row) for row in episodes.support]}))
            seed_summary = summarise(pd.concat([f for f in frames if f["seed"].iat[0] == seed]))
            seconds = time.perf_counter() - start
            child = tracker.child(f"seed {seed}", params={"seed": seed}, tags={"seed": seed})
            tracker.log_metrics({**{f"{r.shot}shot_accuracy": r.accuracy for r in seed_summary.itertuples()},
                                 "seconds": seconds}, child)
            tracker.end_child(child)
            log(f"[baseline {args.method} {args.dataset} seed {seed}] " + ", ".join(
                f"{r.shot}-shot {r.accuracy:.2f}" for r in seed_summary.itertuples()) + f" ({seconds:.1f}s)")
        episodes = pd.concat(frames, ignore_index=True)
        out = root / "reports" / "episodes" / args.method / f"{args.dataset}.csv"
        with atomic_path(out) as tmp:
            episodes.to_csv(tmp, index=False, float_format="%.4f")
        summary = summarise(episodes)
        tracker.log_metrics({f"{r.shot}shot_accuracy": float(r.accuracy) for r in summary.itertuples()})
        tracker.log_artifacts(out)


if __name__ == "__main__":
    run_stage("baseline", main)
