"""Mean Teacher (Tarvainen & Valpola, 2017) on the batched per-episode MLPs."""

import dataclasses
import math

import numpy as np
import torch

from seba.baselines.meanteacher import MeanTeacher, ema_update, sigmoid_rampup, train_meanteacher
from seba.baselines.pseudolabel import init_mlp, mlp_logits
from seba.baselines.meanteacher import MeanteacherConfig
from seba.episodes import sample_episodes

CPU = torch.device("cpu")
CFG = MeanteacherConfig(hidden=16, steps=30, batch_size=32, consistency=10.0, rampup_fraction=0.3,
                        ema_decay=0.9, input_noise=0.15, precision="fp32")


def table(n=200, d=6, seed=0):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed))


def episode(params, e):
    return [params[0][:, e:e + 1]] + [p[e:e + 1] for p in params[1:]]


def clone(params):
    return [p.detach().clone() for p in params]


def test_teacher_is_the_ema_of_the_student_after_every_step():
    X = table()
    support = torch.randint(0, len(X), (3, 4), generator=torch.Generator().manual_seed(1))
    student = init_mlp([1, 2, 3], X.shape[1], 16, 2, CPU)
    history = [(clone(student), clone(student))]  # the teacher starts as a copy of the student
    teacher = train_meanteacher(student, X[support], torch.tensor([0, 0, 1, 1]), X, CFG, 4, 5, "test",
                                observe=lambda t, s, te: history.append((clone(s), clone(te))))
    assert len(history) == CFG.steps + 1
    for step in range(1, CFG.steps + 1):
        a = min(1 - 1 / (step + 1), CFG.ema_decay)  # the true average first, then the decay
        (_, previous_teacher), (new_student, new_teacher) = history[step - 1], history[step]
        for prev, s, t in zip(previous_teacher, new_student, new_teacher):
            torch.testing.assert_close(t, a * prev + (1 - a) * s)
    assert all(torch.equal(t, h) for t, h in zip(teacher, history[-1][1]))
    assert not torch.allclose(teacher[0], student[0])  # the teacher lags the student


def test_ema_update_weights():
    teacher, student = [torch.zeros(3)], [torch.ones(3)]
    assert ema_update(teacher, student, 1, 0.99) == 0.5  # step 1: mean of the two
    torch.testing.assert_close(teacher[0], torch.full((3,), 0.5))
    assert ema_update(teacher, student, 1000, 0.99) == 0.99


def test_sigmoid_rampup():
    assert sigmoid_rampup(0, 100) == math.exp(-5)
    assert sigmoid_rampup(50, 100) == math.exp(-5 * 0.25)
    assert sigmoid_rampup(100, 100) == sigmoid_rampup(500, 100) == sigmoid_rampup(3, 0) == 1.0


def test_an_episode_trained_alone_gets_the_same_student_and_teacher_as_inside_the_batch():
    X = table()
    support = torch.randint(0, len(X), (4, 4), generator=torch.Generator().manual_seed(2))
    labels = torch.tensor([0, 0, 1, 1])
    seeds = [21, 22, 23, 24]
    batch = init_mlp(seeds, X.shape[1], 16, 2, CPU)
    teachers = train_meanteacher(batch, X[support], labels, X, CFG, 6, 7, "test")
    e = 2
    alone = init_mlp([seeds[e]], X.shape[1], 16, 2, CPU)
    teacher = train_meanteacher(alone, X[support[e:e + 1]], labels, X, CFG, 6, 7, "test")
    for a, b in zip(alone + teacher, episode(batch, e) + episode(teachers, e)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_the_consistency_cost_changes_training_and_zero_weight_removes_it():
    X = table()
    support = torch.randint(0, len(X), (2, 4), generator=torch.Generator().manual_seed(3))
    labels = torch.tensor([0, 0, 1, 1])

    def student(cfg):
        params = init_mlp([8, 9], X.shape[1], 16, 2, CPU)
        train_meanteacher(params, X[support], labels, X, cfg, 1, 2, "test")
        return params

    plain, no_noise = student(dataclasses.replace(CFG, consistency=0.0)), student(
        dataclasses.replace(CFG, consistency=0.0, input_noise=0.0))
    assert not torch.equal(plain[0], no_noise[0])  # the student sees noisy inputs
    assert not torch.equal(student(CFG)[0], plain[0])


def test_scores_are_the_teachers_logits_and_deterministic():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 5)).astype(np.float32)
    y = np.repeat([0, 1, 2], 20)
    X[:, 0] += 3 * y
    episodes = sample_episodes(y, 3, 2, n_episodes=4, seed=0)
    method = MeanTeacher(CFG, 0, CPU)
    method.fit(X, X[:5], np.arange(5))
    scores = method.scores(X, episodes.support, episodes.support_labels, 3, 2)
    again = MeanTeacher(CFG, 0, CPU)
    again.fit(X, X[:5], np.arange(5))
    torch.testing.assert_close(again.scores(X, episodes.support, episodes.support_labels, 3, 2), scores, atol=0, rtol=0)
    # rebuild the same training by hand: the scores are the teacher's logits
    from seba.baselines.pseudolabel import episode_seeds
    from seba.core.runtime import derive_seed

    XT = torch.as_tensor(X)
    student = init_mlp(episode_seeds(0, "meanteacher", 2, range(4)), 5, CFG.hidden, 3, CPU)
    teacher = train_meanteacher(student, XT[torch.as_tensor(episodes.support)], torch.as_tensor(episodes.support_labels),
                                XT, CFG, derive_seed(0, "meanteacher", 2, "unlabeled"),
                                derive_seed(0, "meanteacher", 2, "noise"), "test")
    torch.testing.assert_close(scores, mlp_logits(teacher, XT))
    assert not torch.allclose(scores, mlp_logits(student, XT))


def test_bad_settings_are_named_with_their_values():
    import pytest

    from seba.baselines.base import method_config
    from seba.core.config import BaselinesConfig
    from seba.core.errors import ConfigError

    def config(**values):
        return method_config(BaselinesConfig(methods=[], sections={"meanteacher": values}), "meanteacher")

    with pytest.raises(ConfigError, match=r"ema_decay 1.0 \(need 0 <= ema_decay < 1\); input_noise -0.1 \(need >= 0\)"):
        config(ema_decay=1.0, input_noise=-0.1)
    config(ema_decay=0.0, consistency=0.0)  # the bounds themselves are accepted
