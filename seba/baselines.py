"""Baselines, evaluated on exactly SeBA's episodes.

A method is a class registered in ``METHODS``. It gets one seed's standardised table at a time:
``fit`` sees the unlabeled train and validation parts (self- and semi-supervised methods learn
from them; supervised ones ignore them), then ``scores`` gets the test part and a batch of
episodes (support positions and labels, from ``seba.episodes.sample_episodes``, the sampler
SeBA's evaluation uses) and returns class scores for every test row: [episodes, rows, classes].
The stage takes the argmax and scores the query rows exactly as for SeBA.

Add a method: subclass ``Method``, give it ``name`` (its params section and stage name),
``paper_name`` (its row in paper_results.csv, or None), register it with ``@register`` and add
its config dataclass to ``seba.config.BASELINE_SECTIONS``. See README, "Adding a method".
"""

from __future__ import annotations

import numpy as np
import torch

METHODS: dict[str, type["Method"]] = {}


def register(cls: type["Method"]) -> type["Method"]:
    METHODS[cls.name] = cls
    return cls


class Method:
    name: str = ""
    paper_name: str | None = None

    def __init__(self, cfg, seed: int, device: torch.device):
        self.cfg = cfg
        self.seed = seed
        self.device = device

    def fit(self, x_train: np.ndarray, x_val: np.ndarray, groups: np.ndarray) -> None:
        """Learn from the unlabeled train (and validation) part; supervised methods do nothing."""

    def scores(self, x_test: np.ndarray, support: np.ndarray, support_labels: np.ndarray, n_classes: int,
               shot: int) -> torch.Tensor:
        raise NotImplementedError


@register
class KNN(Method):
    """k nearest support rows (Euclidean, on the standardised features), majority vote; ties go
    to the class of the nearest row. k = 1 for 1-shot, else ``knn.k`` capped at the support size."""

    name = "knn"
    paper_name = "kNN"

    def scores(self, x_test, support, support_labels, n_classes, shot):
        X = torch.as_tensor(x_test, dtype=torch.float32, device=self.device)
        sup = torch.as_tensor(support, device=self.device)  # [E, S]
        labels = torch.as_tensor(support_labels, device=self.device)  # [S]
        k = 1 if shot == 1 else min(self.cfg.k, sup.shape[1])
        out = []
        for first in range(0, len(sup), 10):  # 10 episodes at a time bounds the [E, N, S] distances
            d = torch.cdist(X[None], X[sup[first:first + 10]])  # [e, N, S]
            nearest = d.topk(k, dim=-1, largest=False).indices  # [e, N, k], nearest first
            votes = torch.nn.functional.one_hot(labels[nearest], n_classes).float()  # [e, N, k, C]
            score = votes.sum(2)
            score += 0.5 * votes[:, :, 0]  # tie-break: the nearest neighbour's class
            out.append(score)
        return torch.cat(out)


@register
class LogReg(Method):
    """Multinomial logistic regression (scikit-learn, L2, lbfgs) on the support of each episode:
    the supervised linear floor on the standardised features."""

    name = "logreg"
    paper_name = None

    def scores(self, x_test, support, support_labels, n_classes, shot):
        from sklearn.linear_model import LogisticRegression

        out = np.zeros((len(support), len(x_test), n_classes), dtype=np.float32)
        for e, rows in enumerate(support):
            model = LogisticRegression(C=self.cfg.C, max_iter=self.cfg.max_iter)
            model.fit(x_test[rows], support_labels)
            out[e][:, model.classes_] = model.predict_log_proba(x_test)
            missing = np.setdiff1d(np.arange(n_classes), model.classes_)
            out[e][:, missing] = -np.inf
        return torch.from_numpy(out)
