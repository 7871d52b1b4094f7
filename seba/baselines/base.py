"""What every baseline shares: the ``Method`` interface (see ``seba.baselines``), the
``RepresentationMethod`` that evaluates a self-supervised encoder with SeBA's own heads, SeBA's
early-stopping training loop, ``load_method``, which imports one method's module, and
``evaluate_baseline``, which scores a method on SeBA's episodes (the `baseline` stage)."""

from __future__ import annotations

import importlib
import time

import numpy as np
import pandas as pd
import torch

from seba.baselines import BASELINES, METHODS
from seba.data import EncodedTable, scale
from seba.episodes import sample_episodes
from seba.errors import ConfigError, TrainingDiverged
from seba.evaluate import episode_scores, head_scores, summarise, support_hash
from seba.runtime import derive_seed, log
from seba.training import EarlyStopping


def load_method(name: str) -> type[Method]:
    """The class of method ``name``, from its own module ``seba.baselines.<name>``."""
    if name not in BASELINES:
        raise ConfigError(f"unknown baseline '{name}'; known: {', '.join(BASELINES)}")
    importlib.import_module(f"seba.baselines.{name}")
    return METHODS[name]


class Method:
    name: str = ""  # its row of seba.baselines.BASELINES

    def __init__(self, cfg, seed: int, device: torch.device):
        self.cfg = cfg
        self.seed = seed
        self.device = device

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


def evaluate_baseline(cls: type[Method], cfg, table: EncodedTable, splits: dict, evaluate_cfg, dataset: str,
                      device: torch.device, tracker) -> pd.DataFrame:
    """Method ``cls`` on every seed's split of ``table``: fitted on the unlabeled train and
    validation parts, scored on SeBA's episodes of the test part (after ``cls.check``). Every
    episode, as the evaluate stage writes SeBA's; each seed's metrics go to a child run of ``tracker``."""
    cls.check(cfg, table, dataset)
    name, n_classes, frames = cls.name, len(table.classes), []
    for seed, split in splits.items():
        start = time.perf_counter()
        X = scale(table, split.train)
        method = (cls(cfg, seed, device, evaluate_cfg) if issubclass(cls, RepresentationMethod)
                  else cls(cfg, seed, device))
        method.fit(X[split.train], X[split.val], table.groups)
        if getattr(method, "log", None):
            log(f"[baseline {name} {dataset} seed {seed}] trained: {method.log}")
        x_test, y_test = X[split.test], table.y[split.test]
        y = torch.as_tensor(y_test, device=device)
        for shot in evaluate_cfg.shots:
            episodes = sample_episodes(y_test, n_classes, shot, evaluate_cfg.episodes, seed, dataset)
            scores = method.scores(x_test, episodes.support, episodes.support_labels, n_classes, shot)
            predictions = scores.to(device).argmax(-1)[None]  # [1, E, N]
            accuracy, balanced = episode_scores(predictions, y, torch.as_tensor(episodes.query, device=device),
                                                n_classes)
            frames.append(pd.DataFrame({
                "seed": seed, "shot": shot, "episode": range(evaluate_cfg.episodes),
                "member": name, "accuracy": 100.0 * accuracy[0].cpu().numpy(),
                "balanced_accuracy": 100.0 * balanced[0].cpu().numpy(),
                "support_hash": [support_hash(row) for row in episodes.support]}))
        seed_summary = summarise(pd.concat([f for f in frames if f["seed"].iat[0] == seed]))
        seconds = time.perf_counter() - start
        child = tracker.child(f"seed {seed}", params={"seed": seed}, tags={"seed": seed})
        tracker.log_metrics({**{f"{r.shot}shot_accuracy": r.accuracy for r in seed_summary.itertuples()},
                             "seconds": seconds}, child)
        tracker.end_child(child)
        log(f"[baseline {name} {dataset} seed {seed}] " + ", ".join(
            f"{r.shot}-shot {r.accuracy:.2f}" for r in seed_summary.itertuples()) + f" ({seconds:.1f}s)")
    return pd.concat(frames, ignore_index=True)
