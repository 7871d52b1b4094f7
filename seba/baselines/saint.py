"""SAINT: a transformer with column and intersample (row) attention, pretrained self-supervised
with a contrastive and a denoising loss on CutMix + mixup views (Somepalli et al., 2021).

Written from the paper and the official code's defaults (``somepago/saint``: ``train_robust.py``,
``pretraining.py``, ``models/``, ``augmentations.py``); docs/baselines.md#saint lists what is
taken from where and every deviation.

Features. SAINT embeds each original column as one token. Our input is the standardised,
one-hot encoded table and ``groups`` (the original column of each encoded column): a group of one
column is a numeric feature (embedded by its own 1 -> 100 -> dim ReLU MLP, as SAINT's ``MLP``
continuous embedding), a group of several columns is a categorical one-hot block (embedded by a
lookup in an embedding table at the index of its 1; an all-zero block, a missing value, has its
own index, as SAINT's "MissingValue" category). Tokens: [CLS, categoricals, numerics], SAINT's
order. A categorical of a single category is one 0/1 column: it is treated as numeric.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from seba.baselines import register
from seba.baselines.base import RepresentationMethod
from seba.core.errors import ConfigError, DataError, TrainingDiverged
from seba.core.runtime import derive_seed, resolve_precision
from seba.core.schema import Bool, Float, Fraction, PairBatch, PositiveFloat, PositiveInt, choice, section


@section
class SaintConfig:
    # Defaults: somepago/saint train_robust.py / pretraining.py (docs/baselines.md#saint). With
    # official_rules the architecture below is changed as train_robust.py does before training:
    # attention != col -> depth 1, 4 heads, embedding 16, ff dropout 0.8; > 100 original columns ->
    # batch <= 64 (and embedding <= 4, which the first rule overrides). The log names the rules applied.
    embedding_size: PositiveInt = 32  # --embedding_size
    depth: PositiveInt = 6  # --transformer_depth
    heads: PositiveInt = 8  # --attention_heads
    ff_dropout: Float = 0.1  # --ff_dropout (its --attention_dropout is never applied by its attention layer)
    attention: choice("colrow", "col", "row") = "colrow"  # colrow: SAINT | col: SAINT-s | row: SAINT-i
    official_rules: Bool = True
    wide_embedding: PositiveInt | None = None  # above 100 columns, embedding at most this after the rules
    # (not official; the cost setting, e.g. 4: the first rule's cap that the second overrides)
    batch_size: PairBatch = 256  # --batchsize
    lr: PositiveFloat = 1e-4  # AdamW, as pretraining.py (hard-coded there)
    weight_decay: Float = 0.01  # torch's AdamW default (pretraining.py sets none)
    epochs: PositiveInt = 50  # --pretrain_epochs; fixed, no early stopping (as the official pretraining)
    max_steps: PositiveInt = 1000  # optimiser-step cap (cost budget, a deviation; docs/baselines.md#saint)
    cutmix: Bool = True  # CutMix in input space (--pt_aug cutmix)
    cutmix_share: Fraction = 0.1  # probability that a feature takes the partner row's value (--pt_aug_lam)
    mixup: Bool = True  # mixup in embedding space (--pt_aug mixup)
    mixup_lambda: Fraction = 0.3  # weight of the row's own embedding (--mixup_lam; the partner gets 0.7)
    nce_temp: PositiveFloat = 0.7  # InfoNCE temperature (--nce_temp)
    contrastive_weight: Float = 0.5  # --lam0; 0 disables the contrastive loss
    categorical_weight: Float = 1.0  # --lam2: denoising cross-entropy, summed over categorical features
    numeric_weight: Float = 10.0  # --lam3: denoising MSE, averaged over numeric features
    projection: choice("diff", "same") = "diff"  # --pt_projhead_style: a projection head per view, or one shared
    representation: choice("cls", "tokens") = "cls"  # cls: the CLS token's output (official) | tokens: all, flattened
    precision: choice("fp32", "bf16", "auto") = "auto"

    def __post_init__(self):
        if not 0 <= self.ff_dropout < 1:
            raise ConfigError(f"params.yaml: 'baselines.saint.ff_dropout' must lie in [0, 1), got {self.ff_dropout}")
        if min(self.weight_decay, self.contrastive_weight, self.categorical_weight, self.numeric_weight) < 0:
            raise ConfigError("baselines.saint: weight_decay and the loss weights must be >= 0")


# ---------------------------------------------------------------------------------- settings


def saint_settings(cfg, n_features: int) -> tuple[dict, list[str]]:
    """The architecture and batch size SAINT trains with on a table of ``n_features`` original
    columns, and the rules that changed them.

    With ``cfg.official_rules`` (the default) these are ``train_robust.py``'s rules, in its
    order: above 100 features the embedding is at most 4 and the batch at most 64; then, for any
    attention but ``col``, depth 1, 4 heads, embedding 16 (which overrides the first rule's
    embedding) and feed-forward dropout 0.8. Its attention dropout, also set to 0.8 there, is
    never applied by its attention layer; there is no such setting here. ``cfg.wide_embedding``
    (not an official rule; off by default) then caps the embedding above 100 features: the cap
    of 4 that the official order overrides, as its README advises for wide tables."""
    s = {"embedding_size": cfg.embedding_size, "depth": cfg.depth, "heads": cfg.heads,
         "ff_dropout": cfg.ff_dropout, "batch_size": cfg.batch_size}
    rules = []
    if cfg.official_rules and n_features > 100:
        s["embedding_size"], s["batch_size"] = min(4, s["embedding_size"]), min(64, s["batch_size"])
        rules.append(f"{n_features} features > 100: embedding <= 4, batch <= 64")
    if cfg.official_rules and cfg.attention != "col":
        s.update(depth=1, heads=4, embedding_size=16, ff_dropout=0.8)
        rules.append(f"attention {cfg.attention}: depth 1, 4 heads, embedding 16, ff dropout 0.8")
    if cfg.wide_embedding is not None and n_features > 100 and s["embedding_size"] > cfg.wide_embedding:
        s["embedding_size"] = cfg.wide_embedding  # not an official rule: the cost setting (docs/baselines.md#saint)
        rules.append(f"wide_embedding: {n_features} features > 100: embedding {cfg.wide_embedding}")
    return s, rules


# ---------------------------------------------------------------------------------- features


@dataclasses.dataclass(frozen=True)
class Features:
    """SAINT's features over the encoded columns (one per original column, see the module's
    docstring): ``numeric`` [Fn] the encoded column of each numeric feature; ``blocks`` [Fc, C]
    the encoded columns of each categorical one-hot block, padded with -1 to the widest (C)."""

    numeric: np.ndarray
    blocks: np.ndarray

    @property
    def n_categories(self) -> np.ndarray:  # [Fc] categories per categorical feature (without "missing")
        return (self.blocks >= 0).sum(1)

    @property
    def n_features(self) -> int:
        return len(self.numeric) + len(self.blocks)


def saint_features(groups: np.ndarray, x: np.ndarray) -> Features:
    """The features of ``groups`` (in group order within each kind); a multi-column group must be a
    one-hot block in ``x`` (0/1 values, at most one 1 per row), else a DataError."""
    groups = np.asarray(groups)
    numeric, blocks = [], []
    for g in np.unique(groups):
        columns = np.nonzero(groups == g)[0]
        if len(columns) == 1:
            numeric.append(columns[0])
            continue
        block = x[:, columns]
        if not (np.isin(block, (0.0, 1.0)).all() and (block.sum(1) <= 1).all()):
            raise DataError(f"saint: the {len(columns)} encoded columns of group {g} are not a one-hot block")
        blocks.append(columns)
    width = max((len(b) for b in blocks), default=0)
    padded = np.full((len(blocks), width), -1, dtype=np.int64)
    for i, b in enumerate(blocks):
        padded[i, :len(b)] = b
    return Features(np.asarray(numeric, dtype=np.int64), padded)


def split_features(x: torch.Tensor, features: Features) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of the encoded table -> SAINT's inputs: numeric values [n, Fn] and category indices
    [n, Fc] (the position of the block's 1; an all-zero block gets index C_f, "missing")."""
    values = x[:, torch.as_tensor(features.numeric, device=x.device)]
    if not len(features.blocks):
        return values, torch.zeros(len(x), 0, dtype=torch.long, device=x.device)
    blocks = torch.as_tensor(features.blocks, device=x.device)
    padded = torch.cat([x, torch.zeros(len(x), 1, dtype=x.dtype, device=x.device)], 1)
    onehot = padded[:, blocks]  # [n, Fc, C]; the pad (-1) reads the zero column
    missing = torch.as_tensor(features.n_categories, device=x.device).expand(len(x), -1)
    codes = torch.where(onehot.sum(-1) > 0.5, onehot.argmax(-1), missing)
    return values, codes


