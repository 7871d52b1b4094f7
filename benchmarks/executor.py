"""The cost of `executor.kind: ray` against `local`, measured in one run.

Usage (repository root; needs the Ray extra, ``pip install -e ".[ray]"``):
    python benchmarks/executor.py [--dataset diabetes] [--seeds 2] [--ratio 0.3] [--max-epochs 30]
                                  [--baseline logreg] [--cpus 0] [--repeats 2]

What a stage does with each executor, in this process, with the pipeline's params (params.yaml,
the table's own values over them):

1. Ray's fixed costs: starting a local instance (``ray.init``, as a stage without a cluster
   address does), the first task (a worker process starting and importing torch and seba), and
   ``ray.shutdown``.
2. Pretraining ``--seeds`` seeds of one table and ratio (``--max-epochs`` caps the epochs), each
   seed given as its split of the table as the stage gives it (``seba.pretrain.ScaledSplit``):
   ``local``, the stage's plan (``pretrain.workers`` processes of stacks, spawned per stage),
   against ``ray``, one task per seed chunk (``executor.cpus_per_task`` CPUs each) on the running
   instance, the table put into the object store once as the stage puts it. Wall seconds (median
   of ``--repeats``, alternating), the ratio, and whether every seed's weights are equal bit for
   bit; then the same Ray tasks with the table sent inside each task's seeds instead, and the
   bytes each task's arguments pickle to both ways.
3. One baseline (``--baseline``) on the same seeds, fitted and scored on 100 episodes per shot:
   the same comparison.

The local instance gets ``--cpus`` CPUs (0 = all cores), as ``executor.local_cpus``, and no token
authentication (``RAY_AUTH_MODE=disabled``), so that a second process can join it as a stage
joins a cluster through ``RAY_ADDRESS``.
"""

from __future__ import annotations

import argparse
import dataclasses
import pickle
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from entry import positive, ratio

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="diabetes")
    parser.add_argument("--seeds", type=positive, default=2)
    parser.add_argument("--ratio", type=ratio, default=0.3)
    parser.add_argument("--max-epochs", type=positive, default=30)
    parser.add_argument("--baseline", default="logreg")
    parser.add_argument("--cpus", type=int, default=0)
    parser.add_argument("--repeats", type=positive, default=2)
    args = parser.parse_args()

    import torch

    from seba.baselines.base import evaluate_baseline, load_method, method_config
    from seba.core.config import load_params
    from seba.core.data import encode_table, load_snapshot, make_split
    from seba.executor import RayExecutor, chunks
    from seba.pretrain import (ScaledSplit, SeedData, member_bytes, plan_stacks, plan_workers, pretrain_many,
                               train_chunk, without_table)
    from seba.core.tracking import NullTracker

    params = load_params(ROOT / "params.yaml")
    cfg = dataclasses.replace(params.pretrain_for(args.dataset), max_epochs=args.max_epochs, device="cpu",
                              progress_seconds=1e9)
    frame, _ = load_snapshot(params.sources[args.dataset].openml_id, ROOT / "data" / "snapshot")
    table = encode_table(frame)
    splits, members = {}, []
    for seed in range(args.seeds):
        split = make_split(table.y, seed, params.split.test_fraction, params.split.val_fraction)
        splits[seed] = split
        members.append(SeedData(None, None, seed, f"seed {seed}", ScaledSplit(table, split.train, split.val, cfg.normalise)))
    cpu = torch.device("cpu")
    print(f"{args.dataset}: {members[0].n_train} train rows, {table.X.shape[1]} columns, {args.seeds} seeds, "
          f"r = {args.ratio}, at most {args.max_epochs} epochs; torch {torch.__version__}")

    # 1. Ray's fixed costs
    import os

    import ray

    os.environ["RAY_AUTH_MODE"] = "disabled"  # a local instance without a token, so that a second process can join

    executor_cfg = dataclasses.replace(params.executor, kind="ray", address=None, local_cpus=args.cpus)
    start = time.perf_counter()
    executor = RayExecutor(executor_cfg, "cpu")
    init = time.perf_counter() - start
    start = time.perf_counter()
    list(executor.map(len, [([1, 2],)], ["first task"]))
    first = time.perf_counter() - start
    tasks, gpus = executor.plan(args.seeds)
    joined = join_running(ray.get_runtime_context().gcs_address)
    print(f"\n1. Ray {ray.__version__}, local instance of {ray.cluster_resources().get('CPU', 0):g} CPUs: "
          f"ray.init {init:.2f} s, first task {first:.2f} s; another process joining it (a stage with "
          f"RAY_ADDRESS): ray.init {joined['init']:.2f} s, first task {joined['first']:.2f} s")

    # 2. pretraining
    workers, threads = plan_workers(cfg, args.seeds, cpu)
    stacks = plan_stacks(args.seeds, workers, member_bytes(members[0].n_train, members[0].n_val,
                                                          table.X.shape[1], cfg), cfg, cpu)
    jobs = [{"members": [members[i] for i in stack], "groups": table.groups, "ratio": args.ratio, "cfg": cfg,
             "device": cpu, "label": "local"} for stack in stacks]
    parts = chunks(members, tasks)
    table_ref = executor.put(table)
    pieces = [(without_table(part), table.groups, args.ratio, cfg, "ray", table_ref) for part in parts]
    with_table = [(part, table.groups, args.ratio, cfg, "ray") for part in parts]

    def local_pretrain():
        return [r for stack in pretrain_many(jobs, workers, threads) for r in stack]

    def ray_pretrain(pieces=pieces):
        return [r for results, _ in executor.map(train_chunk, pieces, [f"chunk {i}" for i in range(tasks)], gpus)
                for r in results]

    print(f"\n2. pretraining: local = {len(stacks)} stack(s) in {workers} process(es) of {threads} thread(s); "
          f"ray = {tasks} task(s) of {executor_cfg.cpus_per_task} CPU(s)")
    compare(args.repeats, local_pretrain, ray_pretrain, same_weights)
    print("   the table with each task's seeds instead (before the stage put it once), against once:")
    compare(args.repeats, lambda: ray_pretrain(with_table), ray_pretrain, same_weights,
            names=("with each task", "put once"))
    sizes = [(len(pickle.dumps(a[0])), len(pickle.dumps(b[0]))) for a, b in zip(with_table, pieces)]
    print(f"   each task's seeds pickle to {', '.join(size(a) for a, _ in sizes)} with the table "
          f"({size(table.X.nbytes)} of rows), {', '.join(size(b) for _, b in sizes)} without it "
          f"(the table: once per node)")

    # 3. a baseline
    method = load_method(args.baseline)
    method_cfg = method_config(params.baselines, args.baseline)

    torch.set_num_threads(executor_cfg.cpus_per_task)

    def local_baseline():
        return evaluate_baseline(method, method_cfg, table, splits, params.evaluate, args.dataset, cpu, NullTracker())

    def ray_baseline():
        return evaluate_baseline(method, method_cfg, table, splits, params.evaluate, args.dataset, cpu, NullTracker(),
                                 executor, "cpu")

    print(f"\n3. baseline {args.baseline}: local = the seeds in turn ({executor_cfg.cpus_per_task} thread(s)); "
          f"ray = {tasks} task(s)")
    compare(args.repeats, local_baseline, ray_baseline, lambda a, b: a.equals(b))
    start = time.perf_counter()
    ray.shutdown()
    print(f"\nray.shutdown {time.perf_counter() - start:.2f} s")


