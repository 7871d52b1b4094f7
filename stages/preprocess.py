"""DVC stage `preprocess@<dataset>`: type-aware encoding (one-hot blocks, raw numerics, groups)
and the table's schema report (what became of every column), next to the encoded table."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's seba before an installed one (docs/ablations.md)

from seba.core.cli import parse_args, run_stage  # first: hands the stage to a warm worker (seba/core/worker.py)


from seba.core import paths
from seba.core.config import params_for_dataset
from seba.core.data import encode_table, log_schema, read_raw_table, schema_metrics, schema_report
from seba.core.runtime import repo_root, write_json
from seba.core.tracking import Tracker


def main() -> None:
    args = parse_args(__doc__, dataset=str)
    params_for_dataset(args.dataset)  # the whole file validated before any work
    root = repo_root()
    frame = read_raw_table(root, args.dataset)
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
