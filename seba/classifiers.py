"""Few-shot heads on frozen features, batched over members and episodes.

Shapes: ``features`` is [M, N, F] (M members, e.g. one per ratio encoder; N test rows), the
support of an episode set is [E, S] positions into N, ``support_labels`` is [S].
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def prototype_scores(features: torch.Tensor, support: torch.Tensor, support_labels: torch.Tensor,
                     n_classes: int) -> torch.Tensor:
    """Cosine similarity of every row to each class-mean prototype of the support. [M, E, N, C]"""
    support_features = features[:, support]  # [M, E, S, F]
    onehot = F.one_hot(support_labels, n_classes).to(features.dtype)  # [S, C]
    prototypes = torch.einsum("mesf,sc->mecf", support_features, onehot) / onehot.sum(0)[None, None, :, None]
    return torch.einsum("mnf,mecf->menc", F.normalize(features, dim=-1), F.normalize(prototypes, dim=-1))


def train_probes(features: torch.Tensor, support: torch.Tensor, support_labels: torch.Tensor,
                 n_classes: int, lr: float, max_iters: int, patience: int,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One linear probe per (member, episode), all trained at once as one tensor program.

    Each probe follows the released code's rule on its own: full-batch Adam on its support,
    stop as soon as train accuracy reaches 1.0 or after ``patience`` iterations without
    improvement (or ``max_iters``), keep the weights of the best train accuracy. Adam is
    element-wise and the summed loss gives each probe its own gradient, so a probe's path is
    the same as if it were trained alone; a stopped probe's best weights are frozen.
    Returns weights [M, E, F, C], biases [M, E, C] and iterations used [M, E].
    """
    M, E = features.shape[0], support.shape[0]
    n_features = features.shape[-1]
    support_features = features[:, support]  # [M, E, S, F]
    bound = 1.0 / n_features ** 0.5  # nn.Linear's default initialisation
    weight = ((torch.rand(M, E, n_features, n_classes, generator=generator) * 2 - 1) * bound).to(features.device)
    bias = ((torch.rand(M, E, n_classes, generator=generator) * 2 - 1) * bound).to(features.device)
    weight.requires_grad_(True)
    bias.requires_grad_(True)
    optimiser = torch.optim.Adam([weight, bias], lr=lr)
    labels = support_labels.to(features.device)
    S = labels.numel()

    best_acc = torch.full((M, E), -1.0, device=features.device)
    best_iter = torch.zeros((M, E), dtype=torch.long, device=features.device)
    best_weight = weight.detach().clone()
    best_bias = bias.detach().clone()
    active = torch.ones((M, E), dtype=torch.bool, device=features.device)
    iterations = torch.zeros((M, E), dtype=torch.long, device=features.device)
    for it in range(max_iters + 1):
        logits = torch.einsum("mesf,mefc->mesc", support_features, weight) + bias[:, :, None, :]
        with torch.no_grad():
            acc = (logits.argmax(-1) == labels).float().mean(-1)
            improved = active & (acc > best_acc)
            best_acc = torch.where(improved, acc, best_acc)
            best_iter = torch.where(improved, torch.full_like(best_iter, it), best_iter)
            best_weight = torch.where(improved[..., None, None], weight, best_weight)
            best_bias = torch.where(improved[..., None], bias, best_bias)
            done = active & ((acc >= 1.0) | (it - best_iter >= patience))
            iterations = torch.where(done, torch.full_like(iterations, it), iterations)
            active = active & ~done
        if not bool(active.any()) or it == max_iters:
            iterations = torch.where(active, torch.full_like(iterations, it), iterations)
            break
        loss = F.cross_entropy(logits[active].reshape(-1, n_classes),
                               labels.repeat(int(active.sum())), reduction="sum") / S
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
    return best_weight, best_bias, iterations


def probe_logits(features: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Logits of every row under every probe. [M, E, N, C]"""
    return torch.einsum("mnf,mefc->menc", features, weight) + bias[:, :, None, :]
