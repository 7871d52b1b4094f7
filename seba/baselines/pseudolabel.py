"""Pseudo-Label (Lee, 2013): a classifier trained on the support set plus unlabeled rows labelled
with its own current predictions (semi-supervised).

This module also holds the batched-MLP machinery shared with ``seba/baselines/meanteacher.py``:
every episode of a shot gets its own MLP, and all of them are trained at once as one tensor
program. The parameters are stacked tensors ([D, E, H], [E, 1, H], [E, H, C], [E, 1, C]); each step
feeds every episode's network its own support (``torch.bmm``) and one shared unlabeled minibatch
(one GEMM against the stacked first layers). The loss is the SUM over episodes of each episode's
own loss, so the gradient of an episode's parameters is exactly that episode's gradient, and one
Adam over the stacked tensors (Adam and its L2 term act element by element) is E independent
Adams: an episode trained alone gets the same weights as inside the batch
(tests/test_baseline_pseudolabel.py checks this).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch

from seba.baselines import register
from seba.baselines.base import Method
from seba.core.errors import ConfigError, TrainingDiverged
from seba.core.runtime import derive_seed, resolve_precision
from seba.core.schema import Float, PositiveFloat, PositiveInt, choice, section


@section
class PseudolabelConfig:
    hidden: PositiveInt = 128  # one hidden ReLU layer per episode's MLP (our cost/accuracy measurement)
    steps: PositiveInt = 300  # fixed Adam steps per episode; all episodes of a shot are trained at once
    batch_size: PositiveInt = 64  # shared unlabeled rows per step (STUNT: 100); the whole support every step
    lr: PositiveFloat = 1e-3  # STUNT's baselines: Adam, lr 1e-3, weight decay 1e-4
    weight_decay: Float = 1e-4
    alpha_f: Float = 3.0  # Lee (2013): final pseudo-label weight
    t1_fraction: Float = 0.1  # Lee: alpha = 0 before epoch T1 = 100, alpha_f from T2 = 600, here
    t2_fraction: Float = 0.6  # read as shares of the steps (as if a 1000-epoch run)
    threshold: Float = 0.0  # pseudo-label only rows predicted with this confidence (0: Lee, every row)
    episode_chunk: PositiveInt = 100  # episodes trained together (memory bound)
    precision: choice("fp32", "bf16", "auto") = "auto"  # fp32 | bf16 (autocast) | auto (bf16 where native); bf16 measured equal

    def __post_init__(self):
        if not 0 <= self.t1_fraction < self.t2_fraction <= 1:
            raise ConfigError("baselines.pseudolabel: need 0 <= t1_fraction < t2_fraction <= 1, got "
                              f"{self.t1_fraction} and {self.t2_fraction}")
        bad = ([f"threshold {self.threshold} (need 0 <= threshold < 1)"] if not 0 <= self.threshold < 1 else []) + [
            f"{key} {getattr(self, key)} (need >= 0)" for key in ("alpha_f", "weight_decay") if not getattr(self, key) >= 0]
        if bad:
            raise ConfigError("baselines.pseudolabel: " + "; ".join(bad))


Params = list[torch.Tensor]  # [w1 [D, E, H], b1 [E, 1, H], w2 [E, H, C], b2 [E, 1, C]]


def init_mlp(seeds: list[int], d: int, hidden: int, n_classes: int, device: torch.device) -> Params:
    """One MLP per seed (D -> hidden -> ReLU -> n_classes), initialised as ``torch.nn.Linear``
    (uniform in +-1/sqrt(fan_in)), each from its own generator, so an episode's initial weights do
    not depend on which other episodes share its batch. The first layer is stored as [D, E, H]
    so that the shared minibatch multiplies all episodes' first layers as one [D, E * H] matrix."""
    shapes = [(d, hidden), (1, hidden), (hidden, n_classes), (1, n_classes)]
    fan_in = [d, d, hidden, hidden]
    params = [torch.empty(len(seeds), *shape) for shape in shapes]
    for e, seed in enumerate(seeds):
        g = torch.Generator().manual_seed(seed)
        for p, shape, fan in zip(params, shapes, fan_in):
            bound = 1.0 / math.sqrt(fan)
            p[e] = torch.empty(shape).uniform_(-bound, bound, generator=g)
    params[0] = params[0].transpose(0, 1).contiguous()  # [D, E, H]
    return [p.to(device).requires_grad_() for p in params]


