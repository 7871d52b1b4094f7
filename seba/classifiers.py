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
                 generator: torch.Generator, chunk_bytes: int = 4 << 20,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One linear probe per (member, episode), trained many at a time as one tensor program.

    Each probe follows the released code's rule on its own: full-batch Adam (torch's update
    formula) on the mean cross-entropy of its support, stop as soon as train accuracy reaches
    1.0 or after ``patience`` iterations without improvement (or ``max_iters``), keep the
    weights of the best train accuracy. Adam is element-wise and every probe's gradient is its
    own, so a probe's path is the same as if it were trained alone.

    Speed: probes are taken in chunks whose support features fit in ``chunk_bytes`` (so they
    stay in cache across iterations); gradients are written out (softmax minus one-hot), not
    taken by autograd; when half of a chunk's probes have stopped, the chunk is compacted to
    the ones still running, so a long-running probe does not keep the finished ones busy.
    Returns weights [M, E, F, C], biases [M, E, C] and iterations used [M, E].
    """
    M, E = features.shape[0], support.shape[0]
    n_features = features.shape[-1]
    device = features.device
    bound = 1.0 / n_features ** 0.5  # nn.Linear's default initialisation
    weight0 = ((torch.rand(M, E, n_features, n_classes, generator=generator) * 2 - 1) * bound).to(device)
    bias0 = ((torch.rand(M, E, n_classes, generator=generator) * 2 - 1) * bound).to(device)
    labels = support_labels.to(device)
    S = labels.numel()
    onehot = F.one_hot(labels, n_classes).to(features.dtype)  # [S, C]
    n_probes = M * E
    # Results, in [C, F] layout while training (the faster one for the batched products).
    best_weight = weight0.reshape(n_probes, n_features, n_classes).transpose(1, 2).contiguous()
    best_bias = bias0.reshape(n_probes, n_classes).clone()
    iterations = torch.zeros(n_probes, dtype=torch.long, device=device)
    chunk = max(1, min(n_probes, chunk_bytes // max(1, S * n_features * features.element_size())))
    b1, b2 = betas
    with torch.no_grad():
        for first in range(0, n_probes, chunk):
            ids = torch.arange(first, min(first + chunk, n_probes), device=device)
            x = features[(ids // E)[:, None], support[ids % E]]  # [P, S, F]
            w = best_weight[ids].clone()  # [P, C, F]
            b = best_bias[ids].clone()  # [P, C]
            m_w, v_w = torch.zeros_like(w), torch.zeros_like(w)
            m_b, v_b = torch.zeros_like(b), torch.zeros_like(b)
            best_acc = torch.full((len(ids),), -1.0, device=device)
            best_iter = torch.zeros(len(ids), dtype=torch.long, device=device)
            active = torch.ones(len(ids), dtype=torch.bool, device=device)
            for it in range(max_iters + 1):
                logits = torch.baddbmm(b[:, None, :], x, w.transpose(1, 2))  # [P, S, C]
                acc = (logits.argmax(-1) == labels).float().mean(-1)
                improved = active & (acc > best_acc)
                if bool(improved.any()):
                    best_acc = torch.where(improved, acc, best_acc)
                    best_iter = torch.where(improved, it, best_iter)
                    best_weight[ids[improved]] = w[improved]
                    best_bias[ids[improved]] = b[improved]
                done = active & ((acc >= 1.0) | (it - best_iter >= patience))
                iterations[ids[done]] = it
                active = active & ~done
                n_active = int(active.sum())
                if n_active == 0:
                    break
                if it == max_iters:
                    iterations[ids[active]] = it
                    break
                if 2 * n_active <= len(ids):  # compact to the probes still running
                    keep = active.nonzero().squeeze(1)
                    ids, x, w, b = ids[keep], x[keep], w[keep], b[keep]
                    m_w, v_w, m_b, v_b = m_w[keep], v_w[keep], m_b[keep], v_b[keep]
                    best_acc, best_iter, logits = best_acc[keep], best_iter[keep], logits[keep]
                    active = torch.ones(len(ids), dtype=torch.bool, device=device)
                # d(mean cross-entropy)/d logits = (softmax - onehot) / S
                # (softmax written out: torch's kernel is slow for a last dimension of a few classes)
                grad_logits = (logits - logits.amax(-1, keepdim=True)).exp_()
                grad_logits.div_(grad_logits.sum(-1, keepdim=True)).sub_(onehot).div_(S)  # [P, S, C]
                grad_w = torch.bmm(grad_logits.transpose(1, 2), x)  # [P, C, F]
                grad_b = grad_logits.sum(1)  # [P, C]
                step = it + 1
                step_size = lr / (1 - b1 ** step)
                root_correction = (1 - b2 ** step) ** 0.5
                for p, g, m_, v_ in ((w, grad_w, m_w, v_w), (b, grad_b, m_b, v_b)):
                    m_.lerp_(g, 1 - b1)
                    v_.mul_(b2).addcmul_(g, g, value=1 - b2)
                    p.addcdiv_(m_, v_.sqrt().div_(root_correction).add_(eps), value=-step_size)
    weight = best_weight.transpose(1, 2).reshape(M, E, n_features, n_classes)
    return weight, best_bias.reshape(M, E, n_classes), iterations.reshape(M, E)


def probe_logits(features: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Logits of every row under every probe. [M, E, N, C]"""
    return torch.einsum("mnf,mefc->menc", features, weight) + bias[:, :, None, :]
