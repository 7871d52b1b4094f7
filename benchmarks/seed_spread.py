"""Per-seed ensemble accuracies of a multi-seed run, beside the paper: how far single seeds
move a cell, and whether the mean over seeds meets the fidelity target.

Usage (repository root, after `dvc repro`): python benchmarks/seed_spread.py [--markdown] [--csv PATH]

Reads `reports/episodes/<dataset>.csv` for the datasets and shots in params.yaml and the paper's
values in `data/reference/paper_results.csv`. For each dataset x shot: the ensemble's mean
accuracy over the episodes of each seed, the mean over seeds, the standard error of that mean
from the spread of the seed means, and the difference to the paper's SeBA value. ``--csv PATH``
also writes the table (columns dataset, shot, seed_<n>..., mean, se, paper, diff; two decimals,
the difference signed), as the experiments' `seed_means.csv` files hold it.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from seba.core.config import load_params  # noqa: E402
from seba.evaluate import ENSEMBLE  # noqa: E402
from seba.report import load_paper  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--csv", type=Path, metavar="PATH", help="also write the table to PATH")
    args = parser.parse_args()
    params = load_params(ROOT / "params.yaml")
    paper = load_paper(ROOT / "data" / "reference" / "paper_results.csv")
    rows = []
    for dataset in params.datasets:
        episodes = pd.read_csv(ROOT / "reports" / "episodes" / f"{dataset}.csv")
        ens = episodes[episodes["member"] == ENSEMBLE]
        for shot in params.evaluate.shots:
            per_seed = ens[ens["shot"] == shot].groupby("seed")["accuracy"].mean()
            ref = paper[(paper["dataset"] == dataset) & (paper["shot"] == shot)]["paper"]
            mean = float(per_seed.mean())
            se = float(per_seed.std(ddof=1) / np.sqrt(len(per_seed))) if len(per_seed) > 1 else float("nan")
            rows.append({"dataset": dataset, "shot": shot, **{f"seed {s}": v for s, v in per_seed.items()},
                         "mean": mean, "se": se, "paper": float(ref.iloc[0]) if len(ref) else float("nan")})
    table = pd.DataFrame(rows)
    table["diff"] = table["mean"] - table["paper"]
    seeds = [c for c in table.columns if c.startswith("seed ")]
    if args.markdown:
        print("| dataset | shot | " + " | ".join(seeds) + " | mean | SE | paper | diff |")
        print("|---|---|" + "---|" * (len(seeds) + 4))
        for r in table.to_dict("records"):
            print(f"| {r['dataset']} | {r['shot']} | " + " | ".join(f"{r[s]:.2f}" for s in seeds) +
                  f" | {r['mean']:.2f} | {r['se']:.2f} | {r['paper']:.2f} | {r['diff']:+.2f} |")
    else:
        print(table.round(2).to_string(index=False))
    if args.csv:
        csv = table.rename(columns={s: s.replace(" ", "_") for s in seeds}).round(2)
        csv["diff"] = [f"{d:+.2f}" for d in table["diff"]]
        csv.to_csv(args.csv, index=False, float_format="%.2f")
    ok = table["diff"] >= -2
    print(f"\n{int(ok.sum())} of {len(table)} cells within 2 points of the paper or above; mean |diff| "
          f"{table['diff'].abs().mean():.2f}; mean diff {table['diff'].mean():+.2f}; mean SE of a cell "
          f"from the seed spread {table['se'].mean():.2f}")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
