"""The SeBA objective as pure functions: masks over column groups, views, target-view
nearest neighbours, and InfoNCE with cosine similarity.

Shapes: a batch ``x`` is [B, D] (encoded columns), ``groups`` is [D] (original column of each
encoded column), a group mask is [G] bool, its expansion to encoded columns is [D] float.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def masked_group_count(n_groups: int, ratio: float, min_masked: int = 1) -> int:
    """k = max(min_masked, floor(ratio * n_groups)), never all groups (the feature view must
    keep at least one column when there are two or more)."""
    k = max(min_masked, int(math.floor(ratio * n_groups + 1e-9)))
    return min(k, max(n_groups - 1, 1))


def sample_group_mask(n_groups: int, k: int, generator: torch.Generator) -> torch.Tensor:
    """A [G] bool mask with exactly ``k`` original columns set (the target-view columns)."""
    chosen = torch.randperm(n_groups, generator=generator)[:k]
    mask = torch.zeros(n_groups, dtype=torch.bool)
    mask[chosen] = True
    return mask


def expand_mask(group_mask: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """Group mask [G] -> encoded-column mask [D] (a one-hot block follows its group)."""
    return group_mask[groups]


def feature_view(x: torch.Tensor, column_mask: torch.Tensor, fill: str = "zero",
                 permutation: torch.Tensor | None = None) -> torch.Tensor:
    """x with the target-view columns removed: zero imputation x * (1 - m), or ``marginal``:
    the removed columns take the values of another row of the batch (``permutation``)."""
    keep = (~column_mask).to(x.dtype)
    if fill == "zero":
        return x * keep
    if fill == "marginal":
        if permutation is None:
            raise ValueError("fill='marginal' needs a row permutation")
        return x * keep + x[permutation] * (1.0 - keep)
    raise ValueError(f"unknown fill {fill!r}")


def target_neighbours(x: torch.Tensor, column_mask: torch.Tensor, exact: bool = False) -> torch.Tensor:
    """Index of each row's nearest other row (Euclidean) in the target view x[:, m]. [B]

    On a CPU the target columns are selected (fewer columns to compare); elsewhere the other
    columns are zeroed instead, which gives the same distances without the device-to-host
    synchronisation that boolean indexing costs (it must read the mask's count). Distances are
    ``torch.cdist``'s, which for batches of more than 25 rows computes ||a||^2 + ||b||^2 - 2 a.b
    as one product: in float32 its rounding picks a farther row for about 1 % of rows on some
    tables (benchmarks/neighbour_search.py). ``exact`` computes that product in float64, which
    finds the nearest row (``pretrain.neighbour_search: exact``)."""
    if x.device.type == "cpu":
        target = x[:, column_mask]
    else:
        target = x * column_mask.to(x.dtype)
    return _nearest_other_rows(target, exact)


def _nearest_other_rows(target: torch.Tensor, exact: bool) -> torch.Tensor:
    """For [B, D] or stacked [S, B, D] rows: the index of each row's nearest other row (the last
    dimension of the result indexes rows), in float64 if ``exact``."""
    if exact:
        target = target.double()
    distances = torch.cdist(target, target)
    distances.diagonal(dim1=-2, dim2=-1).fill_(float("inf"))
    return distances.argmin(dim=-1)


def info_nce(z: torch.Tensor, positives: torch.Tensor, temperature: float) -> torch.Tensor:
    """Mean over rows of -log( exp(cos(z_i, z_p(i))/T) / sum_{a != i} exp(cos(z_i, z_a)/T) )."""
    if z.ndim != 2 or positives.shape != (z.shape[0],):
        raise ValueError(f"info_nce: z {tuple(z.shape)} and positives {tuple(positives.shape)} disagree")
    z = F.normalize(z, dim=1)
    logits = z @ z.T / temperature
    logits = logits.masked_fill(torch.eye(len(z), dtype=torch.bool, device=z.device), float("-inf"))
    return F.cross_entropy(logits, positives)


# Stacked forms: S members (one per seed) at once. A batch is [S, B, D], masks are [S, D].
# On a CPU each member goes through the functions above (the same arithmetic as a member
# trained alone, bit for bit); elsewhere one batched kernel serves all members.

def _batched(x: torch.Tensor, batched: bool | None) -> bool:
    return x.device.type != "cpu" if batched is None else batched


def stacked_target_neighbours(x: torch.Tensor, column_masks: torch.Tensor,
                              batched: bool | None = None, exact: bool = False) -> torch.Tensor:
    """``target_neighbours`` for every member: [S, B] row indices."""
    if not _batched(x, batched):
        return torch.stack([target_neighbours(x[s], column_masks[s], exact) for s in range(len(x))])
    return _nearest_other_rows(x * column_masks.to(x.dtype).unsqueeze(1), exact)


def stacked_feature_view(x: torch.Tensor, column_masks: torch.Tensor, fill: str = "zero",
                         permutations: torch.Tensor | None = None) -> torch.Tensor:
    """``feature_view`` for every member ([S, B] permutations for ``marginal``): element-wise,
    so the same arithmetic on every device."""
    keep = (~column_masks).to(x.dtype).unsqueeze(1)
    if fill == "zero":
        return x * keep
    if fill == "marginal":
        if permutations is None:
            raise ValueError("fill='marginal' needs a row permutation")
        shuffled = torch.gather(x, 1, permutations.unsqueeze(2).expand(-1, -1, x.shape[2]))
        return x * keep + shuffled * (1.0 - keep)
    raise ValueError(f"unknown fill {fill!r}")


def stacked_info_nce(z: torch.Tensor, positives: torch.Tensor, temperature: float,
                     batched: bool | None = None) -> torch.Tensor:
    """``info_nce`` for every member: [S] losses (each member's mean over its rows)."""
    if z.ndim != 3 or positives.shape != z.shape[:2]:
        raise ValueError(f"stacked_info_nce: z {tuple(z.shape)} and positives {tuple(positives.shape)} disagree")
    if not _batched(z, batched):
        return torch.stack([info_nce(z[s], positives[s], temperature) for s in range(len(z))])
    S, B = positives.shape
    z = F.normalize(z, dim=2)
    logits = torch.bmm(z, z.transpose(1, 2)) / temperature
    logits = logits.masked_fill(torch.eye(B, dtype=torch.bool, device=z.device), float("-inf"))
    per_row = F.cross_entropy(logits.reshape(S * B, B), positives.reshape(S * B), reduction="none")
    return per_row.view(S, B).mean(dim=1)
