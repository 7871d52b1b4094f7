"""Wall time of each DVC stage instance of the last pipeline run, read from MLflow.

Usage (repository root): python benchmarks/stage_times.py [--markdown]

Each stage instance logs one MLflow run; its start and end times give the stage's own time
(without DVC's and Python's start-up, a few seconds per stage; fetch, preprocess and split open
their run after their work, so theirs read near zero: they take about a second each). For each
stage instance the latest finished run is taken.
"""

import argparse
from collections import defaultdict

from mlflow.tracking import MlflowClient

from seba.tracking import EXPERIMENT, tracking_uri


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    client = MlflowClient(tracking_uri=tracking_uri())
    experiment = client.get_experiment_by_name(EXPERIMENT)
    if experiment is None:
        raise SystemExit("no MLflow experiment 'seba' yet: run dvc repro first")
    latest = {}
    for run in client.search_runs([experiment.experiment_id], filter_string="attributes.status = 'FINISHED'",
                                  max_results=50000):
        if "mlflow.parentRunId" in run.data.tags or run.info.end_time is None:
            continue
        key = run.info.run_name
        if key not in latest or run.info.start_time > latest[key].info.start_time:
            latest[key] = run
    by_stage = defaultdict(list)
    for name, run in latest.items():
        by_stage[run.data.tags.get("stage", "?")].append((name, (run.info.end_time - run.info.start_time) / 1000))
    def line(label: str, seconds: float, summary: bool = False) -> str:
        if args.markdown:
            return f"| **{label}** | **{seconds:.1f}** |" if summary else f"| {label} | {seconds:.1f} |"
        return f"{('== ' if summary else '') + label:40s} {seconds:9.1f} s"

    order = ["fetch", "preprocess", "split", "pretrain", "evaluate", "aggregate"]
    if args.markdown:
        print("| stage instance | seconds |\n|---|---|")
    for stage in sorted(by_stage, key=lambda s: order.index(s) if s in order else 99):
        for name, seconds in sorted(by_stage[stage]):
            print(line(name, seconds))
        print(line(f"{stage} (all)", sum(s for _, s in by_stage[stage]), summary=True))
    print(line("total (stage bodies)", sum(s for runs in by_stage.values() for _, s in runs), summary=True))


if __name__ == "__main__":
    main()
