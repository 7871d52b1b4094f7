"""Each cell of a many-seed run from its stage log, beside the paper: for a run whose episodes did
not all come back (a machine with a limit on what returns), the per-seed lines that the
`evaluate` and `baseline` stages print are enough.

Usage (repository root):
    python benchmarks/protocol_cells.py LOG [LOG ...] [--out DIR]

Reads the lines `[evaluate <dataset> seed <s>] 1-shot <acc>, 5-shot <acc>, ...` (SeBA's ensemble)
and `[baseline <method> <dataset> seed <s>] 1-shot <acc>, ...` of `dvc repro`'s output or
`benchmarks/gpu_protocol.py`'s log, gzipped or not (a seed seen in several logs must have the
same accuracies in each within 0.01, the printed rounding of means whose last bits differ between
devices, else the script stops; the first log's value is kept). Prints, per method, dataset and
shot: the seeds, the mean of the seed means, its standard error from their spread, the paper's value
(`data/reference/paper_results.csv`, `seba.report.load_paper`; a baseline's row is its
`paper_name`), the difference and the difference in
standard errors. `--out DIR` writes `seed_means.csv` (method, dataset, seed, shot, accuracy) and
`cells.csv` (the printed table). The lines carry two decimals: a mean over 100 seeds moves by
less than 0.005 from their rounding.

`--episodes CSV [CSV ...]` (a run's `reports/episodes/<dataset>.csv`, which holds SeBA's ensemble
and each ratio's encoder alone) also prints, per dataset, member and shot, the mean of the seed
means and its standard error, and `--out DIR` writes them to `members.csv`.
"""

from __future__ import annotations

import argparse
import gzip
import re
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
LINE = re.compile(r"^\[(?:evaluate (?P<dataset>\S+)|baseline (?P<method>\S+) (?P<bdataset>\S+)) seed (?P<seed>\d+)\] "
                  r"(?P<scores>\d+-shot [\d.]+(?:, \d+-shot [\d.]+)*)")


def seed_means(logs: list[Path]) -> pd.DataFrame:
    found: dict[tuple, float] = {}
    for log in logs:
        try:
            text = gzip.decompress(log.read_bytes()).decode() if log.suffix == ".gz" else log.read_text()
        except (OSError, EOFError, UnicodeDecodeError) as exc:
            raise SystemExit(f"{log}: cannot be read as a stage log ({type(exc).__name__}: {exc})") from None
        for line in text.splitlines():
            match = LINE.match(line)
            if not match:
                continue
            method = match["method"] or "seba"
            dataset = match["dataset"] or match["bdataset"]
            for shot, accuracy in re.findall(r"(\d+)-shot ([\d.]+)", match["scores"]):
                key = (method, dataset, int(match["seed"]), int(shot))
                if key in found:
                    if abs(found[key] - float(accuracy)) > 0.0101:
                        raise SystemExit(f"{log}: {method} {dataset} seed {key[2]} {shot}-shot is {accuracy} here, "
                                         f"{found[key]} in an earlier log")
                    continue
                found[key] = float(accuracy)
    if not found:
        raise SystemExit("no per-seed evaluate or baseline lines in " + ", ".join(map(str, logs)))
    return pd.DataFrame([(*k, v) for k, v in found.items()], columns=["method", "dataset", "seed", "shot", "accuracy"])


def paper_values(method: str) -> pd.Series:
    """The paper's accuracy of ``method`` (``seba`` or a baseline's name) by (dataset, shot);
    empty for a method the paper has no row of."""
    from seba.baselines.base import load_method
    from seba.report import load_paper

    name = "SeBA" if method == "seba" else load_method(method).paper_name
    if name is None:
        return pd.Series(dtype=float)
    return load_paper(ROOT / "data" / "reference" / "paper_results.csv", name).set_index(["dataset", "shot"])["paper"]


def cells(means: pd.DataFrame) -> pd.DataFrame:
    paper = {method: paper_values(method) for method in means["method"].unique()}
    rows = []
    for (method, dataset, shot), group in means.groupby(["method", "dataset", "shot"], sort=False):
        n = len(group)
        mean = group["accuracy"].mean()
        se = group["accuracy"].std(ddof=1) / n ** 0.5 if n > 1 else float("nan")
        ref = paper[method].get((dataset, shot), float("nan"))
        rows.append({"method": method, "dataset": dataset, "shot": shot, "seeds": n, "mean": round(mean, 2),
                     "se": round(se, 2), "paper": ref, "diff": round(mean - ref, 2),
                     "diff_in_se": round((mean - ref) / se, 1) if se > 0 else float("nan")})
    return pd.DataFrame(rows)


def members(episodes: list[Path]) -> pd.DataFrame:
    """SeBA's ensemble and each ratio's encoder: mean of the seed means and its standard error."""
    from benchmarks.entry import read_csv

    rows = []
    for path in episodes:
        frame = read_csv(path, ("member", "seed", "shot", "accuracy"), "an episodes file of the evaluate stage")
        if frame.empty:
            raise SystemExit(f"{path}: no episodes (a header only)")
        accuracy = pd.to_numeric(frame["accuracy"], errors="coerce")
        if accuracy.isna().any():
            raise SystemExit(f"{path}: {int(accuracy.isna().sum())} accuracy value(s) are not numbers "
                             f"(first in row {int(accuracy.isna().to_numpy().argmax()) + 2})")
        frame = frame.assign(accuracy=accuracy)
        per_seed = frame.groupby(["member", "shot", "seed"])["accuracy"].mean()
        for (member, shot), group in per_seed.groupby(["member", "shot"]):
            n = len(group)
            se = group.std(ddof=1) / n ** 0.5 if n > 1 else float("nan")
            rows.append({"dataset": path.stem, "member": member, "shot": shot, "seeds": n,
                         "mean": round(group.mean(), 2), "se": round(se, 2)})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--episodes", nargs="+", type=Path, default=[], metavar="CSV",
                        help="episodes files (after the logs, or the logs first: `--episodes A.csv -- LOG`)")
    args = parser.parse_args()
    missing = [str(path) for path in [*args.logs, *args.episodes] if not path.is_file()]
    if missing:
        raise SystemExit(f"no such file: {', '.join(missing)}")
    parts = members(args.episodes) if args.episodes else None  # every input read before anything is written
    means = seed_means(args.logs).sort_values(["method", "dataset", "seed", "shot"], ignore_index=True)
    table = cells(means)
    print(table.to_string(index=False))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        means.to_csv(args.out / "seed_means.csv", index=False)
        table.to_csv(args.out / "cells.csv", index=False)
    if parts is not None:
        print(parts.to_string(index=False))
        if args.out:
            parts.to_csv(args.out / "members.csv", index=False)


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