def mlp_forward(params: Params, x_support: torch.Tensor | None = None,
                x_shared: torch.Tensor | None = None) -> torch.Tensor:
    """Logits [E, S + B, C] of every episode's network: on its own rows ``x_support`` [E, S, D]
    (first) and on rows ``x_shared`` [B, D] fed to every episode (second)."""
    w1, b1, w2, b2 = params
    d, n_episodes, hidden = w1.shape
    parts = []
    if x_support is not None:
        parts.append(torch.baddbmm(b1, x_support.to(w1.dtype), w1.transpose(0, 1)))  # [E, S, H]
    if x_shared is not None:  # one GEMM for all episodes: [B, D] x [D, E * H]
        z = torch.addmm(b1.reshape(n_episodes * hidden), x_shared.to(w1.dtype), w1.reshape(d, n_episodes * hidden))
        parts.append(z.view(len(x_shared), n_episodes, hidden).transpose(0, 1))  # [E, B, H]
    h = (torch.cat(parts, 1) if len(parts) > 1 else parts[0].contiguous()).relu_()
    return torch.baddbmm(b2, h, w2)


@torch.no_grad()
def mlp_logits(params: Params, x: torch.Tensor, bf16: bool = False, budget: int = 1 << 22) -> torch.Tensor:
    """Float logits [E, N, C] of every episode's network on every row of ``x`` [N, D], in row
    chunks that keep the [E, rows, H] hidden activations under ``budget`` elements."""
    _, n_episodes, hidden = params[0].shape
    rows = max(1, budget // (n_episodes * hidden))
    out = []
    for first in range(0, len(x), rows):
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=bf16):
            out.append(mlp_forward(params, x_shared=x[first:first + rows]).float())
    return torch.cat(out, 1)


def unlabeled_batches(n_rows: int, batch_size: int, seed: int) -> Callable[[], torch.Tensor]:
    """A function returning the next shared unlabeled minibatch (row positions, drawn uniformly
    with replacement from a generator seeded with ``seed``); every chunk of episodes starts
    from the same seed, so it sees the same minibatches."""
    g = torch.Generator().manual_seed(seed)
    return lambda: torch.randint(0, n_rows, (batch_size,), generator=g)


def train_stacked(params: Params, step_loss: Callable[[int], torch.Tensor], steps: int, lr: float,
                  weight_decay: float, label: str, after_step: Callable[[int], None] | None = None) -> None:
    """``steps`` Adam steps (L2 ``weight_decay`` as in ``torch.optim.Adam``) on the stacked
    parameters; ``step_loss(t)`` returns the SUM over episodes of the per-episode losses at step
    ``t`` (0-based); ``after_step(t)`` runs after each update (e.g. the mean teacher's EMA)."""
    optimiser = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, fused=True)  # still element-wise
    for t in range(steps):
        loss = step_loss(t)
        if not torch.isfinite(loss):
            raise TrainingDiverged(f"{label}: loss is not finite at step {t}")
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
        if after_step is not None:
            after_step(t)


def episode_seeds(seed: int, name: str, shot: int, episodes: range) -> list[int]:
    return [derive_seed(seed, name, shot, "init", e) for e in episodes]


def pseudo_label_weight(t: int, steps: int, alpha_f: float, t1_fraction: float, t2_fraction: float) -> float:
    """Lee's alpha(t): 0 before T1, linear up to alpha_f at T2, alpha_f after; T1 and T2 are
    fractions of the run (Lee's epochs 100 and 600, read as per-mille of a 1000-epoch run)."""
    t1, t2 = t1_fraction * steps, t2_fraction * steps
    if t < t1:
        return 0.0
    if t >= t2:
        return alpha_f
    return alpha_f * (t - t1) / (t2 - t1)


