"""Two evaluations of the same encoders on the same episodes (an evaluation-only switch such as
`evaluate.probe_stop`), compared per table and shot for SeBA's ensemble.

Usage (repository root):
    python benchmarks/paired_episodes.py A_DIR B_DIR [--names A B] [--csv OUT.csv]

Each DIR holds `<dataset>.csv` episode files as the evaluate stage writes them
(`reports/episodes/`), copied after each run. Tables in both are compared on the seeds both runs
scored (a seed only one has is named and left out); there their episodes must be the same (shot,
episode and support fingerprint row for row), or the script stops naming the table. Per table
and shot: both means, the difference B − A and its standard error, paired: over the seeds' mean
differences when the runs have two seeds or more (`se_over` = seeds), over the episodes'
differences when they have one (`se_over` = episodes: the noise of those episodes on those
encoders, not of another seed's encoders). The last line is the mean over tables per shot.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

KEYS = ["seed", "shot", "episode"]


def read_dir(path: Path) -> dict[str, pd.DataFrame]:
    """The ensemble rows of every `<dataset>.csv` in ``path``."""
    from entry import read_csv

    if not path.is_dir():
        raise SystemExit(f"error: no such folder: {path}")
    tables = {}
    for file in sorted(path.glob("*.csv")):
        frame = read_csv(file, ("member", *KEYS, "accuracy", "support_hash"), "evaluate stage's episodes file")
        tables[file.stem] = frame[frame["member"] == "ensemble"]
    return tables


def compare(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame], na: str = "A", nb: str = "B") -> pd.DataFrame:
    from compare_results import paired  # the paired standard error over seeds, defined once

    rows = []
    for dataset in [d for d in a if d in b]:
        seeds = set(a[dataset]["seed"]) & set(b[dataset]["seed"])
        if not seeds:
            raise SystemExit(f"error: {dataset}: the two runs share no seed")
        for name, frame in ((na, a[dataset]), (nb, b[dataset])):
            if alone := sorted(set(frame["seed"]) - seeds):
                print(f"{dataset}: {name}'s seed{'s' if len(alone) > 1 else ''} {', '.join(map(str, alone))} "
                      f"not in the other run, left out", file=sys.stderr)
        ea, eb = (frame[frame["seed"].isin(seeds)] for frame in (a[dataset], b[dataset]))
        both = ea.merge(eb, on=KEYS, how="outer", suffixes=("_a", "_b"), indicator=True)
        if (both["_merge"] != "both").any() or (both["support_hash_a"] != both["support_hash_b"]).any():
            raise SystemExit(f"error: {dataset}: the two runs did not score the same episodes of the seeds both have "
                             f"(shots, episodes or supports differ); compare runs of the same splits and evaluate "
                             f"settings")
        means = both.groupby(["shot", "seed"], as_index=False)[["accuracy_a", "accuracy_b"]].mean()
        means = means.assign(dataset=dataset, paper=math.nan)
        cells = paired(means.drop(columns="accuracy_b").rename(columns={"accuracy_a": na}),
                       means.drop(columns="accuracy_a").rename(columns={"accuracy_b": nb}), na, nb)
        for cell in cells.to_dict("records"):
            part = both[both["shot"] == cell["shot"]]
            if cell["seeds"] == 1:  # one seed: the noise of its episodes on its encoders
                diff = part["accuracy_b"] - part["accuracy_a"]
                cell["se"] = diff.std(ddof=1) / math.sqrt(len(diff)) if len(diff) > 1 else math.nan
            rows.append({**cell, "shot": int(cell["shot"]), "episodes": len(part),
                         "se_over": "seeds" if cell["seeds"] > 1 else "episodes"})
    return pd.DataFrame(rows, columns=["dataset", "shot", "seeds", "episodes", na, nb, "diff", "se", "se_over"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--names", nargs=2, default=["A", "B"])
    parser.add_argument("--csv", type=Path)
    args = parser.parse_args()
    na, nb = args.names
    from compare_results import COLUMNS, check_names

    check_names(na, nb, COLUMNS + ("episodes", "se_over"))
    table = compare(read_dir(args.a), read_dir(args.b), na, nb)
    if table.empty:
        raise SystemExit("error: the two folders share no table")
    shown = table.round(2)
    print(shown.to_string(index=False))
    means = table.groupby("shot")[[na, nb, "diff"]].mean().round(2)
    for shot, row in means.iterrows():
        print(f"mean over {table[table['shot'] == shot]['dataset'].nunique()} tables, {shot}-shot: "
              f"{na} {row[na]:.2f}, {nb} {row[nb]:.2f}, difference {row['diff']:+.2f}")
    if args.csv:
        shown.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
