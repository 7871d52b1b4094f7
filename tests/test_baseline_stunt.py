"""STUNT's mechanism: column subsets, k-means pseudo-labels, perturbation, pseudo-validation."""

import math

import numpy as np
import torch

from seba.baselines.stunt import (STUNT, batched_kmeans, perturb, protonet_logits, pseudo_validation, sample_columns,
                                  sample_tasks, task_pool)
from seba.baselines.stunt import StuntConfig
from seba.core.config import EvaluateConfig

CFG = StuntConfig(ways=2, shots=2, queries=4, kmeans_iterations=20, task_pool=8)
CENTRES_A = np.array([[-8, 0], [8, 0], [0, 12]])
CENTRES_B = np.array([[-30, 0], [30, 0], [0, 40]])


def blobs(n=600, seed=0, k=2):
    """Columns 0-1 carry k clusters (labels a), columns 2-3 a different, wider-spread k-cluster
    structure (labels b, independent of a), columns 4-7 noise. (k = 2 for the tasks' k-means:
    seeded at random rows, as faiss, it can stall in a local optimum with more clusters.)"""
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, k, n), rng.integers(0, k, n)
    centres_a, centres_b = CENTRES_A[:k], CENTRES_B[:k]
    X = np.concatenate([centres_a[a] + rng.normal(size=(n, 2)), centres_b[b] + rng.normal(size=(n, 2)),
                        rng.normal(size=(n, 4))], 1)
    return torch.as_tensor(X, dtype=torch.float32), a, b


def purity(found, truth):
    """Share of rows whose found cluster's majority truth label is their own."""
    total = 0
    for c in np.unique(found):
        total += np.bincount(truth[found == c]).max()
    return total / len(found)


def test_a_column_subset_is_whole_groups_of_20_to_50_percent():
    groups = torch.as_tensor([0, 1, 1, 1, 2, 3, 4, 4, 5, 6, 7, 8, 9, 9, 9, 9])  # 10 original columns
    gen = torch.Generator().manual_seed(0)
    sizes = set()
    for _ in range(300):
        mask = sample_columns(groups, 10, 0.2, 0.5, gen)
        chosen = torch.unique(groups[mask])
        assert torch.equal(mask, torch.isin(groups, chosen))  # a one-hot group is chosen as a whole
        sizes.add(len(chosen))
    assert sizes == {2, 3, 4, 5}  # floor(0.2 * 10) .. floor(0.5 * 10)


def test_pseudo_labels_come_from_kmeans_on_the_chosen_columns_only():
    X, a, b = blobs()
    groups = torch.arange(X.shape[1])
    gen = torch.Generator().manual_seed(0)
    for columns, truth, other in (([0, 1], a, b), ([2, 3], b, a)):
        mask = torch.zeros(X.shape[1], dtype=torch.bool)
        mask[columns] = True
        masks, rows, labels, _ = task_pool(X, groups, X.shape[1], CFG, gen, 4, column_masks=mask.expand(4, -1))
        assert torch.equal(masks, mask.expand(4, -1))
        for r, lab in zip(rows.numpy(), labels.numpy()):
            assert purity(lab, truth[r]) == 1.0  # the structure of the chosen columns...
            assert purity(lab, other[r]) < 0.6  # ...not the (stronger) one of the other columns (chance: 0.5)


def test_batched_kmeans_solves_independent_problems():
    X, a, b = blobs(300, k=3)
    x = torch.stack([X[:, :2], X[:, 2:4]])
    labels, inertia = batched_kmeans(x, 3, 20, torch.Generator().manual_seed(1), init="++")
    assert purity(labels[0].numpy(), a) == 1.0 and purity(labels[1].numpy(), b) == 1.0
    assert inertia.shape == (2,) and inertia[0] < 2 * 300 * 3  # about 2 unit-variance dimensions per row
    X, a, b = blobs(300, k=2)
    labels, _ = batched_kmeans(torch.stack([X[:, :2], X[:, 2:4]]), 2, 20, torch.Generator().manual_seed(1))
    assert purity(labels[0].numpy(), a) == 1.0 and purity(labels[1].numpy(), b) == 1.0


def test_perturbation_draws_chosen_groups_from_donor_rows_and_keeps_the_rest():
    rng = np.random.default_rng(0)
    n = 200
    onehot = np.eye(4)[rng.integers(0, 4, n)]
    table = torch.as_tensor(np.concatenate([rng.normal(size=(n, 2)), onehot, rng.normal(size=(n, 1))], 1),
                            dtype=torch.float32)
    groups = torch.as_tensor([0, 1, 2, 2, 2, 2, 3])
    mask = torch.as_tensor([False, True, True, True, True, True, False])  # group 1 and the one-hot group 2
    x = table[:50]
    out = perturb(x, table, mask, groups, torch.Generator().manual_seed(0))
    assert torch.equal(out[:, ~mask], x[:, ~mask])  # the other columns are untouched
    block = out[:, 2:6]
    assert torch.equal(block.sum(1), torch.ones(50)) and set(block.unique().tolist()) == {0.0, 1.0}  # still one-hot
    for row in out:  # every chosen group's values are those of some table row (its empirical marginal)
        assert (table[:, 1] == row[1]).any()
        assert (table[:, 2:6] == row[2:6]).all(1).any()
    assert (out[:, 1] != x[:, 1]).float().mean() > 0.9  # a donor row, not the row itself
    # the two chosen groups come from different donors: their values are not paired as in the table
    donor = [int(torch.nonzero(table[:, 1] == v)[0]) for v in out[:, 1]]
    assert (table[donor, 2:6] != out[:, 2:6]).any(1).float().mean() > 0.5


