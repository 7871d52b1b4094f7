"""Where two precisions' runs part, per table: the encoders' stop epochs and best validation losses
and the episodes' accuracies of the same seeds, from what benchmarks/gpu_protocol.py packs.

Usage (repository root):
    python benchmarks/precision_seeds.py FP32_RUN OTHER_RUN [--csv OUT.csv]

Each RUN is a folder of `tables_<k>.tgz` (gpu_protocol.py's `--out`; benchmarks/gpu_precision.sh
keeps them in runs.tgz as <precision>/tables_<k>.tgz: unpack it and name <precision>). Per table it
prints: seeds × ratios compared, how many encoders stopped at the same epoch in both runs, the
median stop epoch of each, the median relative difference of the best validation loss (other/fp32
− 1), and the mean accuracy difference (other − fp32) of the single-ratio members and of the
ensemble over the same episodes (the episodes' supports must be the same in both runs, else the
script stops). benchmarks/precision_check.py gives the verdict; this says whether a difference
comes with different training (stop epochs, losses) or from the same stops.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tarfile
from pathlib import Path

import pandas as pd


def read_run(path: Path) -> tuple[dict[str, pd.DataFrame], dict[tuple[str, str], dict]]:
    """The episodes by table and the encoders' per-seed log entries by (table, ratio folder)."""
    archives = [tarfile.open(p) for p in sorted(path.glob("tables_*.tgz"))]
    if not archives:
        raise SystemExit(f"{path}: no tables_<k>.tgz")
    episodes: dict[str, pd.DataFrame] = {}
    logs: dict[tuple[str, str], dict] = {}
    for archive in archives:
        for member in archive.getmembers():
            parts = Path(member.name).parts
            if parts[:2] == ("reports", "episodes") and member.name.endswith(".csv"):
                episodes[Path(member.name).stem] = pd.read_csv(archive.extractfile(member))
            elif parts[:2] == ("data", "models") and parts[-1] == "log.json":
                logs[(parts[2], parts[3])] = json.load(archive.extractfile(member))["seeds"]
    return episodes, logs


def compare(fp32: tuple, other: tuple) -> pd.DataFrame:
    rows = []
    for table, a in fp32[0].items():
        if table not in other[0]:
            continue
        both = a.merge(other[0][table], on=["seed", "shot", "episode", "member"], suffixes=("_fp32", "_other"))
        if not (both["support_hash_fp32"] == both["support_hash_other"]).all():
            raise SystemExit(f"{table}: the two runs drew different episodes")
        gain = both["accuracy_other"] - both["accuracy_fp32"]
        ensemble = both["member"] == "ensemble"
        stops, same, losses = [], 0, []
        for (name, ratio), seeds in fp32[1].items():
            if name != table or (name, ratio) not in other[1]:
                continue
            for seed, entry in seeds.items():
                theirs = other[1][(name, ratio)].get(seed)
                if theirs is None:
                    continue
                stops.append((entry["stop_epoch"], theirs["stop_epoch"]))
                same += entry["stop_epoch"] == theirs["stop_epoch"]
                losses.append(theirs["best_val_loss"] / entry["best_val_loss"] - 1)
        rows.append({"dataset": table, "encoders": len(stops), "same_stop": same,
                     "median_stop_fp32": statistics.median(s[0] for s in stops) if stops else float("nan"),
                     "median_stop_other": statistics.median(s[1] for s in stops) if stops else float("nan"),
                     "median_val_loss_rel": round(statistics.median(losses), 5) if losses else float("nan"),
                     "member_diff": round(gain[~ensemble].mean(), 2), "ensemble_diff": round(gain[ensemble].mean(), 2)})
    if not rows:
        raise SystemExit("the two runs share no table")
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fp32_run", type=Path)
    parser.add_argument("other_run", type=Path)
    parser.add_argument("--csv", type=Path)
    args = parser.parse_args()
    table = compare(read_run(args.fp32_run), read_run(args.other_run))
    print(table.to_string(index=False))
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
