"""Where a stacked pretraining stage's time goes, from its encoders' training records: how long
each stack trained, how much of it came after half its seeds had stopped, and how many
model-epochs stopped seeds computed while they waited to leave the stack.

Usage (repository root):
    python benchmarks/stack_tail.py [--datasets cmc diabetes] [--csv OUT.csv]
    python benchmarks/stack_tail.py --from-csv reports/experiments/gpu_h100_stacked/stack_seeds.csv

Reads `data/models/<dataset>/r<ratio>/log.json` (params.yaml's datasets and ratios; or the rows of
an earlier `--csv`): per seed its stop epoch and `seconds` (from the stack's start to the end of
the epoch it stopped in). Per stage it prints the stack's seconds (its last seed's), the seconds
when half its seeds had stopped (the median seed's; the lower of the two middle ones for an even
count: of 100 seeds the 50th), the seconds per epoch before and after that, the last and that
seed's stop epoch, and executed / useful model-epochs: a stopped seed stays in a stack on CUDA graphs
until a quarter of the stack has stopped (`seba.pretrain.GRAPH_COMPACT_SHARE`), else until the
end of its epoch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def records(datasets: list[str] | None) -> pd.DataFrame:
    from seba.core import paths
    from seba.core.config import load_params

    params = load_params(ROOT / "params.yaml")
    rows = []
    for dataset in datasets or params.datasets:
        for ratio in params.ratios:
            log = json.loads(paths.training_log(ROOT, dataset, ratio).read_text())
            for seed, r in log["seeds"].items():
                rows.append({"dataset": dataset, "ratio": ratio, "seed": int(seed), "stop_epoch": r["stop_epoch"],
                             "seconds": r["seconds"], "stack_size": r.get("stack_size", 1),
                             "cuda_graphs": bool(r.get("cuda_graphs", False))})
    return pd.DataFrame(rows)


def executed_epochs(stops: list[int], share: float) -> int:
    """Model-epochs a stack computes: every seed in it each epoch; after an epoch, the stopped seeds
    leave once they are at least ``share`` of the stack (share 0: at once)."""
    stack, epoch, executed = sorted(stops), 0, 0
    while stack:
        epoch += 1
        executed += len(stack)
        stopped = sum(s <= epoch for s in stack)
        if stopped == len(stack):
            break
        if stopped and stopped >= share * len(stack):
            stack = [s for s in stack if s > epoch]
    return executed


def main() -> None:
    from seba.pretrain import GRAPH_COMPACT_SHARE

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="*")
    parser.add_argument("--csv", type=Path)
    parser.add_argument("--from-csv", type=Path)
    args = parser.parse_args()
    from entry import read_csv

    frame = (read_csv(args.from_csv, ("dataset", "ratio", "seed", "stop_epoch", "seconds", "cuda_graphs"),
                      "table of stack_tail.py --csv") if args.from_csv else records(args.datasets))
    if args.csv:
        frame.to_csv(args.csv, index=False)
    for dataset, per_dataset in frame.groupby("dataset", sort=False):
        totals = {"stack": 0.0, "half": 0.0, "executed": 0, "useful": 0}
        for ratio, stage in per_dataset.groupby("ratio"):
            stage = stage.sort_values("stop_epoch")
            # the seed whose stop leaves half the stack stopped (of 100 seeds the 50th)
            last, median = stage.iloc[-1], stage.iloc[(len(stage) - 1) // 2]
            stack_s, half_s = stage["seconds"].max(), median["seconds"]
            share = GRAPH_COMPACT_SHARE if stage["cuda_graphs"].all() else 0.0
            executed = executed_epochs(stage["stop_epoch"].tolist(), share)
            useful = int(stage["stop_epoch"].sum())
            after = (stack_s - half_s) / max(last["stop_epoch"] - median["stop_epoch"], 1)
            print(f"{dataset} r={ratio}: {len(stage)} seeds, stack {stack_s:.1f} s, median seed stopped at "
                  f"{half_s:.1f} s (epoch {median['stop_epoch']}, the last at {last['stop_epoch']}); "
                  f"{1e3 * half_s / median['stop_epoch']:.1f} ms per epoch before, {1e3 * after:.1f} after; "
                  f"executed / useful model-epochs {executed / useful:.2f}")
            totals["stack"] += stack_s
            totals["half"] += half_s
            totals["executed"] += executed
            totals["useful"] += useful
        print(f"{dataset}: stacks {totals['stack']:.1f} s, {100 * (1 - totals['half'] / totals['stack']):.0f} % of it "
              f"after the median seed stopped; executed / useful model-epochs "
              f"{totals['executed'] / totals['useful']:.2f}")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
