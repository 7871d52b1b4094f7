import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import committed_params
from seba.core.config import EvaluateConfig
from seba.evaluate import ENSEMBLE, episode_scores, evaluate_members, summarise


def test_episode_scores_accuracy_and_balanced_accuracy_by_hand():
    y = torch.tensor([0, 0, 0, 1, 1, 2])
    query = torch.tensor([[True, True, True, True, False, True]])
    predictions = torch.tensor([[[0, 0, 1, 1, 0, 0]]])  # one member, one episode
    accuracy, balanced = episode_scores(predictions, y, query, 3)
    assert accuracy.item() == pytest.approx(3 / 5)
    # class 0: 2/3 right, class 1: 1/1, class 2: 0/1
    assert balanced.item() == pytest.approx((2 / 3 + 1 + 0) / 3)


def test_members_share_episodes_and_the_ensemble_of_identical_members_is_a_member():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 20)
    base = torch.as_tensor(rng.normal(size=(60, 8)) + np.eye(8)[y] * 2, dtype=torch.float32)
    features = torch.stack([base, base, base])
    cfg = dataclasses.replace(EvaluateConfig(), episodes=4, shots=(1, 5))
    frame = evaluate_members(features, ["r0.1", "r0.2", "r0.3"], y, 3, seed=0, cfg=cfg)
    assert len(frame) == 2 * 4 * 4
    hashes = frame.groupby(["shot", "episode"])["support_hash"].nunique()
    assert (hashes == 1).all() and frame.groupby("shot")["support_hash"].nunique().min() > 1  # shared, not constant
    for shot in (1, 5):
        part = frame[frame["shot"] == shot].pivot(index="episode", columns="member", values="accuracy")
        # probes start from different random weights, so only prototypes must agree exactly
        if shot == 1:
            for member in ("r0.2", "r0.3", ENSEMBLE):
                np.testing.assert_allclose(part[member], part["r0.1"])
    again = evaluate_members(features, ["r0.1", "r0.2", "r0.3"], y, 3, seed=0, cfg=cfg)
    pd.testing.assert_frame_equal(frame, again)  # deterministic


def test_summarise_means_over_seeds_and_episodes():
    frame = pd.DataFrame({"seed": [0, 0, 1, 1], "shot": 1, "episode": [0, 1, 0, 1], "member": "ensemble",
                          "accuracy": [50.0, 60.0, 70.0, 80.0], "balanced_accuracy": 50.0})
    row = summarise(frame).iloc[0]
    assert row["accuracy"] == 65.0 and row["seeds"] == 2 and row["episodes"] == 4
    assert row["accuracy_std"] == pytest.approx(np.std([50, 60, 70, 80], ddof=1))


def test_seeds_evaluated_together_score_as_each_seed_alone():
    from seba.evaluate import evaluate_in_groups, evaluate_seeds, evaluation_bytes

    rng = np.random.default_rng(1)
    y_tests = [rng.permutation(np.repeat(np.arange(3), 20)) for _ in range(3)]
    features = [torch.as_tensor(rng.normal(size=(2, 60, 8)) + np.eye(8)[y][None] * 1.5, dtype=torch.float32)
                for y in y_tests]
    cfg = dataclasses.replace(EvaluateConfig(), episodes=6, shots=(1, 5))
    seeds = [4, 5, 6]
    together = evaluate_seeds(features, ["r0.1", "r0.2"], y_tests, 3, seeds, cfg, "toy")
    for f, y, seed, frame in zip(features, y_tests, seeds, together):
        alone = evaluate_members(f, ["r0.1", "r0.2"], y, 3, seed, cfg, "toy")
        pd.testing.assert_frame_equal(frame, alone)  # the same probes, bit for bit
    assert not together[0]["accuracy"].equals(together[1]["accuracy"])
    # grouped by a memory budget of two seeds' features and scores: the same frames, in seed order
    per_seed = evaluation_bytes(features[0], 3, cfg.episodes)
    grouped = list(evaluate_in_groups(lambda s: (features[s - 4], y_tests[s - 4]), seeds, ["r0.1", "r0.2"], 3,
                                      cfg, "toy", budget_bytes=2 * per_seed))
    assert [(seed, n) for seed, _, _, n in grouped] == [(4, 2), (5, 2), (6, 1)]
    for (_, frame, _, _), expected in zip(grouped, together):
        pd.testing.assert_frame_equal(frame, expected)


