import numpy as np
import pytest
import torch

from seba.baselines.vime import VIME, vime_corrupt
from seba.baselines.vime import VimeConfig
from seba.core.config import EvaluateConfig


def mixed_table(n=200, seed=0):
    """Two numeric columns with distinct values everywhere, then a 4-level one-hot block (group 2),
    then a numeric column: groups [0, 1, 2, 2, 2, 2, 3]."""
    rng = np.random.default_rng(seed)
    numeric = rng.normal(size=(n, 3)) + np.arange(3) * 100  # columns never share a value
    onehot = np.eye(4)[rng.integers(0, 4, n)]
    x = np.concatenate([numeric[:, :2], onehot, numeric[:, 2:]], axis=1).astype(np.float32)
    return torch.as_tensor(x), torch.as_tensor([0, 1, 2, 2, 2, 2, 3])


def test_corruption_draws_each_column_from_its_own_marginal_and_the_mask_marks_the_changes():
    x, groups = mixed_table()
    g = torch.Generator().manual_seed(0)
    x_tilde, mask = vime_corrupt(x, groups, 4, 0.3, g)
    assert torch.equal(mask, (x_tilde != x).float())  # exactly the changed cells
    for j in range(x.shape[1]):
        # every value of column j is one of column j's own values (a permutation of the column)
        assert torch.isin(x_tilde[:, j], x[:, j]).all()
    # a one-hot block is corrupted as one column: it stays one-hot and is a whole block of some row
    block = x_tilde[:, 2:6]
    assert torch.equal(block.sum(1), torch.ones(len(x))) and set(block.unique().tolist()) == {0.0, 1.0}
    # the numeric columns change at rate p_m (a shuffled row is its own donor with prob. 1/n)
    rate = mask[:, [0, 1, 6]].mean().item()
    assert 0.22 < rate < 0.38
    # numeric columns of one row are masked independently (not one mask per row)
    assert 0 < (mask[:, 0] != mask[:, 1]).float().mean().item()


def test_corruption_keeps_each_shuffled_column_a_permutation_of_the_batch():
    x, groups = mixed_table(n=50)
    x_tilde, _ = vime_corrupt(x, groups, 4, 1.0, torch.Generator().manual_seed(1))  # corrupt every cell
    for j in (0, 1, 6):  # p_m = 1: the column is exactly a permutation of itself
        assert torch.equal(x_tilde[:, j].sort().values, x[:, j].sort().values)
    assert torch.equal(x_tilde[:, 2:6].sum(0), x[:, 2:6].sum(0))  # the one-hot block: the rows' blocks permuted
    assert torch.equal(vime_corrupt(x, groups, 4, 1e-9, torch.Generator().manual_seed(1))[0], x)


def fit(seed, x, **kw):
    model = VIME(VimeConfig(encoder_hidden=32, encoder_out=16, batch_size=32, max_epochs=3, patience=2, **kw), seed,
                 torch.device("cpu"), EvaluateConfig())
    model.fit(x[:80], x[80:], np.arange(x.shape[1]))
    return model


def test_vime_is_deterministic_for_a_seed_and_trains_the_encoder():
    x = np.random.default_rng(0).normal(size=(100, 6)).astype(np.float32)
    a, b, c = fit(0, x), fit(0, x), fit(1, x)
    assert torch.equal(a.encode(x), b.encode(x))
    assert not torch.equal(a.encode(x), c.encode(x))
    assert a.encode(x).shape == (100, 16)
    untrained = fit(0, x, lr=1e-12)  # steps too small to move a float32 weight: the initial encoder
    assert a.log["best_val_loss"] < untrained.log["best_val_loss"]
    assert not torch.allclose(a.encode(x), untrained.encode(x), atol=1e-3)


@pytest.mark.parametrize("n_train,max_epochs,max_steps,epochs", [(1000, 1000, 25, 3), (50, 1000, 25, 25),
                                                                 (1000, 2, 10**6, 2)])
def test_step_cap_bounds_the_epochs(n_train, max_epochs, max_steps, epochs):
    from seba.baselines.base import train_with_early_stopping

    layer = torch.nn.Linear(2, 1)
    cfg = VimeConfig(batch_size=100, max_epochs=max_epochs, max_steps=max_steps, patience=10**6)
    steps = []

    def batch_loss(index):
        steps.append(len(index))
        return layer(torch.ones(len(index), 2)).pow(2).mean()

    log = train_with_early_stopping([layer], batch_loss, n_train, lambda: 1.0, cfg, torch.Generator().manual_seed(0), "t")
    assert log["stop_epoch"] == epochs
    assert len(steps) == epochs * -(-n_train // 100)


@pytest.mark.parametrize("p_m", [0.0, 1.5])
def test_p_m_must_be_a_fraction(p_m):
    from seba.core.errors import ConfigError
    from seba.core.schema import check

    with pytest.raises(ConfigError, match="'baselines.vime.p_m' must lie in"):
        check(VimeConfig, {"p_m": p_m}, "baselines.vime")
