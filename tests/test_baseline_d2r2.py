import numpy as np
import torch

from seba.baselines.d2r2 import D2r2Config
from seba.baselines.d2r2 import (D2R2, pseudo_validation_accuracy, pseudo_validation_tasks, q_sample,
                                 random_projection, rdm_loss, vp_betas)
from seba.core.config import EvaluateConfig

torch.set_num_threads(1)
TINY = D2r2Config(hidden=16, layers=1, embed_dim=4, batch_size=32, max_steps=40, eval_every=10, min_accepted_step=10,
                  val_episodes=10)


def test_forward_noising_matches_the_closed_form_of_the_step_by_step_chain():
    betas = vp_betas(10)
    alpha_hats = torch.cumprod(1 - betas, 0)
    assert betas[0] == 0 and torch.all((betas[1:] > 0) & (betas[1:] < 1))
    x0 = torch.randn(1, 3).expand(200000, 3)
    g = torch.Generator().manual_seed(0)
    x = x0.clone()
    for t in range(1, 7):  # x_t = sqrt(1 - beta_t) x_{t-1} + sqrt(beta_t) eps_t
        x = (1 - betas[t]).sqrt() * x + betas[t].sqrt() * torch.randn(x.shape, generator=g)
    t = torch.full((len(x0), 1), 6)
    eps = torch.randn(x0.shape, generator=g)
    closed = q_sample(x0, t, eps, alpha_hats)
    assert torch.allclose(closed, alpha_hats[6].sqrt() * x0 + (1 - alpha_hats[6]).sqrt() * eps)
    assert torch.allclose(x.mean(0), closed.mean(0), atol=0.01)
    assert torch.allclose(x.var(0), closed.var(0), atol=0.01)
    assert torch.allclose(closed.var(0), 1 - alpha_hats[6], atol=0.01)


def test_random_distance_matching_is_zero_iff_distances_agree():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 6, generator=g)
    numeric = torch.tensor([True] * 4 + [False] * 2)
    projection = random_projection(x, numeric, ~numeric, 0.1, g)
    assert projection.shape == x.shape
    assert float(rdm_loss(projection * 3.0, projection)) < 1e-10  # scale is normalised away
    assert float(rdm_loss(torch.randn(64, 5, generator=g), projection)) > 1e-3
    embed = torch.randn(64, 5, requires_grad=True)
    rdm_loss(embed, projection).backward()
    assert embed.grad.abs().sum() > 0


def clusters(n=120, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, 8)) * 4
    y = np.repeat(np.arange(3), n // 3)
    return (centres[y] + rng.normal(size=(n, 8))).astype(np.float32), y


def test_pseudo_validation_prefers_the_embedding_that_keeps_the_clusters():
    x, _ = clusters()
    v = torch.as_tensor(x)
    tasks = pseudo_validation_tasks(v, 3, 20, 5, 1.0, torch.Generator().manual_seed(0))
    assert tasks[0].shape == (20, 3) and tasks[1].shape == (20, len(v))
    assert not tasks[2].gather(1, tasks[0]).any()  # support rows are not queries
    good = v @ torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
    bad = torch.randn(len(v), 4, generator=torch.Generator().manual_seed(2))
    assert pseudo_validation_accuracy(good, tasks) > pseudo_validation_accuracy(bad, tasks) + 0.2


def fitted(seed=0):
    x, y = clusters()
    model = D2R2(TINY, seed, torch.device("cpu"), EvaluateConfig())
    model.fit(x[:90], x[90:], np.array([0, 1, 2, 3, 4, 5, 5, 5]))  # a one-hot-like block at the end
    return model, x, y


def test_representation_shape_selection_log_and_determinism():
    model, x, _ = fitted()
    z = model.encode(x)
    assert z.shape == (len(x), TINY.embed_dim)
    steps = [s for s, _ in model.log["pseudo_validation"]]
    assert steps == [10, 20, 30, 40] and model.log["best_step"] in steps
    best = max(a for _, a in model.log["pseudo_validation"])
    assert abs(model.log["best_val_accuracy"] - best) < 1e-3
    again, _, _ = fitted()
    assert torch.equal(z, again.encode(x))
    other, _, _ = fitted(seed=1)
    assert not torch.equal(z, other.encode(x))


def test_scores_are_negative_squared_distances_to_class_mean_support_embeddings():
    model, x, _ = fitted()
    support = np.array([[0, 1, 40, 41, 80, 81]])
    labels = np.array([0, 0, 1, 1, 2, 2])
    scores = model.scores(x, support, labels, 3, 2)
    z = model.encode(x)
    prototypes = torch.stack([z[support[0][labels == c]].mean(0) for c in range(3)])
    assert scores.shape == (1, len(x), 3)
    assert torch.allclose(scores[0], -torch.cdist(z, prototypes) ** 2, atol=1e-3)
