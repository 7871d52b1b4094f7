"""Seeds trained as one stacked model: each seed's run is the run it has alone."""

import dataclasses

import numpy as np
import pytest
import torch

from seba.core.config import PretrainConfig
from seba.core.errors import ConfigError
from seba.model import Encoder, StackedEncoder
from seba.objective import stacked_info_nce, stacked_target_neighbours
from seba.pretrain import (SeedData, build_models, encode, member_bytes, plan_stacks, pretrain_encoder,
                           pretrain_stack)

CPU = torch.device("cpu")


def seed_tables(n_seeds=3, n=360, columns=10):
    """A four-cluster table split differently per seed (as the split stage does), with a
    one-hot block so that column groups differ in width."""
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(4, columns)) * 2.5
    X = np.concatenate([c + rng.normal(size=(n // 4, columns)) for c in centres]).astype(np.float32)
    onehot = np.eye(3, dtype=np.float32)[rng.integers(0, 3, len(X))]
    X = np.concatenate([X, onehot], axis=1)
    groups = np.concatenate([np.arange(columns), np.full(3, columns)])
    members = []
    for seed in range(n_seeds):
        order = np.random.default_rng(seed).permutation(len(X))
        members.append(SeedData(X[order[:300]], X[order[300:]], seed=10 + seed, label=f"seed {10 + seed}"))
    return members, groups


def small_cfg(**kw):
    settings = dict(encoder_hidden=32, encoder_out=16, projector_hidden=32, projector_out=16,
                    batch_size=64, max_epochs=40, patience=3, progress_seconds=1e9)
    return dataclasses.replace(PretrainConfig(), **{**settings, **kw})


@pytest.mark.parametrize("fill,validation,search", [("zero", "fixed", "product"), ("marginal", "fresh", "product"),
                                                    ("zero", "fixed", "exact")])
def test_a_stack_trains_each_seed_as_it_trains_alone(fill, validation, search):
    members, groups = seed_tables()
    # min_delta makes the seeds stop at different epochs: the stack drops the first ones to
    # stop and goes on with the others, which must not notice
    cfg = small_cfg(fill=fill, validation=validation, min_delta=0.01, neighbour_search=search)
    stacked = pretrain_stack(members, groups, 0.3, cfg, CPU)
    alone = [pretrain_encoder(m.x_train, m.x_val, groups, 0.3, m.seed, cfg, CPU) for m in members]
    assert len({r.stop_epoch for r in alone}) > 1, [r.stop_epoch for r in alone]
    for s, a in zip(stacked, alone):
        assert s.stop_epoch == a.stop_epoch and s.best_epoch == a.best_epoch
        # bit for bit: on a CPU every seed's products, losses and Adam updates are its own
        assert s.train_loss == a.train_loss and s.val_loss == a.val_loss
        for key in a.encoder_state:
            assert torch.equal(s.encoder_state[key], a.encoder_state[key]), key
        assert s.stack_size == 3 and a.stack_size == 1
    features = [encode(r.encoder_state, {"in_features": 13, "encoder_hidden": 32, "encoder_out": 16,
                                         "encoder_out_relu": True}, members[0].x_val, CPU) for r in stacked]
    assert not torch.equal(features[0], features[1])  # each seed its own encoder, in member order


def test_a_stack_stops_at_the_step_cap_like_a_seed_alone():
    members, groups = seed_tables(n_seeds=2)
    cfg = small_cfg(patience=100, max_steps=10)  # 300 rows, batch 64: 5 steps per epoch
    stacked = pretrain_stack(members, groups, 0.5, cfg, CPU)
    assert [r.stop_epoch for r in stacked] == [2, 2] and all(r.capped and r.steps == 10 for r in stacked)
    alone = pretrain_encoder(members[1].x_train, members[1].x_val, groups, 0.5, members[1].seed, cfg, CPU)
    assert alone.val_loss == stacked[1].val_loss


def test_seeds_with_different_row_counts_cannot_share_a_stack():
    members, groups = seed_tables(n_seeds=2)
    members[1] = dataclasses.replace(members[1], x_train=members[1].x_train[:-1])
    with pytest.raises(ValueError, match=r"\(training rows, validation rows, columns\) differ"):
        pretrain_stack(members, groups, 0.3, small_cfg(), CPU)


def test_stacked_encoder_members_are_encoders():
    cfg = small_cfg()
    encoders = [build_models(13, cfg, seed)[0] for seed in (1, 2)]
    stacked = StackedEncoder(encoders)
    x = torch.randn(2, 5, 13)
    out = stacked(x)
    for s, encoder in enumerate(encoders):
        alone = Encoder(13, 32, 16)
        alone.load_state_dict({k: v[s] for k, v in stacked.state_dict().items()})
        # the same products (torch may pick another CPU kernel for a batched one: last bits)
        torch.testing.assert_close(alone(x[s]), out[s], rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(encoder(x[s]), out[s], rtol=1e-6, atol=1e-6)


def test_the_batched_objective_computes_the_per_seed_objective():
    """The one-kernel forms used on a GPU, checked on the CPU against the per-seed loop."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 50, 12, generator=gen)
    masks = torch.rand(4, 12, generator=gen) < 0.3
    masks[:, 0] = True
    looped = stacked_target_neighbours(x, masks, batched=False)
    batched = stacked_target_neighbours(x, masks, batched=True)
    assert torch.equal(looped, batched)
    z = torch.randn(4, 50, 8, generator=gen)
    a = stacked_info_nce(z, looped, 0.5, batched=False)
    b = stacked_info_nce(z, looped, 0.5, batched=True)
    # the same formula; the sums run in another order (float32 rounding, not a different result)
    torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_stacks_are_split_to_fit_memory_and_stack_size():
    cfg = small_cfg()
    assert plan_stacks(10, 1, 100, cfg, CPU, free_bytes=10_000) == [list(range(10))]
    assert plan_stacks(10, 1, 100, cfg, CPU, free_bytes=450) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert plan_stacks(10, 2, 100, cfg, CPU, free_bytes=10_000) == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert plan_stacks(5, 1, 100, small_cfg(stack_size=2), CPU, free_bytes=10_000) == [[0, 1], [2, 3], [4]]
    with pytest.raises(ConfigError, match="one seed needs about .* GiB on cpu but .* GiB is free"):
        plan_stacks(3, 1, 2 << 30, cfg, CPU, free_bytes=1 << 30, where="[pretrain x r=0.2]")
    # the estimate grows with the rows, the widths and the batch
    base = member_bytes(1000, 100, 20, cfg)
    assert member_bytes(2000, 100, 20, cfg) > base
    assert member_bytes(1000, 100, 20, small_cfg(encoder_hidden=64)) > base
    assert member_bytes(1000, 100, 20, small_cfg(batch_size=128)) > base


def test_a_stack_that_runs_out_of_memory_names_the_setting(monkeypatch):
    import seba.pretrain

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(seba.pretrain, "_train_stack", out_of_memory)
    members, groups = seed_tables(n_seeds=2)
    with pytest.raises(ConfigError, match=r"\[pretrain t\]: a stack of 2 seeds ran out of memory on cpu .*"
                                          r"set pretrain.stack_size below 2"):
        pretrain_stack(members, groups, 0.3, small_cfg(), CPU, label="[pretrain t]")


def test_a_stack_that_runs_out_of_cpu_memory_names_the_setting(monkeypatch):
    """A CPU's allocator fails with a plain RuntimeError (a `ulimit -v` or strict overcommit, which
    MemAvailable does not show): the same named error; other RuntimeErrors stay as they are."""
    import seba.pretrain

    message = ["[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
               "you tried to allocate 3200000000 bytes. Error code 12 (Cannot allocate memory)"]

    def fails(*args, **kwargs):
        raise RuntimeError(message[0])

    monkeypatch.setattr(seba.pretrain, "_train_stack", fails)
    members, groups = seed_tables(n_seeds=2)
    with pytest.raises(ConfigError, match=r"\[pretrain t\]: a stack of 2 seeds ran out of memory on cpu .*"
                                          r"DefaultCPUAllocator.*set pretrain.stack_size below 2"):
        pretrain_stack(members, groups, 0.3, small_cfg(), CPU, label="[pretrain t]")
    # a stack of one seed (the default pipeline's one seed per stage): stack_size cannot go below 1
    with pytest.raises(ConfigError, match=r"\[pretrain t\]: a stack of 1 seed ran out of memory on cpu .*one seed "
                                          r"does not fit: lower pretrain.batch_size or the model widths, or "
                                          r"pretrain.workers") as raised:
        pretrain_stack(members[:1], groups, 0.3, small_cfg(), CPU, label="[pretrain t]")
    assert "stack_size" not in str(raised.value)
    message[0] = "mat1 and mat2 shapes cannot be multiplied"
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        pretrain_stack(members, groups, 0.3, small_cfg(), CPU, label="[pretrain t]")


def test_fused_adam_makes_torch_adams_update_and_keeps_members_state():
    from seba.training import FusedAdam

    gen = torch.Generator().manual_seed(3)
    a = torch.randn(3, 5, 4, generator=gen, requires_grad=True)
    b = a.detach().clone().requires_grad_()
    ours, theirs = FusedAdam([a], lr=1e-2), torch.optim.Adam([b], lr=1e-2, fused=True)
    for _ in range(4):
        target = torch.randn(3, 5, 4, generator=gen)
        for p, opt in ((a, ours), (b, theirs)):
            opt.zero_grad()
            ((p - target) ** 3).sum().backward()
            opt.step()
    assert torch.equal(a, b)
    # members 0 and 2 go on alone, with their moments and step count
    kept = torch.tensor([0, 2])
    c = a.detach()[kept].clone().requires_grad_()
    sub = ours.select([c], kept)
    target = torch.randn(3, 5, 4, generator=gen)
    for p, opt, t in ((a, ours, target), (c, sub, target[kept])):
        opt.zero_grad()
        ((p - t) ** 3).sum().backward()
        opt.step()
    assert torch.equal(c, a.detach()[kept])


@pytest.mark.parametrize("patience,max_epochs,syncs", [(100, 4, 4), (1, 40, None)])
def test_an_epoch_waits_for_the_device_once_after_drawing_the_next_epoch(monkeypatch, patience, max_epochs, syncs):
    """On a GPU the host's draws overlap the device's work: an epoch's steps and validation are
    launched, the next epoch's shuffles and masks drawn, and only then are the losses read, in one
    copy (tensor.tolist: the loop's one synchronisation). A seed's last epoch draws nothing
    after it when it ends at the epoch limit; one that stops early has drawn an epoch it never
    trains, which changes nothing of its run."""
    import seba.pretrain as pretrain

    events = []
    draw, tolist = pretrain._Member.draw_epoch, torch.Tensor.tolist
    monkeypatch.setattr(pretrain._Member, "draw_epoch", lambda self, *a: events.append("draw") or draw(self, *a))
    monkeypatch.setattr(torch.Tensor, "tolist", lambda self: events.append("sync") or tolist(self))
    members, groups = seed_tables(n_seeds=1)
    cfg = small_cfg(patience=patience, max_epochs=max_epochs)
    result, = pretrain_stack(members, groups, 0.3, cfg, CPU)
    monkeypatch.undo()
    epochs = result.stop_epoch
    assert syncs is None or epochs == syncs
    last = ["sync"] if epochs == max_epochs else ["draw", "sync"]
    assert events == ["draw"] + ["draw", "sync"] * (epochs - 1) + last, events
    alone = pretrain_encoder(members[0].x_train, members[0].x_val, groups, 0.3, members[0].seed, cfg, CPU)
    assert result.val_loss == alone.val_loss and len(result.val_loss) == epochs


@pytest.mark.parametrize("precision,search,rest", [("fp32", "highest", "highest"), ("tf32", "high", "high"),
                                                   ("tf32_fp32_search", "highest", "high")])
def test_tf32_fp32_search_keeps_the_neighbour_search_alone_in_fp32(monkeypatch, precision, search, rest):
    """tf32_fp32_search: every product of a step in TF32 but the target-view distances', whose
    matrix-product form TF32 rounds into wrong positives (benchmarks/neighbour_search.py). The
    mode is CUDA's; the float32 matmul precision that torch reads at each product is checked here."""
    import seba.pretrain as pretrain
    from seba.core.runtime import matmul_precision

    members, groups = seed_tables(n_seeds=2)
    cfg = small_cfg(precision=precision)
    models = [build_models(13, cfg, seed) for seed in (1, 2)]
    encoder = StackedEncoder([e for e, _ in models])
    projector = pretrain.StackedProjector([p for _, p in models])
    seen = {}
    neighbours, info_nce = pretrain.stacked_target_neighbours, pretrain.stacked_info_nce
    monkeypatch.setattr(pretrain, "stacked_target_neighbours", lambda *a, **k: seen.setdefault(
        "search", torch.get_float32_matmul_precision()) and neighbours(*a, **k))
    monkeypatch.setattr(pretrain, "stacked_info_nce", lambda *a: seen.setdefault(
        "rest", torch.get_float32_matmul_precision()) and info_nce(*a))
    x = torch.as_tensor(np.stack([m.x_train[:64] for m in members]))
    masks = torch.zeros(2, 13, dtype=torch.bool)
    masks[:, :3] = True
    with matmul_precision(precision):
        losses = pretrain.stacked_seba_loss(encoder, projector, x, masks, cfg)
    assert seen == {"search": search, "rest": rest} and losses.shape == (2,)


def test_progress_counts_a_stacks_seeds_as_trained_together():
    from seba.pretrain_stage import arrivals, progress
    stacks = [(["a", "b", "c"], None), (["d"], {"node": "n1"})]
    assert list(arrivals(iter(stacks))) == [("a", None, 3, 1), ("b", None, 3, 1), ("c", None, 3, 1),
                                            ("d", {"node": "n1"}, 4, 2)]
    # one stack of 100 trained in 20 s: nothing is left, whichever seed is recorded first
    assert progress(20.0, 100, 100, 1, 1, 1) == ""
    # the first of two stacks of 50 took 20 s, one at a time: the other 50 seeds, about 20 s more
    assert progress(20.0, 50, 100, 1, 2, 1) == "; 50 seeds still to train, stage ~20s left"
    assert progress(30.0, 2, 3, 2, 3, 1) == "; 1 seed still to train, stage ~15s left"
    assert progress(0.3, 1, 4, 1, 4, 1) == "; 3 seeds still to train, stage ~1s left"
    # two workers: the other stack of 50 trains beside the first and arrives with it
    assert progress(20.0, 50, 100, 1, 2, 2) == "; 50 seeds still to train, finishing beside this stack"
    # ten stacks of one seed, two at a time: the first arrives after 60 s, four rounds remain
    assert progress(60.0, 1, 10, 1, 10, 2) == "; 9 seeds still to train, stage ~4m00s left"
    # the third arrives at 120 s: two rounds done, three to go
    assert progress(120.0, 3, 10, 3, 10, 2) == "; 7 seeds still to train, stage ~3m00s left"


def test_stacked_rows_are_the_seeds_rows_in_float32_whatever_they_came_as():
    from seba.pretrain import stacked_rows

    rng = np.random.default_rng(0)
    rows = [rng.normal(size=(7, 4)).astype(np.float32) for _ in range(3)]
    as_double = rows[1].astype(np.float64)
    read_only = rows[2].copy()
    read_only.flags.writeable = False
    members = [SeedData(x, x[:2], seed) for seed, x in enumerate([rows[0], as_double, read_only])]
    stacked, val = stacked_rows(members, torch.device("cpu"))
    assert stacked.dtype == val.dtype == torch.float32 and stacked.shape == (3, 7, 4) and val.shape == (3, 2, 4)
    assert torch.equal(stacked, torch.as_tensor(np.stack(rows))) and torch.equal(val, stacked[:, :2])
    assert read_only.flags.writeable is False  # the caller's array is left as it was


def test_mask_bias_is_the_concatenated_projector_up_to_rounding():
    """pretrain.mask_bias computes the mask's product once per batch: the same outputs and
    gradients as the concatenated input, to float rounding; unconditioned projectors ignore it."""
    from seba.model import Projector, StackedProjector

    torch.manual_seed(0)
    members = [Projector(16, 10, 32, 8) for _ in range(3)]
    concat, bias = StackedProjector(members), StackedProjector(members, mask_bias=True)
    h = torch.randn(3, 50, 16, requires_grad=True)
    masks = torch.rand(3, 10) > 0.5
    out, folded = concat(h, masks), bias(h, masks)
    torch.testing.assert_close(folded, out, rtol=1e-5, atol=1e-5)
    for a, b in zip(torch.autograd.grad(out.square().sum(), [h, *concat.parameters()]),
                    torch.autograd.grad(folded.square().sum(), [h, *bias.parameters()])):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
    plain = [Projector(16, 10, 32, 8, conditioned=False) for _ in range(3)]
    assert torch.equal(StackedProjector(plain, mask_bias=True)(h, masks), StackedProjector(plain)(h, masks))


def test_mask_bias_reaches_the_trained_stack_and_changes_rounding_only(monkeypatch):
    import seba.pretrain

    built = []

    class Recorded(seba.pretrain.StackedProjector):
        def __init__(self, projectors, mask_bias=False):
            super().__init__(projectors, mask_bias)
            built.append(mask_bias)

    monkeypatch.setattr(seba.pretrain, "StackedProjector", Recorded)
    members, groups = seed_tables(n_seeds=2)
    cfg = small_cfg(max_epochs=3, patience=3, precision="fp32")
    plain = pretrain_stack(members, groups, 0.3, cfg, CPU)
    biased = pretrain_stack(members, groups, 0.3, dataclasses.replace(cfg, mask_bias=True), CPU)
    assert built == [False, True]
    for a, b in zip(plain, biased):
        assert a.stop_epoch == b.stop_epoch
        np.testing.assert_allclose(b.val_loss, a.val_loss, rtol=1e-4)


def test_seeds_given_as_their_splits_train_as_their_scaled_rows():
    """A stage gives each seed as its split of the table (seba.pretrain.ScaledSplit), scaled
    when its stack starts: the same encoders, bit for bit, as the scaled rows given as arrays;
    the validation rows stay for the stage's health check until released."""
    from seba.core.data import EncodedTable, scale
    from seba.pretrain import ScaledSplit

    members, groups = seed_tables(n_seeds=1)
    X = np.concatenate([members[0].x_train, members[0].x_val]) * 3 + 1
    X[::7, 2] = np.nan  # a missing value, filled by scaling
    table = EncodedTable(X=X, y=np.zeros(len(X), dtype=np.int64), groups=groups, numeric=np.arange(13) < 10,
                         columns=np.array([f"c{g}" for g in range(11)]), encoded_names=np.array([f"e{j}" for j in range(13)]),
                         classes=np.array(["a"]))
    splits = [np.random.default_rng(seed).permutation(len(X)) for seed in range(2)]
    given = [SeedData(None, None, 20 + i, source=ScaledSplit(table, order[:300], order[300:])) for i, order in enumerate(splits)]
    arrays = [SeedData(scale(table, order[:300])[order[:300]], scale(table, order[:300])[order[300:]], 20 + i)
              for i, order in enumerate(splits)]
    assert [(m.n_train, m.n_val, m.n_features) for m in given] == [(300, 60, 13)] * 2
    cfg = small_cfg(max_epochs=6)
    for a, b in zip(pretrain_stack(given, groups, 0.3, cfg, CPU), pretrain_stack(arrays, groups, 0.3, cfg, CPU)):
        assert a.val_loss == b.val_loss and all(torch.equal(a.encoder_state[k], b.encoder_state[k]) for k in a.encoder_state)
    for m, a in zip(given, arrays):
        assert m.source.kept_val is not None and np.array_equal(m.val_rows(), a.x_val)
        m.release()
        assert m.source.kept_val is None and np.array_equal(m.val_rows(), a.x_val)  # scaled again
