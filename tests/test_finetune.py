"""The fine-tuning head (evaluate.head: finetune): encoder and linear head trained per episode."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch

from seba.classifiers import probe_init
from seba.core.config import EvaluateConfig
from seba.episodes import sample_episodes
from seba.evaluate import evaluate_members
from seba.finetune import FineTuneInputs, finetune_scores
from seba.model import Encoder


def checkpoint(in_features, seed, hidden=32, out=16):
    torch.manual_seed(seed)
    encoder = Encoder(in_features, hidden, out)
    return {"encoder": encoder.state_dict(),
            "model_config": {"in_features": in_features, "encoder_hidden": hidden, "encoder_out": out,
                             "encoder_out_relu": True}}


def toy(n_per_class=20, n_classes=3, dim=10, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), n_per_class)
    x = rng.normal(size=(len(y), dim)) + np.eye(dim)[y] * 4.0
    return torch.as_tensor(x, dtype=torch.float32), y


def one_encoder_episodes(seed, encoder_seed, shots, n_episodes):
    """One encoder's fine-tuning inputs on a toy table, episodes of 3 classes × ``shots``, and the
    head's initial weights: (inputs, support, labels, init)."""
    x, y = toy(seed=seed)
    episodes = sample_episodes(y, 3, shots, n_episodes=n_episodes, seed=seed)
    support, labels = torch.as_tensor(episodes.support), torch.as_tensor(episodes.support_labels)
    init = probe_init(1, n_episodes, 16, 3, torch.Generator().manual_seed(seed))
    return FineTuneInputs([checkpoint(10, encoder_seed)], x), support, labels, init


def test_finetuning_learns_the_support_and_scores_the_queries():
    x, y = toy()
    inputs = FineTuneInputs([checkpoint(10, 0), checkpoint(10, 1)], x)
    episodes = sample_episodes(y, 3, 5, n_episodes=4, seed=0)
    support, labels = torch.as_tensor(episodes.support), torch.as_tensor(episodes.support_labels)
    init = probe_init(2, 4, 16, 3, torch.Generator().manual_seed(0))
    scores, iterations = finetune_scores(inputs, support, labels, 3, init, lr=1e-3, max_iters=500, patience=50,
                                         chunk=4)
    assert scores.shape == (2, 4, len(y), 3) and iterations.shape == (2, 4)
    predictions = scores.argmax(-1)
    # the support is learnt (the stopping rule: every support row right) ...
    for m in range(2):
        for e in range(4):
            assert (predictions[m, e, support[e]] == labels).all()
    assert (iterations < 500).all()
    # ... and the queries are far above chance
    query = torch.as_tensor(episodes.query)
    accuracy = ((predictions == torch.as_tensor(y)) & query).sum(-1) / query.sum(-1)
    assert accuracy.min() > 0.7  # chance: 0.33


def test_an_episode_trains_the_same_alone_or_in_a_chunk_and_the_encoder_moves():
    inputs, support, labels, init = one_encoder_episodes(seed=1, encoder_seed=3, shots=2, n_episodes=5)
    together = finetune_scores(inputs, support, labels, 3, init, 1e-3, 300, 30, chunk=5)
    alone = finetune_scores(inputs, support, labels, 3, init, 1e-3, 300, 30, chunk=1)
    torch.testing.assert_close(together[0], alone[0], rtol=1e-4, atol=1e-4)
    assert torch.equal(together[1], alone[1])
    # frozen encoder with the same initial head: different logits, so the encoder was trained too
    with torch.no_grad():
        enc = Encoder(10, 32, 16)
        enc.load_state_dict(inputs.checkpoints[0]["encoder"])
        frozen = torch.einsum("nf,efc->enc", enc(inputs.x), init[0][0]) + init[1][0][:, None]
    assert not torch.allclose(frozen, together[0][0])


def test_the_evaluate_head_finetune_uses_the_seeds_encoders():
    x, y = toy(seed=2)
    inputs = FineTuneInputs([checkpoint(10, 4), checkpoint(10, 5)], x)
    encoders = []
    for c in inputs.checkpoints:
        enc = Encoder(10, 32, 16)
        enc.load_state_dict(c["encoder"])
        encoders.append(enc)
    with torch.no_grad():
        features = torch.stack([e(x) for e in encoders])
    cfg = dataclasses.replace(EvaluateConfig(), episodes=3, shots=(1, 5), head="finetune", probe_max_iters=200)
    tuned = evaluate_members(features, ["r0.1", "r0.2"], y, 3, 0, cfg, finetune=inputs)
    linear = evaluate_members(features, ["r0.1", "r0.2"], y, 3, 0, dataclasses.replace(cfg, head="linear"))
    one = tuned["shot"] == 1
    pd.testing.assert_frame_equal(tuned[one], linear[one])  # 1-shot: cosine prototypes on frozen features
    assert tuned.loc[~one & (tuned["member"] != "ensemble"), "probe_iterations"].gt(0).all()
    assert tuned.loc[~one, "accuracy"].mean() > 80
    with pytest.raises(ValueError, match="needs every seed's encoders"):
        evaluate_members(features, ["r0.1", "r0.2"], y, 3, 0, cfg)
    for head in ("linear", "finetune"):  # evaluate.probe_stop reaches both heads
        full = evaluate_members(features, ["r0.1", "r0.2"], y, 3, 0,
                                dataclasses.replace(cfg, head=head, probe_stop="none"), finetune=inputs)
        assert full.loc[(full["shot"] == 5) & (full["member"] != "ensemble"), "probe_iterations"].eq(200).all()


def test_finetuning_refuses_an_encoder_it_cannot_train():
    x, y = toy()
    bad = checkpoint(10, 0)
    bad["model_config"] = {**bad["model_config"], "encoder": "ft_transformer"}
    episodes = sample_episodes(y, 3, 1, n_episodes=1, seed=0)
    with pytest.raises(ValueError, match="MLP encoder"):
        finetune_scores(FineTuneInputs([bad], x), torch.as_tensor(episodes.support),
                        torch.as_tensor(episodes.support_labels), 3,
                        probe_init(1, 1, 16, 3, torch.Generator().manual_seed(0)), 1e-3, 10, 5, 1)


def test_probe_stop_none_finetunes_every_step_and_keeps_the_final_weights():
    inputs, support, labels, init = one_encoder_episodes(seed=2, encoder_seed=4, shots=2, n_episodes=2)
    early = finetune_scores(inputs, support, labels, 3, init, 1e-3, 60, 30, chunk=2)
    full = finetune_scores(inputs, support, labels, 3, init, 1e-3, 60, 30, chunk=2, early_stop=False)
    assert (early[1] < 60).all() and (full[1] == 60).all()
    # the final weights: 60 more steps of training on the support, alone, give the same logits
    alone = finetune_scores(inputs, support[:1], labels, 3, (init[0][:, :1], init[1][:, :1]), 1e-3, 60, 30, chunk=1,
                            early_stop=False)
    torch.testing.assert_close(full[0][:, :1], alone[0], rtol=1e-4, atol=1e-4)
    assert not torch.allclose(full[0], early[0])
