"""The FT-Transformer encoder (Gorishniy et al., 2021, "Revisiting Deep Learning Models for Tabular
Data"), for the encoder ablation (``pretrain.encoder: ft_transformer``), with the configuration of
rtdl's ``FTTransformer.get_default_kwargs(n_blocks=3)``.

- **Tokenizer.** Every encoded input column ``j`` (the pipeline's X: one-hot categoricals,
  standardised numerics) becomes a token ``x_j * W_j + b_j`` (a per-column linear embedding of width
  ``d``), and a learned CLS token is appended: ``columns + 1`` tokens. No positional encoding: the
  per-column weights tell the columns apart.
- **Masked columns.** SeBA's feature view zeroes the target-view columns of X before the encoder
  (``fill: marginal`` replaces them with another row's values instead), so under the default fill a
  masked column enters as the token of the value 0, i.e. its bias ``b_j`` alone: the same token
  whatever the row's value. The mask itself reaches only the projector, as with the MLP.
- **Blocks.** ``n_blocks`` pre-norm Transformer blocks: ``x + drop(attention(LayerNorm(x)))`` then
  ``x + drop(FFN(LayerNorm(x)))``, the first block's attention LayerNorm omitted (its input is the
  raw tokens). Attention: ``n_heads`` heads over the ``d``-wide tokens with query, key, value and
  output projections (zero biases), dropout on the attention probabilities. FFN: Linear(d, 2h) -
  ReGLU (``a * relu(b)`` of the two halves) - dropout - Linear(h, d) with ``h = int(d * 4 / 3)``.
  The last block computes attention and FFN for the CLS token only (the only token read after it).
- **Output.** The CLS token - LayerNorm - ReLU - Linear(d, out) [- ReLU]: ``[rows, out]``, the
  shape of the MLP encoder's output.

Dropout draws from torch's global generator; pretraining seeds it per seed (seba.pretrain). A
stack trains one FT-Transformer (``StackedFTTransformer``, a stack of one): seeds are not batched
into one model as the MLP's are.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def ffn_hidden(d: int) -> int:
    """The FFN's hidden width for token width ``d``: rtdl's ``d * 4 / 3`` (ReGLU halves 2h)."""
    return int(d * 4 / 3)


class ColumnTokenizer(nn.Module):
    """[B, D] -> [B, D + 1, d]: token ``x_j * weight[j] + bias[j]`` per column, the CLS token last."""

    def __init__(self, n_features: int, d: int):
        super().__init__()
        bound = 1 / math.sqrt(d)
        self.weight = nn.Parameter(torch.empty(n_features, d).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(n_features, d).uniform_(-bound, bound))
        self.cls = nn.Parameter(torch.empty(d).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = torch.addcmul(self.bias, x.unsqueeze(-1), self.weight)  # [B, D, d]
        return torch.cat([tokens, self.cls.expand(len(x), 1, -1)], dim=1)


class MultiheadAttention(nn.Module):
    """Scaled dot-product attention of ``queries`` over ``tokens`` with ``n_heads`` heads."""

    def __init__(self, d: int, n_heads: int, dropout: float):
        super().__init__()
        if d % n_heads:
            raise ValueError(f"token width {d} is not a multiple of {n_heads} heads")
        self.n_heads, self.dropout = n_heads, dropout
        self.query, self.key, self.value, self.out = (nn.Linear(d, d) for _ in range(4))
        for layer in (self.query, self.key, self.value, self.out):
            nn.init.zeros_(layer.bias)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:  # [B, T, d] -> [B, heads, T, d / heads]
        B, T, d = x.shape
        return x.reshape(B, T, self.n_heads, d // self.n_heads).transpose(1, 2)

    def forward(self, queries: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(self.query(queries)), self._heads(self.key(tokens)), self._heads(self.value(tokens))
        mixed = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)
        B, _, Tq, _ = mixed.shape
        return self.out(mixed.transpose(1, 2).reshape(B, Tq, -1))


def dropout(p: float) -> nn.Module:
    """Dropout with probability ``p``; the identity when ``p`` is 0 (no mask drawn or kept)."""
    return nn.Dropout(p) if p > 0 else nn.Identity()


class ReGLU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = x.chunk(2, dim=-1)
        return a * F.relu(b)


class Block(nn.Module):
    """One pre-norm Transformer block; ``attention_norm`` is None for the first block."""

    def __init__(self, d: int, n_heads: int, attention_dropout: float, ffn_dropout: float,
                 residual_dropout: float, first: bool):
        super().__init__()
        hidden = ffn_hidden(d)
        self.attention_norm = None if first else nn.LayerNorm(d)
        self.attention = MultiheadAttention(d, n_heads, attention_dropout)
        self.ffn_norm = nn.LayerNorm(d)
        self.ffn = nn.Sequential(nn.Linear(d, 2 * hidden), ReGLU(), dropout(ffn_dropout), nn.Linear(hidden, d))
        self.residual_dropout = dropout(residual_dropout)

    def forward(self, x: torch.Tensor, cls_only: bool = False) -> torch.Tensor:
        normed = x if self.attention_norm is None else self.attention_norm(x)
        if cls_only:  # only the CLS token is read after this block
            x = x[:, -1:]
            update = self.attention(normed[:, -1:], normed)
        else:
            update = self.attention(normed, normed)
        x = x + self.residual_dropout(update)
        return x + self.residual_dropout(self.ffn(self.ffn_norm(x)))


class FTTransformer(nn.Module):
    """[B, D] -> [B, out]: column tokens and a CLS token through ``n_blocks`` Transformer blocks;
    the CLS token - LayerNorm - ReLU - Linear(d, out) [- ReLU]."""

    def __init__(self, n_features: int, out: int, out_relu: bool = True, d: int = 192, n_blocks: int = 3,
                 n_heads: int = 8, attention_dropout: float = 0.2, ffn_dropout: float = 0.1,
                 residual_dropout: float = 0.0):
        super().__init__()
        self.tokenizer = ColumnTokenizer(n_features, d)
        self.blocks = nn.ModuleList(Block(d, n_heads, attention_dropout, ffn_dropout, residual_dropout, first=i == 0)
                                    for i in range(n_blocks))
        head = [nn.LayerNorm(d), nn.ReLU(), nn.Linear(d, out)]
        if out_relu:
            head.append(nn.ReLU())
        self.head = nn.Sequential(*head)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.tokenizer(x)
        for i, block in enumerate(self.blocks):
            tokens = block(tokens, cls_only=i == len(self.blocks) - 1)
        return self.head(tokens[:, -1])


class StackedFTTransformer(nn.Module):
    """One FT-Transformer in the stacked training loop's shapes: [1, B, D] -> [1, B, out] (a stack
    of one; seeds are not batched into one model). ``stacked_state`` gives its state with the
    leading member dimension that the loop's best-weights bookkeeping indexes."""

    def __init__(self, model: FTTransformer):
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] != 1:
            raise ValueError(f"an FT-Transformer trains in stacks of one, got {x.shape[0]} members")
        return self.model(x[0]).unsqueeze(0)

    def stacked_state(self) -> dict[str, torch.Tensor]:
        return {name: value.unsqueeze(0) for name, value in self.model.state_dict().items()}
