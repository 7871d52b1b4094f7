"""VIME (self-supervised part): mask estimation and feature reconstruction from corrupted rows."""

from __future__ import annotations

import torch

from seba.baselines import register
from seba.baselines.base import MinDelta, RepresentationMethod, train_with_early_stopping
from seba.core.errors import TrainingDiverged
from seba.model import Encoder
from seba.core.runtime import derive_seed, resolve_precision
from seba.core.schema import Fraction, PositiveFloat, PositiveInt, choice, section


@section
class VimeConfig:
    p_m: Fraction = 0.3  # corruption probability (VIME's official code default)
    alpha: PositiveFloat = 2.0  # weight of the reconstruction loss (VIME's official code default)
    encoder_hidden: PositiveInt = 1024  # as SeBA's encoder
    encoder_out: PositiveInt = 256
    lr: PositiveFloat = 1e-3
    batch_size: PositiveInt = 128  # VIME's official code default
    max_epochs: PositiveInt = 1000  # cap; early stopping usually ends earlier
    max_steps: PositiveInt = 3000  # cap on optimiser steps (cost budget; VIME's code: 10 epochs)
    patience: PositiveInt = 20  # SeBA's early-stopping rule, shorter patience for the cost budget
    min_delta: MinDelta = 0.001
    precision: choice("fp32", "bf16", "auto") = "auto"


def vime_corrupt(x: torch.Tensor, groups: torch.Tensor, n_groups: int, p_m: float,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """VIME's pretext generator on one batch ``x`` [n, D].

    Each (row, original column) is masked with probability ``p_m``; a masked cell takes the value
    of the same column in another row of the batch, the rows being shuffled independently per
    column (VIME's ``x_bar``: a draw from the column's empirical marginal). A one-hot block is one
    original column (``groups``): it is masked and shuffled as a whole, so it stays a valid
    one-hot. Returns the corrupted rows and, as in VIME, the mask of the cells that actually
    changed (``x_tilde != x``; a cell swapped with an equal value counts as unchanged)."""
    n = len(x)
    chosen = (torch.rand(n, n_groups, generator=generator) < p_m).to(x.device)  # [n, G]
    order = torch.rand(n, n_groups, generator=generator).argsort(dim=0).to(x.device)  # a permutation per column
    shuffled = torch.gather(x, 0, order[:, groups])  # column j from row order[i, groups[j]]
    x_tilde = torch.where(chosen[:, groups], shuffled, x)
    return x_tilde, (x_tilde != x).to(x.dtype)


@register
class VIME(RepresentationMethod):
    """VIME-self (Yoon et al., 2020): the encoder sees a corrupted row (``vime_corrupt``: a
    ``p_m`` share of the original columns replaced by draws from their empirical marginals) and
    two linear heads on its output predict which cells were corrupted (mask estimator, BCE) and
    the uncorrupted row (feature estimator, MSE); loss = mask loss + ``alpha`` * reconstruction
    loss. Encoder as SeBA's (same sizes); the heads are dropped after pretraining."""

    name = "vime"
    paper_name = "VIME"  # its row in data/reference/paper_results.csv (None: the paper has none)
    Config = VimeConfig

    def fit(self, x_train, x_val, groups):
        cfg = self.cfg
        d = x_train.shape[1]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(self.seed, "vime", "init"))
            self.encoder = Encoder(d, cfg.encoder_hidden, cfg.encoder_out, True).to(self.device)
            heads = torch.nn.ModuleDict({"mask": torch.nn.Linear(cfg.encoder_out, d),
                                         "feature": torch.nn.Linear(cfg.encoder_out, d)}).to(self.device)
        X = torch.as_tensor(x_train, dtype=torch.float32, device=self.device)
        V = torch.as_tensor(x_val, dtype=torch.float32, device=self.device)
        groups_t = torch.as_tensor(groups, dtype=torch.long, device=self.device)
        n_groups = int(groups.max()) + 1
        bf16 = resolve_precision(cfg.precision, self.device) == "bf16"
        gen = torch.Generator().manual_seed(derive_seed(self.seed, "vime"))
        label = f"[baseline vime seed {self.seed}]"

        def loss(x: torch.Tensor, x_tilde: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=bf16):
                h = self.encoder(x_tilde)
                mask_logits, x_hat = heads["mask"](h), heads["feature"](h)
            mask_loss = torch.nn.functional.binary_cross_entropy_with_logits(mask_logits.float(), mask)
            feature_loss = torch.nn.functional.mse_loss(x_hat.float(), x)
            total = mask_loss + cfg.alpha * feature_loss
            if not torch.isfinite(total):
                raise TrainingDiverged(f"{label}: training loss is not finite")
            return total

        def batch_loss(index: torch.Tensor) -> torch.Tensor:
            x = X[index.to(self.device)]
            return loss(x, *vime_corrupt(x, groups_t, n_groups, cfg.p_m, gen))

        # The validation loss uses one fixed corruption of the validation rows (batches of batch_size).
        val_gen = torch.Generator().manual_seed(derive_seed(self.seed, "vime", "validation"))
        fixed_val = [(v, *vime_corrupt(v, groups_t, n_groups, cfg.p_m, val_gen))
                     for v in (V[i:i + cfg.batch_size] for i in range(0, len(V), cfg.batch_size)) if len(v) >= 2]

        def val_loss():
            total = sum(float(loss(*batch)) * len(batch[0]) for batch in fixed_val)
            return total / max(1, sum(len(batch[0]) for batch in fixed_val))

        self.log = train_with_early_stopping([self.encoder, heads], batch_loss, len(X), val_loss,
                                             cfg, gen, label)
