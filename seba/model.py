"""The encoder (kept for few-shot classification) and the mask-conditioned projector, and
their stacked forms: S members of one shape (one per seed) trained as batched products."""

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


class StackedLinear(nn.Module):
    """S independent linear layers applied to S batches at once: ``y[s] = x[s] @ weight[s].T +
    bias[s]`` as one batched product. The weights keep ``nn.Linear``'s layout ([S, out, in]), so
    member ``s``'s slice is an ``nn.Linear`` state as it is."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(weight)  # [S, out, in]
        self.bias = nn.Parameter(bias)  # [S, out]

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [S, B, in] -> [S, B, out]
        return torch.baddbmm(self.bias.unsqueeze(1), x, self.weight.transpose(1, 2))


def stack_sequentials(modules: list[nn.Sequential]) -> nn.Sequential:
    """One ``nn.Sequential`` of ``StackedLinear`` layers (and the same activations) from S
    sequentials of one shape: its state dict has their keys with a leading member dimension."""
    layers = []
    for parts in zip(*modules):
        if isinstance(parts[0], nn.Linear):
            layers.append(StackedLinear(torch.stack([p.weight.detach() for p in parts]),
                                        torch.stack([p.bias.detach() for p in parts])))
        elif isinstance(parts[0], nn.ReLU):
            layers.append(nn.ReLU())
        else:
            raise TypeError(f"cannot stack a {type(parts[0]).__name__} layer")
    return nn.Sequential(*layers)


def select_members(module: nn.Module, members: torch.Tensor) -> None:
    """Keep only the given members (an index into the leading dimension) of every parameter,
    in place: the parameters become new tensors (an optimiser must be rebuilt for them)."""
    for layer in module.modules():
        if isinstance(layer, StackedLinear):
            layer.weight = nn.Parameter(layer.weight.detach()[members])
            layer.bias = nn.Parameter(layer.bias.detach()[members])


class StackedEncoder(nn.Module):
    """S encoders of one shape trained side by side (one per seed): [S, B, D] -> [S, B, out].
    Member ``s`` of its state dict (``v[s]`` for every value) is an ``Encoder`` state dict."""

    def __init__(self, encoders: list[Encoder]):
        super().__init__()
        self.net = stack_sequentials([e.net for e in encoders])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def stacked_state(self) -> dict[str, torch.Tensor]:
        """The state dict: every value has the leading member dimension already."""
        return self.state_dict()


class StackedProjector(nn.Module):
    """S projectors side by side; member s sees its own [D] mask (``column_masks`` is [S, D]).

    ``mask_bias`` (``pretrain.mask_bias``): a batch has one mask, so the first layer's product
    with it is the same for every row; computed once per batch as a bias instead of over the
    concatenated input. The same function and parameters; sums in another order, so results
    differ in float rounding; fewer products the more columns a table has."""

    def __init__(self, projectors: list[Projector], mask_bias: bool = False):
        super().__init__()
        self.conditioned = projectors[0].conditioned
        self.mask_bias = mask_bias
        self.net = stack_sequentials([p.net for p in projectors])

    def forward(self, h: torch.Tensor, column_masks: torch.Tensor) -> torch.Tensor:
        if self.conditioned and self.mask_bias:
            first, rest = self.net[0], self.net[1:]
            width = h.shape[2]  # the encoder's output; the weight's other columns meet the mask
            weight = first.weight.transpose(1, 2)  # [S, width + D, hidden]
            bias = torch.baddbmm(first.bias.unsqueeze(1), column_masks.to(h.dtype).unsqueeze(1), weight[:, width:])
            return rest(torch.baddbmm(bias, h, weight[:, :width]))
        if self.conditioned:
            m = column_masks.to(h.dtype).unsqueeze(1).expand(-1, h.shape[1], -1)
            h = torch.cat([h, m], dim=2)
        return self.net(h)
