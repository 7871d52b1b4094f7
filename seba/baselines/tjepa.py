"""T-JEPA (Thimonier et al., ICLR 2025): a joint-embedding predictive architecture over a row's
features, trained without augmentations by predicting, in latent space, the target encoder's
tokens of some features from the context encoder's tokens of other features."""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from seba.baselines import register
from seba.baselines.base import MinDelta, RepresentationMethod, train_with_early_stopping
from seba.core.errors import ConfigError, TrainingDiverged
from seba.core.runtime import derive_seed, resolve_precision
from seba.core.schema import Float, Fraction, PositiveFloat, PositiveInt, choice, section


@section
class TjepaConfig:
    # Sources: the official code's scripts/launch_tjepa.sh (the run configuration it publishes) where
    # it sets a value, src/configs.py's defaults where it does not. Cut for the cost budget
    # (docs/baselines.md): layers, pred_layers, batch_size, max_steps and dropout; the launch
    # script's values take 30-45 min per small table on this CPU, a day or more per wide one,
    # and over 19 GB of memory on dna.
    dim: PositiveInt = 64  # token width (launch: model_dim_hidden 64; configs.py: 64)
    layers: PositiveInt = 4  # encoder transformer layers (configs.py: 4; launch: 16; cost budget)
    heads: PositiveInt = 2  # (launch: 2; configs.py: 8)
    dim_feedforward: PositiveInt = 64  # (launch: 64; configs.py: 256)
    dropout: Float = 0.0  # encoder dropout (launch: 0.0019, its sweep's range [0, 0.01]; > 0 is 3x slower here)
    reg_tokens: PositiveInt = 1  # [REG] regularisation tokens (launch: n_cls_tokens 1)
    pred_dim: PositiveInt = 16  # predictor width (launch: pred_embed_dim 16; configs.py: 64)
    pred_layers: PositiveInt = 2  # (configs.py: 2; launch: 16; cost budget)
    pred_heads: PositiveInt = 4  # (launch and configs.py: 4)
    pred_dim_feedforward: PositiveInt = 256  # (configs.py; launch does not set it)
    pred_dropout: Float = 0.0  # (launch: 0.0019, sweep range [0, 0.01]; configs.py: 0.1)
    min_context_share: Fraction = 0.13628349247854785  # context: a share of the features (launch; configs.py: 0.2)
    max_context_share: Fraction = 0.36819012681604135  # (launch; configs.py: 0.4)
    min_target_share: Fraction = 0.1556321308543076  # each target: a share of the features (launch; configs.py: 0.2)
    max_target_share: Fraction = 0.6222278244105446  # (launch; configs.py: 0.4)
    targets: PositiveInt = 4  # target sets per context (launch and configs.py: mask_num_preds 4)
    ema_start: Fraction = 0.996  # target-encoder momentum, linear ramp to ema_end over the planned steps
    ema_end: Fraction = 1.0  # (launch and configs.py)
    grad_clip: Float = 1.0  # element-wise clamp of the context encoder's gradients (configs.py; 0: off)
    lr: PositiveFloat = 0.0003658682841082736  # Adam, constant (launch: the peak of warm-up + cosine, AdamW, decay 0)
    batch_size: PositiveInt = 32  # (launch: 512; configs.py: 64; cost budget)
    max_epochs: PositiveInt = 300  # (launch: 300; configs.py: 100)
    max_steps: PositiveInt = 500  # optimiser-step cap, whole epochs (cost budget; launch's 300 epochs: 600-2700 steps here, income 21600)
    patience: PositiveInt = 20  # SeBA's early-stopping rule on a fixed-mask validation loss (launch: 100, train loss)
    min_delta: MinDelta = 0.001
    precision: choice("fp32", "bf16", "auto") = "auto"

    def __post_init__(self):
        if self.dim % self.heads or self.pred_dim % self.pred_heads or self.dim % 2 or self.pred_dim % 2:
            raise ConfigError("baselines.tjepa: dim and pred_dim must be even and divisible by heads and "
                              f"pred_heads, got {self.dim}/{self.heads} and {self.pred_dim}/{self.pred_heads}")
        if self.min_context_share > self.max_context_share or self.min_target_share > self.max_target_share:
            raise ConfigError("baselines.tjepa: need min_context_share <= max_context_share and "
                              "min_target_share <= max_target_share")
        if self.min_context_share + self.min_target_share >= 1:
            raise ConfigError("baselines.tjepa: min_context_share + min_target_share must be < 1 (the context "
                              "and a target are disjoint)")
        if self.ema_start > self.ema_end:
            raise ConfigError("baselines.tjepa: need ema_start <= ema_end")
        if not 0 <= self.dropout < 1 or not 0 <= self.pred_dropout < 1 or self.grad_clip < 0:
            raise ConfigError("baselines.tjepa: need 0 <= dropout, pred_dropout < 1 and grad_clip >= 0")


