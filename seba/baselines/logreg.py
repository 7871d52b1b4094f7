"""Logistic regression on the standardised features (supervised; the support set only)."""

from __future__ import annotations

import numpy as np
import torch

from seba.baselines import register
from seba.baselines.base import Method
from seba.core.schema import PositiveFloat, PositiveInt, section


@section
class LogregConfig:
    C: PositiveFloat = 1.0  # inverse L2 strength (scikit-learn's default)
    max_iter: PositiveInt = 1000


# BLAS threads for the fits (None: the library's default, one per core). An episode's problem is
# tiny (at most 100 support rows), so more threads only wait for each other: on the 2-core CPU one
# thread scores the eight tables' seed 0 1.33x as fast when the machine is idle (income 4.7x) and
# 2.7-24x as fast when other work shares the cores, with the same episodes
# (benchmarks/logreg_threads.py, docs/performance.md#baselines).
BLAS_THREADS: int | None = 1


@register
class LogReg(Method):
    """Multinomial logistic regression (scikit-learn, L2, lbfgs) on the support of each episode:
    the supervised linear floor on the standardised features."""

    name = "logreg"
    paper_name = None  # its row in data/reference/paper_results.csv (None: the paper has none)
    Config = LogregConfig

    def scores(self, x_test, support, support_labels, n_classes, shot):
        from sklearn.linear_model import LogisticRegression
        from threadpoolctl import threadpool_limits

        out = np.zeros((len(support), len(x_test), n_classes), dtype=np.float32)
        with threadpool_limits(BLAS_THREADS, user_api="blas"):
            for e, rows in enumerate(support):
                model = LogisticRegression(C=self.cfg.C, max_iter=self.cfg.max_iter)
                model.fit(x_test[rows], support_labels)
                # a probability that rounds to 0 has log -inf (the argmax is unaffected): no warning
                with np.errstate(divide="ignore"):
                    out[e][:, model.classes_] = model.predict_log_proba(x_test)  # every class is in the support
        return torch.from_numpy(out)
