"""Pseudo-Label (Lee, 2013) and the batched per-episode MLP machinery it shares with Mean Teacher."""

import dataclasses

import numpy as np
import pytest
import torch

from seba.baselines.pseudolabel import (PseudoLabel, init_mlp, mlp_forward, pseudo_label_loss, pseudo_label_weight,
                                        train_pseudolabel)
from seba.baselines.pseudolabel import PseudolabelConfig
from seba.episodes import sample_episodes

CPU = torch.device("cpu")
CFG = PseudolabelConfig(hidden=16, steps=30, batch_size=32, alpha_f=3.0, t1_fraction=0.2, t2_fraction=0.6,
                        precision="fp32")


def table(n=200, d=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g)


def episode(params, e):
    """Episode ``e`` of stacked parameters, as a batch of one (w1 is [D, E, H])."""
    return [params[0][:, e:e + 1]] + [p[e:e + 1] for p in params[1:]]


def test_an_episode_trained_alone_gets_the_same_weights_as_inside_the_batch():
    X = table()
    support = torch.randint(0, len(X), (5, 4), generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([0, 0, 1, 1])
    seeds = [11, 12, 13, 14, 15]
    batch = init_mlp(seeds, X.shape[1], 16, 2, CPU)
    train_pseudolabel(batch, X[support], labels, X, CFG, batch_seed=7, label="test")
    for e in (0, 3):
        alone = init_mlp([seeds[e]], X.shape[1], 16, 2, CPU)
        train_pseudolabel(alone, X[support[e:e + 1]], labels, X, CFG, batch_seed=7, label="test")
        for a, b in zip(alone, episode(batch, e)):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    # and training really moved the weights
    assert not torch.allclose(batch[0], init_mlp(seeds, X.shape[1], 16, 2, CPU)[0])


def test_stacked_forward_equals_each_episodes_own_mlp():
    X = table(n=9, d=5)
    params = init_mlp([1, 2, 3], 5, 8, 4, CPU)
    support = X[torch.tensor([[0, 1], [2, 3], [4, 5]])]
    out = mlp_forward(params, support, X[6:])  # [3, 2 + 3, 4]
    w1, b1, w2, b2 = params
    for e in range(3):
        for rows, got in ((support[e], out[e, :2]), (X[6:], out[e, 2:])):
            expected = torch.relu(rows @ w1[:, e] + b1[e]) @ w2[e] + b2[e]
            torch.testing.assert_close(got, expected)


def test_pseudo_label_weight_follows_lees_schedule():
    w = [pseudo_label_weight(t, 100, 3.0, 0.1, 0.6) for t in range(100)]
    assert all(v == 0.0 for v in w[:10])  # before T1
    assert w[35] == pytest.approx(3.0 * 25 / 50)  # linear between T1 and T2
    assert all(v == 3.0 for v in w[60:])  # alpha_f from T2 on
    assert all(a <= b for a, b in zip(w, w[1:]))


def test_pseudo_labels_are_the_argmax_of_the_current_predictions_without_gradient():
    g = torch.Generator().manual_seed(0)
    support = torch.randn(2, 3, 4, generator=g, requires_grad=True)
    unlabeled = torch.randn(2, 5, 4, generator=g, requires_grad=True)
    labels = torch.tensor([0, 1, 3])
    loss = pseudo_label_loss(support, labels, unlabeled, alpha=2.0)
    ce = torch.nn.functional.cross_entropy
    for e in range(2):
        hard = unlabeled[e].detach().argmax(-1)  # fixed targets
        expected = ce(support[e], labels) + 2.0 * ce(unlabeled[e], hard)
        torch.testing.assert_close(loss[e], expected)
    # the gradient is that of a cross-entropy towards fixed labels (none through the argmax)
    grad, = torch.autograd.grad(loss.sum(), unlabeled)
    p = unlabeled.detach().softmax(-1)
    expected = 2.0 * (p - torch.nn.functional.one_hot(unlabeled.detach().argmax(-1), 4)) / 5
    torch.testing.assert_close(grad, expected)
    # the confidence-threshold variant drops the unconfident rows
    assert torch.all(pseudo_label_loss(support, labels, unlabeled, 2.0, threshold=1.0)
                     == pseudo_label_loss(support, labels, unlabeled, 0.0))


def test_training_is_supervised_only_until_t1_then_uses_the_pseudo_labels():
    X = table()
    support = torch.randint(0, len(X), (3, 4), generator=torch.Generator().manual_seed(2))
    labels = torch.tensor([0, 0, 1, 1])

    def run(cfg):
        params, snapshots = init_mlp([5, 6, 7], X.shape[1], 16, 2, CPU), {}
        train_pseudolabel(params, X[support], labels, X, cfg, 3, "test",
                          observe=lambda t, p: snapshots.__setitem__(t, [q.detach().clone() for q in p]))
        return snapshots

    semi = run(CFG)  # T1 = 0.2 * 30 = step 6
    supervised = run(dataclasses.replace(CFG, alpha_f=0.0))
    for t in range(6):  # updates 0..5 have alpha = 0: identical to supervised-only training
        assert all(torch.equal(a, b) for a, b in zip(semi[t], supervised[t]))
    assert not torch.equal(semi[29][0], supervised[29][0])


def toy_method(seed=0, **kw):
    cfg = dataclasses.replace(CFG, **kw)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 6)).astype(np.float32)
    y = np.repeat([0, 1, 2], 20)
    X[:, 0] += 3 * y
    method = PseudoLabel(cfg, seed, CPU)
    method.fit(X, X[:5], np.arange(6))
    episodes = sample_episodes(y, 3, 2, n_episodes=6, seed=0)
    return method, X, episodes.support, episodes.support_labels


def test_scores_are_deterministic_and_independent_of_episode_chunking():
    method, X, support, labels = toy_method()
    scores = method.scores(X, support, labels, 3, 2)
    assert scores.shape == (6, 60, 3)
    torch.testing.assert_close(toy_method()[0].scores(X, support, labels, 3, 2), scores, atol=0, rtol=0)
    chunked, *_ = toy_method(episode_chunk=4)  # chunks of 4 + 2 episodes
    torch.testing.assert_close(chunked.scores(X, support, labels, 3, 2), scores, atol=1e-5, rtol=1e-5)
    other_seed, *_ = toy_method(seed=1)
    assert not torch.allclose(other_seed.scores(X, support, labels, 3, 2), scores)


def test_bad_settings_are_named_with_their_values():
    import pytest

    from seba.baselines.base import method_config
    from seba.core.config import BaselinesConfig
    from seba.core.errors import ConfigError

    def config(**values):
        return method_config(BaselinesConfig(methods=[], sections={"pseudolabel": values}), "pseudolabel")

    with pytest.raises(ConfigError, match=r"baselines.pseudolabel: threshold 1.0 \(need 0 <= threshold < 1\)$"):
        config(threshold=1.0)
    with pytest.raises(ConfigError, match=r"alpha_f -1.0 \(need >= 0\); weight_decay -0.5 \(need >= 0\)"):
        config(alpha_f=-1.0, weight_decay=-0.5)
