"""What every baseline shares: the ``Method`` interface (see ``seba.baselines``), the
``RepresentationMethod`` that evaluates a self-supervised encoder with SeBA's own heads, SeBA's
early-stopping training loop, ``load_method``, which imports one method's module,
``method_config``, which checks a method's section of params.yaml against its params class, and
``evaluate_baseline``, which scores a method on SeBA's episodes (the `baseline` stage)."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import time
from typing import Annotated

import numpy as np
import pandas as pd
import torch

from seba.baselines import METHODS
from seba.core.config import BaselinesConfig, baseline_names
from seba.core import paths
from seba.core.data import EncodedTable, check_shots, load_split, scale
from seba.episodes import sample_episodes
from seba.core.errors import ConfigError, DataError, TrainingDiverged
from seba.evaluate import episode_scores, head_scores, summarise, support_hash
from seba.executor import chunks, placement_tags
from seba.core.runtime import derive_seed, log, select_device
from seba.core.schema import Float, check, rule
from seba.training import EarlyStopping


def load_method(name: str) -> type[Method]:
    """The class of method ``name``, from its own module ``seba.baselines.<name>``."""
    if name not in baseline_names():
        raise ConfigError(f"unknown baseline '{name}'; known: {', '.join(baseline_names())}")
    importlib.import_module(f"seba.baselines.{name}")
    if name not in METHODS:
        raise ConfigError(f"seba/baselines/{name}.py registers no method (@register on a class named '{name}')")
    return METHODS[name]


def method_config(baselines: BaselinesConfig, name: str):
    """Method ``name``'s settings: its section of params.yaml (``baselines.<name>``) checked
    against its params class, the class's defaults where the section leaves a key out (a
    ConfigError naming the key otherwise)."""
    return check(load_method(name).Config, baselines.sections.get(name), f"baselines.{name}")


def stage_method(baselines: BaselinesConfig, name: str):
    """The baseline stage's method and settings, both checked, and the method listed in
    ``baselines.methods`` (dvc.yaml has a stage for those only): a ConfigError otherwise."""
    method, cfg = load_method(name), method_config(baselines, name)
    if name not in baselines.methods:
        raise ConfigError(f"params.yaml: method '{name}' is not in 'baselines.methods' {list(baselines.methods)}: "
                          f"dvc.yaml has no baseline stage for it; add it there")
    return method, cfg


def check_baselines(baselines: BaselinesConfig) -> None:
    """Every method's section of params.yaml, and every method named in ``baselines.methods``,
    checked by its own module (``seba-validate``; a ConfigError at the first problem)."""
    for name in dict.fromkeys([*baselines.methods, *baselines.sections]):
        method_config(baselines, name)


class Method:
    name: str = ""  # its module's name: its params section, its DVC stages and its episode folder
    # Each method class also sets ``Config`` (its params class, a seba.core.schema.section) and
    # ``paper_name`` (its row in data/reference/paper_results.csv, None if the paper has none).

    def __init__(self, cfg, seed: int, device: torch.device):
        self.cfg = cfg
        self.seed = seed
        self.device = device

    @classmethod
    def check_setup(cls, cfg) -> None:
        """Refuse what the method needs from this machine whatever the table (a package, a
        checkpoint), with an error that names it: ``seba-validate`` asks every listed method, so
        a run stops before its pretraining; the default needs nothing."""

    @classmethod
    def check(cls, cfg, table: EncodedTable, dataset: str) -> None:
        """Refuse, before any work, what the method cannot run (a missing checkpoint or package, a
        table beyond its limits), with an error that names the cause; the default accepts all."""

    def fit(self, x_train: np.ndarray, x_val: np.ndarray, groups: np.ndarray) -> None:
        """Learn from the unlabeled train (and validation) part; supervised methods do nothing."""

    def scores(self, x_test: np.ndarray, support: np.ndarray, support_labels: np.ndarray, n_classes: int,
               shot: int) -> torch.Tensor:
        raise NotImplementedError


class RepresentationMethod(Method):
    """A self-supervised encoder, evaluated with SeBA's own heads (cosine prototypes for the
    prototype shots, the batched linear probe otherwise) so the comparison isolates pretraining.
    Subclasses implement ``fit`` (training ``self.encoder``)."""

    def __init__(self, cfg, seed: int, device: torch.device, evaluate_cfg=None):
        super().__init__(cfg, seed, device)
        self.evaluate_cfg = evaluate_cfg
        self.encoder = None

    @torch.no_grad()
    def encode(self, x: np.ndarray) -> torch.Tensor:
        self.encoder.eval()
        X = torch.as_tensor(x, dtype=torch.float32, device=self.device)
        return torch.cat([self.encoder(X[i:i + 8192]) for i in range(0, len(X), 8192)]).float()

    def scores(self, x_test, support, support_labels, n_classes, shot):
        [(scores, _)] = head_scores([self.encode(x_test)[None]], [torch.as_tensor(support, device=self.device)],
                                    torch.as_tensor(support_labels, device=self.device), n_classes, shot,
                                    self.evaluate_cfg, [derive_seed(self.seed, shot, "probe", self.name)])
        return scores[0]


# ``min_delta`` of the methods trained by ``train_with_early_stopping``: SeBA's rule and range
# (``pretrain.min_delta``); a negative one restarts patience on a worse value, one of 1 or more never (positive losses).
MinDelta = Annotated[Float, rule(lambda v: 0 <= v < 1, "must lie in [0, 1)")]


def train_with_early_stopping(modules: list[torch.nn.Module], batch_loss, n_train: int, val_loss, cfg,
                              generator: torch.Generator, label: str) -> dict:
    """Adam over shuffled minibatches; after every epoch ``val_loss()`` decides early stopping
    with SeBA's rule (``seba.training.EarlyStopping``); the weights of the lowest validation loss
    are restored. ``batch_loss(index)`` returns the loss of one minibatch. ``cfg.max_epochs`` caps
    the epochs and, if ``cfg`` has it, ``max_steps`` caps the optimiser steps (rounded up to whole
    epochs)."""
    import copy
    import math

    params = [p for m in modules for p in m.parameters()]
    optimiser = torch.optim.Adam(params, lr=cfg.lr)
    stopping, best_state = EarlyStopping(cfg.patience, cfg.min_delta), None
    epoch = 0
    steps_per_epoch = max(1, math.ceil(n_train / cfg.batch_size))
    max_steps = getattr(cfg, "max_steps", None)
    max_epochs = cfg.max_epochs if max_steps is None else max(1, min(cfg.max_epochs, math.ceil(max_steps / steps_per_epoch)))
    for epoch in range(1, max_epochs + 1):
        for m in modules:
            m.train()
        order = torch.randperm(n_train, generator=generator)
        for first in range(0, n_train, cfg.batch_size):
            index = order[first:first + cfg.batch_size]
            if len(index) < 2:
                continue
            loss = batch_loss(index)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
        for m in modules:
            m.eval()
        with torch.no_grad():
            current = float(val_loss())
        if not math.isfinite(current):
            raise TrainingDiverged(f"{label}: validation loss is not finite at epoch {epoch}")
        if stopping.update(current, epoch):
            best_state = [copy.deepcopy(m.state_dict()) for m in modules]
        if stopping.should_stop(epoch):
            break
    for m, state in zip(modules, best_state or []):
        m.load_state_dict(state)
    return {"best_epoch": stopping.best_epoch, "stop_epoch": epoch, "best_val_loss": stopping.best}


@contextlib.contextmanager
def naming(name: str, dataset: str, seed: int):
    """A method's own refusal (its table is too small or too narrow for it, its training
    diverged) raised again, of the same type, with the method, dataset and seed in front: a
    method's ``fit`` and ``scores`` are not told the dataset's name."""
    try:
        yield
    except (ConfigError, DataError, TrainingDiverged) as exc:
        raise type(exc)(f"baseline '{name}' on dataset '{dataset}' (seed {seed}): {exc}") from exc


def score_seed(cls: type[Method], cfg, table: EncodedTable, split, seed: int, evaluate_cfg, dataset: str,
               device: torch.device) -> tuple[pd.DataFrame, float, str]:
    """Method ``cls`` fitted on one seed's unlabeled train and validation parts and scored on
    SeBA's episodes of its test part: (every episode's row, seconds, the fit's log line or '')."""
    start = time.perf_counter()
    name, n_classes, frames = cls.name, len(table.classes), []
    X = scale(table, split.train)
    method = (cls(cfg, seed, device, evaluate_cfg) if issubclass(cls, RepresentationMethod)
              else cls(cfg, seed, device))
    with naming(name, dataset, seed):
        method.fit(X[split.train], X[split.val], table.groups)
    fit_log = f"[baseline {name} {dataset} seed {seed}] trained: {method.log}" if getattr(method, "log", None) else ""
    x_test, y_test = X[split.test], table.y[split.test]
    y = torch.as_tensor(y_test, device=device)
    for shot in evaluate_cfg.shots:
        episodes = sample_episodes(y_test, n_classes, shot, evaluate_cfg.episodes, seed, dataset)
        with naming(name, dataset, seed):
            scores = method.scores(x_test, episodes.support, episodes.support_labels, n_classes, shot)
        predictions = scores.to(device).argmax(-1)[None]  # [1, E, N]
        accuracy, balanced = episode_scores(predictions, y, torch.as_tensor(episodes.query, device=device),
                                            n_classes)
        frames.append(pd.DataFrame({
            "seed": seed, "shot": shot, "episode": range(evaluate_cfg.episodes),
            "member": name, "accuracy": 100.0 * accuracy[0].cpu().numpy(),
            "balanced_accuracy": 100.0 * balanced[0].cpu().numpy(),
            "support_hash": [support_hash(row) for row in episodes.support]}))
    return pd.concat(frames, ignore_index=True), time.perf_counter() - start, fit_log


