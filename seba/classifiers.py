"""Few-shot heads on frozen features, batched over members and episodes.

Shapes: ``features`` is [M, N, F] (M members, e.g. one per ratio encoder; N test rows), the
support of an episode set is [E, S] positions into N, ``support_labels`` is [S].
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def prototype_scores(features: torch.Tensor, support: torch.Tensor, support_labels: torch.Tensor,
                     n_classes: int, metric: str = "cosine") -> torch.Tensor:
    """Every row's score for each class-mean prototype of the support: cosine similarity, or
    (``metric="euclidean"``) minus the Euclidean distance. [M, E, N, C]"""
    support_features = features[:, support]  # [M, E, S, F]
    onehot = F.one_hot(support_labels, n_classes).to(features.dtype)  # [S, C]
    prototypes = torch.einsum("mesf,sc->mecf", support_features, onehot) / onehot.sum(0)[None, None, :, None]
    if metric == "cosine":
        return torch.einsum("mnf,mecf->menc", F.normalize(features, dim=-1), F.normalize(prototypes, dim=-1))
    if metric == "euclidean":
        return -torch.stack([torch.cdist(features[m].unsqueeze(0).expand(len(p), -1, -1).contiguous(), p)
                             for m, p in enumerate(prototypes)])
    raise ValueError(f"unknown metric {metric!r}")


def nearest_neighbour_scores(features: torch.Tensor, support: torch.Tensor, support_labels: torch.Tensor,
                             n_classes: int, metric: str = "cosine", chunk_bytes: int = 256 << 20) -> torch.Tensor:
    """1-NN to single support rows: every row's score for a class is its highest cosine similarity
    to (or minus its smallest Euclidean distance from) one of that class's support rows, so the
    top class is the nearest support row's. Episodes are taken in chunks of about ``chunk_bytes``
    of similarities and, for the Euclidean distance, of the three copies of the rows it makes
    ([M * e, N, F] each: repeated per episode here, then scaled and padded in ``torch.cdist``). [M, E, N, C]"""
    M, N = features.shape[:2]
    E, S = support.shape
    onehot = F.one_hot(support_labels, n_classes).bool()  # [S, C]: every class has a support row
    rows = F.normalize(features, dim=-1) if metric == "cosine" else features
    out = features.new_empty(M, E, N, n_classes)
    per_row = S if metric == "cosine" else S + 3 * (features.shape[-1] + 2)  # elements per (member, episode, row)
    step = max(1, chunk_bytes // max(1, M * N * per_row * features.element_size()))
    for first in range(0, E, step):
        part = support[first:first + step]  # [e, S]
        sup = rows[:, part]  # [M, e, S, F]
        if metric == "cosine":
            sim = torch.einsum("mnf,mesf->mens", rows, sup)
        elif metric == "euclidean":
            sim = -torch.cdist(rows.unsqueeze(1).expand(-1, len(part), -1, -1).reshape(M * len(part), N, -1),
                               sup.reshape(M * len(part), S, -1)).view(M, len(part), N, S)
        else:
            raise ValueError(f"unknown metric {metric!r}")
        for c in range(n_classes):
            out[:, first:first + len(part), :, c] = sim[..., onehot[:, c]].amax(-1)
    return out


def probe_init(M: int, E: int, n_features: int, n_classes: int, generator: torch.Generator
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Initial weights [M, E, F, C] and biases [M, E, C] of M x E probes, drawn as nn.Linear's
    default initialisation from ``generator``."""
    bound = 1.0 / n_features ** 0.5
    weight = (torch.rand(M, E, n_features, n_classes, generator=generator) * 2 - 1) * bound
    bias = (torch.rand(M, E, n_classes, generator=generator) * 2 - 1) * bound
    return weight, bias


