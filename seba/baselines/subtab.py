"""SubTab: self-supervised learning from overlapping subsets of the features."""

from __future__ import annotations

import itertools

import numpy as np
import torch

from seba.baselines import register
from seba.baselines.base import MinDelta, RepresentationMethod, train_with_early_stopping
from seba.core.errors import ConfigError, TrainingDiverged
from seba.model import Encoder
from seba.core.runtime import derive_seed, resolve_precision
from seba.core.schema import Float, Fraction, PairBatch, PositiveFloat, PositiveInt, choice, section


@section
class SubtabConfig:
    n_subsets: PositiveInt = 4  # SubTab's official config default
    overlap: Fraction = 0.75  # share of a subset's width taken from its neighbour (SubTab default)
    noise: choice("swap", "gaussian", "zero", "none") = "swap"  # noise added to each subset (SubTab default: swap_noise)
    masking_ratio: Fraction = 0.3  # share of a subset's columns that get noise (SubTab default)
    noise_level: Float = 0.1  # std of the Gaussian noise (SubTab default; used only by noise: gaussian)
    temperature: PositiveFloat = 0.1  # NT-Xent temperature tau (SubTab default)
    contrastive_weight: Float = 1.0  # SubTab adds the losses with weight 1; 0 disables
    distance_weight: Float = 1.0
    encoder_hidden: PositiveInt = 1024  # as SeBA's encoder
    encoder_out: PositiveInt = 256
    lr: PositiveFloat = 1e-3  # SubTab default
    batch_size: PairBatch = 32  # SubTab default
    max_epochs: PositiveInt = 1000  # cap; early stopping usually ends earlier
    max_steps: PositiveInt = 2000  # cap on optimiser steps (cost budget; SubTab's code: 15 epochs)
    patience: PositiveInt = 20  # SeBA's early-stopping rule, shorter patience for the cost budget
    min_delta: MinDelta = 0.001
    precision: choice("fp32", "bf16", "auto") = "auto"

    def __post_init__(self):
        bad = [f"{key} {getattr(self, key)} (need >= 0)" for key in ("contrastive_weight", "distance_weight", "noise_level")
               if not getattr(self, key) >= 0]
        if bad:
            raise ConfigError("baselines.subtab: " + "; ".join(bad))


def subtab_subsets(groups: np.ndarray, n_subsets: int, overlap: float) -> np.ndarray:
    """SubTab's feature subsets as a bool mask [K, D] over the encoded columns.

    As in SubTab, the (original) columns, in the table's order, are cut into ``n_subsets``
    contiguous chunks and every chunk is widened by ``n_overlap = int(overlap * width)`` columns of
    its neighbour (the first one forwards, the others backwards). Unlike SubTab's code, which
    drops the last ``G mod K`` columns, the chunk boundaries are spread so that every column is in
    some subset. A one-hot block (one group) is one column, never split. Fewer columns than
    subsets: one subset per column; a single column: two copies of it (as SubTab does)."""
    ids = np.unique(groups)
    n_groups = len(ids)
    k = min(n_subsets, n_groups)
    if k < 2:
        return np.ones((2, len(groups)), dtype=bool)
    bounds = np.round(np.linspace(0, n_groups, k + 1)).astype(int)
    n_overlap = int(overlap * (n_groups // k))
    masks = []
    for i in range(k):
        start, stop = (0, bounds[1] + n_overlap) if i == 0 else (bounds[i] - n_overlap, bounds[i + 1])
        masks.append(np.isin(groups, ids[max(0, start):min(n_groups, stop)]))
    return np.stack(masks)


def subtab_views(x: torch.Tensor, subsets: torch.Tensor, groups: torch.Tensor, n_groups: int, noise: str,
                 masking_ratio: float, noise_level: float, generator: torch.Generator | None) -> torch.Tensor:
    """The K subset views of a batch ``x`` [n, D], each placed in the full width with the columns
    outside its subset zeroed (the table is standardised: zero is the training mean): [K, n, D].

    With ``generator`` (training), each view gets SubTab's noise independently: a
    ``masking_ratio`` share of its (original) columns is replaced by swap noise (the same column of
    another row of the batch, rows shuffled per column), Gaussian noise (``x + N(0, noise_level)``)
    or zeros. A one-hot block is one column. Without ``generator`` (evaluation) there is no noise."""
    k, (n, d) = len(subsets), x.shape
    views = x.expand(k, n, d)
    if generator is not None and noise != "none":
        chosen = (torch.rand(k, n, n_groups, generator=generator) < masking_ratio).to(x.device)[:, :, groups]
        if noise == "swap":
            order = torch.rand(k, n, n_groups, generator=generator).argsort(dim=1).to(x.device)
            noisy = torch.gather(views, 1, order[:, :, groups])
        elif noise == "gaussian":
            noisy = views + noise_level * torch.randn(k, n, d, generator=generator).to(x.device)
        else:  # zero
            noisy = torch.zeros_like(views)
        views = torch.where(chosen, noisy, views)
    return views * subsets[:, None, :].to(x.dtype)


def nt_xent(zi: torch.Tensor, zj: torch.Tensor, temperature: float) -> torch.Tensor:
    """SubTab's NT-Xent for one pair of subsets: over the 2n projections, each one's positive is
    the same row's projection from the other subset, the other 2n - 2 are its negatives (dot
    product of the L2-normalised projections, divided by the temperature)."""
    z = torch.cat([zi, zj])
    n = len(zi)
    logits = (z @ z.T) / temperature
    logits = logits.masked_fill(torch.eye(2 * n, dtype=torch.bool, device=z.device), float("-inf"))
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)]).to(z.device)
    return torch.nn.functional.cross_entropy(logits, target)


