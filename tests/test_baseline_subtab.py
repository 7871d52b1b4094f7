import math

import numpy as np
import torch

from seba.baselines.subtab import SubTab, nt_xent, subtab_subsets, subtab_views
from seba.baselines.subtab import SubtabConfig
from seba.core.config import EvaluateConfig


def spans(masks):
    return [(int(np.flatnonzero(m)[0]), int(np.flatnonzero(m)[-1]) + 1) for m in masks]


def test_subsets_are_subtabs_overlapping_slices_when_the_columns_divide():
    # SubTab's code with 8 columns, 4 subsets, overlap 0.75: width 2, n_overlap int(1.5) = 1
    masks = subtab_subsets(np.arange(8), 4, 0.75)
    assert spans(masks) == [(0, 3), (1, 4), (3, 6), (5, 8)]
    assert all(m[a:b].all() and m.sum() == b - a for m, (a, b) in zip(masks, spans(masks)))  # contiguous
    assert spans(subtab_subsets(np.arange(12), 3, 0.5)) == [(0, 6), (2, 8), (6, 12)]  # width 4, n_overlap 2


def test_subsets_cover_every_column_and_never_split_a_one_hot_block():
    # 105 columns: SubTab's code would drop the last 105 mod 4 = 1; here every column is covered
    masks = subtab_subsets(np.arange(105), 4, 0.75)
    assert masks.any(0).all()
    n_overlap = int(0.75 * (105 // 4))
    for a, b in zip(masks[1:-1], masks[2:]):  # later neighbours share exactly n_overlap columns
        assert (a & b).sum() == n_overlap
    assert (masks[0] & masks[1]).sum() == 2 * n_overlap  # as in SubTab: the first subset extends forwards
    assert max(m.sum() for m in masks) - min(m.sum() for m in masks) <= 1  # (nearly) equal widths
    groups = np.array([0, 1, 1, 1, 2, 3, 3, 4, 5, 5, 5, 5, 6, 7])  # one-hot blocks of 3, 2 and 4 columns
    masks = subtab_subsets(groups, 4, 0.75)
    assert masks.any(0).all()
    for g in np.unique(groups):  # a block is in a subset entirely or not at all
        assert all(m[groups == g].all() or not m[groups == g].any() for m in masks)
    assert subtab_subsets(np.arange(3), 4, 0.75).shape[0] == 3  # fewer columns than subsets
    assert subtab_subsets(np.zeros(4, dtype=int), 4, 0.75).all()  # one column: two copies of it


def test_views_zero_the_other_columns_and_swap_noise_comes_from_the_same_column():
    rng = np.random.default_rng(0)
    x = torch.as_tensor(rng.normal(size=(64, 8)) + np.arange(8) * 100, dtype=torch.float32)  # distinct values
    groups = torch.arange(8)
    subsets = torch.as_tensor(subtab_subsets(np.arange(8), 4, 0.75))
    clean = subtab_views(x, subsets, groups, 8, "swap", 0.3, 0.1, None)
    assert torch.equal(clean, x * subsets[:, None, :])  # evaluation: no noise
    noisy = subtab_views(x, subsets, groups, 8, "swap", 0.3, 0.1, torch.Generator().manual_seed(0))
    assert (noisy[~subsets[:, None, :].expand_as(noisy)] == 0).all()  # outside its subset: zero
    changed = (noisy != clean) & subsets[:, None, :]
    rate = changed.sum().item() / (subsets.sum().item() * 64)
    assert 0.2 < rate < 0.4  # masking_ratio 0.3 (minus self-swaps)
    for k in range(4):
        for j in np.flatnonzero(subsets[k].numpy()):
            assert torch.isin(noisy[k, :, j], x[:, j]).all()  # swapped within the column
    gaussian = subtab_views(x, subsets, groups, 8, "gaussian", 0.3, 0.1, torch.Generator().manual_seed(0))
    assert (gaussian - clean).abs().max() < 1.0 and (gaussian != clean).any()
    zero = subtab_views(x, subsets, groups, 8, "zero", 1.0, 0.1, torch.Generator().manual_seed(0))
    assert (zero == 0).all()


def test_nt_xent_matches_the_formula():
    zi = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [0.6, 0.8]]), dim=1)
    zj = torch.nn.functional.normalize(torch.tensor([[0.8, 0.6], [0.0, 1.0]]), dim=1)
    z, tau = torch.cat([zi, zj]), 0.5
    expected = 0.0
    for a in range(4):
        partner = (a + 2) % 4
        others = [b for b in range(4) if b != a]
        expected -= math.log(math.exp(z[a] @ z[partner] / tau) / sum(math.exp(z[a] @ z[b] / tau) for b in others))
    assert abs(nt_xent(zi, zj, tau).item() - expected / 4) < 1e-5


def fit(seed, x, **kw):
    cfg = SubtabConfig(encoder_hidden=32, encoder_out=16, batch_size=16, max_epochs=3, patience=2, **kw)
    model = SubTab(cfg, seed, torch.device("cpu"), EvaluateConfig())
    model.fit(x[:80], x[80:], np.arange(x.shape[1]))
    return model


def test_evaluation_embedding_is_the_mean_over_subsets():
    x = np.random.default_rng(0).normal(size=(100, 9)).astype(np.float32)
    model = fit(0, x)
    X = torch.as_tensor(x)
    with torch.no_grad():
        per_subset = torch.stack([model.encoder(X * m.float()) for m in model.subsets])
    assert len(model.subsets) == 4
    assert torch.allclose(model.encode(x), per_subset.mean(0), atol=1e-5)
    assert not torch.allclose(model.encode(x), model.encoder(X).detach(), atol=1e-3)  # not the full row


def test_subtab_is_deterministic_for_a_seed():
    x = np.random.default_rng(0).normal(size=(100, 6)).astype(np.float32)
    a, b, c = fit(0, x), fit(0, x), fit(1, x)
    assert torch.equal(a.encode(x), b.encode(x))
    assert not torch.equal(a.encode(x), c.encode(x))
    d = fit(0, x, contrastive_weight=0.0, distance_weight=0.0, noise="none")  # reconstruction only still trains
    untrained = fit(0, x, contrastive_weight=0.0, distance_weight=0.0, noise="none", lr=1e-12)  # the initial weights
    assert d.log["best_val_loss"] < untrained.log["best_val_loss"]
    assert not torch.allclose(d.encode(x), untrained.encode(x), atol=1e-3)
