"""kNN on the standardised features (supervised; the support set only)."""

from __future__ import annotations

import torch

from seba.baselines import register
from seba.baselines.base import Method
from seba.core.schema import PositiveInt, section


@section
class KnnConfig:
    k: PositiveInt = 1  # neighbours for 5- and 10-shot (capped at the support size); 1-shot always uses k = 1


@register
class KNN(Method):
    """k nearest support rows (Euclidean, on the standardised features), majority vote; ties go
    to the class of the nearest row. k = 1 for 1-shot, else ``knn.k`` capped at the support size."""

    name = "knn"
    paper_name = "kNN"  # its row in data/reference/paper_results.csv (None: the paper has none)
    Config = KnnConfig

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
