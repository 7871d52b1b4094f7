"""`executor.kind: ray`: a stage's pieces (chunks of seeds) as Ray tasks give the local run's
outputs bit for bit; a failing task is the stage's named error; tasks spread over GPUs and nodes.

The Ray tests are skipped when Ray is not installed (``pip install -e ".[ray]"``). One local Ray
instance serves the module (2 CPUs and two declared GPUs, which let the placement tests see
tasks spread over GPU ids; torch sees no CUDA here, so the tasks run on the CPU)."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import socket
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from seba.core.config import EvaluateConfig, ExecutorConfig, PretrainConfig, parse_params
from seba.core.data import EncodedTable, Split
from seba.core.errors import ConfigError, ExecutorError, TrainingDiverged
from seba.executor import RayExecutor, chunks, connect, plan, probe_address
from seba.pretrain import SeedData, pretrain_stack, train_chunk

CPU = torch.device("cpu")
SEBA = str(Path(__file__).resolve().parents[1] / "seba")


@pytest.fixture()
def raw():
    from conftest import committed_params  # not at the top: Ray's workers import this file (py_modules) without it

    return yaml.safe_load(committed_params())


def test_chunks_are_consecutive_and_balanced():
    assert chunks(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert chunks(list(range(2)), 5) == [[0], [1]]  # never an empty task
    assert chunks(list(range(4)), 1) == [[0, 1, 2, 3]]


@pytest.mark.parametrize("edit,message", [
    ({"kind": "dask"}, "'executor.kind' is 'dask'; allowed: local, ray"),
    ({"gpus_per_task": 0}, "'executor.gpus_per_task' must be null (automatic) or a number of GPUs > 0, got 0"),
    ({"cpus_per_task": 0}, "'executor.cpus_per_task' must be > 0"),
    ({"tasks": -1}, "'executor.tasks' must be an integer >= 0"),
    ({"retries": -1}, "'executor.retries' must be an integer >= 0 (0 = none)"),
    ({"adress": "x"}, "unknown key 'executor.adress' (did you mean 'address'?)"),
])
def test_bad_executor_params_name_the_key(raw, edit, message):
    raw["executor"].update(edit)
    with pytest.raises(ConfigError) as error:
        parse_params(raw)
    assert message in str(error.value)


@pytest.mark.parametrize("edit, message", [
    ({"cpus_per_task": 4096}, "executor asks 4096 CPUs and 0 GPUs per task"),
    ({"gpus_per_task": 64}, "executor asks 1 CPUs and 64 GPUs per task"),
    ({"local_cpus": 1, "cpus_per_task": 2}, "(executor.local_cpus 1 of "),
])
def test_validate_refuses_tasks_the_local_ray_instance_cannot_run(raw, monkeypatch, edit, message):
    """Without a cluster address the stages start a local Ray instance: seba-validate checks the
    task shape against this machine before DVC removes any output (the stage would fail later)."""
    from seba.validate import machine_problems

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    raw["executor"].update(kind="ray", address=None, **edit)
    problems = machine_problems(parse_params(raw))
    assert len(problems) == 1 and message in problems[0] and "the local Ray instance a stage starts here" in problems[0]
    raw["executor"] = {"kind": "ray", "address": None}
    assert machine_problems(parse_params(raw)) == []


def test_without_ray_installed_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ConfigError, match=r"executor.kind' is ray but Ray is not installed; install it with "
                                          r"pip install -e \"\.\[ray\]\""):
        connect(ExecutorConfig(kind="ray"))


def test_a_cluster_address_is_probed_before_ray_is_asked():
    """``ray.init`` retries an address where nothing listens for minutes: ``connect`` (and
    ``seba-validate``) refuse it within ``PROBE_SECONDS``; names and local instances are not probed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        with pytest.raises(ConfigError, match=rf"nothing accepts connections at '{re.escape(address)}' "
                                              rf"\(\$RAY_ADDRESS: Connection refused within 5 s\)"):
            probe_address(address, "$RAY_ADDRESS")
    with socket.socket() as server:  # a listening port passes
        server.bind(("127.0.0.1", 0))
        server.listen()
        probe_address(f"127.0.0.1:{server.getsockname()[1]}", "executor.address")
    for address in (None, "auto", "local", "anyscale://cluster"):
        probe_address(address, "executor.address")
    with pytest.raises(ConfigError, match="nothing accepts connections at 'ray://127.0.0.1:"):
        probe_address(f"ray://127.0.0.1:{port}/?namespace=x", "executor.address")  # the path is not the port
    for address in ("not an address", "127.0.0.1", "", "ray://head", ":6379", "host:port"):
        with pytest.raises(ConfigError, match=rf"{re.escape(repr(address))} \(executor.address\) is not a cluster "
                                              rf"address: give host:port"):
            probe_address(address, "executor.address")


