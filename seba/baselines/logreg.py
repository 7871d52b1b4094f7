"""Logistic regression on the standardised features (supervised; the support set only)."""

from __future__ import annotations

import numpy as np
import torch

from seba.baselines import register
from seba.baselines.base import Method
from seba.schema import PositiveFloat, PositiveInt, section


@section
class LogregConfig:
    C: PositiveFloat = 1.0  # inverse L2 strength (scikit-learn's default)
    max_iter: PositiveInt = 1000


@register
class LogReg(Method):
    """Multinomial logistic regression (scikit-learn, L2, lbfgs) on the support of each episode:
    the supervised linear floor on the standardised features."""

    name = "logreg"
    paper_name = None  # its row in data/reference/paper_results.csv (None: the paper has none)
    Config = LogregConfig

    def scores(self, x_test, support, support_labels, n_classes, shot):
        from sklearn.linear_model import LogisticRegression

        out = np.zeros((len(support), len(x_test), n_classes), dtype=np.float32)
        for e, rows in enumerate(support):
            model = LogisticRegression(C=self.cfg.C, max_iter=self.cfg.max_iter)
            model.fit(x_test[rows], support_labels)
            out[e][:, model.classes_] = model.predict_log_proba(x_test)  # every class is in the support
        return torch.from_numpy(out)