def join_running(address: str) -> dict:
    """What a stage pays to join a running instance: connect, and its first task (a new job:
    the job's workers start and import seba), timed in a process of its own."""
    import json
    import subprocess

    code = ("import json, time, sys; sys.path.insert(0, sys.argv[1]); t = time.perf_counter(); "
            "from seba.core.config import ExecutorConfig; from seba.executor import RayExecutor; "
            "e = RayExecutor(ExecutorConfig(kind='ray', address=sys.argv[2]), 'cpu'); i = time.perf_counter() - t; "
            "t = time.perf_counter(); list(e.map(len, [([1],)], ['t'])); "
            "print(json.dumps({'init': i, 'first': time.perf_counter() - t}))")
    done = subprocess.run([sys.executable, "-c", code, str(ROOT), address], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def same_weights(a, b) -> bool:
    import torch

    return len(a) == len(b) and all(
        x.train_loss == y.train_loss and x.encoder_state.keys() == y.encoder_state.keys()
        and all(torch.equal(x.encoder_state[k], y.encoder_state[k]) for k in x.encoder_state) for x, y in zip(a, b))


def compare(repeats: int, local, remote, same, names: tuple[str, str] = ("local", "ray")) -> None:
    a, b = names
    times = {a: [], b: []}
    outputs = {}
    for _ in range(repeats):
        for name, fn in ((a, local), (b, remote)):
            start = time.perf_counter()
            outputs[name] = fn()
            times[name].append(time.perf_counter() - start)
    first, second = statistics.median(times[a]), statistics.median(times[b])
    print(f"   {a} {first:.2f} s   {b} {second:.2f} s   {b} / {a} {second / first:.2f}   "
          f"(each: {', '.join(f'{t:.2f}' for t in times[a])} | {', '.join(f'{t:.2f}' for t in times[b])})"
          f"   identical outputs: {same(outputs[a], outputs[b])}")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
