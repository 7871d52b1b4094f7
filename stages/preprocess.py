"""DVC stage `preprocess@<dataset>`: type-aware encoding (one-hot blocks, raw numerics, groups)
and the table's schema report (what became of every column), next to the encoded table."""

import argparse

import pandas as pd

from seba.cli import run_stage
from seba.config import load_params
from seba.data import encode_table, schema_report
from seba.runtime import log, repo_root, write_json
from seba.tracking import Tracker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    args = parser.parse_args()
    load_params()  # validate the whole file before any work
    root = repo_root()
    frame = pd.read_parquet(root / "data" / "raw" / f"{args.dataset}.parquet")
    notes: dict = {}
    table = encode_table(frame, notes)
    out = root / "data" / "processed"
    table.save(out / f"{args.dataset}.npz")
    report = schema_report(args.dataset, frame, table, notes)
    report_path = out / f"{args.dataset}.schema.json"
    write_json(report_path, report)
    log(f"[preprocess {args.dataset}] {table.X.shape[0]} rows, {len(table.columns)} columns -> "
        f"{table.X.shape[1]} encoded ({int(table.numeric.sum())} numeric), {len(table.classes)} classes")
    log(f"[preprocess {args.dataset}] {report['summary_line']} ({report_path.relative_to(root)})")
    for warning in report["warnings"]:
        log(f"[preprocess {args.dataset}] WARNING {warning}")
    with Tracker("preprocess", f"preprocess {args.dataset}", tags={"dataset": args.dataset}, root=root) as tr:
        tr.log_metrics({"rows": table.X.shape[0], "columns": len(table.columns),
                        "encoded_columns": table.X.shape[1], "classes": len(table.classes),
                        **{f"schema_{k}": v for k, v in report["summary"].items()
                           if k not in ("rows", "classes")}})
        tr.log_artifacts(report_path)


if __name__ == "__main__":
    run_stage("preprocess", main)