def score_chunk(cls: type[Method], cfg, table: EncodedTable, splits: list[tuple[int, object]], evaluate_cfg,
                dataset: str, device_setting: str) -> list[tuple[pd.DataFrame, float, str]]:
    """``score_seed`` for the seeds of one Ray task (seba.executor), on its node's device."""
    device = select_device(device_setting)
    return [score_seed(cls, cfg, table, split, seed, evaluate_cfg, dataset, device) for seed, split in splits]


def stage_inputs(params, dataset: str, root) -> tuple[EncodedTable, dict]:
    """The `baseline` stage's inputs: the dataset's encoded table and every seed's split, each
    seed's test part checked to serve the largest shot (a DataError naming the seed otherwise)."""
    table = EncodedTable.load(paths.processed(root, dataset))
    splits = {seed: load_split(paths.splits(root, dataset), seed) for seed in params.seeds}
    for seed, split in splits.items():
        check_shots(table.y[split.test], table.classes, params.evaluate.shots, dataset, seed)
    return table, splits


def tracked_params(params, name: str, dataset: str, cfg) -> dict:
    """What the `baseline` stage records in MLflow: the run's protocol and the method's settings."""
    return {"method": name, "dataset": dataset, "seeds": list(params.seeds), "shots": list(params.evaluate.shots),
            "episodes": params.evaluate.episodes, name: dataclasses.asdict(cfg), "executor": params.executor.kind}