@register
class SubTab(RepresentationMethod):
    """SubTab (Ucar et al., 2021): the columns are split into ``n_subsets`` overlapping subsets
    (``subtab_subsets``); each subset, with noise added to it (``subtab_views``), goes through the
    same encoder (SeBA's, on the full row with the other columns zeroed); a linear decoder
    reconstructs the whole row from each subset's embedding (MSE), and a projection head feeds
    a contrastive loss (NT-Xent) and a distance loss (MSE) between every pair of subsets.
    At evaluation a row's embedding is the mean of its subsets' embeddings (no noise)."""

    name = "subtab"
    paper_name = "SubTab"  # its row in data/reference/paper_results.csv (None: the paper has none)
    Config = SubtabConfig

    def fit(self, x_train, x_val, groups):
        cfg = self.cfg
        d = x_train.shape[1]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(self.seed, "subtab", "init"))
            self.encoder = Encoder(d, cfg.encoder_hidden, cfg.encoder_out, True).to(self.device)
            heads = torch.nn.ModuleDict({
                "projection": torch.nn.Sequential(torch.nn.Linear(cfg.encoder_out, cfg.encoder_out),
                                                  torch.nn.LeakyReLU(),
                                                  torch.nn.Linear(cfg.encoder_out, cfg.encoder_out)),
                "decoder": torch.nn.Linear(cfg.encoder_out, d)}).to(self.device)
        self.subsets = torch.as_tensor(subtab_subsets(groups, cfg.n_subsets, cfg.overlap), device=self.device)
        X = torch.as_tensor(x_train, dtype=torch.float32, device=self.device)
        V = torch.as_tensor(x_val, dtype=torch.float32, device=self.device)
        groups_t = torch.as_tensor(groups, dtype=torch.long, device=self.device)
        n_groups = int(groups.max()) + 1
        bf16 = resolve_precision(cfg.precision, self.device) == "bf16"
        gen = torch.Generator().manual_seed(derive_seed(self.seed, "subtab"))
        pairs = list(itertools.combinations(range(len(self.subsets)), 2))
        label = f"[baseline subtab seed {self.seed}]"

        def views(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
            return subtab_views(x, self.subsets, groups_t, n_groups, cfg.noise, cfg.masking_ratio,
                                cfg.noise_level, g)

        def loss(x: torch.Tensor, x_views: torch.Tensor) -> torch.Tensor:
            k, n, _ = x_views.shape
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=bf16):
                h = self.encoder(x_views.reshape(k * n, d))
                z, x_hat = heads["projection"](h), heads["decoder"](h)
            z = torch.nn.functional.normalize(z.float(), dim=1).reshape(k, n, -1)
            # SubTab's MSE: squared error summed over the columns, averaged over rows (and subsets).
            total = (x_hat.float().reshape(k, n, d) - x).square().sum(-1).mean()
            for i, j in pairs:
                if cfg.contrastive_weight:
                    total = total + cfg.contrastive_weight * nt_xent(z[i], z[j], cfg.temperature) / len(pairs)
                if cfg.distance_weight:
                    total = total + cfg.distance_weight * (z[i] - z[j]).square().sum(-1).mean() / len(pairs)
            if not torch.isfinite(total):
                raise TrainingDiverged(f"{label}: training loss is not finite")
            return total

        def batch_loss(index: torch.Tensor) -> torch.Tensor:
            x = X[index.to(self.device)]
            return loss(x, views(x, gen))

        # The validation loss uses one fixed noise draw for the validation rows (batches of batch_size).
        val_gen = torch.Generator().manual_seed(derive_seed(self.seed, "subtab", "validation"))
        fixed_val = [(v, views(v, val_gen))
                     for v in (V[i:i + cfg.batch_size] for i in range(0, len(V), cfg.batch_size)) if len(v) >= 2]

        def val_loss():
            return sum(float(loss(v, w)) * len(v) for v, w in fixed_val) / max(1, sum(len(v) for v, _ in fixed_val))

        self.log = train_with_early_stopping([self.encoder, heads], batch_loss, len(X), val_loss, cfg, gen, label)

    @torch.no_grad()
    def encode(self, x: np.ndarray) -> torch.Tensor:
        """SubTab's evaluation embedding: the mean of the row's subset embeddings (no noise)."""
        self.encoder.eval()
        X = torch.as_tensor(x, dtype=torch.float32, device=self.device)
        out = []
        for first in range(0, len(X), 4096):
            views = subtab_views(X[first:first + 4096], self.subsets, None, 0, "none", 0.0, 0.0, None)
            k, n, d = views.shape
            out.append(self.encoder(views.reshape(k * n, d)).reshape(k, n, -1).mean(0))
        return torch.cat(out).float()