def pseudo_label_loss(support_logits: torch.Tensor, labels: torch.Tensor, unlabeled_logits: torch.Tensor,
                      alpha: float, threshold: float = 0.0) -> torch.Tensor:
    """Lee's loss of each episode [E]: mean cross-entropy of its support logits [E, S, C] against
    ``labels`` [S] + alpha * mean cross-entropy of its unlabeled logits [E, B, C] against their own
    argmax (the pseudo-labels; constants, no gradient flows through them). With ``threshold`` > 0
    (a later variant, not Lee's) rows whose top softmax probability is below it contribute 0."""
    n_episodes, n_classes = support_logits.shape[0], support_logits.shape[-1]
    ce = torch.nn.functional.cross_entropy
    supervised = ce(support_logits.reshape(-1, n_classes), labels.repeat(n_episodes), reduction="none")
    confidence, targets = unlabeled_logits.detach().softmax(-1).max(-1)
    unsupervised = ce(unlabeled_logits.reshape(-1, n_classes), targets.reshape(-1), reduction="none")
    unsupervised = unsupervised.view(n_episodes, -1)
    if threshold > 0:
        unsupervised = unsupervised * (confidence >= threshold)
    return supervised.view(n_episodes, -1).mean(1) + alpha * unsupervised.mean(1)


def train_pseudolabel(params: Params, x_support: torch.Tensor, labels: torch.Tensor, x_unlabeled: torch.Tensor,
                      cfg, batch_seed: int, label: str,
                      observe: Callable[[int, Params], None] | None = None) -> None:
    """Trains the stacked MLPs in place on Lee's objective, summed over episodes: every update
    draws a shared unlabeled minibatch, pseudo-labels it with the argmax of each network's current
    predictions (recomputed at every update, as in Lee) and weights that term by alpha(t).
    ``observe(t, params)`` runs after each update (tests)."""
    bf16 = resolve_precision(cfg.precision, x_unlabeled.device) == "bf16"
    next_batch = unlabeled_batches(len(x_unlabeled), cfg.batch_size, batch_seed)
    n_support = x_support.shape[1]

    def step_loss(t: int) -> torch.Tensor:
        xu = x_unlabeled[next_batch().to(x_unlabeled.device)]
        with torch.autocast(xu.device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = mlp_forward(params, x_support, xu).float()  # [E, S + B, C]
        alpha = pseudo_label_weight(t, cfg.steps, cfg.alpha_f, cfg.t1_fraction, cfg.t2_fraction)
        return pseudo_label_loss(logits[:, :n_support], labels, logits[:, n_support:], alpha, cfg.threshold).sum()

    train_stacked(params, step_loss, cfg.steps, cfg.lr, cfg.weight_decay, label,
                  after_step=None if observe is None else lambda t: observe(t, params))


class EpisodeMLPMethod(Method):
    """Shared driver: keeps the unlabeled train part; for each shot trains one MLP per episode
    (``train`` of the subclass, chunks of ``episode_chunk`` episodes at a time) and returns the
    logits of ``predictor`` for every test row."""

    def fit(self, x_train, x_val, groups):
        self.x_unlabeled = torch.as_tensor(np.ascontiguousarray(x_train), dtype=torch.float32, device=self.device)

    def train(self, params: Params, x_support: torch.Tensor, labels: torch.Tensor, shot: int) -> Params:
        raise NotImplementedError

    def scores(self, x_test, support, support_labels, n_classes, shot):
        X = torch.as_tensor(np.ascontiguousarray(x_test), dtype=torch.float32, device=self.device)
        sup = torch.as_tensor(support, device=self.device)
        labels = torch.as_tensor(support_labels, device=self.device)
        bf16 = resolve_precision(self.cfg.precision, self.device) == "bf16"
        out = []
        for first in range(0, len(sup), self.cfg.episode_chunk):
            chunk = range(first, min(first + self.cfg.episode_chunk, len(sup)))
            params = init_mlp(episode_seeds(self.seed, self.name, shot, chunk), X.shape[1], self.cfg.hidden,
                              n_classes, self.device)
            predictor = self.train(params, X[sup[first:chunk.stop]], labels, shot)
            out.append(mlp_logits(predictor, X, bf16))
        return torch.cat(out)


@register
class PseudoLabel(EpisodeMLPMethod):
    """Pseudo-Label (Lee, 2013) with a one-hidden-layer MLP per episode: cross-entropy on the
    support plus alpha(t) times the cross-entropy of unlabeled train rows against the argmax of
    the network's current predictions; alpha ramps linearly from 0 at T1 to ``alpha_f`` at T2."""

    name = "pseudolabel"
    paper_name = "PseudoL"  # its row in data/reference/paper_results.csv (None: the paper has none)
    Config = PseudolabelConfig

    def train(self, params, x_support, labels, shot):
        train_pseudolabel(params, x_support, labels, self.x_unlabeled, self.cfg,
                          derive_seed(self.seed, self.name, shot, "unlabeled"), f"pseudolabel seed {self.seed}")
        return params
