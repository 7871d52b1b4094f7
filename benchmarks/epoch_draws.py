"""The host's share of a stacked pretraining epoch: how long the CPU takes to draw one epoch's
shuffles, masks and permutations for a stack of seeds (each seed from its own generator, as
`seba.pretrain` draws them), per table at its real shape.

On a GPU these draws are the work the device would wait for if the host drew an epoch only after
reading the last one's losses; the stacked loop draws them while the device computes the epoch
before (`seba.pretrain._train_stack`). This script measures the draws alone, on the machine it
runs on, and scales them by the epochs a table's seeds train (the mean stop epochs of the five
ratios in a pretrain log; default: the committed three-seed run's) to the seconds of draws that
100 seeds of the table make in all.

Usage (repository root):
    python benchmarks/epoch_draws.py [--datasets cmc income] [--seeds 100] [--repeats 5]
                                     [--log reports/experiments/default_3seeds/pretrain_log.json]

Prints per table: training rows, batches per epoch, ms to draw one epoch of the stack (median of
``--repeats``), the mean epochs per seed over the ratios, and the seconds of draws for
``--seeds`` seeds' five encoders.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_LOG = ROOT / "reports" / "experiments" / "default_3seeds" / "pretrain_log.json"


def mean_epochs(log: dict, dataset: str, ratios: list) -> float:
    """A seed's epochs summed over the ratios, averaged over the log's seeds."""
    total = 0.0
    for ratio in ratios:
        stops = [r["stop_epoch"] for key, r in log.items() if key.startswith(f"{dataset} r={ratio} ")]
        if not stops:
            raise SystemExit(f"error: the log has no entry for {dataset} r={ratio}")
        total += statistics.mean(stops)
    return total


def processor() -> str:
    """The CPU's model name (Linux), else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    from entry import check_openml_datasets, positive

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=None, help="default: params.yaml's datasets")
    parser.add_argument("--seeds", type=positive, default=100, help="seeds in the stack")
    parser.add_argument("--repeats", type=positive, default=5)
    parser.add_argument("--log", type=Path, default=DEFAULT_LOG, help="a pretrain log (benchmarks/pretrain_log.py)")
    args = parser.parse_args()

    import torch

    import benchmarks.speed as speed
    from seba.core.config import load_params
    from seba.core.paths import RANDOM_RATIO
    from seba.objective import masked_group_count
    from seba.pretrain import SeedData, _Member
    from seba.training import batch_slices

    torch.set_num_threads(1)
    params = load_params(ROOT / "params.yaml")
    log = json.loads(args.log.read_text())
    check_openml_datasets(args.datasets or [], params)
    print(f"host draws of one epoch for a stack of {args.seeds} seeds, one thread ({processor()}, torch {torch.__version__}); "
          f"epochs from {args.log.relative_to(ROOT) if args.log.is_relative_to(ROOT) else args.log}")
    print(f"{'table':10s} {'rows':>6s} {'batches':>7s} {'ms per epoch':>12s} {'epochs per seed':>15s} "
          f"{'s of draws, all seeds':>21s}")
    for dataset in args.datasets or params.datasets:
        table, split = speed.load_table(dataset, params)
        cfg = params.pretrain_for(dataset)
        n_train, n_val = len(split.train), len(split.val)
        groups = torch.as_tensor(table.groups, dtype=torch.long)
        n_groups = int(table.groups.max()) + 1
        ratio = next(r for r in params.ratios if r != RANDOM_RATIO)
        k = masked_group_count(n_groups, ratio, cfg.min_masked_columns)
        val_batches = batch_slices(n_val, cfg.batch_size, torch.arange(n_val))
        empty = SeedData(None, None, seed=0)
        stack = [_Member(dataclasses.replace(empty, seed=s), ratio, cfg, k, n_groups, groups, val_batches)
                 for s in range(args.seeds)]
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            drawn = [s.draw_epoch(n_train, cfg.batch_size) for s in stack]
            torch.stack([order for order, _, _ in drawn])
            torch.stack([torch.stack(m) for _, m, _ in drawn], dim=1)
            times.append(time.perf_counter() - start)
        per_epoch = statistics.median(times)
        epochs = mean_epochs(log, dataset, params.ratios)
        print(f"{dataset:10s} {n_train:6d} {len(drawn[0][1]):7d} {per_epoch * 1e3:12.1f} {epochs:15.0f} "
              f"{per_epoch * epochs:21.1f}")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
