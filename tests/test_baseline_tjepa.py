import copy

import numpy as np
import pytest
import torch

import seba.baselines.tjepa as tjepa
from seba.baselines.tjepa import TjepaConfig
from seba.baselines.tjepa import (TJEPA, TJepaEncoder, TJepaPredictor, draw_masks, ema_update, jepa_loss,
                                  mask_sizes)
from seba.core.config import EvaluateConfig
from seba.core.errors import ConfigError
from seba.core.schema import check

# A tiny T-JEPA (the defaults are the official 16 + 16 layers).
TINY = dict(dim=16, layers=1, heads=2, dim_feedforward=16, pred_dim=8, pred_layers=1, pred_heads=2,
            pred_dim_feedforward=16)


def test_mask_sizes_are_the_configured_shares_of_the_features():
    cfg = TjepaConfig()  # launch_tjepa.sh: context 13.6-36.8 %, target 15.6-62.2 % of the features
    assert mask_sizes(8, cfg) == (1, 3, 1, 5)
    assert mask_sizes(256, cfg) == (35, 94, 40, 159)
    assert mask_sizes(2, cfg) == (1, 1, 1, 1)  # at least one feature each
    with pytest.raises(ConfigError, match="no room"):
        mask_sizes(1, cfg)


@pytest.mark.parametrize("n_features", [2, 8, 64])
def test_context_and_targets_are_disjoint_and_sized_as_configured(n_features):
    cfg = TjepaConfig()
    min_c, max_c, min_t, max_t = sizes = mask_sizes(n_features, cfg)
    gen = torch.Generator().manual_seed(0)
    seen_c, seen_t = set(), set()
    for _ in range(30):
        context, targets = draw_masks(50, n_features, sizes, 4, gen)
        n_c, n_t = context.shape[1], targets.shape[2]
        seen_c.add(n_c), seen_t.add(n_t)
        assert targets.shape[:2] == (4, 50) and min_c <= n_c <= max_c and min_t <= n_t <= max_t
        assert n_c + n_t <= n_features
        for row in range(50):
            c = set(context[row].tolist())
            assert len(c) == n_c and max(c) < n_features
            for k in range(4):
                t = set(targets[k, row].tolist())
                assert len(t) == n_t and not (t & c)  # a target never overlaps its row's context
        if n_features >= 8:  # each row draws its own subsets
            assert len({tuple(r) for r in context.tolist()}) > 1
            assert not torch.equal(targets[0], targets[1])
    if n_features == 64:  # the sizes range over their bounds (one size per batch)
        assert min(seen_c) <= min_c + 2 and max(seen_c) >= max_c - 2 and len(seen_t) > 5


def test_a_one_hot_block_is_one_token():
    groups = torch.tensor([0, 1, 1, 1, 2])  # a numeric column, a 3-level one-hot block, a numeric column
    enc = TJepaEncoder(groups, 8, 1, 2, 8, 0.0, reg_tokens=2)
    x = torch.tensor([[0.5, 0.0, 1.0, 0.0, -1.0]])
    tokens = enc.tokens(x)
    assert tokens.shape == (1, 2 + 3, 8)  # [REG] x 2, then one token per original column
    position = enc.position
    assert torch.allclose(tokens[0, 2] - position[2], 0.5 * enc.weight[0] + enc.bias[0])
    assert torch.allclose(tokens[0, 3] - position[3], enc.weight[2] + enc.bias[1])  # the category's embedding
    assert torch.allclose(tokens[0, :2] - position[:2], enc.reg)


def test_predictor_shape_and_the_target_encoder_gets_no_gradient():
    torch.manual_seed(0)
    groups = torch.arange(6)
    enc = TJepaEncoder(groups, 16, 1, 2, 16, 0.0, 1)
    target = copy.deepcopy(enc).requires_grad_(False)
    pred = TJepaPredictor(7, 16, 8, 1, 2, 16, 0.0)
    x = torch.randn(5, 6)
    context, targets = draw_masks(5, 6, (2, 2, 3, 3), 4, torch.Generator().manual_seed(0))
    out = pred(enc(x, torch.cat([torch.zeros(5, 1, dtype=torch.long), 1 + context], 1)),
               torch.cat([torch.zeros(5, 1, dtype=torch.long), 1 + context], 1), 1 + targets)
    assert out.shape == (4, 5, 3, 16)  # [target sets, rows, target features, dim]
    jepa_loss(enc, target, pred, x, context, targets).backward()
    assert all(p.grad is None for p in target.parameters())
    assert all(p.grad is not None for p in enc.parameters()) and pred.mask_token.grad is not None


