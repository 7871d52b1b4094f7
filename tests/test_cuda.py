"""Pretraining and evaluation on a CUDA device (skipped where there is none, as on CI; run on a
GPU machine with `pytest tests/test_cuda.py`)."""

import dataclasses

import numpy as np
import pytest
import torch

from conftest import committed_params
from seba.core.config import load_params
from seba.core.data import encode_table, load_snapshot, make_split, scale
from seba.evaluate import evaluate_members, summarise
import seba.pretrain
from seba.pretrain import SeedData, encode, encoder_config, pretrain_encoder, pretrain_stack
from seba.core.runtime import count_cuda_syncs

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
CPU, CUDA = torch.device("cpu"), torch.device("cuda")


@pytest.fixture(scope="module")
def karhunen(snapshot_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("params") / "params.yaml"
    path.write_text(committed_params())
    params = load_params(path)
    frame, _ = load_snapshot(params.sources["karhunen"].openml_id, snapshot_dir)
    table = encode_table(frame)
    split = make_split(table.y, 0, params.split.test_fraction, params.split.val_fraction)
    return params, table, split, scale(table, split.train)


def test_sync_counter_sees_each_synchronisation():
    x = torch.ones(8, device=CUDA)
    count, _ = count_cuda_syncs(lambda: [float(x.sum()) for _ in range(5)])
    assert count >= 5


@pytest.mark.parametrize("fill", ["zero", "marginal"])
def test_pretraining_synchronises_per_epoch_not_per_batch(karhunen, fill):
    params, table, split, X = karhunen
    per_epoch = {}
    for batch_size in (32, 512):  # 42 and 3 training batches per epoch
        counts = {}
        for epochs in (3, 5):
            cfg = dataclasses.replace(params.pretrain, max_epochs=epochs, batch_size=batch_size, fill=fill,
                                      precision="fp32", progress_seconds=1e9)
            counts[epochs], result = count_cuda_syncs(
                lambda: pretrain_encoder(X[split.train], X[split.val], table.groups, 0.3, 0, cfg, CUDA))
            assert result.stop_epoch == epochs and result.cuda_graphs
        per_epoch[batch_size] = (counts[5] - counts[3]) / 2
    assert len(split.train) // 32 > 40
    # the epoch's rows, masks (and permutations) to the device, its training and validation
    # losses back: the same few synchronisations whatever the number of batches
    assert per_epoch[32] == per_epoch[512], per_epoch
    assert per_epoch[32] <= (5 if fill == "marginal" else 4), per_epoch


@pytest.mark.parametrize("fill", ["zero", "marginal"])
def test_graph_replayed_steps_compute_the_eager_steps(karhunen, fill):
    params, table, split, X = karhunen
    cfg = dataclasses.replace(params.pretrain, max_epochs=4, batch_size=256, fill=fill, precision="fp32",
                              progress_seconds=1e9)
    runs = {graphs: pretrain_encoder(X[split.train], X[split.val], table.groups, 0.3, 0, cfg, CUDA,
                                     cuda_graphs=graphs) for graphs in (True, False)}
    assert runs[True].cuda_graphs and not runs[False].cuda_graphs
    np.testing.assert_allclose(runs[True].train_loss, runs[False].train_loss, rtol=1e-6)
    np.testing.assert_allclose(runs[True].val_loss, runs[False].val_loss, rtol=1e-6)
    for name, value in runs[True].encoder_state.items():
        torch.testing.assert_close(value, runs[False].encoder_state[name], rtol=1e-5, atol=1e-6)


def test_pretraining_on_cuda_follows_the_cpu(karhunen):
    params, table, split, X = karhunen
    cfg = dataclasses.replace(params.pretrain, max_epochs=3, precision="fp32", progress_seconds=1e9)
    runs = {device.type: pretrain_encoder(X[split.train], X[split.val], table.groups, 0.3, 0, cfg, device)
            for device in (CPU, CUDA)}
    # same initial weights, shuffles and masks (drawn on the CPU); only the arithmetic differs
    np.testing.assert_allclose(runs["cuda"].train_loss[0], runs["cpu"].train_loss[0], rtol=1e-4)
    np.testing.assert_allclose(runs["cuda"].val_loss, runs["cpu"].val_loss, rtol=2e-3)
    config = encoder_config(cfg, X.shape[1])
    on_cpu = encode(runs["cpu"].encoder_state, config, X[split.test], CPU)
    on_cuda = encode(runs["cuda"].encoder_state, config, X[split.test], CUDA).cpu()
    assert torch.allclose(on_cuda, on_cpu, rtol=0.05, atol=0.05)


def test_evaluation_on_cuda_follows_the_cpu(karhunen):
    params, table, split, X = karhunen
    cfg = dataclasses.replace(params.pretrain, max_epochs=5, precision="fp32", progress_seconds=1e9)
    features = []
    for ratio in (0.1, 0.5):
        result = pretrain_encoder(X[split.train], X[split.val], table.groups, ratio, 0, cfg, CPU)
        features.append(encode(result.encoder_state, encoder_config(cfg, X.shape[1]), X[split.test], CPU))
    features = torch.stack(features)
    y_test = table.y[split.test]
    runs = {device.type: evaluate_members(features.to(device), ["a", "b"], y_test, len(table.classes), 0,
                                          params.evaluate, "karhunen") for device in (CPU, CUDA)}
    # identical episodes; probes may stop an iteration apart where float sums differ
    assert (runs["cuda"]["support_hash"] == runs["cpu"]["support_hash"]).all()
    same_iters = (runs["cuda"]["probe_iterations"] == runs["cpu"]["probe_iterations"]).mean()
    assert same_iters > 0.8, same_iters
    means = {k: summarise(v).set_index(["shot", "member"])["accuracy"] for k, v in runs.items()}
    assert (means["cuda"] - means["cpu"]).abs().max() < 0.5, (means["cuda"] - means["cpu"])


def seed_members(params, table, seeds):
    members = []
    for seed in seeds:
        split = make_split(table.y, seed, params.split.test_fraction, params.split.val_fraction)
        X = scale(table, split.train)
        members.append(SeedData(X[split.train], X[split.val], seed))
    return members


def test_stacked_graph_steps_compute_the_eager_steps_through_compactions(karhunen, monkeypatch):
    params, table, _, _ = karhunen
    monkeypatch.setattr(seba.pretrain, "GRAPH_COMPACT_SHARE", 0.01)  # compact (and capture again) at each stop
    members = seed_members(params, table, (0, 1, 2, 3))
    cfg = dataclasses.replace(params.pretrain, max_epochs=40, patience=3, min_delta=0.01, batch_size=256,
                              precision="fp32", progress_seconds=1e9)
    runs = {graphs: pretrain_stack(members, table.groups, 0.3, cfg, CUDA, cuda_graphs=graphs) for graphs in (True, False)}
    assert all(r.cuda_graphs for r in runs[True]) and not any(r.cuda_graphs for r in runs[False])
    assert len({r.stop_epoch for r in runs[True]}) > 1  # seeds left the stack at different epochs
    for a, b in zip(runs[True], runs[False]):
        assert a.stop_epoch == b.stop_epoch
        np.testing.assert_allclose(a.val_loss, b.val_loss, rtol=1e-5)
        for name, value in a.encoder_state.items():
            torch.testing.assert_close(value, b.encoder_state[name], rtol=1e-4, atol=1e-5)


def test_a_stack_on_cuda_follows_the_same_seeds_alone(karhunen):
    params, table, split, X = karhunen
    members = seed_members(params, table, (0, 1, 2))
    cfg = dataclasses.replace(params.pretrain, max_epochs=3, precision="fp32", progress_seconds=1e9)
    stacked = pretrain_stack(members, table.groups, 0.3, cfg, CUDA)
    config = encoder_config(cfg, X.shape[1])
    for m, s in zip(members, stacked):
        alone = pretrain_encoder(m.x_train, m.x_val, table.groups, 0.3, m.seed, cfg, CUDA)
        # batched kernels sum in another order than a seed's own: float32 rounding only. Adam's first
        # updates move a weight by about lr whatever its gradient's size, so a rounding difference in a
        # near-zero gradient can move it by lr in one run and not the other: a few outputs drift by up to
        # ~1e-2 within 3 epochs (H100: 0.2 % of the outputs beyond 1e-3 + 1 %, the largest 0.0095). A
        # mix-up of seeds, masks or rows moves the outputs by O(1) and the losses beyond 1e-4.
        np.testing.assert_allclose(s.val_loss, alone.val_loss, rtol=1e-4)
        a = encode(s.encoder_state, config, X[split.test], CUDA)
        b = encode(alone.encoder_state, config, X[split.test], CUDA)
        assert torch.isclose(a, b, rtol=1e-2, atol=1e-3).float().mean() >= 0.99
        assert (a - b).abs().max() <= 0.03


def test_a_stack_synchronises_per_epoch_not_per_seed_or_batch(karhunen):
    params, table, _, _ = karhunen
    per_epoch = {}
    for n_seeds in (1, 4):
        members = seed_members(params, table, range(n_seeds))
        counts = {}
        for epochs in (3, 5):
            cfg = dataclasses.replace(params.pretrain, max_epochs=epochs, batch_size=128, precision="fp32",
                                      progress_seconds=1e9)
            counts[epochs], _ = count_cuda_syncs(lambda: pretrain_stack(members, table.groups, 0.3, cfg, CUDA))
        per_epoch[n_seeds] = (counts[5] - counts[3]) / 2
    assert per_epoch[1] == per_epoch[4] and per_epoch[4] <= 4, per_epoch


def test_stacked_rows_reach_the_gpu_seed_by_seed_unchanged(karhunen):
    from seba.pretrain import stacked_rows

    _, _, split, X = karhunen
    parts = [X[split.train], X[split.train][::-1].copy(), X[split.train] * 2]
    members = [SeedData(part, part[:50] + 1, seed) for seed, part in enumerate(parts)]
    rows, val = stacked_rows(members, CUDA)
    assert torch.equal(rows.cpu(), torch.as_tensor(np.stack(parts)))
    assert torch.equal(val.cpu(), torch.as_tensor(np.stack([part[:50] + 1 for part in parts])))


def test_tf32_fp32_search_finds_the_fp32_positives_and_tf32_does_not(snapshot_dir, tmp_path):
    """On income (the table TF32 cost points), 1024-row batches under one-column masks: the
    stacked neighbour search of a tf32_fp32_search step picks fp32's positives, inside a CUDA graph
    too; plain TF32 picks others for some rows (benchmarks/neighbour_search.py: 8 % on the CPU's
    emulation)."""
    from seba.core.runtime import matmul_precision
    from seba.objective import stacked_target_neighbours

    path = tmp_path / "params.yaml"
    path.write_text(committed_params())
    params = load_params(path)
    frame, _ = load_snapshot(params.sources["income"].openml_id, snapshot_dir)
    table = encode_table(frame)
    split = make_split(table.y, 0, params.split.test_fraction, params.split.val_fraction)
    X = torch.as_tensor(scale(table, split.train)[split.train][:4096], device=CUDA).view(4, 1024, -1)
    groups = torch.as_tensor(table.groups, device=CUDA)
    masks = torch.stack([groups == g for g in range(4)])  # one original column each
    found = {}
    for mode in ("fp32", "tf32", "tf32_fp32_search"):
        with matmul_precision(mode):
            if mode == "tf32_fp32_search":
                with matmul_precision("fp32"):  # as seba.pretrain.stacked_seba_loss keeps the search
                    found[mode] = stacked_target_neighbours(X, masks)
            else:
                found[mode] = stacked_target_neighbours(X, masks)
    assert torch.equal(found["tf32_fp32_search"], found["fp32"])
    assert not torch.equal(found["tf32"], found["fp32"])
    # the same through a step's code in a CUDA graph: the search's product keeps fp32 there
    graph, static = torch.cuda.CUDAGraph(), X.clone()
    with matmul_precision("tf32_fp32_search"):
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            stacked_target_neighbours(static, masks)  # warm-up outside the capture
        torch.cuda.current_stream().wait_stream(stream)
        with torch.cuda.graph(graph):
            with matmul_precision("fp32"):
                captured = stacked_target_neighbours(static, masks)
    graph.replay()
    assert torch.equal(captured, found["fp32"])
