"""How far below chance each encoder's best validation objective ended: did pretraining learn?

Usage (repository root): python benchmarks/chance_gap.py [LOG ...]

SeBA's objective is InfoNCE over the rows of a batch: an encoder whose similarities do not depend
on the input scores ln(b) on a batch of b rows, and the validation objective is the row-weighted
mean over the validation batches, so "chance" is sum(b ln b) / sum(b) over the table's validation
batches (params.yaml's split and `pretrain.batch_size` for the table). With cosine similarities at
temperature 1 the objective cannot go much more than 1 below chance, so the gaps are small numbers.

LOG: a committed record (`reports/experiments/*/pretrain_log.json`, made by pretrain_log.py) or a
pretrain stage's own `data/models/<dataset>/r<ratio>/log.json`; default: every stage log of the
current pipeline outputs. Prints, per table and ratio, the encoders' gaps (chance - best
validation objective): fewest, median, most. docs/failures.md uses it to show why the health check
has no "learned nothing" warning on this gap.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import speed  # noqa: E402
from seba.core.config import load_params  # noqa: E402
from seba.training import batch_slices  # noqa: E402


def chance_level(n_val: int, batch_size: int) -> float:
    """The validation objective of input-independent similarities: sum(b ln b) / sum(b) over the
    validation batches, cut as pretraining cuts them."""
    sizes = [len(b) for b in batch_slices(n_val, batch_size, torch.arange(n_val))]
    return sum(b * math.log(b) for b in sizes) / sum(sizes)


def entries(path: Path) -> list[tuple[str, str, float]]:
    """(dataset, ratio, best validation objective) per encoder of a committed record or a stage log."""
    from benchmarks.entry import read_json

    log = read_json(path)
    try:
        if isinstance(log, dict) and "seeds" in log and "dataset" in log:  # a stage's log.json
            out = [(log["dataset"], str(log["ratio"]), float(s["best_val_loss"])) for s in log["seeds"].values()]
        else:
            out = []
            for key, entry in log.items():  # "<dataset> r<ratio> seed <seed>"
                dataset, tag = key.split()[:2]
                out.append((dataset, tag.removeprefix("r=").removeprefix("r"), float(entry["best_val_loss"])))
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise SystemExit(f"error: {path} is neither a pretrain stage's log.json nor a pretrain_log.py record "
                         f"({type(exc).__name__}: {exc})") from None
    if not out:
        raise SystemExit(f"error: {path} holds no encoder")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logs", nargs="*", type=Path)
    args = parser.parse_args()
    params = load_params(ROOT / "params.yaml")
    logs = args.logs or sorted((ROOT / "data" / "models").glob("*/r*/log.json"))
    if not logs:
        raise SystemExit("no logs given and no data/models/*/r*/log.json: run the pipeline or name a record")
    chances: dict[str, float] = {}
    for path in logs:
        gaps: dict[tuple[str, str], list[float]] = {}
        for dataset, ratio, best in entries(path):
            if dataset not in chances:
                if dataset not in params.sources:
                    raise SystemExit(f"{path}: dataset {dataset!r} is not in params.yaml's sources")
                _, split = speed.load_table(dataset, params)  # seed 0's split: every seed's has its size
                chances[dataset] = chance_level(len(split.val), params.pretrain_for(dataset).batch_size)
            gaps.setdefault((dataset, ratio), []).append(chances[dataset] - best)
        print(f"{path}: chance - best validation objective, per encoder")
        for (dataset, ratio), values in sorted(gaps.items()):
            print(f"  {dataset:10s} r={ratio:6s} chance {chances[dataset]:.3f}  {len(values)} encoders: "
                  f"fewest {min(values):.3f}, median {statistics.median(values):.3f}, most {max(values):.3f}")
        every = [g for values in gaps.values() for g in values]
        print(f"  all {len(every)}: fewest {min(every):.3f}, median {statistics.median(every):.3f}, most {max(every):.3f}")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
