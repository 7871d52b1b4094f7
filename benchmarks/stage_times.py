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
    order = ["fetch", "preprocess", "split", "pretrain", "evaluate", "aggregate"]
    total = 0.0
    if args.markdown:
        print("| stage instance | seconds |\n|---|---|")
    for stage in sorted(by_stage, key=lambda s: order.index(s) if s in order else 99):
        for name, seconds in sorted(by_stage[stage]):
            total += seconds
            print(f"| {name} | {seconds:.1f} |" if args.markdown else f"{name:40s} {seconds:9.1f} s")
        stage_total = sum(s for _, s in by_stage[stage])
        print(f"| **{stage} (all)** | **{stage_total:.1f}** |" if args.markdown
              else f"{'== ' + stage + ' (all)':40s} {stage_total:9.1f} s")
    print(f"| **total (stage bodies)** | **{total:.1f}** |" if args.markdown
          else f"{'== total (stage bodies)':40s} {total:9.1f} s")


if __name__ == "__main__":
    main()