def test_episodes_are_pseudo_classes_with_chosen_columns_perturbed():
    X, a, b = blobs()
    X[:, 4] = torch.as_tensor(a, dtype=torch.float32)  # an unchosen column that tells the true cluster
    groups = torch.arange(X.shape[1])
    mask = torch.zeros(X.shape[1], dtype=torch.bool)
    mask[[0, 1]] = True
    gen = torch.Generator().manual_seed(0)
    pool = task_pool(X, groups, X.shape[1], CFG, gen, 4, column_masks=mask.expand(4, -1))
    support, query, labels = sample_tasks(X, groups, pool, CFG, gen, 6)
    assert support.shape == (6, 2 * 2, 8) and query.shape == (6, 2 * 4, 8) and labels.shape == (6, 2 * 4)
    support_labels = torch.arange(2).repeat_interleave(2)
    for s, q, lab in zip(support, query, labels):
        # rows of one pseudo-class share their true cluster (column 4 is intact) ...
        for c in range(2):
            assert len(torch.unique(torch.cat([s[support_labels == c, 4], q[lab == c, 4]]))) == 1
        assert len(torch.unique(s[:, 4])) == 2
        # ... while their chosen columns no longer do: they come from random rows of the table
        x = torch.cat([s, q])
        true = x[:, 4].long()
        shown = torch.cdist(x[:, :2], torch.as_tensor(CENTRES_A[:2], dtype=torch.float32)).argmin(1)
        assert (shown == true).float().mean() < 0.85  # chance: 0.5; unperturbed: 1
        for row in x:  # the unchosen columns are those of one table row, the chosen ones are not
            source = torch.nonzero((X[:, 2:] == row[2:]).all(1)).flatten()
            assert len(source) == 1 and not torch.equal(X[source[0], :2], row[:2])


def test_protonet_logits_are_negative_squared_distances_to_class_means():
    support = torch.tensor([[0.0, 0.0], [2.0, 0.0], [10.0, 10.0], [10.0, 12.0]])  # class-major, 2 shots
    query = torch.tensor([[1.0, 1.0]])
    logits = protonet_logits(support, query, 2)
    assert torch.allclose(logits, torch.tensor([[-1.0, -(9.0 ** 2 + 10.0 ** 2)]]))


def test_pseudo_validation_episodes_follow_kmeans_of_the_validation_rows():
    X, a, _ = blobs(120, k=3)
    V = X[:, :2]
    cfg = StuntConfig(val_clusters=3, val_queries=30, val_tasks=5)
    support, query, ways = pseudo_validation(V, cfg, torch.Generator().manual_seed(0))
    assert ways == 3 and support.shape == (5, 3)
    q = query.shape[1] // 3
    assert q == min(30, int(np.bincount(a).min()) - 1)
    for s, qs in zip(support, query):
        for c in range(3):
            assert len(np.unique(a[torch.cat([s[c:c + 1], qs[c * q:(c + 1) * q]]).numpy()])) == 1


def small_fit(seed, x, v, groups):
    cfg = StuntConfig(ways=3, queries=5, task_pool=20, encoder_hidden=32, encoder_out=16, max_steps=30,
                      eval_every=10, patience=20, precision="fp32")
    model = STUNT(cfg, seed, torch.device("cpu"), EvaluateConfig(probe_max_iters=50))
    model.fit(x, v, groups)
    return model


def test_fit_is_deterministic_for_a_seed():
    X, _, _ = blobs(200, k=3)
    x, v = X[:160].numpy(), X[160:].numpy()
    groups = np.arange(8)
    one, two, other = small_fit(3, x, v, groups), small_fit(3, x, v, groups), small_fit(4, x, v, groups)
    for p, q, r in zip(one.encoder.parameters(), two.encoder.parameters(), other.encoder.parameters()):
        assert torch.equal(p, q)
    assert not all(torch.equal(p, r) for p, r in zip(one.encoder.parameters(), other.encoder.parameters()))
    assert one.log == two.log and one.log["stop_step"] <= 30 and math.isfinite(one.log["best_val_accuracy"])


def test_scores_use_euclidean_prototypes_at_every_shot_unless_head_is_seba():
    method = STUNT(StuntConfig(encoder_hidden=8, encoder_out=4), 0, torch.device("cpu"), EvaluateConfig())
    method.encoder = torch.nn.Identity()
    x = np.array([[0.0, 0.0], [1.0, 0.0], [10.0, 0.0], [11.0, 0.0], [3.0, 0.0], [0.0, 9.0]], dtype=np.float32)
    support, labels = np.array([[0, 1, 2, 3]]), np.array([0, 0, 1, 1])  # class means (0.5, 0) and (10.5, 0)
    scores = method.scores(x, support, labels, 2, 5)
    expected = -torch.cdist(torch.as_tensor(x), torch.tensor([[0.5, 0.0], [10.5, 0.0]])) ** 2
    torch.testing.assert_close(scores[0], expected, rtol=1e-5, atol=1e-4)
    # (0, 9) is nearer to class 0's mean in Euclidean distance but points away from both in cosine terms
    seba = STUNT(StuntConfig(head="seba"), 0, torch.device("cpu"), EvaluateConfig(prototype_shots=(5,)))
    seba.encoder = torch.nn.Identity()
    cosine = seba.scores(x, support, labels, 2, 5)
    assert not torch.allclose(cosine[0], expected)
