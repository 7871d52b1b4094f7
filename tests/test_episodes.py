import numpy as np
import pytest

from seba.episodes import sample_episodes
from seba.core.errors import EpisodeError


@pytest.mark.parametrize("shot", [1, 5, 10])
def test_episodes_have_k_per_class_and_disjoint_query(shot):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, size=200)
    ep = sample_episodes(y, 4, shot, n_episodes=20, seed=5)
    assert ep.support.shape == (20, 4 * shot)
    for e in range(20):
        s = ep.support[e]
        assert len(set(s)) == len(s)
        np.testing.assert_array_equal(np.bincount(y[s], minlength=4), [shot] * 4)
        np.testing.assert_array_equal(y[s], ep.support_labels)
        assert not ep.query[e, s].any()
        assert ep.query[e].sum() == len(y) - 4 * shot  # query = every other test row


def test_episodes_are_reproducible_and_vary():
    y = np.repeat(np.arange(3), 30)
    a = sample_episodes(y, 3, 5, 10, seed=1)
    b = sample_episodes(y, 3, 5, 10, seed=1)
    c = sample_episodes(y, 3, 5, 10, seed=2)
    np.testing.assert_array_equal(a.support, b.support)
    assert not np.array_equal(a.support, c.support)
    assert len({tuple(row) for row in a.support}) > 1


def test_a_class_too_small_for_the_shot_is_named():
    y = np.array([0] * 20 + [1] * 3)
    with pytest.raises(EpisodeError, match="class 1 has 3 test rows.*5-shot"):
        sample_episodes(y, 2, 5, 10, seed=0, dataset="toy")


def test_a_class_with_exactly_shot_test_rows_is_refused_it_would_have_no_query():
    """With as many test rows as the shot, every one is support: the class would never be queried,
    and the episode's accuracy would be measured on the other classes alone."""
    y = np.array([0] * 20 + [1] * 5)
    with pytest.raises(EpisodeError, match="class 1 has 5 test rows; a 5-shot episode needs 5 for its support "
                                           "and at least one more to query"):
        sample_episodes(y, 2, 5, 10, seed=0, dataset="toy")
    episodes = sample_episodes(np.array([0] * 20 + [1] * 6), 2, 5, 10, seed=0, dataset="toy")
    assert all((np.array([0] * 20 + [1] * 6)[q] == 1).any() for q in episodes.query)
