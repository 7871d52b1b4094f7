"""Wall time of each DVC stage instance of the last pipeline run, read from MLflow or from the
stages' records.

Usage (repository root):
    python benchmarks/stage_times.py [--markdown] [--csv PATH] [--before EPOCH]
    python benchmarks/stage_times.py --records [DIR] ...   # no MLflow: the records in data/tracking/

Each stage instance logs one MLflow run; its start and end times give the stage's own time
(without DVC's and Python's start-up, a few seconds per stage; fetch, preprocess and split open
their run after their work, so theirs read near zero: they take about a second each). For each
stage instance the latest finished run is taken (with --before, the latest that ended before that
Unix time: the runs of one `dvc repro` when later runs followed it).

--records reads the same runs from the records the stages write before the `track` stage pushes
them into MLflow (seba/core/tracking.py): on a machine without MLflow they stay in data/tracking/.
--csv writes one row per stage instance: stage, method, dataset, ratio, seconds.
"""

import argparse
import csv
import json
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

ORDER = ["fetch", "preprocess", "split", "pretrain", "evaluate", "aggregate"]


class Run(NamedTuple):
    name: str
    tags: dict
    start: int  # ms since the epoch
    end: int


def from_mlflow() -> list[Run]:
    from mlflow.tracking import MlflowClient

    from seba.core.tracking import EXPERIMENT, tracking_uri

    client = MlflowClient(tracking_uri=tracking_uri())
    experiment = client.get_experiment_by_name(EXPERIMENT)
    if experiment is None:
        raise SystemExit("no MLflow experiment 'seba' yet: run dvc repro first (or --records)")
    return [Run(r.info.run_name, r.data.tags, r.info.start_time, r.info.end_time)
            for r in client.search_runs([experiment.experiment_id], filter_string="attributes.status = 'FINISHED'",
                                        max_results=50000)
            if "mlflow.parentRunId" not in r.data.tags and r.info.end_time is not None]


def from_records(folder: Path) -> list[Run]:
    files = sorted(folder.glob("*.json"))
    if not files:
        raise SystemExit(f"no stage records in {folder}: the track stage has pushed them into MLflow "
                         f"(leave out --records), or no stage has run")
    runs = []
    for path in files:
        for r in json.loads(path.read_text())["runs"]:
            if r["parent"] is None and r["status"] == "FINISHED" and r["end"] is not None:
                runs.append(Run(r["name"], r["tags"], r["start"], r["end"]))
    return runs


def latest(runs: list[Run], before_ms: float) -> dict[str, Run]:
    """The latest run of each stage instance (run name) that ended before ``before_ms``."""
    out: dict[str, Run] = {}
    for run in runs:
        if run.end <= before_ms and (run.name not in out or run.start > out[run.name].start):
            out[run.name] = run
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--records", nargs="?", const="data/tracking", metavar="DIR",
                        help="read the stages' records (default folder: data/tracking) instead of MLflow")
    parser.add_argument("--before", type=float, metavar="EPOCH", help="only runs that ended before this Unix time")
    parser.add_argument("--csv", metavar="PATH", help="also write one row per stage instance")
    args = parser.parse_args()
    runs = from_records(Path(args.records)) if args.records else from_mlflow()
    chosen = latest(runs, args.before * 1000 if args.before is not None else float("inf"))
    if not chosen:
        raise SystemExit("no finished stage runs" + (f" before {args.before}" if args.before is not None else ""))

    by_stage = defaultdict(list)
    for name, run in chosen.items():
        by_stage[run.tags.get("stage", "?")].append((name, (run.end - run.start) / 1000, run.tags))
    stages = sorted(by_stage, key=lambda s: (ORDER.index(s) if s in ORDER else 99, s))

    def line(label: str, seconds: float, summary: bool = False) -> str:
        if args.markdown:
            return f"| **{label}** | **{seconds:.1f}** |" if summary else f"| {label} | {seconds:.1f} |"
        return f"{('== ' if summary else '') + label:40s} {seconds:9.1f} s"

    if args.markdown:
        print("| stage instance | seconds |\n|---|---|")
    for stage in stages:
        for name, seconds, _ in sorted(by_stage[stage]):
            print(line(name, seconds))
        print(line(f"{stage} (all)", sum(s for _, s, _ in by_stage[stage]), summary=True))
    print(line("total (stage bodies)", sum(s for runs in by_stage.values() for _, s, _ in runs), summary=True))

    if args.csv:
        rows = sorted(((stage, tags.get("method", ""), tags.get("dataset", ""), tags.get("ratio", ""), round(seconds, 1))
                       for stage in stages for _, seconds, tags in by_stage[stage]),
                      key=lambda r: (ORDER.index(r[0]) if r[0] in ORDER else 99, r[0], r[1], r[2], r[3]))
        with open(args.csv, "w", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(["stage", "method", "dataset", "ratio", "seconds"])
            writer.writerows(rows)


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