def test_ema_moves_the_target_by_the_momentum_rule():
    torch.manual_seed(0)
    online = TJepaEncoder(torch.arange(4), 8, 1, 2, 8, 0.0, 1)
    target = copy.deepcopy(online).requires_grad_(False)
    with torch.no_grad():
        for p in online.parameters():
            p.add_(torch.randn_like(p))
    before = [p.clone() for p in target.parameters()]
    ema_update(target, online, 0.9)
    for b, p, q in zip(before, target.parameters(), online.parameters()):
        assert torch.allclose(p, 0.9 * b + 0.1 * q)


def toy_table(n=120, seed=0):
    """Eight columns driven by two latent factors (so some features predict others)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 2))
    x = z @ rng.normal(size=(2, 8)) + 0.1 * rng.normal(size=(n, 8))
    return ((x - x.mean(0)) / x.std(0)).astype(np.float32)


def test_loss_decreases_on_a_toy_table():
    x = torch.as_tensor(toy_table(64))
    torch.manual_seed(0)
    enc = TJepaEncoder(torch.arange(8), 16, 1, 2, 16, 0.0, 1)
    target = copy.deepcopy(enc).requires_grad_(False)
    pred = TJepaPredictor(9, 16, 8, 1, 2, 16, 0.0)
    masks = draw_masks(len(x), 8, mask_sizes(8, TjepaConfig()), 4, torch.Generator().manual_seed(0))
    optimiser = torch.optim.Adam(list(enc.parameters()) + list(pred.parameters()), lr=3e-3)
    with torch.no_grad():
        first = jepa_loss(enc, target, pred, x, *masks).item()
    for _ in range(15):
        loss = jepa_loss(enc, target, pred, x, *masks)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        ema_update(target, enc, 0.996)
    with torch.no_grad():
        assert jepa_loss(enc, target, pred, x, *masks).item() < 0.8 * first  # 0.99 -> 0.61 measured


def fit(seed, x, **kw):
    cfg = TjepaConfig(**{**TINY, "batch_size": 32, "max_epochs": 3, "patience": 2, **kw})
    model = TJEPA(cfg, seed, torch.device("cpu"), EvaluateConfig())
    model.fit(x[:100], x[100:], np.arange(x.shape[1]))
    return model


def test_momentum_ramps_after_every_step_and_gradients_never_move_the_target(monkeypatch):
    x = toy_table()
    calls, first_target = [], []

    def recording(target, online, momentum):
        if not calls:
            first_target.extend(p.clone() for p in target.parameters())
        calls.append(momentum)
        ema_update(target, online, momentum)

    monkeypatch.setattr(tjepa, "ema_update", recording)
    model = fit(0, x, max_epochs=3, patience=10)  # 100 rows, batch 32: 4 steps an epoch, 12 planned
    assert len(calls) == model.log["steps"] == 12
    assert np.allclose(calls, 0.996 + np.arange(12) * 0.004 / 12)  # ema_start -> ema_end over the planned steps
    calls.clear(), first_target.clear()
    model = fit(0, x, ema_start=1.0, ema_end=1.0)  # momentum 1: only gradients could move the target
    assert all(torch.equal(a, b) for a, b in zip(first_target, model.networks["target"].parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(first_target, model.networks["context"].parameters()))


def test_tjepa_is_deterministic_for_a_seed_with_dropout_and_leaves_the_global_generator_alone():
    x = toy_table()
    state = torch.get_rng_state()
    a, b, c = fit(0, x, dropout=0.2, pred_dropout=0.2), fit(0, x, dropout=0.2, pred_dropout=0.2), fit(1, x)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(a.encode(x), b.encode(x))
    assert not torch.equal(a.encode(x), c.encode(x))
    assert a.encode(x).shape == (120, (1 + 8) * 16)  # [REG] + one token per feature, flattened


@pytest.mark.parametrize("change,message", [({"heads": 3}, "divisible"), ({"min_context_share": 0.6,
                                            "min_target_share": 0.5, "max_context_share": 0.7}, "< 1"),
                                            ({"ema_start": 0.999, "ema_end": 0.99}, "ema_start")])
def test_inconsistent_settings_are_refused(change, message):
    with pytest.raises(ConfigError, match=message):
        check(TjepaConfig, change, "baselines.tjepa")
