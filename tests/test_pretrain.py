import dataclasses
import math

import numpy as np
import torch

from seba.core.config import PretrainConfig
from seba.pretrain import encode, pretrain_encoder
from seba.training import batch_slices


def toy_table(n=300, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, 12)) * 3
    X = np.concatenate([c + rng.normal(size=(n // 3, 12)) for c in centres]).astype(np.float32)
    return X, np.arange(12)


def small_cfg(**kw):
    settings = dict(encoder_hidden=32, encoder_out=16, projector_hidden=32, projector_out=16,
                    batch_size=64, max_epochs=15, patience=5, progress_seconds=1e9)
    return dataclasses.replace(PretrainConfig(), **{**settings, **kw})


def test_pretraining_is_deterministic_on_cpu_and_keeps_the_best_epoch():
    X, groups = toy_table()
    cfg = small_cfg()
    a = pretrain_encoder(X[:250], X[250:], groups, 0.3, seed=4, cfg=cfg, device=torch.device("cpu"))
    b = pretrain_encoder(X[:250], X[250:], groups, 0.3, seed=4, cfg=cfg, device=torch.device("cpu"))
    c = pretrain_encoder(X[:250], X[250:], groups, 0.3, seed=5, cfg=cfg, device=torch.device("cpu"))
    for key in a.encoder_state:
        assert torch.equal(a.encoder_state[key], b.encoder_state[key])
    assert a.train_loss == b.train_loss and a.val_loss == b.val_loss
    assert not torch.equal(a.encoder_state["net.0.weight"], c.encoder_state["net.0.weight"])
    assert all(math.isfinite(v) for v in a.train_loss)
    assert a.best_val_loss == min(a.val_loss)
    assert a.val_loss[a.best_epoch - 1] == a.best_val_loss
    assert a.stop_epoch == min(cfg.max_epochs, a.best_epoch + cfg.patience)
    assert a.masked_columns == 3
    assert a.train_loss[-1] < a.train_loss[0]  # it learns something
    features = encode(a.encoder_state, {"in_features": 12, "encoder_hidden": 32, "encoder_out": 16,
                                        "encoder_out_relu": True}, X, torch.device("cpu"))
    assert features.shape == (300, 16)


def test_marginal_fill_and_fresh_validation_run():
    X, groups = toy_table()
    result = pretrain_encoder(X[:250], X[250:], groups, 0.5, seed=0,
                              cfg=small_cfg(fill="marginal", validation="fresh", max_epochs=3),
                              device=torch.device("cpu"))
    assert len(result.train_loss) == 3
    runs = {name: pretrain_encoder(X[:250], X[250:], groups, 0.5, seed=0, cfg=small_cfg(max_epochs=3, **kw),
                                   device=torch.device("cpu"))
            for name, kw in {"default": {}, "marginal": {"fill": "marginal"}, "fresh": {"validation": "fresh"}}.items()}
    assert small_cfg().fill == "zero" and small_cfg().validation == "fixed"
    assert runs["marginal"].train_loss != runs["default"].train_loss  # the masked cells' values change
    assert runs["fresh"].train_loss == runs["default"].train_loss  # fresh validation masks leave training alone
    assert runs["fresh"].val_loss != runs["default"].val_loss  # and change what it is validated on


def test_batches_keep_the_partial_batch_but_never_a_single_row():
    order = torch.arange(10)
    assert [len(b) for b in batch_slices(10, 4, order)] == [4, 4, 2]
    assert [len(b) for b in batch_slices(9, 4, order[:9])] == [4, 5]
    assert torch.equal(torch.cat(batch_slices(9, 4, order[:9])), order[:9])


def test_min_delta_stops_on_insignificant_improvements_but_keeps_the_best_weights():
    X, groups = toy_table()
    plain = pretrain_encoder(X[:250], X[250:], groups, 0.3, seed=4, cfg=small_cfg(max_epochs=40, patience=3),
                             device=torch.device("cpu"))
    strict = pretrain_encoder(X[:250], X[250:], groups, 0.3, seed=4,
                              cfg=small_cfg(max_epochs=40, patience=3, min_delta=0.5),
                              device=torch.device("cpu"))
    # No epoch improves the validation objective by half, so patience runs out after epoch 1 ...
    assert strict.stop_epoch == 1 + 3
    # ... along the same path as without the threshold, and the lowest epoch is still restored.
    assert strict.val_loss == plain.val_loss[:4]
    assert strict.best_val_loss == min(strict.val_loss)
    assert strict.val_loss[strict.best_epoch - 1] == strict.best_val_loss
    assert plain.stop_epoch >= strict.stop_epoch


def test_max_steps_caps_training_at_the_end_of_an_epoch_on_the_same_path():
    X, groups = toy_table()  # 250 train rows, batch 64: 4 optimiser steps per epoch
    free = pretrain_encoder(X[:250], X[250:], groups, 0.3, seed=4, cfg=small_cfg(max_epochs=12, patience=100),
                            device=torch.device("cpu"))
    capped = pretrain_encoder(X[:250], X[250:], groups, 0.3, seed=4,
                              cfg=small_cfg(max_epochs=12, patience=100, max_steps=10),
                              device=torch.device("cpu"))
    assert not free.capped and free.steps == 12 * 4
    assert capped.capped and capped.stop_epoch == 3 and capped.steps == 12  # first epoch end >= 10 steps
    assert capped.val_loss == free.val_loss[:3]
    assert capped.best_val_loss == min(capped.val_loss)


def test_plan_workers_shares_the_thread_budget_among_seeds():
    from seba.pretrain import plan_workers

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert plan_workers(small_cfg(threads=2, workers=0), 3, cpu) == (2, 1)
    assert plan_workers(small_cfg(threads=2, workers=0), 1, cpu) == (1, 2)
    assert plan_workers(small_cfg(threads=4, workers=2), 5, cpu) == (2, 2)
    assert plan_workers(small_cfg(threads=1, workers=3), 3, cpu) == (3, 1)
    assert plan_workers(small_cfg(threads=2, workers=4), 2, cpu) == (2, 1)  # never more than seeds
    assert plan_workers(small_cfg(threads=2, workers=0), 3, cuda) == (1, 2)  # one GPU process


def test_stacks_trained_in_parallel_processes_equal_the_same_stacks_in_turn():
    from seba.core.data import EncodedTable
    from seba.pretrain import ScaledSplit, SeedData, pretrain_many

    X, groups = toy_table()
    members = [SeedData(X[:250], X[250:], seed) for seed in (1, 2)]
    table = EncodedTable(X=X, y=np.zeros(len(X), dtype=np.int64), groups=groups, numeric=np.ones(X.shape[1], bool),
                         columns=np.array([f"c{g}" for g in range(groups.max() + 1)]),
                         encoded_names=np.array([f"e{j}" for j in range(X.shape[1])]), classes=np.array(["a"]))
    rows = np.arange(len(X))  # a seed given as its split: scaled in the worker process
    members.append(SeedData(None, None, 3, source=ScaledSplit(table, rows[:250], rows[250:])))
    stacks = [{"members": members[:2], "groups": groups, "ratio": 0.3, "cfg": small_cfg(max_epochs=4),
               "device": torch.device("cpu")},
              {"members": members[2:], "groups": groups, "ratio": 0.3, "cfg": small_cfg(max_epochs=4),
               "device": torch.device("cpu")}]
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # the workers' thread count: the same rounding path
    try:
        in_turn = [r for stack in pretrain_many(stacks, workers=1, threads=1) for r in stack]
    finally:
        torch.set_num_threads(before)
    parallel = [r for stack in pretrain_many(stacks, workers=2, threads=1) for r in stack]
    assert len(parallel) == 3
    assert [r.val_loss for r in parallel] == [r.val_loss for r in in_turn]
    for a, b in zip(parallel, in_turn):
        for key in a.encoder_state:
            assert torch.equal(a.encoder_state[key], b.encoder_state[key])
    assert parallel[0].val_loss != parallel[1].val_loss  # each seed its own run, in seed order


def test_stacks_trained_in_this_process_use_the_planned_threads(monkeypatch):
    """A rerun that has one stack left (the others kept) trains it here, not in a worker: with
    the thread count of the plan, as the uninterrupted run's worker did (the thread count changes
    a CPU's float rounding at the default widths), and the process's count is restored."""
    import seba.pretrain as pretrain

    seen = []
    monkeypatch.setattr(pretrain, "pretrain_stack", lambda **job: seen.append(torch.get_num_threads()) or [job["n"]])
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert [r for stack in pretrain.pretrain_many([{"n": 1}], workers=1, threads=1) for r in stack] == [1]
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def _pool_workers() -> list:
    import os

    from tiny_pipeline import descendants

    return descendants(os.getpid(), "spawn_main")


def test_a_failing_stack_ends_the_stacks_still_training_at_once():
    """Two workers: the first stack diverges in its first epoch while the second would train for
    hours (10 million epochs). The failure surfaces at once and the second worker is ended (its
    seeds would be thrown away with the failure); it used to be waited for, the error shown only
    after it. A 15-minute alarm turns that old wait into a failure instead of a hang (no timing is
    asserted: the fixed code takes seconds)."""
    import signal

    import pytest

    from seba.core.errors import TrainingDiverged
    from seba.pretrain import SeedData, pretrain_many

    def waited(*_):
        raise AssertionError("pretrain_many waited for the stack still training after another failed")

    X, groups = toy_table()
    cpu = torch.device("cpu")
    endless = small_cfg(max_epochs=10_000_000, patience=10_000_000)
    stacks = [{"members": [SeedData(X[:250], X[250:], 0, "[seed 0]")], "groups": groups, "ratio": 0.3,
               "cfg": small_cfg(lr=1e30, max_epochs=5), "device": cpu},
              {"members": [SeedData(X[:250], X[250:], 1, "[seed 1]")], "groups": groups, "ratio": 0.3,
               "cfg": endless, "device": cpu}]
    before = signal.signal(signal.SIGALRM, waited)
    signal.alarm(900)
    try:
        with pytest.raises(TrainingDiverged, match=r"\[seed 0\]: loss is not finite"):
            list(pretrain_many(stacks, workers=2, threads=1))
        assert not _pool_workers()
        # a caller that stops early (a seed found collapsed) ends the other stacks too
        run = pretrain_many([{**stacks[1], "cfg": small_cfg(max_epochs=2)}, stacks[1]], workers=2, threads=1)
        next(run)
        run.close()
        assert not _pool_workers()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def test_a_killed_worker_process_is_an_executor_error_naming_the_seeds():
    """A worker process killed mid-training (the OOM killer) broke the pool with the pool's own
    traceback, naming neither the stage nor its seeds."""
    import threading
    import time

    import pytest

    from seba.core.errors import ExecutorError
    from seba.pretrain import SeedData, pretrain_many

    X, groups = toy_table()
    slow = small_cfg(max_epochs=30_000, patience=30_000)
    stacks = [{"members": [SeedData(X[:250], X[250:], seed)], "groups": groups, "ratio": 0.3, "cfg": slow,
               "device": torch.device("cpu"), "label": f"[pretrain toy r=0.3 stack {seed + 1}/2]"} for seed in (0, 1)]

    def kill_one():
        deadline = time.time() + 60
        while len(_pool_workers()) < 2 and time.time() < deadline:
            time.sleep(0.2)
        for worker in _pool_workers():
            worker.kill()

    threading.Thread(target=kill_one, daemon=True).start()
    with pytest.raises(ExecutorError, match=r"\[pretrain toy r=0.3 stack \d/2\]: a worker process ended abruptly "
                                            r"\(killed, or out of memory: lower pretrain.workers.*\); seeds 0, 1 did not finish"):
        list(pretrain_many(stacks, workers=2, threads=1))
    assert not _pool_workers()


def test_the_random_ratio_draws_each_views_size_from_its_range_and_trains():
    from seba.objective import masked_group_count
    from seba.pretrain import _Member, SeedData

    X, groups = toy_table()
    cfg = small_cfg(random_ratio_range=(0.1, 0.5), max_epochs=3)
    member = _Member(SeedData(X[:250], X[250:], 0), "random", cfg, 0, 12, torch.as_tensor(groups), [])
    sizes = [int(member.column_mask(member.gen).sum()) for _ in range(400)]
    low, high = masked_group_count(12, 0.1), masked_group_count(12, 0.5)
    # k = max(1, floor(u * 12)), u uniform on [0.1, 0.5): every size from 0.1's up to 0.5's (exclusive)
    assert set(sizes) == set(range(low, high))
    fixed = _Member(SeedData(X[:250], X[250:], 0), 0.3, cfg, 3, 12, torch.as_tensor(groups), [])
    assert {int(fixed.column_mask(fixed.gen).sum()) for _ in range(50)} == {3}
    result = pretrain_encoder(X[:250], X[250:], groups, "random", seed=0, cfg=cfg, device=torch.device("cpu"))
    assert len(result.train_loss) == 3 and result.masked_columns == 0  # 0: the size varies per view
    again = pretrain_encoder(X[:250], X[250:], groups, "random", seed=0, cfg=cfg, device=torch.device("cpu"))
    assert result.train_loss == again.train_loss
    narrow = pretrain_encoder(X[:250], X[250:], groups, "random", seed=0, device=torch.device("cpu"),
                              cfg=dataclasses.replace(cfg, random_ratio_range=(0.3, 0.3)))
    assert narrow.train_loss != result.train_loss  # the range is what is drawn from
