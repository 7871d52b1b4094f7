"""SCARF: contrastive pretraining with random feature corruption (self-supervised)."""

from __future__ import annotations

import torch

from seba.baselines import register
from seba.baselines.base import MinDelta, RepresentationMethod, train_with_early_stopping
from seba.model import Encoder
from seba.core.runtime import derive_seed, resolve_precision
from seba.core.schema import Fraction, PairBatch, PositiveFloat, PositiveInt, choice, section


@section
class ScarfConfig:
    corruption_rate: Fraction = 0.6  # SCARF paper's default
    temperature: PositiveFloat = 1.0  # SCARF paper's default
    encoder_hidden: PositiveInt = 1024  # as SeBA's encoder
    encoder_out: PositiveInt = 256
    lr: PositiveFloat = 1e-3
    batch_size: PairBatch = 256  # SCARF paper: 128; 256 halves the steps on 2 cores
    max_epochs: PositiveInt = 1000  # cap; early stopping ends earlier
    max_steps: PositiveInt = 3000  # optimiser-step cap (cost budget, as VIME's and SubTab's)
    patience: PositiveInt = 20  # SeBA's early-stopping rule (epochs), short for the cost budget
    min_delta: MinDelta = 0.001
    precision: choice("fp32", "bf16", "auto") = "auto"


@register
class SCARF(RepresentationMethod):
    """SCARF (Bahri et al., 2022): each row's view corrupts a random ``corruption_rate`` share of
    its original columns (a one-hot block counts as one column) with the values of the same
    columns in random other training rows, i.e. draws from the empirical marginals; encoder +
    head are trained with InfoNCE between a row's clean and corrupted embeddings, the other rows
    of the batch as negatives. Encoder as SeBA's (same sizes)."""

    name = "scarf"
    paper_name = "Scarf"  # its row in data/reference/paper_results.csv (None: the paper has none)
    Config = ScarfConfig

    def fit(self, x_train, x_val, groups):
        cfg = self.cfg
        d = x_train.shape[1]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(self.seed, "scarf", "init"))
            self.encoder = Encoder(d, cfg.encoder_hidden, cfg.encoder_out, True).to(self.device)
            head = torch.nn.Sequential(torch.nn.Linear(cfg.encoder_out, cfg.encoder_hidden), torch.nn.ReLU(),
                                       torch.nn.Linear(cfg.encoder_hidden, cfg.encoder_out)).to(self.device)
        X = torch.as_tensor(x_train, dtype=torch.float32, device=self.device)
        V = torch.as_tensor(x_val, dtype=torch.float32, device=self.device)
        groups_t = torch.as_tensor(groups, dtype=torch.long, device=self.device)
        n_groups = int(groups.max()) + 1
        columns = torch.arange(d, device=self.device)
        bf16 = resolve_precision(cfg.precision, self.device) == "bf16"
        gen = torch.Generator().manual_seed(derive_seed(self.seed, "scarf"))

        def corrupt(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
            chosen = (torch.rand(len(x), n_groups, generator=g) < cfg.corruption_rate).to(self.device)
            donors = torch.randint(0, len(X), (len(x), n_groups), generator=g).to(self.device)
            values = X[donors[:, groups_t], columns]  # each column from its group's donor row
            return torch.where(chosen[:, groups_t], values, x)

        def loss(x: torch.Tensor, x_corrupt: torch.Tensor) -> torch.Tensor:
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=bf16):
                z = head(self.encoder(torch.cat([x, x_corrupt])))
            z = torch.nn.functional.normalize(z.float(), dim=1)
            anchors, positives = z[:len(x)], z[len(x):]
            logits = anchors @ positives.T / cfg.temperature
            return torch.nn.functional.cross_entropy(logits, torch.arange(len(x), device=self.device))

        val_gen = torch.Generator().manual_seed(derive_seed(self.seed, "scarf", "validation"))
        fixed_val = [(V[i:i + cfg.batch_size], corrupt(V[i:i + cfg.batch_size], val_gen))
                     for i in range(0, len(V), cfg.batch_size) if len(V[i:i + cfg.batch_size]) >= 2]

        def val_loss():
            return sum(float(loss(a, b)) * len(a) for a, b in fixed_val) / max(1, sum(len(a) for a, _ in fixed_val))

        self.log = train_with_early_stopping(
            [self.encoder, head], lambda idx: loss(X[idx.to(self.device)], corrupt(X[idx.to(self.device)], gen)),
            len(X), val_loss, cfg, gen, f"[baseline scarf seed {self.seed}]")
