"""Few-shot evaluation of the ratio encoders and their ensemble on shared episodes."""

from __future__ import annotations

import hashlib
import time
from typing import Callable, Iterator

import numpy as np
import pandas as pd
import torch

from seba.classifiers import nearest_neighbour_scores, probe_init, probe_logits, prototype_scores, train_probes
from seba.core.config import HEADS, EvaluateConfig
from seba.episodes import sample_episodes
from seba.core.runtime import derive_seed

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


def head_scores(features: list[torch.Tensor], supports: list[torch.Tensor], labels: torch.Tensor, n_classes: int,
                shot: int, cfg: EvaluateConfig, probe_seeds: list[int], head: str = "linear",
                finetune: list[Callable] | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """For each seed (its members' features [M, N, F] and its episodes' support [E, S]), the class
    scores [M, E, N, C] of every member's few-shot head and the iterations its training used
    [M, E] (0 for heads that do not train): cosine prototypes for the prototype shots, else
    ``head``: a linear probe per (member, episode) initialised from the seed's ``probe_seed``
    (the paper's), cosine or Euclidean prototypes, 1-NN to single support rows, or fine-tuning
    the encoder with the probe (``finetune``: per seed, ``tune(support, labels, n_classes,
    probe_init's pair, cfg)``, e.g. ``seba.finetune.FineTuneInputs``). The probes of
    all the seeds train together (one loop; each probe's path is its own), which on a GPU saves
    a loop of small kernels per seed."""
    if shot in cfg.prototype_shots:
        head = "prototype_cosine"
    if head not in HEADS:
        raise ValueError(f"unknown few-shot head {head!r}; allowed: {', '.join(HEADS)}")
    if head in ("prototype_cosine", "prototype_euclidean", "nn_cosine", "nn_euclidean"):
        kind, metric = head.split("_")
        score = prototype_scores if kind == "prototype" else nearest_neighbour_scores
        out = []
        for f, support in zip(features, supports):
            scores = score(f, support, labels, n_classes, metric)
            out.append((scores, torch.zeros(scores.shape[:2], dtype=torch.long)))
        return out
    M, E = features[0].shape[0], supports[0].shape[0]
    inits = [probe_init(M, E, features[0].shape[-1], n_classes, torch.Generator().manual_seed(s))
             for s in probe_seeds]
    if head == "finetune":
        if finetune is None or len(finetune) != len(features):
            raise ValueError("the finetune head needs every seed's encoders (FineTuneInputs)")
        return [tune(support, labels, n_classes, init, cfg) for tune, support, init in zip(finetune, supports, inits)]
    weight, bias, iterations = train_probes(
        torch.cat(features), torch.cat([support.expand(M, -1, -1) for support in supports]), labels, n_classes,
        lr=cfg.probe_lr, max_iters=cfg.probe_max_iters, patience=cfg.probe_patience,
        early_stop=cfg.probe_stop == "train_accuracy",
        init=(torch.cat([w for w, _ in inits]), torch.cat([b for _, b in inits])))
    with torch.no_grad():
        return [(probe_logits(f, weight[i * M:(i + 1) * M], bias[i * M:(i + 1) * M]), iterations[i * M:(i + 1) * M])
                for i, f in enumerate(features)]


def evaluate_seeds(features: list[torch.Tensor], member_names: list[str], y_tests: list[np.ndarray],
                   n_classes: int, seeds: list[int], cfg: EvaluateConfig, dataset: str = "",
                   finetune: list[Callable] | None = None) -> list[pd.DataFrame]:
    """``evaluate_members`` for several seeds at once (each seed's members' [M, N, F] features on
    its test part, the seeds' test parts of one size): one frame per seed, the frame the seed
    gets alone (the probes of all seeds train together). The shots not in
    ``cfg.prototype_shots`` use ``cfg.head`` (``finetune``: each seed's fine-tuning callable)."""
    frames: list[list[pd.DataFrame]] = [[] for _ in seeds]
    device = features[0].device
    for shot in cfg.shots:
        episodes = [sample_episodes(y, n_classes, shot, cfg.episodes, seed, dataset) for y, seed in zip(y_tests, seeds)]
        labels = torch.as_tensor(episodes[0].support_labels, device=device)  # class-major: every seed's
        supports = [torch.as_tensor(e.support, device=device) for e in episodes]
        heads = head_scores(features, supports, labels, n_classes, shot, cfg,
                            [derive_seed(seed, shot, "probe") for seed in seeds], cfg.head, finetune)
        for i, (seed, y_test, e, (scores, iterations)) in enumerate(zip(seeds, y_tests, episodes, heads)):
            y = torch.as_tensor(y_test, dtype=torch.long, device=device)
            query = torch.as_tensor(e.query, device=device)
            with torch.no_grad():
                scores = torch.cat([scores, scores.mean(0, keepdim=True)])  # ensemble appended
                predictions = scores.argmax(-1)  # [M + 1, E, N]
                accuracy, balanced = episode_scores(predictions, y, query, n_classes)
            names = list(member_names) + [ENSEMBLE]
            iters = torch.cat([iterations.cpu(), torch.full((1, cfg.episodes), -1)]).numpy()
            hashes = [support_hash(row) for row in e.support]
            for k, name in enumerate(names):
                frames[i].append(pd.DataFrame({
                    "seed": seed, "shot": shot, "episode": np.arange(cfg.episodes), "member": name,
                    "accuracy": 100.0 * accuracy[k].cpu().numpy(),
                    "balanced_accuracy": 100.0 * balanced[k].cpu().numpy(),
                    "probe_iterations": iters[k],
                    "support_hash": hashes,
                }))
    return [pd.concat(f, ignore_index=True) for f in frames]


def evaluate_members(features: torch.Tensor, member_names: list[str], y_test: np.ndarray,
                     n_classes: int, seed: int, cfg: EvaluateConfig, dataset: str = "",
                     finetune: Callable | None = None) -> pd.DataFrame:
    """All shots x episodes for the members ([M, N, F] features on the test part) and their
    ensemble (mean of logits / cosine similarities). One row per seed, shot, episode, member."""
    return evaluate_seeds([features], member_names, [y_test], n_classes, [seed], cfg, dataset,
                          None if finetune is None else [finetune])[0]


def evaluation_bytes(features: torch.Tensor, n_classes: int, episodes: int) -> int:
    """Bytes one seed holds while its group is evaluated: its features [M, N, F] and a shot's class
    scores [M, episodes, N, classes], which every seed of a group holds at once (on a table of
    many classes the scores are the larger by far: devnagari's, 46 classes, ~18 times its features)."""
    members, rows = features.shape[:2]
    return features.element_size() * (features.numel() + members * episodes * rows * n_classes)


def evaluate_in_groups(load_seed: Callable[[int], tuple], seeds: list[int],
                       member_names: list[str], n_classes: int, cfg: EvaluateConfig, dataset: str,
                       budget_bytes: int) -> Iterator[tuple[int, pd.DataFrame, float, int]]:
    """``evaluate_seeds`` over groups of consecutive seeds whose features (``load_seed(seed)``:
    [M, N, F] features, test labels and, optionally, the seed's fine-tuning callable) and class
    scores (``evaluation_bytes``) fit ``budget_bytes`` together. Yields, in seed order, (seed, its
    frame, seconds per seed of its group, seeds in the group)."""
    group: list[tuple] = []
    start = time.perf_counter()

    def run() -> Iterator[tuple[int, pd.DataFrame, float, int]]:
        tuners = [g[3] for g in group]
        frames = evaluate_seeds([g[1] for g in group], member_names, [g[2] for g in group], n_classes,
                                [g[0] for g in group], cfg, dataset, None if None in tuners else tuners)
        seconds = (time.perf_counter() - start) / len(group)
        for g, frame in zip(group, frames):
            yield g[0], frame, seconds, len(group)

    for seed in seeds:
        features, y_test, *rest = load_seed(seed)
        if group and (features.shape != group[0][1].shape
                      or (len(group) + 1) * evaluation_bytes(features, n_classes, cfg.episodes) > budget_bytes):
            yield from run()
            group, start = [], time.perf_counter()
        group.append((seed, features, y_test, rest[0] if rest else None))
    if group:
        yield from run()


def summarise(episodes: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds x episodes for each shot and member."""
    grouped = episodes.groupby(["shot", "member"], sort=False)
    out = grouped.agg(accuracy=("accuracy", "mean"), accuracy_std=("accuracy", "std"),
                      balanced_accuracy=("balanced_accuracy", "mean"),
                      seeds=("seed", "nunique"), episodes=("accuracy", "size"))
    return out.reset_index()
