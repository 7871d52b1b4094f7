"""Baselines, evaluated on exactly SeBA's episodes.

A method is a class registered in ``METHODS``. It gets one seed's standardised table at a time:
``fit`` sees the unlabeled train and validation parts (self- and semi-supervised methods learn
from them; supervised ones ignore them), then ``scores`` gets the test part and a batch of
episodes (support positions and labels, from ``seba.episodes.sample_episodes``, the sampler
SeBA's evaluation uses) and returns class scores for every test row: [episodes, rows, classes].
The stage takes the argmax and scores the query rows exactly as for SeBA.

Each method lives in its own module, ``seba/baselines/<name>.py``, which is the only method code
its DVC stage depends on: editing one method reruns only that method's stages.

Add a method: write ``seba/baselines/<name>.py`` with a subclass of ``Method`` that has ``name``
(its params section and stage name) and ``paper_name`` (its row in paper_results.csv, or None),
registered with ``@register``; list the module in ``MODULES`` below and add its config dataclass
to ``seba.config.BASELINE_SECTIONS``. See docs/adding-a-method.md.
"""

from __future__ import annotations

import importlib

import numpy as np
import torch

from seba.errors import TrainingDiverged
from seba.evaluate import head_scores
from seba.training import EarlyStopping
from seba.runtime import derive_seed

METHODS: dict[str, type["Method"]] = {}


def register(cls: type["Method"]) -> type["Method"]:
    METHODS[cls.name] = cls
    return cls


class Method:
    name: str = ""
    paper_name: str | None = None

    def __init__(self, cfg, seed: int, device: torch.device):
        self.cfg = cfg
        self.seed = seed
        self.device = device

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


# The method modules, in the order of the report's tables; importing one registers its method.
MODULES = ("knn", "logreg", "catboost", "stunt", "scarf", "vime", "subtab", "pseudolabel", "meanteacher")
for _module in MODULES:
    importlib.import_module(f"seba.baselines.{_module}")