def sinusoid(n_positions: int, dim: int, base: float) -> torch.Tensor:
    """Fixed positional codes [n_positions, dim]: sines then cosines of position x base^(-2i/dim)."""
    position = torch.arange(n_positions, dtype=torch.float64)[:, None]
    frequency = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angle = position * frequency
    return torch.cat([angle.sin(), angle.cos()], dim=1).float()


def mask_sizes(n_features: int, cfg) -> tuple[int, int, int, int]:
    """The smallest and largest context and target sizes (features) for ``n_features``: each
    share of the features rounded, at least one feature; the smallest context and target must
    leave each other room (they are disjoint)."""
    min_c = max(1, round(n_features * cfg.min_context_share))
    max_c = max(min_c, round(n_features * cfg.max_context_share))
    min_t = max(1, round(n_features * cfg.min_target_share))
    max_t = max(min_t, round(n_features * cfg.max_target_share))
    if min_c + min_t > n_features:
        raise ConfigError(f"baselines.tjepa: a table of {n_features} feature(s) has no room for a context of "
                          f"{min_c} and a disjoint target of {min_t} feature(s)")
    return min_c, max_c, min_t, max_t


def draw_masks(n_rows: int, n_features: int, sizes: tuple[int, int, int, int], n_targets: int,
               generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One batch's masks, as T-JEPA draws them: a context size and a target size for the whole
    batch (each uniform between its bounds, redrawn until both fit in the row), then per row a
    random context of that many features and ``n_targets`` target sets, each drawn among the
    features outside the context (targets may overlap one another, never the context).
    Returns sorted feature indices: context [n_rows, n_context], targets [n_targets, n_rows, n_target]."""
    min_c, max_c, min_t, max_t = sizes
    while True:
        n_context = min_c + round((max_c - min_c) * torch.rand(1, generator=generator).item())
        n_target = min_t + round((max_t - min_t) * torch.rand(1, generator=generator).item())
        if n_context + n_target <= n_features:
            break
    order = torch.rand(n_rows, n_features, generator=generator).argsort(dim=1)
    context = order[:, :n_context].sort(dim=1).values
    in_context = torch.zeros(n_rows, n_features, dtype=torch.bool).scatter_(1, context, True)
    keys = torch.rand(n_targets, n_rows, n_features, generator=generator).masked_fill(in_context, 2.0)
    targets = keys.argsort(dim=2)[:, :, :n_target].sort(dim=2).values
    return context, targets


def _init_linear(module: nn.Module) -> None:
    """The official initialisation (``trunc_normal``): Linear weights N(0, 0.02) truncated, zero
    biases, LayerNorms at identity."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


class Transformer(nn.Module):
    """T-JEPA's tabular transformer: post-norm encoder layers (ReLU), then dropout, LayerNorm,
    Linear, dropout, LayerNorm on every token."""

    def __init__(self, dim: int, layers: int, heads: int, dim_feedforward: int, dropout: float):
        super().__init__()
        layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward, dropout, activation="relu",
                                           batch_first=True, norm_first=False)
        self.layers = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.out = nn.Sequential(nn.Dropout(dropout), nn.LayerNorm(dim), nn.Linear(dim, dim), nn.Dropout(dropout),
                                 nn.LayerNorm(dim))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.layers(tokens))


