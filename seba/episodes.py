"""Few-shot episodes drawn from a seed's test part: K support rows per class, the rest query.

One sampler serves every member (each ratio encoder and the ensemble) and, later, every
baseline, so all of them are scored on identical support / query indices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seba.core.errors import EpisodeError
from seba.core.runtime import derive_seed


@dataclass
class Episodes:
    shot: int
    support: np.ndarray  # int64 [episodes, classes * shot]: positions in the test part, class-major
    support_labels: np.ndarray  # int64 [classes * shot]: the same for every episode
    query: np.ndarray  # bool [episodes, test rows]: True for query rows (all non-support rows)


def sample_episodes(y_test: np.ndarray, n_classes: int, shot: int, n_episodes: int, seed: int,
                    dataset: str = "") -> Episodes:
    counts = np.bincount(y_test, minlength=n_classes)
    short = [(c, int(n)) for c, n in enumerate(counts) if n <= shot]  # its support, and a query row
    if short:
        c, n = short[0]
        raise EpisodeError(
            f"dataset '{dataset}': class {c} has {n} test rows; a {shot}-shot episode needs {shot} for its support "
            f"and at least one more to query (lower evaluate.shots or change split.test_fraction)"
        )
    rng = np.random.default_rng(derive_seed(seed, shot, "episodes"))
    by_class = [np.flatnonzero(y_test == c) for c in range(n_classes)]
    support = np.empty((n_episodes, n_classes * shot), dtype=np.int64)
    for e in range(n_episodes):
        support[e] = np.concatenate([rng.choice(rows, size=shot, replace=False) for rows in by_class])
    query = np.ones((n_episodes, len(y_test)), dtype=bool)
    np.put_along_axis(query, support, False, axis=1)
    labels = np.repeat(np.arange(n_classes, dtype=np.int64), shot)
    return Episodes(shot=shot, support=support, support_labels=labels, query=query)