def evaluate_baseline(cls: type[Method], cfg, table: EncodedTable, splits: dict, evaluate_cfg, dataset: str,
                      device: torch.device, tracker, executor=None, device_setting: str = "auto") -> pd.DataFrame:
    """Method ``cls`` on every seed's split of ``table``: fitted on the unlabeled train and
    validation parts, scored on SeBA's episodes of the test part (after ``cls.check``). Every
    episode, as the evaluate stage writes SeBA's; each seed's metrics go to a child run of
    ``tracker``. With a Ray ``executor`` (seba.executor) the seeds run as Ray tasks, in chunks,
    on devices the tasks pick by ``device_setting`` (pretrain.device); the results are the same."""
    cls.check(cfg, table, dataset)
    items = list(splits.items())
    if executor is None:
        results = (((seed, *score_seed(cls, cfg, table, split, seed, evaluate_cfg, dataset, device)), None)
                   for seed, split in items)
    else:
        tasks, gpus = executor.plan(len(items))
        parts = chunks(items, tasks)
        table_ref = executor.put(table)
        log(f"[baseline {cls.name} {dataset}] {len(items)} seed{'s' if len(items) > 1 else ''} as {len(parts)} Ray "
            f"task{'s' if len(parts) > 1 else ''}")
        labels = [f"[baseline {cls.name} {dataset} seeds {part[0][0]}..{part[-1][0]}]" for part in parts]
        results = (((seed, *outcome), placement) for part, (outcomes, placement) in zip(parts, executor.map(
            score_chunk, [(cls, cfg, table_ref, part, evaluate_cfg, dataset, device_setting) for part in parts],
            labels, gpus)) for (seed, _), outcome in zip(part, outcomes))
    frames = []
    for (seed, frame, seconds, fit_log), placement in results:
        if fit_log:
            log(fit_log)
        frames.append(frame)
        seed_summary = summarise(frame)
        child = tracker.child(f"seed {seed}", params={"seed": seed}, tags={"seed": seed, **placement_tags(placement)})
        tracker.log_metrics({**{f"{r.shot}shot_accuracy": r.accuracy for r in seed_summary.itertuples()},
                             "seconds": seconds}, child)
        tracker.end_child(child)
        log(f"[baseline {cls.name} {dataset} seed {seed}] " + ", ".join(
            f"{r.shot}-shot {r.accuracy:.2f}" for r in seed_summary.itertuples()) + f" ({seconds:.1f}s"
            + (f" on {placement['node_ip']}" if placement else "") + ")")
    return pd.concat(frames, ignore_index=True)
