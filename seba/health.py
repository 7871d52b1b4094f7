"""Is a finished pretraining a usable encoder? A collapsed or diverged one is an error, not a result.

Two signs, checked after each seed's training on what every training run returns (its
validation loss per epoch) and on the trained encoder's outputs for the validation rows:

* **No improvement over the first epoch.** The weights kept are those of the lowest validation
  loss; when that is the first epoch's, training may have taught the encoder nothing. The loss
  after the first epoch never changing at all says so for certain (an encoder or projector
  collapsed to constant similarities: ``pretrain.lr: 1e6`` gives exactly ln(rows) from the
  first step on): an error. ``PLATEAU_EPOCHS`` epochs without any lower value is a warning
  only, unless the outputs below also show collapse. The committed
  training logs (reports/experiments/default_3seeds/pretrain_log.json: 8 tables x 5 ratios x 3
  seeds) first go below their first epoch by epoch 26 at the latest, and each curve's losses
  after the first epoch span at least 0.6 % of the first, against ``STUCK_TOLERANCE``.
  A run shorter than both (a few epochs with a short patience) is not judged by its loss.
* **Outputs that no longer depend on the input**: every validation row mapped to the same
  direction (or to zero), or outputs that are not finite. Cosine prototypes and linear probes
  then see one point. Trained encoders spread the rows widely (mean pairwise cosine 0.6 on
  diabetes after a few epochs; even ``lr: 1e6`` leaves 0.98).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from seba.core.errors import EncoderCollapsed

PLATEAU_EPOCHS = 50  # epochs after the first without a lower validation loss (logs: <= 25)
STUCK_TOLERANCE = 1e-7  # relative change of the validation loss below which it has not moved
SPREAD_TOLERANCE = 1e-4  # RMS distance of unit-length outputs to their mean direction


def check_training(val_loss: list[float], outputs: torch.Tensor | np.ndarray, label: str = "",
                   lr: float | None = None) -> str | None:
    """Raise ``EncoderCollapsed`` (naming ``label``, e.g. "[pretrain cmc r=0.2 seed 0 (1/3)]")
    when the validation losses per epoch or the encoder's ``outputs`` [rows, features] on the
    validation rows show a collapsed or diverged encoder. A loss that bounced without going
    below its first epoch's while the outputs still spread the rows is not certain collapse (a
    small table's first epoch can be its best: the random-ratio ablation on diabetes, 64
    validation rows): it is returned as a warning, for the stage to log and record."""
    hint = f" (pretrain.lr = {lr:g}: too high?)" if lr is not None else ""
    where = f"{label}: " if label else ""
    loss = loss_problem(val_loss)
    problem = (loss if loss_stuck(val_loss) else None) or output_problem(outputs)
    if problem:
        raise EncoderCollapsed(f"{where}the encoder collapsed or diverged: {problem}{hint}; its checkpoint is not written")
    return f"{where}warning: {loss}; its outputs still spread the rows, so it is kept" if loss else None


def loss_stuck(val_loss: list[float]) -> bool:
    """The validation loss never went below the first epoch's and has not moved since: certain collapse."""
    if len(val_loss) < 3 or not all(math.isfinite(v) for v in val_loss):
        return False
    first, later = val_loss[0], val_loss[1:]
    return min(later) >= first and max(later) - min(later) <= STUCK_TOLERANCE * max(abs(first), 1e-12)


def loss_problem(val_loss: list[float]) -> str | None:
    """Why the validation losses say training did not improve the encoder, or None."""
    if len(val_loss) < 2 or not all(math.isfinite(v) for v in val_loss):
        return None  # non-finite losses stop training with TrainingDiverged already
    first, later = val_loss[0], val_loss[1:]
    if min(later) < first:
        return None
    if loss_stuck(val_loss):
        return (f"its validation loss never went below the first epoch's {first:.6g} and has not moved since "
                f"(constant {later[-1]:.6g} over {len(later)} epochs)")
    if len(later) >= PLATEAU_EPOCHS:
        return (f"its validation loss never went below the first epoch's {first:.6g} in {len(later)} "
                f"further epochs")
    return None


def output_problem(outputs: torch.Tensor | np.ndarray) -> str | None:
    """Why the encoder's outputs on the validation rows show collapse or divergence, or None."""
    out = torch.as_tensor(outputs).detach().double().reshape(len(outputs), -1)
    if len(out) == 0:
        return None
    if not torch.isfinite(out).all():
        return f"{int((~torch.isfinite(out)).any(1).sum())} of {len(out)} validation rows have non-finite outputs"
    norms = out.norm(dim=1)
    if float(norms.max()) == 0.0:
        return f"its outputs are zero for all {len(out)} validation rows"
    if len(out) < 2:
        return None
    unit = out / norms.clamp_min(torch.finfo(torch.float64).tiny)[:, None]
    spread = float((unit - unit.mean(0)).pow(2).sum(1).mean().sqrt())
    if spread <= SPREAD_TOLERANCE:
        return (f"its outputs no longer depend on the input: all {len(out)} validation rows point the same way "
                f"(spread {spread:.2g})")
    return None
