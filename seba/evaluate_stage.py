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
from seba.errors import ConfigError
from seba.evaluate import ENSEMBLE, summarise
from seba.finetune import FineTuneInputs
from seba.pretrain import encode, normalised_input
from seba.runtime import atomic_path, log, write_json


def feature_loader(params: Params, dataset: str, table: EncodedTable, root: Path,
                   device: torch.device) -> Callable[[int], tuple[torch.Tensor, np.ndarray]]:
    """``load_seed(seed)``: the ratio encoders' features [M, N, F] on the seed's test part, its
    labels, and (``evaluate.head: finetune``) the encoders and test rows to fine-tune with."""

    def load_seed(seed: int) -> tuple[torch.Tensor, np.ndarray]:
        split = load_split(paths.splits(root, dataset), seed)
        inputs: dict[bool, np.ndarray] = {}  # the test rows as each encoder was trained (pretrain.normalise)
        features, checkpoints = [], []
        for ratio in params.pretrain.ratios:
            checkpoint = torch.load(paths.checkpoint(root, dataset, ratio, seed), map_location="cpu",
                                    weights_only=True)
            normalise = normalised_input(checkpoint)
            if normalise not in inputs:
                inputs[normalise] = scale(table, split.train, normalise)[split.test]
            features.append(encode(checkpoint["encoder"], checkpoint["model_config"], inputs[normalise], device))
            checkpoints.append(checkpoint)
        if params.evaluate.head != "finetune":
            return torch.stack(features), table.y[split.test]
        if len(inputs) > 1:
            raise ConfigError(f"evaluate {dataset}: the finetune head needs encoders trained on one input "
                              f"(pretrain.normalise differs between the ratios' checkpoints)")
        x = torch.as_tensor(next(iter(inputs.values())), dtype=torch.float32, device=device)
        return torch.stack(features), table.y[split.test], FineTuneInputs(checkpoints, x)

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
