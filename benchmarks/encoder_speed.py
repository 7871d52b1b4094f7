"""The encoder ablation's cost: one SeBA training step with the MLP encoder against the
FT-Transformer (``pretrain.encoder: ft_transformer``, the params' ft_* settings), per table, and
what a seed's pretraining would cost with each (not part of the test suite).

Usage (repository root): python benchmarks/encoder_speed.py [--tables cmc,dna] [--batch 1024]
                        [--repeats 5] [--memory-gib G] [--memory-rows 128] [--threads N]
                        [--device cpu]

Per table (the vendored snapshot, seed 0's split, r = 0.3, the table's own pretrain values with
the encoder switched):
1. ms per training step (feature view, encoder, conditioned projector, InfoNCE, backward, Adam) on
   a ``--batch``-row batch, median of ``--repeats`` after one warm-up step; the two encoders'
   calls are timed in turn, round after round, so that both see the same machine; an FT step
   whose estimated memory (seba.pretrain.member_bytes) exceeds ``--memory-gib`` (default: half
   the free memory) is timed on the largest power-of-two batch that fits and scaled by rows (its
   cost is about linear in the rows; the line says so);
2. seconds per epoch: the steps of one epoch (every batch size of the table's split) plus the
   validation pass (eval mode, validation_draws views per batch), each timed the same way;
3. the estimated pretraining cost of one seed and ratio: epochs x seconds per epoch, for (a) the
   mean stop epoch of the table's MLP encoders in the committed three-seed run
   (reports/experiments/default_3seeds/pretrain_log.json: the FT-Transformer's own stop epochs are
   not measured) and (b) the step cap (pretrain.max_steps), the most any encoder trains;
4. the FT-Transformer's memory: the floats per row that autograd keeps for the backward pass
   (counted with saved-tensor hooks on an 8-row forward of the encoder), and one training step on
   ``--memory-rows`` rows in a fresh process: its peak resident memory, page faults and user /
   system CPU seconds, against ``member_bytes`` for that batch.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import speed  # noqa: E402
from seba.core.config import load_params  # noqa: E402
from seba.core.data import scale  # noqa: E402
from seba.model import StackedProjector  # noqa: E402
from seba.objective import expand_mask, masked_group_count, sample_group_mask  # noqa: E402
from seba.pretrain import build_models, member_bytes, stack_encoders, stacked_seba_loss  # noqa: E402
from seba.core.runtime import available_bytes, resolve_precision  # noqa: E402
from seba.training import FusedAdam, batch_slices  # noqa: E402

ENCODERS = ("mlp", "ft_transformer")
RATIO = 0.3


class Bench:
    """One table's rows, masks and models for one encoder; ``step(rows)`` and ``validation(rows)``
    are timed closures on the first ``rows`` training / validation rows."""

    def __init__(self, table, split, cfg):
        self.cfg = cfg
        X = scale(table, split.train)
        self.train = torch.as_tensor(X[split.train], dtype=torch.float32, device=speed.DEVICE).unsqueeze(0)
        self.val = torch.as_tensor(X[split.val], dtype=torch.float32, device=speed.DEVICE).unsqueeze(0)
        groups = torch.as_tensor(table.groups, dtype=torch.long)
        n_groups = int(table.groups.max()) + 1
        gen = torch.Generator().manual_seed(0)
        k = masked_group_count(n_groups, RATIO, cfg.min_masked_columns)
        self.masks = [expand_mask(sample_group_mask(n_groups, k, gen), groups).unsqueeze(0).to(speed.DEVICE)
                      for _ in range(16)]
        self.draw = 0
        encoder, projector = build_models(X.shape[1], cfg, 0)
        self.encoder = stack_encoders([encoder]).to(speed.DEVICE)
        self.projector = StackedProjector([projector]).to(speed.DEVICE)
        self.optimiser = FusedAdam(list(self.encoder.parameters()) + list(self.projector.parameters()), cfg.lr)

    def mask(self) -> torch.Tensor:
        self.draw += 1
        return self.masks[self.draw % len(self.masks)]

    def step(self, rows: int):
        xb = self.train[:, :rows]

        def run():
            self.encoder.train()
            self.projector.train()
            losses = stacked_seba_loss(self.encoder, self.projector, xb, self.mask(), self.cfg)
            self.optimiser.zero_grad(set_to_none=True)
            losses.sum().backward()
            self.optimiser.step()
        return run

    def validation(self, rows: int):
        xb = self.val[:, :rows]

        @torch.no_grad()
        def run():
            self.encoder.eval()
            self.projector.eval()
            for _ in range(self.cfg.validation_draws):
                stacked_seba_loss(self.encoder, self.projector, xb, self.mask(), self.cfg)
        return run


def fitting_rows(rows: int, n_rows: int, n_val: int, d: int, cfg, budget: float) -> int:
    """``rows``, or the largest power of two below it whose estimated memory fits ``budget``."""
    fits = rows
    while fits > 2 and member_bytes(n_rows, n_val, d, dataclasses.replace(cfg, batch_size=fits)) > budget:
        fits = 2 ** (math.ceil(math.log2(fits)) - 1)
    return fits


def interleaved(calls: dict, repeats: int) -> dict:
    """Median seconds of every call of ``calls`` (name -> function): one warm-up call each, then
    ``repeats`` rounds that time each call once, in turn."""
    for fn in calls.values():
        fn()
    times = {name: [] for name in calls}
    for _ in range(repeats):
        for name, fn in calls.items():
            speed.sync()
            start = time.perf_counter()
            fn()
            speed.sync()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def saved_floats_per_row(cfg, n_features: int, rows: int = 8) -> float:
    """Floats per row of the tensors autograd keeps from a training-mode forward of the encoder
    (each storage counted once, the weights left out)."""
    encoder, _ = build_models(n_features, cfg, 0)
    weights = {p.untyped_storage().data_ptr() for p in encoder.parameters()}
    kept = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        kept[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        encoder.train()(torch.randn(rows, n_features))
    return sum(n for ptr, n in kept.items() if ptr not in weights) / 4 / rows


def _status_bytes(field: str) -> int:
    """A size from /proc/self/status (VmHWM: this process image's peak resident memory; unlike
    getrusage's maxrss it does not carry the parent's over from before the exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def _step_in_fresh_process(name: str, kind: str, rows: int, threads: int) -> tuple:
    """One training step of ``kind`` on ``rows`` rows of ``name`` (run in a spawned process):
    (peak resident bytes, resident bytes before the step, minor page faults, user s, system s)."""
    import resource

    if threads:
        torch.set_num_threads(threads)
    params = load_params(ROOT / "params.yaml")
    table, split = speed.load_table(name, params)
    cfg = dataclasses.replace(params.pretrain_for(name), encoder=kind)
    bench = Bench(table, split, dataclasses.replace(cfg, precision=resolve_precision(cfg.precision, speed.DEVICE)))
    step = bench.step(rows)
    resident = _status_bytes("VmRSS")
    before = resource.getrusage(resource.RUSAGE_SELF)
    step()
    after = resource.getrusage(resource.RUSAGE_SELF)
    return (_status_bytes("VmHWM"), resident, after.ru_minflt - before.ru_minflt, after.ru_utime - before.ru_utime,
            after.ru_stime - before.ru_stime)


def memory_benchmark(name: str, params, rows: int, batch: int, threads: int) -> None:
    from concurrent.futures import ProcessPoolExecutor
    import multiprocessing

    table, split = speed.load_table(name, params)
    n_rows, n_val, d = len(split.train), len(split.val), table.X.shape[1]
    cfg = dataclasses.replace(params.pretrain_for(name), encoder="ft_transformer")
    per_row = saved_floats_per_row(cfg, d)
    print(f"  FT-Transformer memory: autograd keeps {per_row / 1e6:.2f} M floats per row "
          f"({per_row * 4 * batch / 2**30:.2f} GiB at batch {batch})")
    rows = min(rows, n_rows)
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        peak, base, faults, user, system = pool.submit(_step_in_fresh_process, name, "ft_transformer", rows, threads).result()
    estimate = member_bytes(n_rows, n_val, d, dataclasses.replace(cfg, batch_size=rows))
    print(f"  one {rows}-row FT step in a fresh process: peak resident {peak / 2**30:.2f} GiB, "
          f"{base / 2**30:.2f} GiB resident before the step (member_bytes {estimate / 2**30:.2f} GiB), {faults / 1e6:.2f} M page faults, {user:.1f} s user + {system:.1f} s system")


def mlp_stop_epochs(name: str) -> float | None:
    path = ROOT / "reports" / "experiments" / "default_3seeds" / "pretrain_log.json"
    if not path.exists():
        return None
    log = json.loads(path.read_text())
    epochs = [entry["stop_epoch"] for key, entry in log.items() if key.startswith(f"{name} r=")]
    return float(np.mean(epochs)) if epochs else None


def table_benchmark(name: str, params, batch: int, repeats: int, budget: float) -> None:
    table, split = speed.load_table(name, params)
    n_rows, n_val, d = len(split.train), len(split.val), table.X.shape[1]
    cfgs = {kind: dataclasses.replace(params.pretrain_for(name), encoder=kind, progress_seconds=1e9)
            for kind in ENCODERS}
    cfgs = {kind: dataclasses.replace(cfg, precision=resolve_precision(cfg.precision, speed.DEVICE))
            for kind, cfg in cfgs.items()}
    benches = {kind: Bench(table, split, cfg) for kind, cfg in cfgs.items()}
    rows = min(batch, n_rows)
    sizes = [len(b) for b in batch_slices(n_rows, cfgs["mlp"].batch_size, torch.arange(n_rows))]
    val_sizes = [len(b) for b in batch_slices(n_val, cfgs["mlp"].batch_size, torch.arange(n_val))]
    print(f"{name}: {n_rows} train / {n_val} val rows, {d} columns ({d + 1} FT tokens), precision "
          f"{cfgs['mlp'].precision}; epoch batches {sizes}, validation batches {val_sizes} x "
          f"{cfgs['mlp'].validation_draws} draws")
    # every (encoder, call, rows) to time: a call on more rows than fit is timed on fewer, scaled
    fits = {kind: fitting_rows(max([rows] + sizes + val_sizes), n_rows, n_val, d, cfgs[kind], budget)
            for kind in ENCODERS}
    wanted = {(kind, call, n) for kind in ENCODERS
              for call, ns in (("step", [rows] + sizes), ("validation", val_sizes)) for n in ns}
    used = {key: min(key[2], fits[key[0]]) for key in wanted}
    medians = interleaved({(kind, call, n): getattr(benches[kind], call)(n)
                           for kind, call, n in sorted(set((k, c, u) for (k, c, _), u in used.items()))}, repeats)

    def seconds(kind: str, call: str, n: int) -> float:
        u = used[kind, call, n]
        return medians[kind, call, u] * n / u

    step = {kind: seconds(kind, "step", rows) for kind in ENCODERS}
    epoch = {kind: sum(seconds(kind, "step", n) for n in sizes) + sum(seconds(kind, "validation", n) for n in val_sizes)
             for kind in ENCODERS}
    for kind in ENCODERS:
        u = used[kind, "step", rows]
        note = f" (timed on {u} rows, scaled x{rows / u:g})" if u < rows else ""
        estimate = member_bytes(n_rows, n_val, d, dataclasses.replace(cfgs[kind], batch_size=rows)) / 2**30
        print(f"  {kind:14s}: {step[kind] * 1e3:9.1f} ms per {rows}-row step{note}; "
              f"{epoch[kind]:8.2f} s per epoch; member_bytes at batch {rows}: {estimate:6.2f} GiB")
    print(f"  FT-Transformer / MLP: {step['ft_transformer'] / step['mlp']:.1f}x per step, "
          f"{epoch['ft_transformer'] / epoch['mlp']:.1f}x per epoch")
    cap = cfgs["mlp"].max_steps
    plans = []
    stop = mlp_stop_epochs(name)
    if stop is not None:
        plans.append((f"the MLP's mean stop epoch {stop:.0f}", stop))
    if cap:
        plans.append((f"the step cap, {cap} steps = {math.ceil(cap / len(sizes))} epochs", math.ceil(cap / len(sizes))))
    for label, epochs in plans:
        mlp, ft = epochs * epoch["mlp"], epochs * epoch["ft_transformer"]
        print(f"  one seed and ratio at {label}: MLP {mlp / 60:.1f} min, FT-Transformer {ft / 3600:.2f} h "
              f"({ft / mlp:.1f}x)")


def main() -> None:
    from entry import positive

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", default="cmc,dna")
    parser.add_argument("--batch", type=positive, default=1024)
    parser.add_argument("--repeats", type=positive, default=5)
    parser.add_argument("--memory-gib", type=float, default=0.0,
                        help="memory a timed step may take by member_bytes' estimate (0: half the free memory)")
    parser.add_argument("--memory-rows", type=positive, default=128, help="rows of the FT step whose memory is measured")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    speed.DEVICE = torch.device(args.device)
    params = load_params(ROOT / "params.yaml")
    budget = args.memory_gib * 2**30 if args.memory_gib > 0 else 0.5 * available_bytes(speed.DEVICE)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; {torch.get_num_threads()} torch "
          f"threads, torch {torch.__version__}, on {speed.DEVICE}; memory budget {budget / 2**30:.1f} GiB; r = {RATIO}")
    for name in args.tables.split(","):
        # the machine's state around each table (the figures of a busy machine are slower)
        print(f"fp32 matmul peak (2048^2): {speed.matmul_peak(torch.float32, 2048):.1f} GFLOP/s")
        table_benchmark(name.strip(), params, args.batch, args.repeats, budget)
        if speed.DEVICE.type == "cpu":
            memory_benchmark(name.strip(), params, args.memory_rows, args.batch, args.threads)
    print(f"fp32 matmul peak (2048^2): {speed.matmul_peak(torch.float32, 2048):.1f} GFLOP/s; "
          f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
