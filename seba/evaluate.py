"""Few-shot evaluation of the ratio encoders and their ensemble on shared episodes."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import torch

from seba.classifiers import probe_logits, prototype_scores, train_probes
from seba.config import EvaluateConfig
from seba.episodes import sample_episodes
from seba.runtime import derive_seed

ENSEMBLE = "ensemble"


def support_hash(support_row: np.ndarray) -> str:
    """A short fingerprint of one episode's support positions: baselines are checked against it."""
    return hashlib.sha1(np.ascontiguousarray(support_row, dtype=np.int64).tobytes()).hexdigest()[:12]


def episode_scores(predictions: torch.Tensor, y_test: torch.Tensor, query: torch.Tensor,
                   n_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Accuracy and balanced accuracy over each episode's query rows.

    ``predictions`` is [K, E, N] (K members), ``query`` is [E, N] bool. Returns two [K, E].
    """
    correct = (predictions == y_test) & query
    accuracy = correct.sum(-1).float() / query.sum(-1).float()
    onehot = torch.nn.functional.one_hot(y_test, n_classes).bool()  # [N, C]
    per_class_total = (query[..., None] & onehot).sum(-2).float()  # [E, C]
    per_class_correct = (correct[..., None] & onehot).sum(-2).float()  # [K, E, C]
    present = per_class_total > 0
    recall = torch.where(present, per_class_correct / per_class_total.clamp(min=1),
                         per_class_correct.new_zeros(()))
    balanced = recall.sum(-1) / present.sum(-1).float()
    return accuracy, balanced


def head_scores(features: torch.Tensor, support: torch.Tensor, labels: torch.Tensor, n_classes: int, shot: int,
                cfg: EvaluateConfig, probe_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Class scores [M, E, N, C] of every member's few-shot head on a set of episodes: cosine
    prototypes for the prototype shots, else a linear probe per (member, episode) initialised
    from ``probe_seed``; and the probe iterations used [M, E] (0 for prototypes)."""
    if shot in cfg.prototype_shots:
        scores = prototype_scores(features, support, labels, n_classes)
        return scores, torch.zeros(scores.shape[:2], dtype=torch.long)
    generator = torch.Generator().manual_seed(probe_seed)
    weight, bias, iterations = train_probes(features, support, labels, n_classes, lr=cfg.probe_lr,
                                            max_iters=cfg.probe_max_iters, patience=cfg.probe_patience,
                                            generator=generator)
    with torch.no_grad():
        return probe_logits(features, weight, bias), iterations


def evaluate_members(features: torch.Tensor, member_names: list[str], y_test: np.ndarray,
                     n_classes: int, seed: int, cfg: EvaluateConfig, dataset: str = "") -> pd.DataFrame:
    """All shots x episodes for the members ([M, N, F] features on the test part) and their
    ensemble (mean of logits / cosine similarities). One row per seed, shot, episode, member."""
    y = torch.as_tensor(y_test, dtype=torch.long, device=features.device)
    frames = []
    for shot in cfg.shots:
        episodes = sample_episodes(y_test, n_classes, shot, cfg.episodes, seed, dataset)
        support = torch.as_tensor(episodes.support, device=features.device)
        labels = torch.as_tensor(episodes.support_labels, device=features.device)
        query = torch.as_tensor(episodes.query, device=features.device)
        scores, iterations = head_scores(features, support, labels, n_classes, shot, cfg,
                                         derive_seed(seed, shot, "probe"))
        with torch.no_grad():
            scores = torch.cat([scores, scores.mean(0, keepdim=True)])  # ensemble appended
            predictions = scores.argmax(-1)  # [M + 1, E, N]
            accuracy, balanced = episode_scores(predictions, y, query, n_classes)
        names = list(member_names) + [ENSEMBLE]
        iters = torch.cat([iterations.cpu(), torch.full((1, cfg.episodes), -1)]).numpy()
        hashes = [support_hash(row) for row in episodes.support]
        for k, name in enumerate(names):
            frames.append(pd.DataFrame({
                "seed": seed, "shot": shot, "episode": np.arange(cfg.episodes), "member": name,
                "accuracy": 100.0 * accuracy[k].cpu().numpy(),
                "balanced_accuracy": 100.0 * balanced[k].cpu().numpy(),
                "probe_iterations": iters[k],
                "support_hash": hashes,
            }))
    return pd.concat(frames, ignore_index=True)


def summarise(episodes: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds x episodes for each shot and member."""
    grouped = episodes.groupby(["shot", "member"], sort=False)
    out = grouped.agg(accuracy=("accuracy", "mean"), accuracy_std=("accuracy", "std"),
                      balanced_accuracy=("balanced_accuracy", "mean"),
                      seeds=("seed", "nunique"), episodes=("accuracy", "size"))
    return out.reset_index()
