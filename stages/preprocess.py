"""DVC stage `preprocess@<dataset>`: type-aware encoding (one-hot blocks, raw numerics, groups)."""

import argparse

import pandas as pd

from seba.cli import run_stage
from seba.config import load_params
from seba.data import encode_table
from seba.runtime import log, repo_root
from seba.tracking import Tracker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    args = parser.parse_args()
    load_params()  # validate the whole file before any work
    root = repo_root()
    frame = pd.read_parquet(root / "data" / "raw" / f"{args.dataset}.parquet")
    table = encode_table(frame)
    table.save(root / "data" / "processed" / f"{args.dataset}.npz")
    log(f"[preprocess {args.dataset}] {table.X.shape[0]} rows, {len(table.columns)} columns -> "
        f"{table.X.shape[1]} encoded ({int(table.numeric.sum())} numeric), {len(table.classes)} classes")
    with Tracker("preprocess", f"preprocess {args.dataset}", tags={"dataset": args.dataset}, root=root) as tr:
        tr.log_metrics({"rows": table.X.shape[0], "columns": len(table.columns),
                        "encoded_columns": table.X.shape[1], "classes": len(table.classes)})


if __name__ == "__main__":
    run_stage("preprocess", main)
