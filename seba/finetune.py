"""The fine-tuning head (the head ablation, ``evaluate.head: finetune``): per episode, a copy of
a pretrained encoder and a linear head trained together on the episode's support rows.

The paper fine-tunes "the whole encoder along with the classifier" and says nothing else. Here
both follow the linear probe's settings (``seba.classifiers.train_probes``; the paper's few-shot
hyper-parameters): full-batch Adam on the support's mean cross-entropy with ``evaluate.probe_lr``,
stop as soon as every support row is classified right, or after ``evaluate.probe_patience``
iterations without a better train accuracy, or after ``evaluate.probe_max_iters``; the weights
of the best train accuracy are kept (``evaluate.probe_stop: none``: every step, the final
weights). The head starts as the probe of the same episode does (``probe_init`` from the seed's
and shot's generator). ``evaluate.finetune_chunk`` episodes train
together as one stacked model (``seba.model.StackedEncoder``: every episode's gradient is its
own, and Adam is element-wise, so an episode's path is the one it takes alone).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from seba.core.config import EvaluateConfig
from seba.model import Encoder, StackedEncoder, select_members
from seba.training import FusedAdam


@dataclass
class FineTuneInputs:
    """One seed's inputs to fine-tuning: each member's encoder checkpoint and the test rows as
    the encoders were trained on them ([N, D], on the evaluation device)."""

    checkpoints: list[dict]  # {"encoder": state dict, "model_config": ...} per member
    x: torch.Tensor

    def __call__(self, support: torch.Tensor, support_labels: torch.Tensor, n_classes: int,
                 init: tuple[torch.Tensor, torch.Tensor], cfg: EvaluateConfig) -> tuple[torch.Tensor, torch.Tensor]:
        """``finetune_scores`` with the ``evaluate`` section's settings (``seba.evaluate.head_scores``)."""
        return finetune_scores(self, support, support_labels, n_classes, init, cfg.probe_lr, cfg.probe_max_iters,
                               cfg.probe_patience, cfg.finetune_chunk, early_stop=cfg.probe_stop == "train_accuracy")


def _encoder(checkpoint: dict) -> Encoder:
    cfg = checkpoint["model_config"]
    kind = cfg.get("encoder", "mlp")
    if kind != "mlp":
        raise ValueError(f"fine-tuning needs an MLP encoder, got {kind!r}")
    encoder = Encoder(cfg["in_features"], cfg["encoder_hidden"], cfg["encoder_out"], cfg["encoder_out_relu"])
    encoder.load_state_dict(checkpoint["encoder"])
    return encoder


def finetune_scores(inputs: FineTuneInputs, support: torch.Tensor, support_labels: torch.Tensor, n_classes: int,
                    init: tuple[torch.Tensor, torch.Tensor], lr: float, max_iters: int, patience: int,
                    chunk: int, batch_rows: int = 4096, early_stop: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Class logits [M, E, N, C] of every test row under each (member, episode)'s fine-tuned
    encoder and head, and the iterations each used [M, E]. ``support`` is [E, S] positions into
    the test rows, ``init`` the heads' initial weights [M, E, F, C] and biases [M, E, C]."""
    device = inputs.x.device
    E, S = support.shape
    labels = support_labels.to(device)
    out, iterations = [], []
    for m, checkpoint in enumerate(inputs.checkpoints):
        template = _encoder(checkpoint).to(device)
        logits_m, iters_m = [], []
        for first in range(0, E, chunk):
            episodes = torch.arange(first, min(first + chunk, E), device=device)
            encoder, weight, bias, used = _train(template, inputs.x[support[episodes]], labels, n_classes,
                                                 init[0][m, episodes].to(device), init[1][m, episodes].to(device),
                                                 lr, max_iters, patience, early_stop)
            iters_m.append(used)
            with torch.no_grad():
                parts = []
                for row in range(0, len(inputs.x), batch_rows):
                    x = inputs.x[row:row + batch_rows].unsqueeze(0).expand(len(episodes), -1, -1)
                    parts.append(torch.baddbmm(bias.unsqueeze(1), encoder(x), weight))  # [e, n, C]
                logits_m.append(torch.cat(parts, dim=1))
        out.append(torch.cat(logits_m))
        iterations.append(torch.cat(iters_m))
    return torch.stack(out), torch.stack(iterations)


def _train(template: Encoder, x: torch.Tensor, labels: torch.Tensor, n_classes: int, weight0: torch.Tensor,
           bias0: torch.Tensor, lr: float, max_iters: int, patience: int, early_stop: bool = True
           ) -> tuple[StackedEncoder, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fine-tune one copy of ``template`` and a head per episode on its support rows ``x``
    [e, S, D]; returns the best weights (``early_stop`` False: the final ones, after ``max_iters``
    steps; stacked encoder in eval mode, head [e, F, C] and [e, C]) and the iterations used [e]."""
    n, S = x.shape[:2]
    device = x.device
    encoder = StackedEncoder([template] * n).to(device)
    weight = torch.nn.Parameter(weight0.clone())
    bias = torch.nn.Parameter(bias0.clone())

    def parameters() -> list[torch.Tensor]:
        return list(encoder.parameters()) + [weight, bias]

    optimiser = FusedAdam(parameters(), lr)
    best = [p.detach().clone() for p in parameters()]  # [n, ...] each, the best weights of every episode
    ids = torch.arange(n, device=device)  # the episodes still training
    best_wrong = torch.full((n,), S + 1, dtype=torch.long, device=device)
    best_iter = torch.zeros(n, dtype=torch.long, device=device)
    used = torch.zeros(n, dtype=torch.long, device=device)
    targets = labels.repeat(n)
    for it in range(max_iters + 1):
        logits = torch.baddbmm(bias.unsqueeze(1), encoder(x[ids]), weight)  # [a, S, C]
        with torch.no_grad():
            wrong = (logits.argmax(-1) != labels).sum(1)
            if early_stop:
                improved = wrong < best_wrong[ids]
            else:  # the final weights only
                improved = torch.full_like(wrong, it == max_iters, dtype=torch.bool)
            if bool(improved.any()):
                for kept, value in zip(best, parameters()):
                    kept[ids[improved]] = value.detach()[improved]
                best_wrong[ids[improved]] = wrong[improved]
                best_iter[ids[improved]] = it
            done = ((wrong == 0) | (best_iter[ids] <= it - patience)) & early_stop
            if it == max_iters:
                done[:] = True
            used[ids[done]] = it
        if bool(done.all()):
            break
        loss = F.cross_entropy(logits.reshape(-1, n_classes), targets[:len(ids) * S], reduction="none")
        optimiser.zero_grad()
        loss.view(len(ids), S).mean(1).sum().backward()  # each episode's gradient is its own
        optimiser.step()
        if bool(done.any()):  # the finished episodes leave the stack (their best weights are kept)
            keep = (~done).nonzero().squeeze(1)
            ids = ids[keep]
            select_members(encoder, keep)
            weight, bias = torch.nn.Parameter(weight.detach()[keep]), torch.nn.Parameter(bias.detach()[keep])
            optimiser = optimiser.select(parameters(), keep)
    final = StackedEncoder([template] * n).to(device)
    with torch.no_grad():
        for target, value in zip(final.parameters(), best[:-2]):
            target.copy_(value)
    return final.eval(), best[-2], best[-1], used
