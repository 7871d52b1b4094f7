"""DVC stage `theorem`: the appendix theorem checked by simulation (seba/theorem.py); no data needed."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's seba before an installed one (docs/ablations.md)

from seba.core.cli import run_stage
from seba.core.runtime import atomic_path, log, repo_root, write_json, write_text
from seba.theorem import (batch_table, best_constant, config_dict, figures, judge, load_theorem, numbers,
                          pair_table, report_markdown, summary)
from seba.core.tracking import Tracker


def main() -> None:
    root = repo_root()
    cfg = load_theorem(root / "params.yaml")
    out = root / "reports" / "theorem"
    log("theorem: per-view mismatch probabilities")
    pairs = pair_table(cfg)
    log("theorem: batch-level 1-NN mismatch")
    batches = batch_table(cfg)
    c_fit = best_constant(pairs)
    pairs = judge(pairs, c_fit)
    with atomic_path(out / "theorem.csv") as tmp:
        numbers(pairs, batches).to_csv(tmp, index=False, float_format="%.6g")
    figures(cfg, pairs, batches, c_fit, out)
    metrics = summary(pairs, batches, c_fit)
    write_json(out / "summary.json", metrics)
    write_text(out / "README.md", report_markdown(cfg, pairs, batches, c_fit))
    log((out / "README.md").read_text().split("## Counterexample")[0])
    with Tracker("theorem", "theorem", params=config_dict(cfg), root=root) as tracker:
        tracker.log_metrics(metrics)
        tracker.log_artifacts(out, "theorem")


if __name__ == "__main__":
    run_stage("theorem", main)
