"""The steps of one `evaluate@<dataset>` stage: the ratio encoders' features of every seed's
test part, and each seed's tracked metrics and log line; the dataset's episodes and metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch

from seba import paths
from seba.config import Params
from seba.data import EncodedTable, load_split, scale
from seba.evaluate import ENSEMBLE, summarise
from seba.pretrain import encode
from seba.runtime import atomic_path, log, write_json


def feature_loader(params: Params, dataset: str, table: EncodedTable, root: Path,
                   device: torch.device) -> Callable[[int], tuple[torch.Tensor, np.ndarray]]:
    """``load_seed(seed)``: the ratio encoders' features [M, N, F] on the seed's test part, and its labels."""

    def load_seed(seed: int) -> tuple[torch.Tensor, np.ndarray]:
        split = load_split(paths.splits(root, dataset), seed)
        X_test = scale(table, split.train)[split.test]
        features = []
        for ratio in params.pretrain.ratios:
            checkpoint = torch.load(paths.checkpoint(root, dataset, ratio, seed), map_location="cpu",
                                    weights_only=True)
            features.append(encode(checkpoint["encoder"], checkpoint["model_config"], X_test, device))
        return torch.stack(features), table.y[split.test]

    return load_seed


def record_seed(dataset: str, seed: int, episodes: pd.DataFrame, seconds: float, together: int, tracker) -> None:
    """One seed's tracked run (metrics, per-episode series) and its log line."""
    seed_summary = summarise(episodes)
    child = tracker.child(f"seed {seed}", params={"seed": seed}, tags={"seed": seed})
    tracker.log_metrics({**{f"{r.shot}shot_{r.member}_accuracy": r.accuracy
                            for r in seed_summary.itertuples()}, "seconds": seconds}, child)
    tracker.log_series({  # one point per episode (step = episode index)
        f"{shot}shot_{member}_episode_accuracy": list(zip(group["episode"], group["accuracy"]))
        for (shot, member), group in episodes.groupby(["shot", "member"], sort=False)}, child)
    tracker.end_child(child)
    ens = seed_summary[seed_summary["member"] == ENSEMBLE]
    log(f"[evaluate {dataset} seed {seed}] " + ", ".join(
        f"{r.shot}-shot {r.accuracy:.2f}" for r in ens.itertuples()) +
        f" (ensemble; {seconds:.1f}s" + (f" per seed, {together} seeds together)" if together > 1 else ")"))


def write_results(dataset: str, frames: list[pd.DataFrame], root: Path, tracker) -> None:
    """Every episode (reports/episodes/<dataset>.csv) and the summary metrics (reports/metrics)."""
    episodes = pd.concat(frames, ignore_index=True)
    with atomic_path(paths.episodes(root, dataset)) as tmp:
        episodes.to_csv(tmp, index=False, float_format="%.4f")
    summary = summarise(episodes)
    metrics = {f"{r.shot}shot_{r.member}": round(float(r.accuracy), 4) for r in summary.itertuples()}
    metrics.update({f"{r.shot}shot_{r.member}_balanced": round(float(r.balanced_accuracy), 4)
                    for r in summary.itertuples()})
    write_json(paths.metrics(root, dataset), metrics)
    tracker.log_metrics(metrics)
    tracker.log_artifacts(paths.episodes(root, dataset))
