"""Pieces every training loop shares: the early-stopping rule, Adam as the loops build it, and
the split of a shuffled epoch into batches."""

from __future__ import annotations

import math

import torch


class EarlyStopping:
    """The stopping rule of every pretraining loop: remember the lowest validation value (and
    the epoch it came at); patience counts epochs since the last improvement of more than
    ``min_delta`` (relative) over the value that last restarted it."""

    def __init__(self, patience: int, min_delta: float):
        self.patience, self.min_delta = patience, min_delta
        self.best, self.best_epoch = math.inf, 0
        self.reference, self.reference_epoch = math.inf, 0

    def update(self, value: float, epoch: int) -> bool:
        """Record one epoch's value; True when it is the lowest so far (save the weights)."""
        if value < self.reference - self.min_delta * abs(self.reference) or not math.isfinite(self.reference):
            self.reference, self.reference_epoch = value, epoch
        if value < self.best:
            self.best, self.best_epoch = value, epoch
            return True
        return False

    def should_stop(self, epoch: int) -> bool:
        return epoch - self.reference_epoch >= self.patience

    def stops_by(self, max_epochs: int) -> int:
        return min(self.reference_epoch + self.patience, max_epochs)


def make_adam(params: list, lr: float, device: torch.device) -> torch.optim.Optimizer:
    """Adam with torch's fused kernel where the device has one (the same update, one pass over
    the weights instead of several: ~10 % of a CPU step here), else the default. On CUDA it
    keeps its step count on the device (``capturable``), so that a step can be a CUDA graph."""
    try:
        return torch.optim.Adam(params, lr=lr, fused=device.type in ("cpu", "cuda"),
                                capturable=device.type == "cuda")
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(params, lr=lr)


def batch_slices(n_rows: int, batch_size: int, order: torch.Tensor) -> list[torch.Tensor]:
    """Consecutive slices of ``order``; the last partial batch is kept unless it has one row
    (a single row has no neighbour), in which case it joins the previous batch."""
    cuts = list(range(0, n_rows, batch_size))
    batches = [order[i:i + batch_size] for i in cuts]
    if len(batches) > 1 and len(batches[-1]) < 2:
        batches[-2] = torch.cat([batches[-2], batches[-1]])
        batches.pop()
    return [b for b in batches if len(b) >= 2]


class FusedAdam:
    """Adam over a fixed list of tensors through torch's fused kernel: the update
    ``torch.optim.Adam(fused=True)`` makes, bit for bit, without ``torch.optim``, whose first
    use imports torch's compiler stack (about a second of every pretraining process's
    start-up). The step counts live on the tensors' device, so a step can be a CUDA graph.
    ``select`` keeps some members of stacked tensors (their leading dimension) with their state."""

    def __init__(self, params: list[torch.Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, state: tuple[list, list, list] | None = None):
        self.params, self.lr, self.betas, self.eps = list(params), lr, betas, eps
        self.exp_avg, self.exp_avg_sq, self.steps = state or (
            [torch.zeros_like(p) for p in self.params], [torch.zeros_like(p) for p in self.params],
            [torch.zeros((), dtype=torch.float32, device=p.device) for p in self.params])

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        torch._foreach_add_(self.steps, 1)
        torch._fused_adam_(self.params, [p.grad for p in self.params], self.exp_avg, self.exp_avg_sq, [],
                           self.steps, amsgrad=False, lr=self.lr, beta1=self.betas[0], beta2=self.betas[1],
                           weight_decay=0.0, eps=self.eps, maximize=False, grad_scale=None, found_inf=None)

    def select(self, params: list[torch.Tensor], members: torch.Tensor) -> "FusedAdam":
        """Adam for ``params``, the kept ``members`` of this one's tensors, with their state."""
        return FusedAdam(params, self.lr, self.betas, self.eps,
                         ([m[members] for m in self.exp_avg], [v[members] for v in self.exp_avg_sq],
                          [s.clone() for s in self.steps]))
