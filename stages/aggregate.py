"""DVC stage `aggregate`: results tables, summary metrics and figures for the datasets in params."""

import dataclasses

import pandas as pd
import yaml

from seba.cli import run_stage
from seba.config import load_params
from seba.baselines import METHODS
from seba.report import (comparison_markdown, comparison_table, figure, load_paper, markdown,
                         rank_figure, results_table, summary_metrics)
from seba.runtime import atomic_path, log, repo_root, write_json, write_text
from seba.tracking import Tracker


def main() -> None:
    params = load_params()
    root = repo_root()
    reports = root / "reports"
    episodes = {name: pd.read_csv(reports / "episodes" / f"{name}.csv") for name in params.datasets}
    paper = load_paper(root / "data" / "reference" / "paper_results.csv")
    table = results_table(episodes, paper)
    run_info = {"seeds": list(params.seeds), "episodes": params.evaluate.episodes,
                "ratios": list(params.pretrain.ratios), "encoder_out": params.pretrain.encoder_out,
                "test_fraction": params.split.test_fraction}
    with atomic_path(reports / "results.csv") as tmp:
        table.to_csv(tmp, index=False, float_format="%.4f")
    write_text(reports / "results.md", markdown(table, run_info))
    metrics = summary_metrics(table)
    write_json(reports / "summary.json", metrics)
    figure(table, reports / "figures" / "accuracy.png")
    baselines = {(method, name): pd.read_csv(reports / "episodes" / method / f"{name}.csv")
                 for method in params.baselines.methods for name in params.datasets}
    paper_names = {name: cls.paper_name for name, cls in METHODS.items()}
    comparison = comparison_table(episodes, baselines, pd.read_csv(root / "data" / "reference" / "paper_results.csv"),
                                  paper_names)
    with atomic_path(reports / "comparison.csv") as tmp:
        comparison.to_csv(tmp, index=False, float_format="%.4f")
    rank_figure(comparison, reports / "figures" / "ranks.png")
    if params.baselines.methods:
        write_text(reports / "results.md", (reports / "results.md").read_text() + "\n" +
                   comparison_markdown(comparison))
        for shot, group in comparison.groupby("shot"):
            for method, rank in group.groupby("method")["rank"].mean().items():
                metrics[f"rank_{shot}shot_{method}"] = round(float(rank), 4)
        write_json(reports / "summary.json", metrics)
    raw_params = yaml.safe_load((root / "params.yaml").read_text())
    write_text(reports / "params_used.yaml", yaml.safe_dump(raw_params, sort_keys=False))
    log((reports / "results.md").read_text())
    with Tracker("aggregate", "aggregate", params={"datasets": list(params.datasets), **run_info,
                 "pretrain": dataclasses.asdict(params.pretrain)}, root=root) as tracker:
        tracker.log_metrics(metrics)
        for name in ("results.md", "results.csv", "comparison.csv", "summary.json", "params_used.yaml"):
            tracker.log_artifacts(reports / name)
        tracker.log_artifacts(reports / "figures", "figures")


if __name__ == "__main__":
    run_stage("aggregate", main)
