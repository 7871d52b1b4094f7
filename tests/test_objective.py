import math

import numpy as np
import pandas as pd
import pytest
import torch

from seba.core.data import encode_table
from seba.objective import (
    expand_mask,
    feature_view,
    info_nce,
    masked_group_count,
    sample_group_mask,
    stacked_feature_view,
    stacked_target_neighbours,
    target_neighbours,
)


@pytest.mark.parametrize("dataset", ["cmc", "income"])
@pytest.mark.parametrize("ratio", [0.1, 0.2, 0.3, 0.4, 0.5])
def test_masks_never_split_a_group_and_hide_k_columns(snapshot_dir, dataset, ratio):
    table = encode_table(pd.read_parquet(snapshot_dir / f"{dataset}.parquet"))
    groups = torch.as_tensor(table.groups)
    n_groups = table.n_groups
    k = masked_group_count(n_groups, ratio)
    assert k == max(1, math.floor(ratio * n_groups + 1e-9))
    gen = torch.Generator().manual_seed(0)
    for _ in range(50):
        group_mask = sample_group_mask(n_groups, k, gen)
        assert int(group_mask.sum()) == k
        column_mask = expand_mask(group_mask, groups)
        for g in range(n_groups):
            block = column_mask[groups == g]
            assert bool(block.all()) or not bool(block.any()), f"group {g} split by the mask"
        assert int(column_mask.sum()) == int(sum((groups == g).sum() for g in torch.nonzero(group_mask)))


def test_released_code_would_mask_nothing_on_small_tables_but_we_mask_one():
    # diabetes has 8 columns: int(0.1 * 8) = 0 in the released code
    assert masked_group_count(8, 0.1) == 1
    assert masked_group_count(8, 0.5) == 4
    assert masked_group_count(9, 0.3) == 2  # floor(2.7)
    assert masked_group_count(10, 0.3) == 3  # no float fuzz: 0.3 * 10 = 3.0000000000000004


def test_feature_view_zero_and_marginal():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4) + 1
    mask = torch.tensor([True, False, True, False])
    zero = feature_view(x, mask, "zero")
    assert torch.equal(zero[:, [0, 2]], torch.zeros(3, 2))
    assert torch.equal(zero[:, [1, 3]], x[:, [1, 3]])
    perm = torch.tensor([2, 0, 1])
    marginal = feature_view(x, mask, "marginal", perm)
    assert torch.equal(marginal[:, [0, 2]], x[perm][:, [0, 2]])
    assert torch.equal(marginal[:, [1, 3]], x[:, [1, 3]])


def test_stacked_feature_view_is_each_members_feature_view():
    # two members, each with its own mask and its own row permutation
    x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) + 1
    masks = torch.tensor([[True, False, True, False], [False, True, False, False]])
    perms = torch.tensor([[2, 0, 1], [1, 2, 0]])
    zero = stacked_feature_view(x, masks, "zero")
    marginal = stacked_feature_view(x, masks, "marginal", perms)
    for s in range(2):
        assert torch.equal(zero[s], feature_view(x[s], masks[s], "zero"))
        assert torch.equal(marginal[s], feature_view(x[s], masks[s], "marginal", perms[s]))
    assert not torch.equal(marginal[1], feature_view(x[1], masks[1], "marginal", perms[0]))
    with pytest.raises(ValueError, match="permutation"):
        stacked_feature_view(x, masks, "marginal")
    with pytest.raises(ValueError, match="unknown fill"):
        stacked_feature_view(x, masks, "mean")


def test_target_neighbour_on_hand_made_batch():
    # target view = columns 0 and 2; column 1 is a decoy that would change the answer
    x = torch.tensor([
        [0.0, 100.0, 0.0],
        [0.1, -50.0, 0.0],   # nearest to row 0 in the target view
        [5.0, 0.0, 5.0],
        [5.0, 0.0, 5.5],     # nearest to row 2
        [0.0, 0.1, 0.3],     # second nearest to row 0
    ])
    mask = torch.tensor([True, False, True])
    nn = target_neighbours(x, mask)
    assert nn.tolist() == [1, 0, 3, 2, 0]
    # never the row itself, even with duplicates
    dup = torch.tensor([[1.0, 0.0], [1.0, 0.0], [3.0, 0.0]])
    assert target_neighbours(dup, torch.tensor([True, False])).tolist() == [1, 0, 0]  # ties go to the first row, like torch.argmin


def reference_info_nce(z: np.ndarray, positives: np.ndarray, temperature: float) -> float:
    """The paper's formula written out row by row with numpy."""
    z = z / np.linalg.norm(z, axis=1, keepdims=True)
    losses = []
    for i in range(len(z)):
        sims = np.array([z[i] @ z[a] / temperature for a in range(len(z))])
        denominator = sum(math.exp(sims[a]) for a in range(len(z)) if a != i)
        losses.append(-(sims[positives[i]] - math.log(denominator)))
    return float(np.mean(losses))


@pytest.mark.parametrize("temperature", [1.0, 0.5, 0.1])
def test_info_nce_matches_the_formula(temperature):
    rng = np.random.default_rng(3)
    z = rng.normal(size=(7, 5)).astype(np.float64)
    positives = np.array([3, 0, 6, 1, 2, 2, 4])
    ours = float(info_nce(torch.as_tensor(z), torch.as_tensor(positives), temperature))
    assert ours == pytest.approx(reference_info_nce(z, positives, temperature), rel=1e-9, abs=1e-9)


def test_info_nce_rejects_bad_shapes():
    with pytest.raises(ValueError, match="disagree"):  # ours, not torch's own shape error
        info_nce(torch.zeros(4, 3), torch.zeros(5, dtype=torch.long), 1.0)


def test_exact_search_finds_the_nearest_row_where_the_float32_product_does_not():
    """torch.cdist's one product, ||a||^2 + ||b||^2 - 2 a.b, rounds away near rows' differences when
    the values are large beside them (here: 1000 plus hundredths); neighbour_search: exact (the
    product in float64) finds a nearest other row for every row (ties aside), on both paths (per
    member, batched)."""
    rng = np.random.default_rng(0)
    x = torch.as_tensor(1000 + rng.normal(size=(300, 3)) * 0.01, dtype=torch.float32)
    mask = torch.tensor([True, True, False])

    def farther(rows, found):  # rows whose chosen neighbour is farther than their nearest, in float64
        d = torch.cdist(rows[:, mask].double(), rows[:, mask].double(), compute_mode="donot_use_mm_for_euclid_dist")
        d.fill_diagonal_(float("inf"))
        return float((d.gather(1, found.unsqueeze(1)).squeeze(1) > d.min(dim=1).values).float().mean())

    assert farther(x, target_neighbours(x, mask, exact=True)) == 0
    assert farther(x, target_neighbours(x, mask)) > 0.1  # the float32 product's rounding
    stacked, masks = torch.stack([x, x.flip(0)]), torch.stack([mask, mask])
    for batched in (False, True):
        found = stacked_target_neighbours(stacked, masks, batched=batched, exact=True)
        assert farther(x, found[0]) == 0 and farther(x.flip(0), found[1]) == 0