class TJepaEncoder(nn.Module):
    """Rows [B, D] -> tokens [B, R + G, dim]: ``R`` [REG] tokens, then one token per original
    column (a one-hot block is one column: its token is the sum of its columns' embeddings, i.e.
    its category's embedding, plus the column's bias), a fixed sinusoidal code per position
    (base 100, as the official encoder), then the transformer. ``keep`` [B, K] (token
    positions) encodes only those tokens: the context encoder's input."""

    def __init__(self, groups: torch.Tensor, dim: int, layers: int, heads: int, dim_feedforward: int,
                 dropout: float, reg_tokens: int):
        super().__init__()
        n_columns, n_groups = len(groups), int(groups.max()) + 1
        bound = 1 / math.sqrt(dim)  # nn.Linear's default, as the official tokenizer
        self.weight = nn.Parameter(torch.empty(n_columns, dim).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(n_groups, dim).uniform_(-bound, bound))
        self.reg = nn.Parameter(torch.empty(reg_tokens, dim).uniform_(-bound, bound))
        self.register_buffer("groups", groups.clone(), persistent=False)
        self.register_buffer("position", sinusoid(reg_tokens + n_groups, dim, 100.0), persistent=False)
        self.one_per_group = n_columns == n_groups and bool((groups == torch.arange(n_groups)).all())
        self.transformer = Transformer(dim, layers, heads, dim_feedforward, dropout)
        _init_linear(self.transformer)

    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        per_column = x[:, :, None] * self.weight  # [B, D, dim]
        if self.one_per_group:
            features = per_column + self.bias
        else:
            features = per_column.new_zeros(len(x), *self.bias.shape).index_add_(1, self.groups, per_column) + self.bias
        return torch.cat([self.reg.expand(len(x), -1, -1), features], dim=1) + self.position

    def forward(self, x: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        tokens = self.tokens(x)
        if keep is not None:
            tokens = torch.gather(tokens, 1, keep[:, :, None].expand(-1, -1, tokens.shape[-1]))
        return self.transformer(tokens)


class TJepaPredictor(nn.Module):
    """From the context tokens [B, Nc, dim] (at token positions [B, Nc]) to predictions of the
    target tokens at positions [T, B, Nt]: the context projected to ``pred_dim`` plus its
    positions' codes, and for each target set one learned mask token plus its positions' codes
    (sinusoidal, base 10000), through the predictor's transformer; the target slots, normalised,
    projected back to ``dim``. Returns [T, B, Nt, dim]."""

    def __init__(self, n_positions: int, dim: int, pred_dim: int, layers: int, heads: int, dim_feedforward: int,
                 dropout: float):
        super().__init__()
        self.embed = nn.Linear(dim, pred_dim)
        self.mask_token = nn.Parameter(torch.empty(pred_dim))
        self.register_buffer("position", sinusoid(n_positions, pred_dim, 10000.0), persistent=False)
        self.transformer = Transformer(pred_dim, layers, heads, dim_feedforward, dropout)
        self.norm = nn.LayerNorm(pred_dim)
        self.project = nn.Linear(pred_dim, dim)
        _init_linear(self)
        nn.init.trunc_normal_(self.mask_token, std=0.02)

    def forward(self, context: torch.Tensor, context_pos: torch.Tensor, target_pos: torch.Tensor) -> torch.Tensor:
        n_sets, batch, n_target = target_pos.shape
        n_context = context.shape[1]
        c = self.embed(context) + self.position[context_pos]  # [B, Nc, p]
        t = self.mask_token + self.position[target_pos]  # [T, B, Nt, p]
        sequence = torch.cat([c.expand(n_sets, -1, -1, -1), t.to(c.dtype)], dim=2)
        out = self.transformer(sequence.reshape(n_sets * batch, n_context + n_target, -1))
        out = self.project(self.norm(out[:, n_context:]))
        return out.reshape(n_sets, batch, n_target, -1)


def jepa_loss(context_encoder: TJepaEncoder, target_encoder: TJepaEncoder, predictor: TJepaPredictor,
              x: torch.Tensor, context: torch.Tensor, targets: torch.Tensor, bf16: bool = False) -> torch.Tensor:
    """T-JEPA's loss on rows ``x`` [B, D] with masks from ``draw_masks`` (feature indices): the
    target encoder encodes the whole row (no gradient); the context encoder the [REG] tokens and
    the context features; the predictor predicts each target set's tokens from the context's;
    the mean squared error to the target encoder's tokens at those positions."""
    device, R = x.device, context_encoder.reg.shape[0]
    context_pos = torch.cat([torch.arange(R).expand(len(x), -1), R + context], dim=1).to(device)
    target_pos = (R + targets).to(device)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        with torch.no_grad():
            h = target_encoder(x)  # [B, R + G, dim]
        prediction = predictor(context_encoder(x, context_pos), context_pos, target_pos)  # [T, B, Nt, dim]
    index = target_pos[..., None].expand(-1, -1, -1, h.shape[-1])
    goal = torch.gather(h.float().expand(len(target_pos), -1, -1, -1), 2, index)
    return nn.functional.mse_loss(prediction.float(), goal)


@torch.no_grad()
def ema_update(target: nn.Module, online: nn.Module, momentum: float) -> None:
    """target <- momentum x target + (1 - momentum) x online, parameter by parameter."""
    for p_target, p_online in zip(target.parameters(), online.parameters()):
        p_target.mul_(momentum).add_(p_online.detach(), alpha=1.0 - momentum)


class FlatRepresentation(nn.Module):
    """The representation T-JEPA's linear probe reads: the (target) encoder's tokens of the whole
    row, [REG] tokens included, flattened to [B, (R + G) x dim]; encoded ``chunk`` rows at a time
    (attention over every token of a wide table)."""

    def __init__(self, encoder: TJepaEncoder, bf16: bool, chunk: int = 512):
        super().__init__()
        self.encoder, self.bf16, self.chunk = encoder, bf16, chunk

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = []
        for first in range(0, len(x), self.chunk):
            with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=self.bf16):
                out.append(self.encoder(x[first:first + self.chunk]).flatten(1).float())
        return torch.cat(out)


