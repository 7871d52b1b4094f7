"""DVC stage `preprocess@<dataset>`: type-aware encoding (one-hot blocks, raw numerics, groups)
and the table's schema report (what became of every column), next to the encoded table."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's seba before an installed one (docs/ablations.md)

from seba.cli import parse_args, run_stage  # first: hands the stage to a warm worker (seba/worker.py)

import pandas as pd

from seba import paths
from seba.config import known_dataset, load_params
from seba.data import encode_table, log_schema, schema_metrics, schema_report
from seba.errors import DataError
from seba.runtime import repo_root, write_json
from seba.tracking import Tracker


def main() -> None:
    args = parse_args(__doc__, dataset=str)
    known_dataset(load_params(), args.dataset)  # the whole file validated before any work
    root = repo_root()
    raw = paths.raw_table(root, args.dataset)
    if not raw.is_file():
        raise DataError(f"{raw} does not exist: the fetch stage writes it (`dvc repro fetch@{args.dataset}`, "
                        f"with {args.dataset} in params.yaml's `datasets`)")
    frame = pd.read_parquet(raw)
    notes: dict = {}
    table = encode_table(frame, notes)
    table.save(paths.processed(root, args.dataset))
    report = schema_report(args.dataset, frame, table, notes)
    report_path = paths.schema_report(root, args.dataset)
    write_json(report_path, report)
    log_schema(args.dataset, table, report, report_path.relative_to(root))
    with Tracker("preprocess", f"preprocess {args.dataset}", tags={"dataset": args.dataset}, root=root) as tr:
        tr.log_metrics(schema_metrics(table, report))
        tr.log_artifacts(report_path)


if __name__ == "__main__":
    run_stage("preprocess", main)
