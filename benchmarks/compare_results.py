"""Compare the ensemble accuracies of two runs (e.g. fp32 vs bf16, or encoder_out 256 vs 1024) cell
by cell, with the paper's value beside them.

Usage: python benchmarks/compare_results.py A.csv B.csv [--names A B] > comparison.md

Each CSV is either `benchmarks/seed_spread.py --csv`'s per-seed table (columns dataset, shot,
seed_<n>..., paper: the experiments' `seed_means.csv`) or a `reports/results.csv`.

Two per-seed tables are compared **paired over seeds**: per cell the seeds both runs have (the
`seeds` column; A's and B's means are over those seeds), the mean difference and its standard error
std(ddof=1) / √seeds of the per-seed differences (runs with the same seeds share their splits and
episodes, so the pairing removes what the seeds share). |diff| ≤ 2 SE is reported as "within
noise" (a cell of one seed has no SE).

A results.csv holds no per-seed means, so when either file is one the standard error is taken from
the two episode standard deviations as if every episode were independent (sqrt(sA^2/nA + sB^2/nB)).
That is not the noise of a difference between runs: it ignores that a seed's episodes share one
encoder (seed-to-seed variation, which can be several times larger) and that paired runs share
their episodes, so it can be too large or too small; its "within noise" is only a rough guide.
"""

import argparse

import numpy as np
import pandas as pd


def read_run(path: str, name: str) -> tuple[pd.DataFrame, bool]:
    """The run's ensemble cells as (dataset, shot, [seed,] NAME, paper[, NAME_std, NAME_n]) and
    whether they are per seed."""
    from entry import read_csv

    seeds = [c for c in read_csv(path).columns if c.startswith("seed_")]
    if seeds:
        t = read_csv(path, ("dataset", "shot", "paper"), "seed_spread.py --csv table")
        long = t.melt(id_vars=["dataset", "shot", "paper"], value_vars=seeds, var_name="seed", value_name=name)
        long["seed"] = long["seed"].str.removeprefix("seed_").astype(int)
        return long.dropna(subset=[name]), True  # a seed a table lacks is an empty cell, not a seed
    t = read_csv(path, ("member", "dataset", "shot", "accuracy", "accuracy_std", "episodes", "paper"),
                 "reports/results.csv table")
    t = t[t["member"] == "ensemble"][["dataset", "shot", "accuracy", "accuracy_std", "episodes", "paper"]]
    return t.rename(columns={"accuracy": name, "accuracy_std": f"{name}_std", "episodes": f"{name}_n"}), False


# the columns of the tables that --names label: a run may not be named after one of them
COLUMNS = ("dataset", "shot", "seed", "seeds", "paper", "diff", "se")


def check_names(na: str, nb: str, columns: tuple[str, ...] = COLUMNS) -> None:
    """Exit naming the problem unless the two runs' names differ and neither is a column's."""
    if na == nb or na in columns or nb in columns:
        raise SystemExit(f"error: --names must be two different names other than the table's columns "
                         f"({', '.join(columns)}), got {na!r} {nb!r}")


def paired(a: pd.DataFrame, b: pd.DataFrame, na: str, nb: str) -> pd.DataFrame:
    """Per cell over the seeds both runs have: both means, the mean difference (B − A) and the
    standard error of the per-seed differences."""
    both = a.drop(columns="paper").merge(b, on=["dataset", "shot", "seed"], how="inner")
    both["diff"] = both[nb] - both[na]
    rows = []
    for (dataset, shot), g in both.groupby(["dataset", "shot"], sort=False):
        n = len(g)
        rows.append({"dataset": dataset, "shot": shot, "seeds": n, na: g[na].mean(), nb: g[nb].mean(),
                     "paper": g["paper"].iloc[0], "diff": g["diff"].mean(),
                     "se": g["diff"].std(ddof=1) / np.sqrt(n) if n > 1 else float("nan")})
    return pd.DataFrame(rows, columns=["dataset", "shot", "seeds", na, nb, "paper", "diff", "se"])


def unpaired(a: pd.DataFrame, b: pd.DataFrame, na: str, nb: str) -> pd.DataFrame:
    both = a.drop(columns="paper").merge(b, on=["dataset", "shot"], how="inner")
    both["diff"] = both[nb] - both[na]
    both["se"] = np.sqrt(both[f"{na}_std"] ** 2 / both[f"{na}_n"] + both[f"{nb}_std"] ** 2 / both[f"{nb}_n"])
    return both


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--names", nargs=2, default=["A", "B"])
    args = parser.parse_args()
    na, nb = args.names
    check_names(na, nb, COLUMNS + tuple(f"{name}_{end}" for name in (na, nb) for end in ("std", "n")))
    (a, a_seeds), (b, b_seeds) = read_run(args.a, na), read_run(args.b, nb)
    if a_seeds != b_seeds:
        raise SystemExit("error: one file is per seed (seed_spread.py --csv) and the other a results.csv: "
                         "compare two of the same kind")
    both = paired(a, b, na, nb) if a_seeds else unpaired(a, b, na, nb)
    if both.empty:
        raise SystemExit("error: the two files share no cell" + (" and seed" if a_seeds else ""))
    unit = "paired over seeds" if a_seeds else "episodes, unpaired"
    print(f"| dataset | shot |{' seeds |' if a_seeds else ''} {na} | {nb} | {nb} − {na} | 2 SE ({unit}) | paper |")
    print("|---|---|" + ("---|" if a_seeds else "") + "---|---|---|---|---|")
    for _, r in both.iterrows():  # (rows by column name: --names need not be identifiers); no flag without an SE
        flag = " *" if abs(r["diff"]) > 2 * r["se"] else ""
        seeds = f" {r['seeds']} |" if a_seeds else ""
        print(f"| {r['dataset']} | {r['shot']} |{seeds} {r[na]:.2f} | {r[nb]:.2f} | {r['diff']:+.2f}{flag} | "
              f"{2 * r['se']:.2f} | {r['paper']:.2f} |")
    scored = both.dropna(subset=["se"])
    within = int((scored["diff"].abs() <= 2 * scored["se"]).sum())
    seeds = (f" {both['seeds'].min()}" + (f"–{both['seeds'].max()}" if both["seeds"].nunique() > 1 else "")
             + " seeds per cell;") if a_seeds else ""
    print(f"\n{len(both)} cells;{seeds} mean {nb} − {na}: {both['diff'].mean():+.2f} points; mean |diff|: "
          f"{both['diff'].abs().mean():.2f}; within 2 SE ({unit}): {within} of {len(scored)} (* = outside).")
    if not a_seeds:
        print("(episode standard errors ignore the seed-to-seed variation: compare seed_spread.py tables for a "
              "paired standard error)")
    for name in (na, nb):
        d = both[name] - both["paper"]
        print(f"{name}: mean |{name} − paper| {d.abs().mean():.2f}; within 2 points or above: "
              f"{int((d >= -2).sum())} of {len(both)}.")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