def test_seed_groups_fit_the_budget_with_their_class_scores_not_only_their_features():
    """On a table of many classes a seed's class scores [M, episodes, N, classes] outweigh its
    features [M, N, F] (devnagari: 46 classes, 100 episodes, 256 features, ~18 times): a budget
    that holds three seeds' features but not their scores evaluates them one at a time."""
    from seba.evaluate import evaluate_in_groups, evaluation_bytes

    rng = np.random.default_rng(3)
    n_classes, cfg = 46, dataclasses.replace(EvaluateConfig(), episodes=4, shots=(1,))
    y_tests = [rng.permutation(np.arange(92) % n_classes) for _ in range(3)]
    features = [torch.as_tensor(rng.normal(size=(2, 92, 8)), dtype=torch.float32) for _ in y_tests]
    feature_bytes = features[0].element_size() * features[0].numel()
    per_seed = evaluation_bytes(features[0], n_classes, cfg.episodes)
    assert per_seed == feature_bytes + 4 * 2 * 4 * 92 * n_classes
    budget = 3 * feature_bytes  # three seeds' features, not even one seed's scores
    assert per_seed > budget
    grouped = list(evaluate_in_groups(lambda s: (features[s], y_tests[s]), [0, 1, 2], ["r0.1", "r0.2"], n_classes,
                                      cfg, "toy", budget_bytes=budget))
    assert [(seed, n) for seed, _, _, n in grouped] == [(0, 1), (1, 1), (2, 1)]
    together = list(evaluate_in_groups(lambda s: (features[s], y_tests[s]), [0, 1, 2], ["r0.1", "r0.2"], n_classes,
                                       cfg, "toy", budget_bytes=3 * per_seed))
    assert [n for *_, n in together] == [3, 3, 3]
    for (_, alone, _, _), (_, frame, _, _) in zip(grouped, together):
        pd.testing.assert_frame_equal(alone, frame)


@pytest.mark.parametrize("head", ["prototype_cosine", "prototype_euclidean", "nn_cosine", "nn_euclidean"])
def test_the_head_switch_changes_only_the_shots_that_use_it(head):
    rng = np.random.default_rng(2)
    y = np.repeat(np.arange(3), 20)
    features = torch.as_tensor(rng.normal(size=(2, 60, 8)) + np.eye(8)[y][None] * 1.5, dtype=torch.float32)
    base = dataclasses.replace(EvaluateConfig(), episodes=5, shots=(1, 5))
    linear = evaluate_members(features, ["r0.1", "r0.2"], y, 3, 0, base)
    other = evaluate_members(features, ["r0.1", "r0.2"], y, 3, 0, dataclasses.replace(base, head=head))
    one = linear["shot"] == 1
    pd.testing.assert_frame_equal(linear[one], other[one])  # 1-shot keeps its cosine prototypes
    assert (other.loc[~one, "probe_iterations"].isin([0, -1])).all()  # nothing trained
    assert list(other["support_hash"]) == list(linear["support_hash"])  # the same episodes
    if head == "prototype_cosine":  # the 1-shot head, applied to 5-shot
        as_prototypes = evaluate_members(features, ["r0.1", "r0.2"], y, 3, 0,
                                         dataclasses.replace(base, prototype_shots=(1, 5)))
        pd.testing.assert_frame_equal(other, as_prototypes)
    else:
        assert not linear.loc[~one, "accuracy"].equals(other.loc[~one, "accuracy"])


def test_a_prototype_shot_that_is_not_evaluated_is_named(monkeypatch, capsys):
    """evaluate.prototype_shots [3] with shots [1, 5, 10]: every shot trains the head, and the
    evaluate stage says which listed shot no episode uses; [] is allowed (no prototypes) and a
    duplicate refused."""
    import copy

    import yaml

    import seba.evaluate_stage as stage
    from seba.core.config import parse_params
    from seba.core.errors import ConfigError

    raw = yaml.safe_load(committed_params())
    monkeypatch.setattr(stage, "feature_loader", lambda *a: None)
    monkeypatch.setattr(stage, "evaluate_in_groups", lambda *a, **k: iter(()))
    monkeypatch.setattr(stage, "check_pretrained", lambda *a: None)  # no encoders needed: the features are stubbed
    for listed, warned in (([1], None), ([3], "lists 3, which evaluate.shots [1, 5, 10] lacks: no episode uses it "
                                               "(cosine prototypes serve no shot, evaluate.head 'linear' the others)"),
                           ([5, 7], "lists 7,"), ([], None)):
        edited = copy.deepcopy(raw)
        edited["evaluate"]["prototype_shots"] = listed
        table = type("Table", (), {"classes": ["a", "b"]})()
        list(stage.evaluate_all(parse_params(edited), "cmc", table, Path("."), torch.device("cpu")))
        err = capsys.readouterr().err
        assert (warned in err) if warned else "prototype_shots" not in err, (listed, err)
    edited["evaluate"]["prototype_shots"] = [1, 1]
    with pytest.raises(ConfigError, match=r"'evaluate.prototype_shots' has duplicates: \[1, 1\]"):
        parse_params(edited)
