"""CatBoost on the standardised features (supervised; each episode's support set only)."""

from __future__ import annotations

import numpy as np
import torch

from seba.baselines import register
from seba.baselines.base import Method
from seba.runtime import derive_seed


@register
class CatBoost(Method):
    """Gradient-boosted oblivious trees (Prokhorenkova et al., 2018) fitted on the support rows of
    each episode, CPU, seeded per seed and episode. Categorical columns arrive one-hot encoded and
    standardised like every method's input, so CatBoost sees them as numeric columns."""

    name = "catboost"

    def scores(self, x_test, support, support_labels, n_classes, shot):
        from catboost import CatBoostClassifier

        cfg = self.cfg
        threads = max(1, torch.get_num_threads())
        out = np.zeros((len(support), len(x_test), n_classes), dtype=np.float32)
        classes = np.unique(support_labels)
        for e, rows in enumerate(support):
            model = CatBoostClassifier(
                iterations=cfg.iterations, learning_rate=cfg.learning_rate, depth=cfg.depth,
                border_count=cfg.border_count, l2_leaf_reg=cfg.l2_leaf_reg,
                loss_function="MultiClass" if len(classes) > 2 else "Logloss",
                random_seed=derive_seed(self.seed, shot, e, "catboost") % 2**31, thread_count=threads,
                verbose=False, allow_writing_files=False)
            model.fit(x_test[rows], support_labels)
            proba = model.predict_proba(x_test)
            out[e][:, model.classes_.astype(int)] = np.log(np.clip(proba, 1e-12, None))
        return torch.from_numpy(out)
