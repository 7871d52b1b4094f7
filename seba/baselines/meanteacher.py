"""Mean Teacher (Tarvainen & Valpola, 2017): a student classifier trained on the support set plus a
consistency cost towards a teacher whose weights are the exponential moving average of the
student's (semi-supervised).

The batched per-episode MLP machinery (stacked parameters, one shared unlabeled minibatch per
step, one Adam over the stacked tensors) is shared with Pseudo-Label and lives in
``seba/baselines/pseudolabel.py``.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from seba.baselines import register
from seba.baselines.pseudolabel import EpisodeMLPMethod, Params, mlp_forward, train_stacked, unlabeled_batches
from seba.core.errors import ConfigError
from seba.core.runtime import derive_seed, resolve_precision
from seba.core.schema import Float, Fraction, PositiveFloat, PositiveInt, choice, section


@section
class MeanteacherConfig:
    hidden: PositiveInt = 128  # one hidden ReLU layer per episode's MLP (student and teacher)
    steps: PositiveInt = 300  # fixed Adam steps per episode; all episodes of a shot are trained at once
    batch_size: PositiveInt = 64  # shared unlabeled rows per step (STUNT: 100); the whole support every step
    lr: PositiveFloat = 1e-3  # STUNT's baselines: Adam, lr 1e-3, weight decay 1e-4
    weight_decay: Float = 1e-4
    consistency: Float = 1.0  # max consistency weight; STUNT's grid {0.1, 1, 10, 20, 50, 100}, MT code 100
    rampup_fraction: Fraction = 0.3  # sigmoid ramp-up over this share of the steps (MT code: 40k of 150k)
    ema_decay: Float = 0.99  # teacher EMA decay (MT code: 0.99 during ramp-up, 0.999 after)
    input_noise: Float = 0.15  # std of the Gaussian input noise on the standardised features (MT code)
    episode_chunk: PositiveInt = 100  # episodes trained together (memory bound)
    precision: choice("fp32", "bf16", "auto") = "auto"  # fp32 | bf16 (autocast) | auto (bf16 where native)

    def __post_init__(self):
        bad = ([f"ema_decay {self.ema_decay} (need 0 <= ema_decay < 1)"] if not 0 <= self.ema_decay < 1 else []) + [
            f"{key} {getattr(self, key)} (need >= 0)" for key in ("consistency", "input_noise", "weight_decay")
            if not getattr(self, key) >= 0]
        if bad:
            raise ConfigError("baselines.meanteacher: " + "; ".join(bad))


def sigmoid_rampup(t: float, length: float) -> float:
    """The Mean Teacher ramp-up exp(-5 (1 - t / length)^2), 1 from ``length`` on."""
    if length <= 0 or t >= length:
        return 1.0
    phase = 1.0 - max(t, 0.0) / length
    return math.exp(-5.0 * phase * phase)


def ema_update(teacher: Params, student: Params, step: int, decay: float) -> float:
    """teacher <- a * teacher + (1 - a) * student after the ``step``-th update (1-based), with
    a = min(1 - 1 / (step + 1), decay): the true average of the weights so far until the EMA
    is the better estimate (as in the official code). Returns a."""
    a = min(1.0 - 1.0 / (step + 1), decay)
    with torch.no_grad():
        for t, s in zip(teacher, student):
            t.mul_(a).add_(s.detach(), alpha=1.0 - a)
    return a


def train_meanteacher(student: Params, x_support: torch.Tensor, labels: torch.Tensor, x_unlabeled: torch.Tensor,
                      cfg, batch_seed: int, noise_seed: int, label: str,
                      observe: Callable[[int, Params, Params], None] | None = None) -> Params:
    """Trains the stacked students in place and returns the stacked teachers.

    Per episode and step: student and teacher each see the support and the shared unlabeled
    minibatch under their own Gaussian input noise (std ``input_noise``; the noise draws are
    shared by all episodes, like the minibatch); loss = mean CE of the student on the support
    + w(t) * mean over rows (support and unlabeled, as the official code's default) of the MSE
    between the student's and the teacher's softmax outputs (no gradient into the teacher);
    w(t) = consistency * sigmoid ramp-up. After each Adam step the teacher becomes the EMA of
    the student. ``observe(t, student, teacher)`` runs after each update (tests)."""
    teacher = [p.detach().clone() for p in student]
    bf16 = resolve_precision(cfg.precision, x_unlabeled.device) == "bf16"
    next_batch = unlabeled_batches(len(x_unlabeled), cfg.batch_size, batch_seed)
    noise = torch.Generator().manual_seed(noise_seed)
    n_support, d = x_support.shape[1], x_support.shape[2]
    rampup = cfg.rampup_fraction * cfg.steps
    device = x_unlabeled.device

    def noisy(xs: torch.Tensor, xu: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        eps = cfg.input_noise * torch.randn(n_support + len(xu), d, generator=noise).to(device)
        return xs + eps[:n_support], xu + eps[n_support:]

    def step_loss(t: int) -> torch.Tensor:
        xu = x_unlabeled[next_batch().to(device)]
        student_in, teacher_in = noisy(x_support, xu), noisy(x_support, xu)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = mlp_forward(student, *student_in).float()  # [E, S + B, C]
            with torch.no_grad():
                target = mlp_forward(teacher, *teacher_in).float()
        n_classes = logits.shape[-1]
        supervised = torch.nn.functional.cross_entropy(
            logits[:, :n_support].reshape(-1, n_classes), labels.repeat(len(logits)), reduction="none"
        ).view(len(logits), -1).mean(1)
        consistency = (logits.softmax(-1) - target.softmax(-1)).square().mean(-1).mean(1)
        weight = cfg.consistency * sigmoid_rampup(t, rampup)
        return (supervised + weight * consistency).sum()

    def after_step(t: int) -> None:
        ema_update(teacher, student, t + 1, cfg.ema_decay)
        if observe is not None:
            observe(t, student, teacher)

    train_stacked(student, step_loss, cfg.steps, cfg.lr, cfg.weight_decay, label, after_step)
    return teacher


@register
class MeanTeacher(EpisodeMLPMethod):
    """Mean Teacher (Tarvainen & Valpola, 2017) with a one-hidden-layer MLP per episode: the
    student learns from the support (cross-entropy) and from a softmax-MSE consistency cost
    towards the EMA teacher under Gaussian input noise, on the support and unlabeled train rows;
    the teacher's logits are the scores."""

    name = "meanteacher"
    paper_name = "MeanT"  # its row in data/reference/paper_results.csv (None: the paper has none)
    Config = MeanteacherConfig

    def train(self, params, x_support, labels, shot):
        return train_meanteacher(params, x_support, labels, self.x_unlabeled, self.cfg,
                                 derive_seed(self.seed, self.name, shot, "unlabeled"),
                                 derive_seed(self.seed, self.name, shot, "noise"), f"meanteacher seed {self.seed}")