@register
class TJEPA(RepresentationMethod):
    """T-JEPA: per batch, a context of some features and ``targets`` disjoint target sets
    (``draw_masks``); the context encoder sees the [REG] tokens and the context features'
    tokens; the target encoder (an EMA of the context encoder, momentum ramped from
    ``ema_start`` to ``ema_end`` over the planned steps, never trained by gradients) sees the whole
    row; the predictor predicts the target encoder's tokens of each target set from the context
    tokens; loss: their mean squared error. The representation is the target encoder's output over
    the whole row, flattened (as the official linear probe reads it), scored with SeBA's heads."""

    name = "tjepa"
    paper_name = "T-JEPA"  # its row in data/reference/paper_results.csv (None: the paper has none)
    Config = TjepaConfig

    def fit(self, x_train, x_val, groups):
        cfg = self.cfg
        device = self.device
        groups_t = torch.as_tensor(groups, dtype=torch.long)
        n_features = int(groups_t.max()) + 1
        sizes = mask_sizes(n_features, cfg)
        R = cfg.reg_tokens
        label = f"[baseline tjepa seed {self.seed}]"
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(self.seed, "tjepa", "init"))
            context_encoder = TJepaEncoder(groups_t, cfg.dim, cfg.layers, cfg.heads, cfg.dim_feedforward,
                                           cfg.dropout, R).to(device)
            predictor = TJepaPredictor(R + n_features, cfg.dim, cfg.pred_dim, cfg.pred_layers, cfg.pred_heads,
                                       cfg.pred_dim_feedforward, cfg.pred_dropout).to(device)
        target_encoder = copy.deepcopy(context_encoder).requires_grad_(False)
        if cfg.grad_clip > 0:  # the official clamp, on the context encoder's gradients only
            for p in context_encoder.parameters():
                p.register_hook(lambda grad: grad.clamp(-cfg.grad_clip, cfg.grad_clip))
        X = torch.as_tensor(x_train, dtype=torch.float32, device=device)
        V = torch.as_tensor(x_val, dtype=torch.float32, device=device)
        bf16 = resolve_precision(cfg.precision, device) == "bf16"
        gen = torch.Generator().manual_seed(derive_seed(self.seed, "tjepa"))

        def loss(x: torch.Tensor, context: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
            value = jepa_loss(context_encoder, target_encoder, predictor, x, context, targets, bf16)
            if not torch.isfinite(value):
                raise TrainingDiverged(f"{label}: training loss is not finite")
            return value

        # The momentum ramps over the planned optimiser steps (the official: over all epochs' steps).
        steps_per_epoch = math.ceil(len(X) / cfg.batch_size)
        epochs = max(1, min(cfg.max_epochs, math.ceil(cfg.max_steps / steps_per_epoch)))
        real_steps = steps_per_epoch - (len(X) % cfg.batch_size == 1)  # a one-row batch is skipped
        planned = max(1, epochs * real_steps)
        state = {"steps": 0, "pending": False}

        def momentum(step: int) -> float:  # after optimiser step ``step`` (1, 2, ...)
            return cfg.ema_start + (step - 1) * (cfg.ema_end - cfg.ema_start) / planned

        def follow() -> None:  # the EMA update due after the optimiser step that just ran
            if state["pending"]:
                ema_update(target_encoder, context_encoder, momentum(state["steps"]))
                state["pending"] = False

        def batch_loss(index: torch.Tensor) -> torch.Tensor:
            follow()
            x = X[index.to(device)]
            value = loss(x, *draw_masks(len(x), n_features, sizes, cfg.targets, gen))
            state["steps"] += 1
            state["pending"] = True  # train_with_early_stopping steps the optimiser on this loss next
            return value

        val_gen = torch.Generator().manual_seed(derive_seed(self.seed, "tjepa", "validation"))
        fixed_val = [(v, *draw_masks(len(v), n_features, sizes, cfg.targets, val_gen))
                     for v in (V[i:i + cfg.batch_size] for i in range(0, len(V), cfg.batch_size)) if len(v) >= 2]

        def val_loss() -> float:
            follow()
            total = sum(float(loss(*batch)) * len(batch[0]) for batch in fixed_val)
            return total / max(1, sum(len(batch[0]) for batch in fixed_val))

        # Dropout draws from torch's global generator: seed it, and leave the caller's untouched.
        devices = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(derive_seed(self.seed, "tjepa", "dropout"))
            self.log = train_with_early_stopping([context_encoder, predictor, target_encoder], batch_loss, len(X),
                                                 val_loss, cfg, gen, label)
        self.log["steps"] = state["steps"]
        self.encoder = FlatRepresentation(target_encoder, bf16)
        self.networks = {"context": context_encoder, "predictor": predictor, "target": target_encoder}
