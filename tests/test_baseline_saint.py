import numpy as np
import pytest
import torch

from seba.baselines.saint import SaintConfig
from seba.baselines.saint import (SAINT, SaintNetwork, SaintTransformer, cutmix, mixup, saint_features,
                                  saint_settings, split_features)
from seba.core.config import EvaluateConfig
from seba.core.errors import DataError

# Tiny settings for the mechanism tests (the official rules would replace them).
TINY = dict(official_rules=False, embedding_size=8, depth=1, heads=2, ff_dropout=0.0, batch_size=32, epochs=4,
            lr=1e-3, precision="fp32")


def mixed_table(n=120, seed=0):
    """Two numeric columns, a 3-level one-hot block (group 2) with some all-zero (missing) rows,
    then a numeric column: groups [0, 1, 2, 2, 2, 3]."""
    rng = np.random.default_rng(seed)
    numeric = rng.normal(size=(n, 3))
    onehot = np.eye(3)[rng.integers(0, 3, n)]
    onehot[:5] = 0  # missing
    x = np.concatenate([numeric[:, :2], onehot, numeric[:, 2:]], axis=1).astype(np.float32)
    return x, np.array([0, 1, 2, 2, 2, 3])


def test_features_map_one_hot_blocks_to_category_indices_and_single_columns_to_numbers():
    x, groups = mixed_table()
    features = saint_features(groups, x)
    assert features.numeric.tolist() == [0, 1, 5] and features.blocks.tolist() == [[2, 3, 4]]
    values, codes = split_features(torch.as_tensor(x), features)
    assert torch.equal(values, torch.as_tensor(x[:, [0, 1, 5]]))
    assert codes[:5, 0].tolist() == [3] * 5  # an all-zero block: its own "missing" index
    assert torch.equal(codes[5:, 0], torch.as_tensor(x[5:, 2:5]).argmax(1))
    bad = x.copy()
    bad[0, 2:5] = [0.5, 0.5, 0]
    with pytest.raises(DataError, match="not a one-hot block"):
        saint_features(groups, bad)


def test_intersample_attention_mixes_the_rows_of_a_batch_and_column_attention_does_not():
    torch.manual_seed(0)
    tokens = torch.randn(6, 4, 8)
    changed = tokens.clone()
    changed[3] = torch.randn(4, 8)  # another row of the batch (not a shift: LayerNorm would remove it)
    for attention, mixes in (("colrow", True), ("row", True), ("col", False)):
        net = SaintTransformer(4, 8, depth=1, heads=2, dropout=0.0, attention=attention).eval()
        with torch.no_grad():
            a, b = net(tokens), net(changed)
        assert not torch.allclose(a[3], b[3])
        assert (not torch.allclose(a[0], b[0])) == mixes, attention
        assert torch.allclose(a[[0, 1, 2, 4, 5]], b[[0, 1, 2, 4, 5]]) == (not mixes), attention


def test_cutmix_replaces_about_the_configured_share_of_features_with_one_partner_rows():
    n, fn, fc = 400, 6, 4
    values = torch.arange(n, dtype=torch.float32)[:, None].expand(n, fn) + 0.5  # value = row + 0.5
    codes = torch.arange(n)[:, None].expand(n, fc)  # category index = row
    v2, c2 = cutmix(values, codes, 0.1, torch.Generator().manual_seed(0))
    replaced = torch.cat([v2 != values, c2 != codes], 1)
    assert 0.08 < replaced.float().mean().item() < 0.12
    donors = torch.cat([v2 - 0.5, c2.float()], 1)  # the row each cell came from
    for i in range(n):  # every replaced cell of a row comes from the same partner row
        assert len(donors[i][replaced[i]].unique()) <= 1
    v3, c3 = cutmix(values, codes, 1.0, torch.Generator().manual_seed(0))
    assert torch.equal(v3[:, 0] - 0.5, c3[:, 0].float()) and torch.equal((v3[:, 0] - 0.5).sort().values,
                                                                          values[:, 0] - 0.5)  # a permutation