def train_probes(features: torch.Tensor, support: torch.Tensor, support_labels: torch.Tensor,
                 n_classes: int, lr: float, max_iters: int, patience: int,
                 generator: torch.Generator | None = None, chunk_bytes: int | None = None,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 init: tuple[torch.Tensor, torch.Tensor] | None = None, early_stop: bool = True,
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One linear probe per (member, episode), trained many at a time as one tensor program.

    Each probe follows the released code's rule on its own: full-batch Adam (torch's update
    formula) on the mean cross-entropy of its support, stop as soon as train accuracy reaches
    1.0 or after ``patience`` iterations without improvement (or ``max_iters``), keep the
    weights of the best train accuracy; with ``early_stop`` False (``evaluate.probe_stop: none``,
    the paper's "10 000 epochs"), train every probe ``max_iters`` steps and keep the final
    weights. Adam is element-wise and every probe's gradient is its own, so a probe's path is
    the same as if it were trained alone.

    Speed: the bias is folded into the weights (the support features get a column of ones), so
    one batched product gives the logits, one gives the whole gradient, and one Adam update
    covers weights and bias; the support is stored once, [S, F], and read transposed for the
    logits, so that both products write a wide output ([C, S] logits, [C, F] gradient), which
    runs about twice as fast as a [S, C] one on a CPU; gradients are written out (softmax minus
    one-hot), not taken by autograd; the probes of a chunk start together, so they share Adam's
    step count and one fused Adam kernel (torch's, as ``torch.optim.Adam(fused=True)`` uses)
    updates them in one pass; train accuracy is kept as a count of wrong support rows; probes
    are taken in chunks whose support fits in ``chunk_bytes`` (cache-sized on a CPU); when half of a
    chunk's probes have stopped, the chunk is compacted to the ones still running, so a
    long-running probe does not keep the finished ones busy.
    ``support`` is [E, S], shared by the members, or [M, E, S], each member's own (the members
    of several seeds, each seed with its episodes). The initial weights come from ``init``
    (``probe_init``'s pair) or are drawn from ``generator``.
    Returns weights [M, E, F, C], biases [M, E, C] and iterations used [M, E].
    """
    M, E = features.shape[0], support.shape[-2]
    n_features = features.shape[-1]
    device = features.device
    weight0, bias0 = init if init is not None else probe_init(M, E, n_features, n_classes, generator)
    weight0, bias0 = weight0.to(device), bias0.to(device)
    per_member = support.dim() == 3
    labels = support_labels.to(device)
    S = labels.numel()
    onehot = F.one_hot(labels, n_classes).to(features.dtype).T.contiguous()  # [C, S]
    is_label = onehot.bool()  # [C, S]
    up_to_label = torch.arange(n_classes, device=device)[:, None] <= labels[None, :]  # [C, S]
    n_probes = M * E
    # Results, as [C, F + 1] (weights, then the bias) per probe while training.
    best = torch.cat([weight0.reshape(n_probes, n_features, n_classes).transpose(1, 2),
                      bias0.reshape(n_probes, n_classes, 1)], dim=2).contiguous()
    iterations = torch.zeros(n_probes, dtype=torch.long, device=device)
    width = n_features + 1
    if chunk_bytes is None:  # a CPU's cache; on a GPU, all probes at once (fewer, larger kernels)
        chunk_bytes = 4 << 20 if device.type == "cpu" else 1 << 30
    chunk = max(1, min(n_probes, chunk_bytes // max(1, S * width * features.element_size())))
    b1, b2 = betas
    step = torch.zeros((), device=device)  # Adam's step count, shared by a chunk's probes
    with torch.no_grad():
        for first in range(0, n_probes, chunk):
            ids = torch.arange(first, min(first + chunk, n_probes), device=device)
            x = torch.ones(len(ids), S, width, dtype=features.dtype, device=device)  # [P, S, F + 1]
            rows = support[ids // E, ids % E] if per_member else support[ids % E]
            x[:, :, :n_features] = features[(ids // E)[:, None], rows]
            xt = x.transpose(1, 2)  # [P, F + 1, S], a view
            w = best[ids].clone()  # [P, C, F + 1]
            m, v = torch.zeros_like(w), torch.zeros_like(w)
            best_wrong = torch.full((len(ids),), S + 1, dtype=torch.long, device=device)
            best_iter = torch.zeros(len(ids), dtype=torch.long, device=device)
            active = torch.ones(len(ids), dtype=torch.bool, device=device)
            for it in range(max_iters + 1):
                logits = torch.bmm(w, xt)  # [P, C, S]
                top = logits.amax(1, keepdim=True)  # [P, 1, S]
                n_active = len(ids)
                if early_stop:
                    # argmax == label, ties to the first class as argmax does (argmax over the short
                    # strided class axis is ~15x slower than amax): the label is a maximum and no
                    # earlier class is one
                    # train accuracy as the number of wrong support rows (accuracy 1.0 = none)
                    wrong = ((logits == top) & up_to_label).logical_xor_(is_label).any(1).sum(1)  # [P]
                    improved = active & (wrong < best_wrong)
                    if bool(improved.any()):
                        best_wrong = torch.where(improved, wrong, best_wrong)
                        best_iter.masked_fill_(improved, it)
                        best[ids[improved]] = w[improved]
                    done = active & ((wrong == 0) | (best_iter <= it - patience))
                    if bool(done.any()):
                        iterations[ids[done]] = it
                        active = active & ~done
                    n_active = int(active.sum())
                    if n_active == 0:
                        break
                if it == max_iters:
                    if not early_stop:  # the final weights, after max_iters steps
                        best[ids] = w
                    iterations[ids[active]] = it
                    break
                if 2 * n_active <= len(ids):  # compact to the probes still running
                    keep = active.nonzero().squeeze(1)
                    ids, x, w, m, v = ids[keep], x[keep], w[keep], m[keep], v[keep]
                    xt = x.transpose(1, 2)
                    best_wrong, best_iter, logits, top = best_wrong[keep], best_iter[keep], logits[keep], top[keep]
                    active = torch.ones(len(ids), dtype=torch.bool, device=device)
                # d(mean cross-entropy)/d logits = (softmax - onehot) / S
                # (softmax written out: torch's kernel is slow for a last dimension of a few classes)
                grad = (logits - top).exp_()
                grad.div_(grad.sum(1, keepdim=True)).sub_(onehot).div_(S)  # [P, C, S]
                grad = torch.bmm(grad, x)  # [P, C, F + 1]: weights and bias
                step.fill_(it + 1)
                adam_step(w, grad, m, v, step, lr, b1, b2, eps)
    weight = best[:, :, :n_features].transpose(1, 2).reshape(M, E, n_features, n_classes)
    return weight, best[:, :, n_features].reshape(M, E, n_classes), iterations.reshape(M, E)


def adam_step(w: torch.Tensor, grad: torch.Tensor, m: torch.Tensor, v: torch.Tensor, step: torch.Tensor,
              lr: float, b1: float, b2: float, eps: float) -> None:
    """One Adam update of ``w`` in place, every element at step ``step`` (already counted):
    torch's fused kernel where this torch has one for the device, else the same formula as
    torch's single-tensor Adam, written out."""
    if hasattr(torch, "_fused_adam_") and w.device.type in ("cpu", "cuda"):
        torch._fused_adam_([w], [grad], [m], [v], [], [step], lr=lr, beta1=b1, beta2=b2,
                           weight_decay=0.0, eps=eps, amsgrad=False, maximize=False)
        return
    t = float(step)
    m.lerp_(grad, 1 - b1)
    v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
    w.addcdiv_(m, v.sqrt().div_((1 - b2 ** t) ** 0.5).add_(eps), value=-lr / (1 - b1 ** t))


def probe_logits(features: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Logits of every row under every probe. [M, E, N, C]"""
    return torch.einsum("mnf,mefc->menc", features, weight) + bias[:, :, None, :]
