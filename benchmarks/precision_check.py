"""Whether a faster precision may become the CUDA default: its ensemble accuracy against fp32's on
the same seeds and episodes, per table and shot, from the two runs' stage logs.

Usage (repository root):
    python benchmarks/precision_check.py FP32_LOG TF32_LOG [--tolerance 0.3] [--csv OUT.csv]
                                         [--expect DATASET ...]

Each LOG is `dvc repro`'s output or `benchmarks/gpu_protocol.py`'s log (gzipped or not) of one run
(`benchmarks/gpu_precision.sh` makes both). From SeBA's per-seed lines (`[evaluate <dataset> seed
<s>] ...`, see benchmarks/protocol_cells.py) it prints, per table and shot, the mean over the
seeds both runs have in each precision, the difference (other − fp32) and its standard error from
the paired seed differences; then the verdict: the other precision passes when every table's
difference is within `--tolerance` points (the project's rule for making it the CUDA default).
With `--expect`, the tables the rule needs (`benchmarks/gpu_precision.sh`: params.yaml's
datasets): one that the two runs do not both have (a run cut by its time limit) makes the verdict
INCOMPLETE, whatever the others show. Exits 1 when it does not pass, 2 when the runs share no
table, 3 when it is incomplete.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare_results import paired  # noqa: E402
from protocol_cells import seed_means  # noqa: E402


def compare(fp32: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and shot: seeds, both means, the difference and its paired standard error
    (compare_results.paired, the one definition of it)."""
    def side(table: pd.DataFrame, name: str) -> pd.DataFrame:
        seba = table[table["method"] == "seba"][["dataset", "shot", "seed", "accuracy"]]
        return seba.rename(columns={"accuracy": name}).assign(paper=float("nan"))

    table = paired(side(fp32, "fp32"), side(other, "other"), "fp32", "other")
    return table.drop(columns="paper")  # unrounded: the tolerance applies to the exact difference


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fp32_log", type=Path)
    parser.add_argument("other_log", type=Path)
    parser.add_argument("--tolerance", type=float, default=0.3)
    parser.add_argument("--csv", type=Path)
    parser.add_argument("--expect", nargs="+", default=[], metavar="DATASET",
                        help="tables that must all be compared for a PASS")
    args = parser.parse_args()
    table = compare(seed_means([args.fp32_log]), seed_means([args.other_log]))
    if table.empty:
        print("the two runs share no table and seed")
        return 2
    shown = table.round(2)
    print(shown.to_string(index=False))
    if args.csv:
        shown.to_csv(args.csv, index=False)
    worst = table.loc[table["diff"].abs().idxmax()]
    passed = bool((table["diff"].abs() <= args.tolerance + 1e-9).all())  # 1e-9: the logs' two decimals in floats
    missing = [name for name in args.expect if name not in set(table["dataset"])]
    verdict = "FAIL" if not passed else "INCOMPLETE" if missing else "PASS"
    print(f"{verdict}: largest difference {worst['diff']:+.2f} ({worst['dataset']}, "
          f"{worst['shot']}-shot) against the tolerance {args.tolerance}; {table['seeds'].min()} to "
          f"{table['seeds'].max()} seeds per cell, {table['dataset'].nunique()} tables"
          + (f"; not compared: {', '.join(missing)} (no verdict for the default)" if missing else ""))
    return 1 if not passed else 3 if missing else 0


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
