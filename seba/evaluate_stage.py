"""The steps of one `evaluate@<dataset>` stage: the ratio encoders' features of every seed's
test part, and each seed's tracked metrics and log line; the dataset's episodes and metrics."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pandas as pd
import torch

from seba.core import paths
from seba.core.config import Params, ratio_tag
from seba.core.data import EncodedTable, load_split, reading, scale
from seba.core.errors import ConfigError, DataError
from seba.evaluate import ENSEMBLE, evaluate_in_groups, summarise
from seba.executor import chunks
from seba.finetune import FineTuneInputs
from seba.pretrain import encode, load_checkpoint, normalised_input
from seba.core.runtime import atomic_path, available_bytes, log, select_device, write_json


@dataclass
class SeedInputs:
    """What one seed's evaluation reads from disk: each ratio encoder's checkpoint, the seed's test
    rows as each encoder was trained on them (by ``pretrain.normalise``), and their labels."""
    checkpoints: list[dict]
    inputs: dict[bool, np.ndarray]
    y_test: np.ndarray


def seed_inputs(params: Params, dataset: str, table: EncodedTable, root: Path, seed: int) -> SeedInputs:
    split = load_split(paths.splits(root, dataset), seed)
    inputs: dict[bool, np.ndarray] = {}
    checkpoints = []
    for ratio in params.ratios:
        checkpoint = load_checkpoint(root, dataset, ratio, seed)
        normalise = normalised_input(checkpoint)
        if normalise not in inputs:
            inputs[normalise] = scale(table, split.train, normalise)[split.test]
        checkpoints.append(checkpoint)
    return SeedInputs(checkpoints, inputs, table.y[split.test])


def seed_features(seed_input: SeedInputs, head: str, device: torch.device, dataset: str) -> tuple:
    """The ratio encoders' features [M, N, F] on the seed's test part, its labels, and (``head``
    finetune) the encoders and test rows to fine-tune with."""
    features = [encode(c["encoder"], c["model_config"], seed_input.inputs[normalised_input(c)], device)
                for c in seed_input.checkpoints]
    if head != "finetune":
        return torch.stack(features), seed_input.y_test
    if len(seed_input.inputs) > 1:
        raise ConfigError(f"evaluate {dataset}: the finetune head needs encoders trained on one input "
                          f"(pretrain.normalise differs between the ratios' checkpoints)")
    x = torch.as_tensor(next(iter(seed_input.inputs.values())), dtype=torch.float32, device=device)
    return torch.stack(features), seed_input.y_test, FineTuneInputs(seed_input.checkpoints, x)


def feature_loader(params: Params, dataset: str, table: EncodedTable, root: Path,
                   device: torch.device) -> Callable[[int], tuple]:
    """``load_seed(seed)``: ``seed_features`` of the seed's files."""

    def load_seed(seed: int) -> tuple:
        return seed_features(seed_inputs(params, dataset, table, root, seed), params.evaluate.head, device, dataset)

    return load_seed


def feature_budget(device: torch.device) -> int:
    """Bytes of features and class scores evaluated together (``seba.evaluate.evaluation_bytes``):
    a quarter of the device's free memory, at most 8 GiB."""
    return min(8 << 30, available_bytes(device) // 4)


def evaluate_chunk(seeds: list[tuple[int, SeedInputs]], member_names: list[str], n_classes: int, cfg, dataset: str,
                   device_setting: str) -> list[tuple[int, pd.DataFrame, float, int]]:
    """The seeds of one Ray task (seba.executor), evaluated on its node's device: what
    ``evaluate_in_groups`` yields for them (each seed's frame is the frame it gets alone)."""
    device = select_device(device_setting)
    by_seed = dict(seeds)
    return list(evaluate_in_groups(lambda seed: seed_features(by_seed[seed], cfg.head, device, dataset),
                                   [seed for seed, _ in seeds], member_names, n_classes, cfg, dataset,
                                   budget_bytes=feature_budget(device)))


def check_pretrained(params: Params, dataset: str, root: Path) -> None:
    """Every ratio's pretrain stage finished for every seed: its log.json, written last, lists them
    (a stage stopped part-way leaves some seeds' checkpoints but no log.json)."""
    for ratio in params.ratios:
        stage = f"pretrain@{dataset}-{ratio}"
        path = paths.training_log(root, dataset, ratio)
        shown = path.relative_to(root) if path.is_relative_to(root) else path
        if not path.is_file():
            raise DataError(f"{shown} does not exist: {stage} has not finished (it writes log.json last); run it "
                            f"(`dvc repro {stage}`)")
        with reading(shown, stage):
            trained = json.loads(path.read_text())["seeds"]
        missing = [s for s in params.seeds if str(s) not in trained]
        if missing:
            raise DataError(f"{shown}: {stage} trained seeds {', '.join(sorted(trained, key=int)) or 'none'}, not "
                            f"{', '.join(map(str, missing))} of params.yaml's seeds: rerun it (`dvc repro {stage}`)")


def evaluate_all(params: Params, dataset: str, table: EncodedTable, root: Path, device: torch.device,
                 executor=None) -> Iterator[tuple[int, pd.DataFrame, float, int]]:
    """(seed, its episodes, seconds per seed, seeds evaluated together) for every seed, in order:
    here, in groups that fit memory, or (a Ray ``executor``) as Ray tasks of seed chunks, each
    task reading nothing but what it is sent."""
    check_pretrained(params, dataset, root)
    seeds, members = list(params.seeds), [ratio_tag(r) for r in params.ratios]
    cfg = params.evaluate
    if note := cfg.unevaluated_prototype_shots():
        log(f"[evaluate {dataset}] WARNING {note} (cosine prototypes serve "
            f"{', '.join(f'{s}-shot' for s in cfg.shots if s in cfg.prototype_shots) or 'no shot'}, evaluate.head "
            f"'{cfg.head}' the others)")
    if executor is None:
        yield from evaluate_in_groups(feature_loader(params, dataset, table, root, device), seeds, members,
                                      len(table.classes), params.evaluate, dataset,
                                      budget_bytes=feature_budget(device))
        return
    tasks, gpus = executor.plan(len(seeds))
    parts = chunks(seeds, tasks)
    log(f"[evaluate {dataset}] {len(seeds)} seed{'s' if len(seeds) > 1 else ''} as {len(parts)} Ray "
        f"task{'s' if len(parts) > 1 else ''}")
    pieces = (([(seed, seed_inputs(params, dataset, table, root, seed)) for seed in part], members,
               len(table.classes), params.evaluate, dataset, params.pretrain.device) for part in parts)
    labels = [f"[evaluate {dataset} seeds {part[0]}..{part[-1]}]" for part in parts]
    for results, placement in executor.map(evaluate_chunk, pieces, labels, gpus):
        yield from results


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
