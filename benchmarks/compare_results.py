"""Compare the ensemble accuracies of two `reports/results.csv` files (e.g. fp32 vs bf16, or
encoder_out 256 vs 1024) cell by cell, with the paper's value beside them.

Usage: python benchmarks/compare_results.py A.csv B.csv [--names A B] > comparison.md

The standard error of a difference is taken from the two episode standard deviations as if the
runs were independent (sqrt(sA^2/nA + sB^2/nB)); runs with the same seeds share their episodes,
so this overstates the noise somewhat. |diff| < 2 SE is reported as "within noise".
"""

import argparse

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--names", nargs=2, default=["A", "B"])
    args = parser.parse_args()
    na, nb = args.names
    from entry import read_csv

    frames = []
    for path, name in ((args.a, na), (args.b, nb)):
        t = read_csv(path, ("member", "dataset", "shot", "accuracy", "accuracy_std", "episodes", "paper"),
                     "reports/results.csv table")
        t = t[t["member"] == "ensemble"][["dataset", "shot", "accuracy", "accuracy_std", "episodes", "paper"]]
        frames.append(t.rename(columns={"accuracy": name, "accuracy_std": f"{name}_std", "episodes": f"{name}_n"}))
    both = frames[0].drop(columns="paper").merge(frames[1], on=["dataset", "shot"], how="inner")
    both["diff"] = both[nb] - both[na]
    both["se"] = np.sqrt(both[f"{na}_std"] ** 2 / both[f"{na}_n"] + both[f"{nb}_std"] ** 2 / both[f"{nb}_n"])
    print(f"| dataset | shot | {na} | {nb} | {nb} − {na} | 2 SE | paper |")
    print("|---|---|---|---|---|---|---|")
    for r in both.itertuples():
        flag = "" if abs(r.diff) < 2 * r.se else " *"
        print(f"| {r.dataset} | {r.shot} | {getattr(r, na):.2f} | {getattr(r, nb):.2f} | {r.diff:+.2f}{flag} | "
              f"{2 * r.se:.2f} | {r.paper:.2f} |")
    within = int((both["diff"].abs() < 2 * both["se"]).sum())
    print(f"\n{len(both)} cells; mean {nb} − {na}: {both['diff'].mean():+.2f} points; mean |diff|: "
          f"{both['diff'].abs().mean():.2f}; within 2 SE (noise): {within} of {len(both)} (* = outside).")
    for name in (na, nb):
        d = both[name] - both["paper"]
        print(f"{name}: mean |{name} − paper| {d.abs().mean():.2f}; within 2 points or above: "
              f"{int((d >= -2).sum())} of {len(both)}.")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