# ---------------------------------------------------------------------------------- augmentations


def cutmix(values: torch.Tensor, codes: torch.Tensor, share: float,
           generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """SAINT's CutMix in input space: every row takes a partner (one random permutation of the
    batch) and each of its features is replaced by the partner's with probability ``share``
    (official ``pt_aug_lam``; one Bernoulli draw per row and feature). A categorical feature is
    replaced whole (its category index)."""
    n = len(values)
    partner = torch.randperm(n, generator=generator).to(values.device)
    chosen = (torch.rand(n, values.shape[1] + codes.shape[1], generator=generator) < share).to(values.device)
    codes_chosen, values_chosen = chosen[:, :codes.shape[1]], chosen[:, codes.shape[1]:]
    return (torch.where(values_chosen, values[partner], values), torch.where(codes_chosen, codes[partner], codes))


def mixup(embeddings: torch.Tensor, lam: float, generator: torch.Generator) -> torch.Tensor:
    """SAINT's mixup in embedding space: ``lam * e_i + (1 - lam) * e_partner(i)`` over every token,
    one random permutation of the batch (official ``mixup_data``; ``lam`` is the weight of the
    row's own embedding, official ``mixup_lam`` 0.3)."""
    partner = torch.randperm(len(embeddings), generator=generator).to(embeddings.device)
    return lam * embeddings + (1 - lam) * embeddings[partner]


# ---------------------------------------------------------------------------------- network


def _uniform(shape, fan_in: int) -> nn.Parameter:
    bound = 1 / math.sqrt(fan_in)  # nn.Linear's default initialisation
    return nn.Parameter(torch.empty(shape).uniform_(-bound, bound))


class PerFeatureMLP(nn.Module):
    """One Linear - ReLU - Linear MLP per feature, each applied to its own feature, as stacked
    weights: [n, F, d_in] -> [n, F, d_out]."""

    def __init__(self, n_features: int, d_in: int, hidden: int, d_out: int):
        super().__init__()
        self.w1, self.b1 = _uniform((n_features, d_in, hidden), d_in), _uniform((n_features, hidden), d_in)
        self.w2, self.b2 = _uniform((n_features, hidden, d_out), hidden), _uniform((n_features, d_out), hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(torch.einsum("nfi,fih->nfh", x, self.w1) + self.b1)
        return torch.einsum("nfh,fho->nfo", h, self.w2) + self.b2


class Attention(nn.Module):
    """Multi-head self-attention over the second axis of [b, n, dim] (heads of ``dim_head``;
    scaled dot product, no attention dropout: the official layer defines one but never applies it)."""

    def __init__(self, dim: int, heads: int, dim_head: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * heads * dim_head, bias=False)
        self.out = nn.Linear(heads * dim_head, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        return self.out(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, -1))


class FeedForward(nn.Module):
    """Linear(dim, 8 dim) - GEGLU - dropout - Linear(4 dim, dim), SAINT's feed-forward."""

    def __init__(self, dim: int, dropout: float, mult: int = 4):
        super().__init__()
        self.inp, self.drop, self.outp = nn.Linear(dim, dim * mult * 2), nn.Dropout(dropout), nn.Linear(dim * mult, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, gates = self.inp(x).chunk(2, dim=-1)
        return self.outp(self.drop(a * F.gelu(gates)))


class Sublayer(nn.Module):
    """LayerNorm, then ``fn`` with a residual connection around the normalised input: the official
    ``PreNorm(dim, Residual(fn))``, whose residual adds the normalised x, not x."""

    def __init__(self, dim: int, fn: nn.Module):
        super().__init__()
        self.norm, self.fn = nn.LayerNorm(dim), fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(x)
        return y + self.fn(y)


class SaintTransformer(nn.Module):
    """``depth`` stages over tokens [b, n, dim]. ``col``: self-attention among a row's tokens and a
    feed-forward per token (heads of 16). ``row``: intersample attention, each row's n tokens
    flattened to one n * dim vector attending to the other rows of the batch (heads of 64), and
    a feed-forward on that vector. ``colrow`` (SAINT): both, column first, in every stage."""

    def __init__(self, n_tokens: int, dim: int, depth: int, heads: int, dropout: float, attention: str):
        super().__init__()
        self.layers = nn.ModuleList()
        wide = n_tokens * dim
        for _ in range(depth):
            layer = nn.ModuleDict()
            if attention in ("col", "colrow"):
                layer["col_attention"] = Sublayer(dim, Attention(dim, heads, 16))
                layer["col_ff"] = Sublayer(dim, FeedForward(dim, dropout))
            if attention in ("row", "colrow"):
                layer["row_attention"] = Sublayer(wide, Attention(wide, heads, 64))
                layer["row_ff"] = Sublayer(wide, FeedForward(wide, dropout))
            self.layers.append(layer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        for layer in self.layers:
            if "col_attention" in layer:
                x = layer["col_ff"](layer["col_attention"](x))
            if "row_attention" in layer:
                x = layer["row_ff"](layer["row_attention"](x.reshape(1, b, n * d))).reshape(b, n, d)
        return x


def _mlp(d_in: int, hidden: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, d_out))


class SaintNetwork(nn.Module):
    """Embeddings, transformer, and the pretraining heads: two projection heads (``diff``; one
    shared with ``same``) of the flattened, per-token L2-normalised outputs, dim * T -> 6/5 ->
    1/2 of it, and one denoising MLP per feature (dim -> 5 dim -> categories + missing, or -> 1)."""

    def __init__(self, features: Features, dim: int, depth: int, heads: int, dropout: float,
                 attention: str, projection: str):
        super().__init__()
        n_cat, n_num = len(features.blocks), len(features.numeric)
        self.n_tokens = 1 + n_cat + n_num
        self.cls = nn.Parameter(torch.randn(dim))  # the CLS token's embedding (nn.Embedding's N(0, 1))
        vocab = features.n_categories + 1  # + "missing" per feature
        self.register_buffer("offsets", torch.as_tensor(np.concatenate([[0], np.cumsum(vocab)[:-1]]), dtype=torch.long))
        self.register_buffer("valid", torch.arange(int(vocab.max(initial=1)))[None] < torch.as_tensor(vocab)[:, None])
        self.embed_cat = nn.Embedding(int(vocab.sum()), dim) if n_cat else None
        self.embed_num = PerFeatureMLP(n_num, 1, 100, dim) if n_num else None
        self.transformer = SaintTransformer(self.n_tokens, dim, depth, heads, dropout, attention)
        wide = self.n_tokens * dim
        self.projections = nn.ModuleList([_mlp(wide, 6 * wide // 5, wide // 2)
                                          for _ in range(2 if projection == "diff" else 1)])
        self.decode_cat = PerFeatureMLP(n_cat, dim, 5 * dim, int(vocab.max())) if n_cat else None
        self.decode_num = PerFeatureMLP(n_num, dim, 5 * dim, 1) if n_num else None

    def embed(self, values: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        """[n, Fn] values and [n, Fc] category indices -> tokens [n, 1 + Fc + Fn, dim]."""
        parts = [self.cls.expand(len(values), 1, -1)]
        if self.embed_cat is not None:
            parts.append(self.embed_cat(codes + self.offsets))
        if self.embed_num is not None:
            parts.append(self.embed_num(values[..., None]))
        return torch.cat([p.to(parts[-1].dtype) for p in parts], 1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.transformer(tokens)

    def project(self, reps: torch.Tensor, view: int) -> torch.Tensor:
        return self.projections[min(view, len(self.projections) - 1)](F.normalize(reps, dim=-1).flatten(1))

    def denoise(self, reps: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Category logits [n, Fc, C] (masked beyond each feature's categories) and values [n, Fn]."""
        n_cat = 0 if self.decode_cat is None else self.decode_cat.w1.shape[0]
        logits = values = None
        if self.decode_cat is not None:
            logits = self.decode_cat(reps[:, 1:1 + n_cat]).float().masked_fill(~self.valid, float("-inf"))
        if self.decode_num is not None:
            values = self.decode_num(reps[:, 1 + n_cat:]).float()[..., 0]
        return logits, values


def saint_losses(net: SaintNetwork, values: torch.Tensor, codes: torch.Tensor, cfg,
                 generator: torch.Generator, bf16: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """SAINT's pretraining losses on one batch: the contrastive loss (InfoNCE both ways between the
    projections of the original and the augmented rows, temperature ``nce_temp``, the batch's
    other rows as negatives) and the denoising losses (the original features predicted from the
    augmented row's outputs: categorical cross-entropy summed over features, numeric MSE averaged
    over features, as the official code). The augmented view: CutMix of the inputs, then mixup of
    the embeddings (each if enabled). The augmented view is encoded once and feeds both losses."""
    device = values.device
    v2, c2 = cutmix(values, codes, cfg.cutmix_share, generator) if cfg.cutmix else (values, codes)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        e2 = net.embed(v2, c2)
        if cfg.mixup:
            e2 = mixup(e2, cfg.mixup_lambda, generator)
        r2 = net(e2)
        zero = torch.zeros((), device=device)
        contrastive = zero
        if cfg.contrastive_weight:
            r1 = net(net.embed(values, codes))
            z1, z2 = net.project(r1, 0).float(), net.project(r2, 1).float()
    if cfg.contrastive_weight:
        logits = z1 @ z2.T / cfg.nce_temp
        target = torch.arange(len(values), device=device)
        contrastive = (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        logits_cat, values_hat = net.denoise(r2)
    categorical = zero if logits_cat is None else F.cross_entropy(
        logits_cat.flatten(0, 1), codes.flatten(), reduction="sum") / len(values)
    numeric = zero if values_hat is None else F.mse_loss(values_hat, values)
    return contrastive, categorical, numeric


# ---------------------------------------------------------------------------------- method


def _balanced_batches(n: int, batch_size: int) -> list[np.ndarray]:
    """Row positions 0..n-1 in order, cut into ceil(n / batch_size) consecutive batches whose sizes
    differ by at most one."""
    return np.array_split(np.arange(n), max(1, math.ceil(n / batch_size))) if n else []


@register
class SAINT(RepresentationMethod):
    """SAINT (Somepalli et al., 2021), its self-supervised pretraining: see ``saint_losses`` and
    ``SaintNetwork``; AdamW for a fixed number of epochs (official: 50, no early stopping),
    capped at ``max_steps``. The representation of a row is the CLS token's output (as the
    official code feeds its classifier), or with ``representation: tokens`` all the tokens'
    normalised outputs flattened (the projection heads' input). Intersample attention makes a
    row's representation depend on its batch: ``encode`` puts the rows in a fixed random order
    (seeded by the seed) and cuts it into equal consecutive batches of at most the batch size, in
    evaluation mode (no dropout), so the representations are a fixed function of the rows, their
    order, the seed and the trained weights."""

    name = "saint"
    paper_name = "SAINT"  # its row in data/reference/paper_results.csv (None: the paper has none)
    Config = SaintConfig

    def fit(self, x_train, x_val, groups):
        cfg = self.cfg
        self.features = saint_features(groups, x_train)
        self.settings, rules = saint_settings(cfg, self.features.n_features)
        s = self.settings
        label = f"[baseline saint seed {self.seed}]"
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(self.seed, "saint", "init"))
            net = SaintNetwork(self.features, s["embedding_size"], s["depth"], s["heads"], s["ff_dropout"],
                               cfg.attention, cfg.projection).to(self.device)
        self.encoder = net
        X = torch.as_tensor(x_train, dtype=torch.float32, device=self.device)
        values, codes = split_features(X, self.features)
        bf16 = resolve_precision(cfg.precision, self.device) == "bf16"
        gen = torch.Generator().manual_seed(derive_seed(self.seed, "saint"))
        optimiser = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        batch, n = s["batch_size"], len(X)
        steps_per_epoch = sum(1 for first in range(0, n, batch) if n - first >= 2)
        epochs = min(cfg.epochs, math.ceil(cfg.max_steps / max(1, steps_per_epoch)))

        def weighted(parts):
            c, cat, num = parts
            return cfg.contrastive_weight * c + cfg.categorical_weight * cat + cfg.numeric_weight * num

        # A held-out loss on the validation rows (for the log; training does not use it): fixed
        # batches and augmentations, drawn once from their own generator, no dropout.
        V = torch.as_tensor(x_val, dtype=torch.float32, device=self.device)
        val_order = self._order(len(V), "validation order")
        val_batches = [split_features(V[val_order[idx]], self.features)
                       for idx in _balanced_batches(len(V), batch) if len(idx) >= 2]
        val_seed = derive_seed(self.seed, "saint", "validation")

        @torch.no_grad()
        def val_loss() -> float:
            net.eval()
            g = torch.Generator().manual_seed(val_seed)
            total = sum(float(weighted(saint_losses(net, v, c, cfg, g, bf16))) * len(v) for v, c in val_batches)
            return total / max(1, sum(len(v) for v, _ in val_batches))

        history, step = [], 0
        self.log = {"features": self.features.n_features, **s, "rules": rules, "val_loss_start": val_loss()}
        devices = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(derive_seed(self.seed, "saint", "dropout"))  # dropout draws, CPU and CUDA
            for epoch in range(1, epochs + 1):
                net.train()
                order = torch.randperm(n, generator=gen).to(self.device)
                sums, done = np.zeros(3), 0
                for first in range(0, n, batch):
                    index = order[first:first + batch]
                    if len(index) < 2 or step >= cfg.max_steps:
                        continue
                    parts = saint_losses(net, values[index], codes[index], cfg, gen, bf16)
                    loss = weighted(parts)
                    if not torch.isfinite(loss):
                        raise TrainingDiverged(f"{label}: training loss is not finite at epoch {epoch}")
                    optimiser.zero_grad(set_to_none=True)
                    loss.backward()
                    optimiser.step()
                    sums += [float(p.detach()) for p in parts]
                    step, done = step + 1, done + 1
                means = sums / max(1, done)
                history.append({k: round(float(v), 5) for k, v in zip(("contrastive", "categorical", "numeric"),
                                                                          means)})
        self.history = history  # per epoch: the mean unweighted losses of its steps
        self.log.update(epochs=epochs, steps=step, loss_first_epoch=history[0], loss_last_epoch=history[-1],
                        val_loss_end=val_loss())

    @torch.no_grad()
    def encode(self, x: np.ndarray) -> torch.Tensor:
        self.encoder.eval()
        X = torch.as_tensor(x, dtype=torch.float32, device=self.device)
        order = torch.as_tensor(self._order(len(X), "encode"), device=self.device)
        cls = self.cfg.representation == "cls"
        out = torch.empty(len(X), self.settings["embedding_size"] * (1 if cls else self.encoder.n_tokens),
                          device=self.device)
        for idx in _balanced_batches(len(X), self.settings["batch_size"]):
            rows = order[torch.as_tensor(idx, device=self.device)]
            reps = self.encoder(self.encoder.embed(*split_features(X[rows], self.features)))
            out[rows] = (reps[:, 0] if cls else F.normalize(reps, dim=-1).flatten(1)).float()
        return out

    def _order(self, n: int, what: str) -> np.ndarray:
        """A fixed random order of n rows for batching them (seeded by the seed and ``what``): the
        tables' rows, and so our splits, can be sorted by class, and with intersample attention a
        batch of one class would pass label information between its rows."""
        return np.random.default_rng(derive_seed(self.seed, "saint", what)).permutation(n)
