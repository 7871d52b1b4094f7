"""Add methods run later to a committed comparison: their episodes, checked to be SeBA's, joined
to an earlier run's `comparison.csv`, with the ranks recomputed among all the methods.

Usage (repository root):
    python benchmarks/method_table.py --comparison reports/experiments/nine_baselines_seed0/comparison.csv \\
        --repo RUN_DIR --methods d2r2 tjepa saint --out reports/experiments/DIR

``RUN_DIR`` is the repository (or DVC experiment workspace) where the methods ran: its
`reports/episodes/<method>/<dataset>.csv`, `data/processed/` and `data/splits/`. Each episode's
support fingerprint is compared with the episodes SeBA's evaluation draws for the same split, seed,
shot and episode count (``seba.episodes.sample_episodes``), so a method scored on other episodes
is refused, as the aggregate stage refuses it. Writes ``comparison.csv`` (method, dataset, shot,
accuracy, paper, rank), ``comparison.md`` (the paper's layout, seba.report) and prints it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--comparison", type=Path, required=True)
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--methods", nargs="+", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    from seba.core import paths
    from seba.baselines.base import load_method
    from seba.core.data import EncodedTable, load_split
    from seba.episodes import sample_episodes
    from seba.evaluate import support_hash
    from seba.report import comparison_markdown

    from benchmarks.entry import read_csv

    earlier = read_csv(args.comparison, ("method", "dataset", "shot", "accuracy", "paper", "rank"),
                       "reports/comparison.csv table")
    paper = pd.read_csv(ROOT / paths.PAPER_RESULTS)
    paper = paper[paper["table"] == "main"]
    rows = []
    for method in args.methods:
        for csv in sorted((args.repo / "reports" / "episodes" / method).glob("*.csv")):
            dataset = csv.stem
            episodes = pd.read_csv(csv)
            table = EncodedTable.load(paths.processed(args.repo, dataset))
            for (seed, shot), group in episodes.groupby(["seed", "shot"]):
                split = load_split(paths.splits(args.repo, dataset), int(seed))
                drawn = sample_episodes(table.y[split.test], len(table.classes), int(shot), len(group), int(seed),
                                        dataset)
                expected = [support_hash(row) for row in drawn.support]
                if list(group.sort_values("episode")["support_hash"]) != expected:
                    raise SystemExit(f"{csv}: seed {seed}, {shot}-shot: not SeBA's episodes")
            for shot, group in episodes.groupby("shot"):
                name = load_method(method).paper_name
                hit = paper[(paper["method"] == name) & (paper["dataset"] == dataset) & (paper["shot"] == shot)]
                rows.append({"method": method, "dataset": dataset, "shot": int(shot),
                             "accuracy": group["accuracy"].mean(),
                             "paper": float(hit["accuracy"].iloc[0]) if len(hit) else float("nan")})
    added = pd.DataFrame(rows)
    missing = set(earlier["dataset"]) - set(added["dataset"]) if len(added) else set(earlier["dataset"])
    if missing:
        print(f"note: no episodes for {sorted(missing)} of the added methods", file=sys.stderr)
    table = pd.concat([earlier.drop(columns="rank"), added], ignore_index=True)
    table["rank"] = table.groupby(["dataset", "shot"])["accuracy"].rank(ascending=False, method="average")
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "comparison.csv", index=False, float_format="%.4f")
    text = comparison_markdown(table)
    (args.out / "comparison.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