def test_mixup_mixes_each_rows_embedding_with_one_partner_row():
    e = torch.randn(50, 5, 8)
    mixed = mixup(e, 0.3, torch.Generator().manual_seed(0))
    partner = torch.randperm(50, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(mixed, 0.3 * e + 0.7 * e[partner])
    assert torch.allclose(mixup(e, 1.0, torch.Generator()), e)


def test_official_rules_for_colrow_attention_and_for_more_than_100_columns():
    default = SaintConfig()
    s, rules = saint_settings(default, 100)
    assert s == {"embedding_size": 16, "depth": 1, "heads": 4, "ff_dropout": 0.8, "batch_size": 256}
    assert len(rules) == 1
    s, rules = saint_settings(default, 101)
    assert s["batch_size"] == 64 and s["embedding_size"] == 16 and len(rules) == 2
    col = SaintConfig(attention="col")
    assert saint_settings(col, 100)[0] == {"embedding_size": 32, "depth": 6, "heads": 8, "ff_dropout": 0.1,
                                           "batch_size": 256}
    assert saint_settings(col, 101)[0]["embedding_size"] == 4 and saint_settings(col, 101)[0]["batch_size"] == 64
    off = SaintConfig(official_rules=False)
    assert saint_settings(off, 500) == ({"embedding_size": 32, "depth": 6, "heads": 8, "ff_dropout": 0.1,
                                         "batch_size": 256}, [])


def fit(seed, x, groups, **changes):
    model = SAINT(SaintConfig(**{**TINY, **changes}), seed, torch.device("cpu"), EvaluateConfig())
    model.fit(x[:100], x[100:], groups)
    return model


def test_both_losses_are_finite_and_decrease_on_a_toy_table():
    x, groups = mixed_table()
    model = fit(0, x, groups, epochs=8)
    first, last = model.history[0], model.history[-1]
    for part in ("contrastive", "categorical", "numeric"):
        assert np.isfinite(list(first.values()) + list(last.values())).all()
        assert last[part] < first[part], part
    assert model.log["val_loss_end"] < model.log["val_loss_start"]
    assert model.log["steps"] == 8 * 4  # 100 rows, batches of 32 (the last has 4 rows)


def test_saint_is_deterministic_for_a_seed_and_the_step_cap_holds():
    x, groups = mixed_table()
    a, b, c = fit(0, x, groups, max_steps=5), fit(0, x, groups, max_steps=5), fit(1, x, groups, max_steps=5)
    assert a.log["steps"] == 5 and a.log["epochs"] == 2
    assert torch.equal(a.encode(x), b.encode(x))
    assert not torch.equal(a.encode(x), c.encode(x))
    assert a.encode(x).shape == (120, 8)
    tokens = fit(0, x, groups, max_steps=1, representation="tokens", ff_dropout=0.5)
    assert tokens.encode(x).shape == (120, 5 * 8)  # CLS + 4 features
    assert torch.equal(tokens.encode(x), tokens.encode(x))  # no dropout at evaluation


def test_network_sizes_follow_the_official_layout():
    x, groups = mixed_table()
    net = SaintNetwork(saint_features(groups, x), 8, 1, 2, 0.0, "colrow", "diff")
    wide = 5 * 8  # CLS + 4 features
    assert [tuple(p.weight.shape) for p in net.projections[0] if hasattr(p, "weight")] == [(6 * wide // 5, wide),
                                                                                          (wide // 2, 6 * wide // 5)]
    assert len(net.projections) == 2 and net.decode_cat.w2.shape == (1, 40, 4)  # 3 categories + missing
    assert net.transformer.layers[0]["row_ff"].fn.inp.weight.shape == (8 * wide, wide)


@pytest.mark.parametrize("raw,message", [({"ff_dropout": 1.0}, "must lie in \\[0, 1\\)"),
                                         ({"numeric_weight": -1.0}, "loss weights must be >= 0"),
                                         ({"attention": "rowcol"}, "allowed: colrow, col, row")])
def test_settings_are_checked(raw, message):
    from seba.core.errors import ConfigError
    from seba.core.schema import check

    with pytest.raises(ConfigError, match=message):
        check(SaintConfig, raw, "baselines.saint")
