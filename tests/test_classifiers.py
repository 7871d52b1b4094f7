import numpy as np
import pytest
import torch
import torch.nn.functional as F

from seba.classifiers import probe_logits, prototype_scores, train_probes
from seba.episodes import sample_episodes


def separable(n_per_class=30, n_classes=3, dim=16, seed=0, noise=0.002):
    """Tight, far-apart clusters: a probe that stops at 100 % support accuracy (the released
    code's rule) separates them all, whatever hyperplane it stopped at."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.eye(dim)[:n_classes] * 6.0
    X = torch.cat([centres[c] + noise * torch.randn(n_per_class, dim, generator=g) for c in range(n_classes)])
    y = torch.arange(n_classes).repeat_interleave(n_per_class)
    return X, y


@pytest.mark.parametrize("shot", [1, 5, 10])
def test_prototypes_and_probe_classify_a_separable_set_perfectly(shot):
    X, y = separable()
    episodes = sample_episodes(y.numpy(), 3, shot, n_episodes=4, seed=0)
    support = torch.as_tensor(episodes.support)
    labels = torch.as_tensor(episodes.support_labels)
    query = torch.as_tensor(episodes.query)
    features = X[None]  # one member
    scores = prototype_scores(features, support, labels, 3)
    assert ((scores.argmax(-1) == y) | ~query).all()
    w, b, iters = train_probes(features, support, labels, 3, lr=1e-2, max_iters=1000, patience=100,
                               generator=torch.Generator().manual_seed(0))
    logits = probe_logits(features, w, b)
    assert ((logits.argmax(-1) == y) | ~query).all()


def reference_probe(support_x, support_y, w0, b0, lr, max_iters, patience):
    """One probe trained alone, the released code's rule: Adam full-batch, stop at 100 % train
    accuracy or after `patience` iterations without improvement, keep the best weights."""
    linear = torch.nn.Linear(support_x.shape[1], w0.shape[1])
    with torch.no_grad():
        linear.weight.copy_(w0.T)
        linear.bias.copy_(b0)
    opt = torch.optim.Adam(linear.parameters(), lr=lr)
    best_acc, best_it, best = -1.0, 0, None
    for it in range(max_iters + 1):
        logits = linear(support_x)
        acc = (logits.argmax(1) == support_y).float().mean().item()
        if acc > best_acc:
            best_acc, best_it = acc, it
            best = (linear.weight.detach().T.clone(), linear.bias.detach().clone())
        if acc >= 1.0 or it - best_it >= patience or it == max_iters:
            return best, it
        loss = F.cross_entropy(logits, support_y)
        opt.zero_grad()
        loss.backward()
        opt.step()


def test_batched_probes_follow_each_probes_own_stopping_rule():
    g = torch.Generator().manual_seed(1)
    n, dim, C = 60, 8, 4
    features = torch.randn(3, n, dim, generator=g)  # 3 members, noisy: some probes never reach 100 %
    y = torch.randint(0, C, (n,), generator=g)
    y[:C] = torch.arange(C)
    episodes = sample_episodes(y.numpy(), C, 5, n_episodes=6, seed=2)
    support = torch.as_tensor(episodes.support)
    labels = torch.as_tensor(episodes.support_labels)
    w0, b0, _ = train_probes(features, support, labels, C, lr=1e-2, max_iters=0, patience=5,
                             generator=torch.Generator().manual_seed(7))
    w, b, iters = train_probes(features, support, labels, C, lr=1e-2, max_iters=300, patience=5,
                               generator=torch.Generator().manual_seed(7))
    assert len(set(iters.flatten().tolist())) > 1  # probes stopped at different iterations
    for m in range(3):
        for e in range(6):
            (w_ref, b_ref), it_ref = reference_probe(features[m, support[e]], labels, w0[m, e], b0[m, e],
                                                     1e-2, 300, 5)
            assert int(iters[m, e]) == it_ref
            torch.testing.assert_close(w[m, e], w_ref, rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(b[m, e], b_ref, rtol=1e-4, atol=1e-5)


def test_prototype_scores_are_cosine_to_class_means():
    features = torch.tensor([[[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [3.0, 0.1]]])
    support = torch.tensor([[0, 3, 1]])  # class 0: rows 0 and 3; class 1: row 1
    labels = torch.tensor([0, 0, 1])
    scores = prototype_scores(features, support, labels, 2)
    proto0 = F.normalize(torch.tensor([2.0, 0.05]), dim=0)
    expected = F.normalize(torch.tensor([1.0, 1.0]), dim=0) @ proto0
    assert scores[0, 0, 2, 0].item() == pytest.approx(expected.item(), rel=1e-6)
    assert scores[0, 0, 2, 1].item() == pytest.approx(F.normalize(torch.tensor([1.0, 1.0]), dim=0)[1].item())


def test_adam_step_fused_and_written_out_match_torch_adam(monkeypatch):
    """The probes' Adam update: torch's fused kernel and the written-out fallback both follow
    torch.optim.Adam, step by step."""
    from seba.classifiers import adam_step

    g = torch.Generator().manual_seed(3)
    w0 = torch.randn(4, 3, 9, generator=g)
    grads = [torch.randn(4, 3, 9, generator=g) for _ in range(20)]
    ref = w0.clone().requires_grad_(True)
    opt = torch.optim.Adam([ref], lr=1e-2)
    results = {}
    for name in ("fused", "written_out"):
        if name == "written_out":
            monkeypatch.delattr(torch, "_fused_adam_")
        w, m, v, step = w0.clone(), torch.zeros_like(w0), torch.zeros_like(w0), torch.zeros(())
        for t, grad in enumerate(grads, start=1):
            step.fill_(t)
            adam_step(w, grad, m, v, step, 1e-2, 0.9, 0.999, 1e-8)
        results[name] = w
    for grad in grads:
        ref.grad = grad.clone()
        opt.step()
    torch.testing.assert_close(results["fused"], ref.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(results["written_out"], ref.detach(), rtol=1e-5, atol=1e-6)
    assert not torch.equal(results["fused"], w0)


def test_euclidean_prototypes_and_nearest_neighbours_by_hand():
    from seba.classifiers import nearest_neighbour_scores

    # one member, 5 rows in 2-D; support rows 0, 1 (class 0) and 2 (class 1)
    X = torch.tensor([[0.0, 0.0], [2.0, 0.0], [10.0, 0.0], [1.5, 0.0], [6.5, 0.0]])[None]
    support, labels = torch.tensor([[0, 1, 2]]), torch.tensor([0, 0, 1])
    proto = prototype_scores(X, support, labels, 2, "euclidean")[0, 0]  # class means at x = 1 and x = 10
    torch.testing.assert_close(proto[:, 0], -(X[0, :, 0] - 1).abs())
    torch.testing.assert_close(proto[:, 1], -(X[0, :, 0] - 10).abs())
    nn = nearest_neighbour_scores(X, support, labels, 2, "euclidean")[0, 0]
    torch.testing.assert_close(nn[:, 0], -torch.tensor([0.0, 0.0, 8.0, 0.5, 4.5]))
    torch.testing.assert_close(nn[:, 1], -torch.tensor([10.0, 8.0, 0.0, 8.5, 3.5]))
    # x = 6.5 is nearer class 1 both ways (means 5.5 vs 3.5 away, support rows 4.5 vs 3.5)
    assert nn.argmax(-1).tolist() == [0, 0, 1, 0, 1] == proto.argmax(-1).tolist()
    # where 1-NN and prototypes disagree: class 0's rows at 0 and 8, class 1's at 5; query at 7.5
    Y = torch.tensor([[0.0, 0.0], [8.0, 0.0], [5.0, 0.0], [7.5, 0.0]])[None]
    support, labels = torch.tensor([[0, 1, 2]]), torch.tensor([0, 0, 1])
    assert nearest_neighbour_scores(Y, support, labels, 2, "euclidean")[0, 0, 3].argmax() == 0  # 8 is nearest
    assert prototype_scores(Y, support, labels, 2, "euclidean")[0, 0, 3].argmax() == 1  # mean 4 vs 5
    # cosine 1-NN: the highest cosine similarity to one support row of the class
    Z = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [3.0, 0.1]])[None]
    cos = nearest_neighbour_scores(Z, torch.tensor([[0, 1]]), torch.tensor([0, 1]), 2, "cosine")[0, 0]
    torch.testing.assert_close(cos, F.normalize(Z[0], dim=1) @ F.normalize(Z[0, :2], dim=1).T)


def test_nearest_neighbour_scores_are_the_same_in_chunks_of_episodes():
    from seba.classifiers import nearest_neighbour_scores

    X, y = separable(n_per_class=10)
    features = torch.stack([X, X * 2 + 1])
    episodes = sample_episodes(y.numpy(), 3, 2, n_episodes=7, seed=0)
    support, labels = torch.as_tensor(episodes.support), torch.as_tensor(episodes.support_labels)
    for metric in ("cosine", "euclidean"):
        whole = nearest_neighbour_scores(features, support, labels, 3, metric)
        chunked = nearest_neighbour_scores(features, support, labels, 3, metric, chunk_bytes=1)
        torch.testing.assert_close(whole, chunked)
        assert ((whole.argmax(-1) == y) | ~torch.as_tensor(episodes.query)).all()


def test_euclidean_nearest_neighbours_keep_their_row_copies_within_the_chunk(monkeypatch):
    """The Euclidean 1-NN copies the rows for every episode of a chunk (and torch.cdist scales and
    pads that copy): chunks sized by the similarities alone reached 9.8 GB for one seed of income's
    10-shot (256 features, 20 support rows) against 256 MiB of similarities; the copies count too,
    and the scores stay those of one chunk."""
    from seba.classifiers import nearest_neighbour_scores

    g = torch.Generator().manual_seed(0)
    features = torch.randn(2, 30, 16, generator=g)
    support = torch.stack([torch.randperm(30, generator=g)[:6] for _ in range(40)])
    labels = torch.arange(3).repeat_interleave(2)
    whole = nearest_neighbour_scores(features, support, labels, 3, "euclidean", chunk_bytes=1 << 30)
    calls = []
    cdist = torch.cdist
    monkeypatch.setattr(torch, "cdist", lambda x1, x2: calls.append((x1.numel(), x2.shape)) or cdist(x1, x2))
    chunk_bytes = 30_000
    chunked = nearest_neighbour_scores(features, support, labels, 3, "euclidean", chunk_bytes=chunk_bytes)
    assert torch.equal(whole, chunked)
    assert len(calls) > 1
    for rows, (pairs, n_support, _) in calls:
        # three copies of the repeated rows, and the similarities
        assert 4 * (3 * rows + pairs * 30 * n_support) <= chunk_bytes


def test_probe_stop_none_trains_every_step_and_keeps_the_final_weights():
    """`evaluate.probe_stop: none` (the paper's "10 000 epochs"): no probe stops early, and the
    weights are those after max_iters Adam steps, as torch's Adam loop gives them."""
    X, y = separable()
    episodes = sample_episodes(y.numpy(), 3, 5, n_episodes=3, seed=0)
    support = torch.as_tensor(episodes.support)
    labels = torch.as_tensor(episodes.support_labels)
    features = X[None]
    w0, b0, _ = train_probes(features, support, labels, 3, lr=1e-2, max_iters=0, patience=5,
                             generator=torch.Generator().manual_seed(3))
    early = train_probes(features, support, labels, 3, lr=1e-2, max_iters=200, patience=5, init=(w0, b0))
    w, b, iters = train_probes(features, support, labels, 3, lr=1e-2, max_iters=200, patience=5, init=(w0, b0),
                               early_stop=False)
    assert (early[2] < 200).all() and (iters == 200).all()  # the separable support stops the default at once
    for e in range(3):
        linear = torch.nn.Linear(16, 3)
        with torch.no_grad():
            linear.weight.copy_(w0[0, e].T)
            linear.bias.copy_(b0[0, e])
        opt = torch.optim.Adam(linear.parameters(), lr=1e-2)
        for _ in range(200):
            loss = F.cross_entropy(linear(features[0, support[e]]), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
        torch.testing.assert_close(w[0, e], linear.weight.detach().T, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(b[0, e], linear.bias.detach(), rtol=1e-4, atol=1e-5)
        assert not torch.allclose(w[0, e], early[0][0, e])