# ------------------------------------------------------------------------------------- Ray

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install -e \".[ray]\"")


@pytest.fixture(scope="module")
def cluster():
    """A local Ray instance for the module (the docs' testing advice: one per module)."""
    if ray.is_initialized():
        ray.shutdown()
    # no token authentication on this test instance, so that the stages' processes can join it
    # without a token (Ray >= 2.59 turns it on for local instances; docs/scale-out.md)
    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, logging_level="WARNING",
             runtime_env={"py_modules": [SEBA, __file__]})  # this file: the tasks defined below
    import seba.executor

    seba.executor._connected = ""  # connect() in the code under test reuses this Ray instance
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()
    seba.executor._connected = None
    if saved is None:
        os.environ.pop("RAY_AUTH_MODE", None)
    else:
        os.environ["RAY_AUTH_MODE"] = saved


def executor(device: str = "auto", **settings) -> RayExecutor:
    return RayExecutor(ExecutorConfig(kind="ray", **settings), device)


def seed_tables(n_seeds=3, n=240, columns=8):
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(3, columns)) * 2.5
    X = np.concatenate([c + rng.normal(size=(n // 3, columns)) for c in centres]).astype(np.float32)
    members = []
    for seed in range(n_seeds):
        order = np.random.default_rng(seed).permutation(len(X))
        members.append(SeedData(X[order[:180]], X[order[180:]], seed=seed, label=f"seed {seed}"))
    return members, np.arange(columns)


def test_pretraining_as_ray_tasks_gives_the_local_weights(cluster):
    members, groups = seed_tables()
    cfg = dataclasses.replace(PretrainConfig(), encoder_hidden=32, encoder_out=16, projector_hidden=32,
                              projector_out=16, batch_size=64, max_epochs=6, patience=2, device="cpu",
                              progress_seconds=1e9)
    torch.set_num_threads(1)  # the tasks' thread count (executor.cpus_per_task)
    local = pretrain_stack(members, groups, 0.3, cfg, CPU)
    run = executor("cpu")
    tasks, gpus = run.plan(len(members))
    assert (tasks, gpus) == (2, 0.0)  # 2 CPUs, one each; pretrain.device cpu asks no GPU
    parts = chunks(members, tasks)
    out = list(run.map(train_chunk, [(part, groups, 0.3, cfg, f"chunk {i}") for i, part in enumerate(parts)],
                       [f"chunk {i}" for i in range(tasks)]))
    remote = [result for results, _ in out for result in results]
    assert [len(r) for r, _ in out] == [2, 1]
    for a, b in zip(local, remote):
        assert a.train_loss == b.train_loss and a.val_loss == b.val_loss and a.best_epoch == b.best_epoch
        for key in a.encoder_state:
            assert torch.equal(a.encoder_state[key], b.encoder_state[key]), key
    assert all(p["node_id"] == ray.get_runtime_context().get_node_id() for _, p in out)


def test_seeds_given_as_splits_reach_their_tasks_with_the_table_put_once(cluster):
    """A stage's seeds are splits of one table (seba.pretrain.ScaledSplit): the table goes into
    the object store once and each task's seeds travel without it (their pickles hold no copy),
    yet every task trains what the same seeds train here."""
    import pickle

    from seba.pretrain import ScaledSplit, shared_table, without_table

    arrays, groups = seed_tables(n_seeds=1)
    X = np.concatenate([arrays[0].x_train, arrays[0].x_val] * 20)
    table = EncodedTable(X=X, y=np.zeros(len(X), dtype=np.int64), groups=groups, numeric=np.ones(8, bool),
                         columns=np.array([f"c{j}" for j in range(8)]), encoded_names=np.array([f"c{j}" for j in range(8)]),
                         classes=np.array(["a"]))
    members = [SeedData(None, None, seed, label=f"seed {seed}", source=ScaledSplit(table, order[:180], order[180:240]))
               for seed, order in enumerate(np.random.default_rng(s).permutation(len(X)) for s in range(3))]
    cfg = dataclasses.replace(PretrainConfig(), encoder_hidden=32, encoder_out=16, projector_hidden=32,
                              projector_out=16, batch_size=64, max_epochs=4, patience=2, device="cpu",
                              progress_seconds=1e9)
    torch.set_num_threads(1)
    local = pretrain_stack(members, groups, 0.3, cfg, CPU)
    assert shared_table(members) is table
    sent = without_table(members)
    assert all(m.source.table is None for m in sent) and all(m.source.table is table for m in members)
    assert len(pickle.dumps(sent)) < table.X.nbytes / 5  # the splits, not the table
    run = executor("cpu")
    tasks, _ = run.plan(len(members))
    ref = run.put(table)
    out = list(run.map(train_chunk, [(without_table(part), groups, 0.3, cfg, f"chunk {i}", ref)
                                     for i, part in enumerate(chunks(members, tasks))], [f"chunk {i}" for i in range(tasks)]))
    remote = [result for results, _ in out for result in results]
    assert len(remote) == 3
    for a, b in zip(local, remote):
        assert a.val_loss == b.val_loss and a.best_epoch == b.best_epoch
        assert all(torch.equal(a.encoder_state[k], b.encoder_state[k]) for k in a.encoder_state)


def separable_table(n_classes=3, per_class=40, dim=6):
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(n_classes, dim)) * 4
    X = np.concatenate([c + rng.normal(size=(per_class, dim)) for c in centres]).astype(np.float32)
    y = np.repeat(np.arange(n_classes), per_class)
    names = np.array([f"c{j}" for j in range(dim)])
    table = EncodedTable(X=X, y=y, groups=np.arange(dim), numeric=np.ones(dim, bool), columns=names,
                         encoded_names=names, classes=np.array([f"k{c}" for c in range(n_classes)]))
    splits = {}
    for seed in range(3):
        order = np.random.default_rng(seed).permutation(len(y))
        splits[seed] = Split(seed=seed, train=order[:30], val=order[30:40], test=order[40:])
    return table, splits


class Tracker:
    def __init__(self):
        self.children = []

    def child(self, name, params=None, tags=None):
        self.children.append(tags)

    def log_metrics(self, *args, **kwargs):
        pass

    def end_child(self, *args, **kwargs):
        pass


@pytest.mark.parametrize("method", ["logreg", "scarf"])
def test_a_baseline_as_ray_tasks_gives_the_local_episodes(cluster, method):
    from seba.baselines.base import evaluate_baseline, load_method

    table, splits = separable_table()
    cls = load_method(method)
    cfg = cls.Config()
    if method == "scarf":
        cfg = dataclasses.replace(cfg, encoder_hidden=32, encoder_out=16, max_epochs=3, batch_size=16)
    evaluate = EvaluateConfig(shots=(1, 5), episodes=4)
    torch.set_num_threads(1)
    local = evaluate_baseline(cls, cfg, table, splits, evaluate, "toy", CPU, Tracker())
    tracker = Tracker()
    remote = evaluate_baseline(cls, cfg, table, splits, evaluate, "toy", CPU, tracker, executor("cpu"), "cpu")
    pd.testing.assert_frame_equal(local, remote, check_exact=True)
    assert [t["seed"] for t in tracker.children] == [0, 1, 2] and all("ray_node_id" in t for t in tracker.children)


def fails_with(kind: str, x: int) -> int:
    if kind == "named" and x == 1:
        raise TrainingDiverged("seed 1: loss is not finite at epoch 3")
    if kind == "bug" and x == 1:
        return x // 0
    if kind == "crash" and x == 1:
        # a worker that ran piece 0 just before may run this piece too: let its reply for piece 0 reach
        # the owner first (a worker killed at once can lose it, and Ray then names piece 0 as crashed)
        time.sleep(1)
        os._exit(3)
    return x


@pytest.mark.parametrize("kind,error,message", [
    ("named", TrainingDiverged, "^seed 1: loss is not finite at epoch 3$"),
    ("bug", ExecutorError, r"^\[piece 1\]: its Ray task failed \(ZeroDivisionError: integer division or modulo by "
                           r"zero\); the stage writes no outputs$"),
    ("crash", ExecutorError, r"^\[piece 1\]: its Ray task did not finish \("),
])
def test_a_failing_task_is_the_stages_named_error(cluster, kind, error, message):
    run = executor()
    got = []
    with pytest.raises(error, match=message):
        for result, _ in run.map(fails_with, [(kind, x) for x in range(3)], [f"[piece {x}]" for x in range(3)]):
            got.append(result)
    assert got == [0]  # the pieces before the failure arrived; nothing after it


def dies_once(marker: str, x: int) -> int:
    """Piece 1's worker process dies the first time it runs (a lost node, an OOM kill)."""
    if x == 1 and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(9)
    return x * 10


@pytest.mark.parametrize("retries", [0, 1])
def test_a_lost_task_is_rerun_only_when_retries_allow(cluster, tmp_path, retries):
    run, marker = executor(retries=retries), str(tmp_path / f"died-{retries}")
    pieces, labels = [(marker, x) for x in range(3)], [f"[piece {x}]" for x in range(3)]
    if retries:
        assert [result for result, _ in run.map(dies_once, pieces, labels)] == [0, 10, 20]
    else:
        with pytest.raises(ExecutorError, match=r"^\[piece 1\]: its Ray task did not finish \("):
            list(run.map(dies_once, pieces, labels))
    assert os.path.exists(marker)  # piece 1 did die once


def test_a_task_that_raises_is_never_rerun(cluster, tmp_path):
    calls = tmp_path / "calls"

    def count_and_fail(x):
        with open(calls, "a") as out:
            out.write("x")
        return x // 0

    with pytest.raises(ExecutorError, match="ZeroDivisionError"):
        list(executor(retries=2).map(count_and_fail, [(1,)], ["[piece 1]"]))
    assert calls.read_text() == "x"



def fails_after_the_others(markers: str, x: int) -> int:
    """Piece 0 fails once pieces 1 and 2 have finished (their results stored: 2 s after their markers)."""
    if x == 0:
        while not all(os.path.exists(f"{markers}-{k}") for k in (1, 2)):
            time.sleep(0.05)
        time.sleep(2)
        return x // 0
    open(f"{markers}-{x}", "w").close()
    return x * 10


def test_tasks_that_finished_before_a_failing_one_are_salvaged(cluster, tmp_path):
    """Pieces 1 and 2 finished while piece 0 still ran; when it fails, their results go to
    ``salvage`` (a pretrain stage keeps their seeds for a rerun) instead of being cancelled unseen."""
    import signal

    def hung(*_):
        raise AssertionError("piece 0 never saw pieces 1 and 2 finish")

    kept = []
    before = signal.signal(signal.SIGALRM, hung)
    signal.alarm(600)
    try:
        with pytest.raises(ExecutorError, match=r"^\[piece 0\]: its Ray task failed \(ZeroDivisionError"):
            list(executor().map(fails_after_the_others, [(str(tmp_path / "done"), x) for x in range(3)],
                                [f"[piece {x}]" for x in range(3)], salvage=lambda i, done: kept.append((i, done[0]))))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
    assert kept == [(1, 10), (2, 20)]


def test_plans_that_no_node_can_run_are_refused_before_any_task(cluster):
    with pytest.raises(ConfigError, match=r"asks 3 CPUs and 0 GPUs per task \(executor.cpus_per_task, "
                                          r"executor.gpus_per_task\) but no node of the Ray cluster has them"):
        plan(ExecutorConfig(kind="ray", cpus_per_task=3), "cpu", 10)
    with pytest.raises(ConfigError, match="asks 1 CPUs and 4 GPUs"):
        plan(ExecutorConfig(kind="ray", gpus_per_task=4), "auto", 10)
    assert plan(ExecutorConfig(kind="ray"), "cpu", 10) == (2, 0.0)
    assert plan(ExecutorConfig(kind="ray", tasks=5), "cpu", 3) == (3, 0.0)  # at most one task per seed
    assert plan(ExecutorConfig(kind="ray", gpus_per_task=0.5), "auto", 10) == (2, 0.5)  # CPUs bound it


def gpu_of(x: int) -> int:
    return x


def test_tasks_spread_over_the_gpus(cluster):
    """With GPUs in the cluster and pretrain.device auto, each task asks one GPU: the two tasks get
    different GPUs (Ray sets CUDA_VISIBLE_DEVICES for each; torch sees no CUDA here)."""
    run = executor()
    tasks, gpus = run.plan(8)
    assert (tasks, gpus) == (2, 1.0)
    placements = [p for _, p in run.map(gpu_of, [(0,), (1,)], ["a", "b"], gpus)]
    assert sorted(g for p in placements for g in p["gpu_ids"]) == ["0", "1"]


# ------------------------------------------------------------------------------------- stages


@pytest.fixture(scope="module")
def pipeline(tiny_pipeline, tmp_path_factory):
    """A copy of the tiny pipeline (its git history and DVC cache too) for this module's runs:
    they leave MLflow records and cache objects behind, which the shared one must not get."""
    work, env, _ = tiny_pipeline
    copy = tmp_path_factory.mktemp("ray-pipeline") / "repo"
    shutil.copytree(work, copy, symlinks=True, ignore=shutil.ignore_patterns("tmp"))
    return copy, env


@pytest.mark.slow
def test_dvc_repro_with_ray_gives_the_local_outputs_bit_for_bit(cluster, pipeline):
    """The tiny pipeline (built with executor local): its pretrain, evaluate and baseline stages
    rerun with executor ray, as subprocesses joining this module's cluster, write the same bytes."""
    from tiny_pipeline import run, stages_run

    work, env = pipeline[0], dict(pipeline[1])
    outputs = ["data/models/diabetes/r0.2/seed0.pt", "reports/episodes/knn/diabetes.csv",
               "reports/episodes/diabetes.csv", "reports/metrics/diabetes.json"]
    before = {name: (work / name).read_bytes() for name in outputs}
    params, lock = (work / "params.yaml").read_text(), (work / "dvc.lock").read_text()
    raw = yaml.safe_load(params)
    threads = raw["pretrain"]["threads"] or os.cpu_count()  # the local run's torch threads (one seed)
    raw["executor"] = {**raw["executor"], "kind": "ray", "cpus_per_task": min(threads, 2)}
    (work / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    try:
        if threads > 2:
            pytest.skip("the local run used more torch threads than the 2-CPU test cluster gives a task")
        env.update(RAY_ADDRESS=cluster, RAY_AUTH_MODE="disabled")
        stages = ["pretrain@diabetes-0.2", "evaluate@diabetes", "baseline@knn-diabetes"]
        result = run(["dvc", "repro", "--force", "--single-item", *stages], work, env)
        assert stages_run(result.stdout) == set(stages)
        output = result.stdout + result.stderr
        assert "as 1 Ray task" in output and "[evaluate diabetes] 1 seed as 1 Ray task" in output, output
        for name in outputs:
            assert (work / name).read_bytes() == before[name], name
        log = yaml.safe_load((work / "data/models/diabetes/r0.2/log.json").read_text())
        assert log["seeds"]["0"]["ray"]["node_id"] == ray.get_runtime_context().get_node_id()
        assert log["seeds"]["0"]["precision"] == log["precision"]  # the precision the task resolved, per seed
    finally:
        (work / "params.yaml").write_text(params)
        (work / "dvc.lock").write_text(lock)
        run(["dvc", "checkout", "--force"], work, env)
    assert stages_run(run(["dvc", "repro", "--dry"], work, pipeline[1]).stdout) <= {"validate", "track"}


@pytest.mark.slow
def test_a_failing_ray_task_fails_its_stage_with_the_named_error_and_keeps_nothing(cluster, pipeline):
    """lr 1e30 makes the loss non-finite inside the Ray task: the stage fails with the error a
    local run gives, writes no checkpoint and records nothing; `dvc checkout` brings back the
    earlier encoder, unchanged."""
    from tiny_pipeline import run, stages_run

    work, env = pipeline[0], dict(pipeline[1])
    checkpoint = work / "data/models/diabetes/r0.2/seed0.pt"
    before = checkpoint.read_bytes()
    params, lock = (work / "params.yaml").read_text(), (work / "dvc.lock").read_text()
    raw = yaml.safe_load(params)
    raw["executor"]["kind"] = "ray"
    raw["pretrain"]["lr"] = 1e30
    (work / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    try:
        env.update(RAY_ADDRESS=cluster, RAY_AUTH_MODE="disabled")
        result = run(["dvc", "repro", "--single-item", "pretrain@diabetes-0.2"], work, env, check=False)
        output = result.stdout + result.stderr
        assert result.returncode != 0
        assert stages_run(result.stdout) == {"pretrain@diabetes-0.2"}
        assert ("error in stage 'pretrain': [pretrain diabetes r=0.2 seed 0 (1/1)]: loss is not finite at epoch"
                in output), output
        assert "Traceback" not in output
        assert not list(checkpoint.parent.glob("*.pt")) and not list(checkpoint.parent.glob(".*tmp*"))
        assert (work / "dvc.lock").read_text() == lock  # the failed stage is not recorded
    finally:
        (work / "params.yaml").write_text(params)
        (work / "dvc.lock").write_text(lock)
        run(["dvc", "checkout", "--force"], work, env)
    assert checkpoint.read_bytes() == before


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_nodes(*marks: str) -> None:
    """End the Ray processes whose command line holds one of ``marks`` (the head's temp dir, the
    cluster's address), and only those: `ray stop` would end every Ray instance of the machine."""
    import signal

    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if any(m.encode() in cmdline for m in marks) and int(pid) != os.getpid():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


@pytest.mark.slow
def test_a_stage_on_a_two_node_cluster_uses_both_nodes(pipeline):
    """`ray start --head` and a second node on 127.0.0.1, one CPU each: a pretrain stage of two
    seeds joins the cluster through RAY_ADDRESS and runs one task on each node."""
    import tempfile

    from tiny_pipeline import run, stages_run

    ray_cli = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    work, env = pipeline[0], dict(pipeline[1])
    port = free_port()
    temp_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    env.update(RAY_ADDRESS=f"127.0.0.1:{port}", RAY_AUTH_MODE="disabled")
    start = [ray_cli, "start", "--num-cpus", "1", "--num-gpus", "0", "--node-ip-address", "127.0.0.1"]
    params, lock = (work / "params.yaml").read_text(), (work / "dvc.lock").read_text()
    try:
        run([*start, "--head", "--port", str(port), "--temp-dir", temp_dir, "--include-dashboard", "false",
             "--disable-usage-stats"], work, env)
        run([*start, "--address", f"127.0.0.1:{port}"], work, env)
        raw = yaml.safe_load(params)
        raw["seeds"] = [0, 1]
        raw["executor"]["kind"] = "ray"
        (work / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        result = run(["dvc", "repro", "--single-item", "split@diabetes", "pretrain@diabetes-0.2"], work, env)
        assert "pretrain@diabetes-0.2" in stages_run(result.stdout)
        assert "as 2 Ray tasks" in result.stdout + result.stderr
        log = yaml.safe_load((work / "data/models/diabetes/r0.2/log.json").read_text())
        nodes = {log["seeds"][s]["ray"]["node_id"] for s in ("0", "1")}
        assert len(nodes) == 2, log["seeds"]
    finally:
        stop_nodes(temp_dir, f"127.0.0.1:{port}")
        shutil.rmtree(temp_dir, ignore_errors=True)
        (work / "params.yaml").write_text(params)
        (work / "dvc.lock").write_text(lock)
        run(["dvc", "checkout", "--force"], work, env)


def test_evaluation_as_ray_tasks_gives_the_local_episodes(cluster):
    """Three seeds' ratio encoders evaluated here (in one group, probes together) and as two Ray
    tasks (seeds 0-1 and 2): the same episodes."""
    from seba.evaluate import evaluate_in_groups
    from seba.evaluate_stage import SeedInputs, evaluate_chunk, seed_features
    from seba.pretrain import encoder_config

    table, splits = separable_table(per_class=60)
    cfg = dataclasses.replace(PretrainConfig(), encoder_hidden=32, encoder_out=16, projector_hidden=32,
                              projector_out=16, batch_size=32, max_epochs=3, device="cpu", progress_seconds=1e9)
    torch.set_num_threads(1)
    inputs = {}
    for seed, split in splits.items():
        x = table.X
        members = [SeedData(x[split.train], x[split.val], seed)]
        checkpoints = [{"encoder": pretrain_stack(members, table.groups, ratio, cfg, CPU)[0].encoder_state,
                        "model_config": encoder_config(cfg, x.shape[1])} for ratio in (0.2, 0.4)]
        inputs[seed] = SeedInputs(checkpoints, {True: x[split.test]}, table.y[split.test])
    evaluate = EvaluateConfig(shots=(1, 5), episodes=3)
    names = ["r0.2", "r0.4"]
    local = list(evaluate_in_groups(lambda s: seed_features(inputs[s], "linear", CPU, "toy"), [0, 1, 2], names, 3,
                                    evaluate, "toy", budget_bytes=1 << 30))
    assert {together for *_, together in local} == {3}
    run = executor("cpu")
    remote = [r for results, _ in run.map(evaluate_chunk, [([(s, inputs[s]) for s in part], names, 3, evaluate, "toy",
                                                              "cpu") for part in ([0, 1], [2])], ["a", "b"])
              for r in results]
    assert [seed for seed, *_ in remote] == [0, 1, 2]
    for (seed_a, frame_a, *_), (seed_b, frame_b, *_) in zip(local, remote):
        pd.testing.assert_frame_equal(frame_a, frame_b, check_exact=True)
