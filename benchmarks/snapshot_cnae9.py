"""Build `data/snapshot/cnae9.parquet` (OpenML 1468, cnae-9) from UCI's `CNAE-9.data`.

    python benchmarks/snapshot_cnae9.py CNAE-9.data [--out data/snapshot/cnae9.parquet]

UCI's file (https://archive.ics.uci.edu/dataset/233/cnae+9) has one document per line: the class
(1..9) first, then 856 word counts. The parquet has the snapshot's format (data/snapshot/MANIFEST.md):
features V1..V856 as float64 (OpenML's names), the label `class` as a category 1..9, rows in the
file's order. Before writing, the file is checked against what UCI and OpenML state about the
table: 1080 rows, 857 columns, 9 classes of 120 rows, no missing cell, non-negative integer
counts, 99.22 % of the feature cells zero. Prints the sha256 to put in `manifest.json`.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from seba.core.data import sha256_file  # noqa: E402

ROWS, FEATURES, CLASSES, PER_CLASS = 1080, 856, 9, 120
ZERO_SHARE = 0.9922  # UCI: "99.22% of the matrix is filled with zeros"


def build(source: Path) -> pd.DataFrame:
    raw = pd.read_csv(source, header=None)
    if raw.shape != (ROWS, FEATURES + 1):
        raise SystemExit(f"{source}: {raw.shape[0]} rows × {raw.shape[1]} columns, expected {ROWS} × {FEATURES + 1}")
    if raw.isna().any().any():
        raise SystemExit(f"{source}: missing cells; UCI's CNAE-9 has none")
    labels, values = raw.iloc[:, 0], raw.iloc[:, 1:].to_numpy()
    counts = labels.value_counts().sort_index()
    if counts.index.tolist() != list(range(1, CLASSES + 1)) or set(counts) != {PER_CLASS}:
        raise SystemExit(f"{source}: class counts {counts.to_dict()}, expected {PER_CLASS} of each of 1..{CLASSES}")
    if values.min() < 0 or not np.array_equal(values, np.round(values)):
        raise SystemExit(f"{source}: features are not non-negative integer word counts")
    zero_share = float((values == 0).mean())
    if round(zero_share, 4) != ZERO_SHARE:
        raise SystemExit(f"{source}: {zero_share:.4%} of the feature cells are zero, UCI states {ZERO_SHARE:.2%}")
    frame = pd.DataFrame(values.astype("float64"), columns=[f"V{i}" for i in range(1, FEATURES + 1)])
    frame["class"] = pd.Categorical(labels.astype(str), categories=[str(c) for c in range(1, CLASSES + 1)])
    return frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="UCI's CNAE-9.data")
    parser.add_argument("--out", type=Path, default=Path("data/snapshot/cnae9.parquet"))
    args = parser.parse_args()
    frame = build(args.source)
    frame.to_parquet(args.out, index=False)
    zeros = float((frame.drop(columns="class").to_numpy() == 0).mean())
    print(f"{args.out}: {len(frame)} rows, {frame.shape[1] - 1} features, {frame['class'].nunique()} classes, "
          f"{zeros:.2%} zero cells")
    print(f"source sha256 {sha256_file(args.source)}")
    print(f"sha256 {sha256_file(args.out)}")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
