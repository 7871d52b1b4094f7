"""The encoder (kept for few-shot classification) and the mask-conditioned projector."""

from __future__ import annotations

import torch
from torch import nn


class Encoder(nn.Module):
    """2-layer MLP: Linear(D, hidden) - ReLU - Linear(hidden, out) [- ReLU]."""

    def __init__(self, in_features: int, hidden: int, out: int, out_relu: bool = True):
        super().__init__()
        layers = [nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, out)]
        if out_relu:
            layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Projector(nn.Module):
    """2-layer head pi(h, m): input cat(h, m) with m the expanded [D] mask when conditioned."""

    def __init__(self, in_features: int, mask_features: int, hidden: int, out: int,
                 conditioned: bool = True):
        super().__init__()
        self.conditioned = conditioned
        width = in_features + (mask_features if conditioned else 0)
        self.net = nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, out))

    def forward(self, h: torch.Tensor, column_mask: torch.Tensor) -> torch.Tensor:
        if self.conditioned:
            m = column_mask.to(h.dtype).expand(h.shape[0], -1)
            h = torch.cat([h, m], dim=1)
        return self.net(h)
