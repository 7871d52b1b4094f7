"""A regression guard on a real table: a short fixed-seed SeBA run on optdigits must stay above
accuracy floors measured when this test was written (with margin), and above what the same
encoders reach untrained.

Measured on the 2-core CPU (fp32, seed 0, ratios 0.3 + 0.5, 15 epochs, 20 episodes):
ensemble 1-shot 67.13, 5-shot 83.92; untrained encoders 56.10 / 76.99. The floors sit about four
points under the trained figures and well over the untrained ones, so a broken mask, view,
loss, scaling or classifier fails the test, while another CPU's rounding does not.
"""

from pathlib import Path

import torch

from seba.core.config import EvaluateConfig, PretrainConfig
from seba.core.data import encode_table, load_snapshot, make_split, scale
from seba.evaluate import ENSEMBLE, evaluate_members, summarise
from seba.pretrain import encode, pretrain_encoder

FLOORS = {1: 63.0, 5: 80.0}
UNTRAINED = {1: 56.10, 5: 76.99}


def ensemble_accuracy(table, split, X, cfg) -> dict[int, float]:
    """1- and 5-shot ensemble accuracy of r = 0.3 and 0.5 encoders pretrained with ``cfg`` (seed 0)."""
    features = []
    for ratio in (0.3, 0.5):
        result = pretrain_encoder(X[split.train], X[split.val], table.groups, ratio, 0, cfg, torch.device("cpu"))
        features.append(encode(result.encoder_state, {"in_features": X.shape[1], "encoder_hidden": 1024,
                                                      "encoder_out": 256, "encoder_out_relu": True},
                               X[split.test], torch.device("cpu")))
    episodes = evaluate_members(torch.stack(features), ["r0.3", "r0.5"], table.y[split.test], len(table.classes),
                                0, EvaluateConfig(shots=(1, 5), episodes=20), "optdigits")
    summary = summarise(episodes)
    return {int(r.shot): float(r.accuracy) for r in summary[summary["member"] == ENSEMBLE].itertuples()}


def test_short_optdigits_run_stays_above_the_measured_floor(snapshot_dir: Path):
    frame, _ = load_snapshot(28, snapshot_dir)
    table = encode_table(frame)
    split = make_split(table.y, 0, 1 / 6, 0.1)
    X = scale(table, split.train)
    accuracy = ensemble_accuracy(table, split, X, PretrainConfig(max_epochs=15, patience=100, precision="fp32",
                                                                 progress_seconds=1e9))
    # the same encoders untrained: one epoch at a learning rate too small to move a float32 weight
    untrained = ensemble_accuracy(table, split, X, PretrainConfig(max_epochs=1, lr=1e-12, precision="fp32",
                                                                  progress_seconds=1e9))
    for shot, floor in FLOORS.items():
        assert abs(untrained[shot] - UNTRAINED[shot]) < 3, f"{shot}-shot untrained {untrained[shot]:.2f}"
        assert accuracy[shot] >= floor, f"{shot}-shot ensemble accuracy {accuracy[shot]:.2f} < floor {floor}"
        assert accuracy[shot] > untrained[shot] + 3, (accuracy, untrained)
