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
means and its standard error, and `--out DIR` writes them to `members.csv` and each seed's mean to
`member_seed_means.csv` (dataset, member, seed, shot, accuracy: small enough to keep where the
episodes are not). `--member-means CSV [CSV ...]` adds such files of earlier runs (other seeds of
the same tables; a seed in several inputs must agree within 0.0101, the earlier file's value is
kept), so the members of a table run in parts are averaged over all of its seeds (pass every
part's log too, for cells over the same seeds: where a dataset's members and cells cover other
seeds, a note on stderr says so). An episodes file's dataset is its name (`<dataset>.csv`, as the
run writes it): members of a dataset that the logs have no SeBA lines of get a note too (a renamed copy?).
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


MEMBER_MEANS = ("dataset", "member", "seed", "shot", "accuracy")


def member_seed_means(episodes: list[Path]) -> pd.DataFrame:
    """Per dataset (the file's stem), member (SeBA's ensemble, each ratio's encoder), seed and shot:
    the mean over that seed's episodes."""
    from benchmarks.entry import read_csv

    frames = []
    for path in episodes:
        frame = read_csv(path, ("member", "seed", "shot", "accuracy"), "an episodes file of the evaluate stage")
        if frame.empty:
            raise SystemExit(f"{path}: no episodes (a header only)")
        accuracy = pd.to_numeric(frame["accuracy"], errors="coerce")
        if accuracy.isna().any():
            raise SystemExit(f"{path}: {int(accuracy.isna().sum())} accuracy value(s) are not numbers "
                             f"(first in row {int(accuracy.isna().to_numpy().argmax()) + 2})")
        per_seed = frame.assign(accuracy=accuracy).groupby(["member", "seed", "shot"], as_index=False)["accuracy"].mean()
        frames.append(per_seed.assign(dataset=path.stem)[list(MEMBER_MEANS)])
    return pd.concat(frames, ignore_index=True)


def read_member_means(paths: list[Path]) -> pd.DataFrame:
    """Earlier runs' member_seed_means.csv files, checked."""
    from benchmarks.entry import read_csv

    frames = []
    for path in paths:
        frame = read_csv(path, MEMBER_MEANS, "member_seed_means.csv of protocol_cells.py --out")
        if frame.empty:
            raise SystemExit(f"{path}: no rows")
        values = frame[["seed", "shot", "accuracy"]].apply(pd.to_numeric, errors="coerce")
        named = frame[["dataset", "member"]].astype(str).apply(lambda c: c.str.strip()).ne("") & frame[
            ["dataset", "member"]].notna()
        bad = (values.isna().any(axis=1) | ~named.all(axis=1) | (values[["seed", "shot"]] % 1 != 0).any(axis=1)
               | (values["seed"] < 0) | (values["shot"] < 1) | ~values["accuracy"].between(0, 100))
        if bad.any():
            raise SystemExit(f"{path}: row {int(bad.to_numpy().argmax()) + 2} is not a dataset, member, whole seed "
                             f"and shot and an accuracy in [0, 100]")
        twice = frame.duplicated(["dataset", "member", "seed", "shot"])
        if twice.any():
            raise SystemExit(f"{path}: row {int(twice.to_numpy().argmax()) + 2} repeats a dataset, member, seed and shot")
        frames.append(frame[list(MEMBER_MEANS)].assign(**{c: values[c] for c in ("seed", "shot", "accuracy")})
                      .astype({"seed": int, "shot": int}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(MEMBER_MEANS))


def combined(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Per-seed member means of several runs as one: a (dataset, member, seed, shot) in more than one
    must agree within 0.0101 (the first is kept), else the script stops."""
    every = pd.concat([p for p in parts if len(p)], ignore_index=True)
    key = ["dataset", "member", "seed", "shot"]
    spread = every.groupby(key)["accuracy"].agg(lambda a: a.max() - a.min())
    if (spread > 0.0101).any():
        dataset, member, seed, shot = spread[spread > 0.0101].index[0]
        raise SystemExit(f"{dataset} {member} seed {seed} {shot}-shot differs between the inputs by "
                         f"{spread[(dataset, member, seed, shot)]:.4f}: runs of other params or code?")
    return every.drop_duplicates(key, keep="first").sort_values(key, ignore_index=True)


def members_table(per_seed: pd.DataFrame) -> pd.DataFrame:
    """SeBA's ensemble and each ratio's encoder: mean of the seed means and its standard error."""
    rows = []
    for (dataset, member, shot), group in per_seed.groupby(["dataset", "member", "shot"]):
        n = len(group)
        se = group["accuracy"].std(ddof=1) / n ** 0.5 if n > 1 else float("nan")
        rows.append({"dataset": dataset, "member": member, "shot": shot, "seeds": n,
                     "mean": round(group["accuracy"].mean(), 2), "se": round(se, 2)})
    return pd.DataFrame(rows)


def members(episodes: list[Path]) -> pd.DataFrame:
    """``members_table`` of episodes files."""
    return members_table(member_seed_means(episodes))


def seed_ranges(seeds) -> str:
    """Whole seeds as ranges: 0-19, 40, 60-99."""
    seeds, spans = sorted(set(int(s) for s in seeds)), []
    for seed in seeds:
        if spans and seed == spans[-1][1] + 1:
            spans[-1][1] = seed
        else:
            spans.append([seed, seed])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)


def member_notes(per_seed: pd.DataFrame, means: pd.DataFrame) -> list[str]:
    """A note for each dataset of the member means that the logs have no SeBA lines of (an episodes
    file is named after its dataset, `<dataset>.csv`: a renamed copy makes a table of its own), and
    for each whose members cover other seeds than its cells."""
    logged = means[means["method"] == "seba"].groupby("dataset")["seed"].unique()
    notes = []
    for dataset, seeds in per_seed.groupby("dataset")["seed"].unique().items():
        if dataset not in logged.index:
            notes.append(f"note: members of {dataset!r} (an episodes file's dataset is its name, <dataset>.csv: "
                         f"a renamed copy?) but no SeBA lines of it in the logs, which have "
                         f"{', '.join(logged.index) or 'none'}")
        elif set(seeds) != set(logged[dataset]):
            notes.append(f"note: {dataset}'s members (members.csv) cover seeds {seed_ranges(seeds)}, its cells "
                         f"(cells.csv) seeds {seed_ranges(logged[dataset])}")
    return notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--episodes", nargs="+", type=Path, default=[], metavar="CSV",
                        help="episodes files (after the logs, or the logs first: `--episodes A.csv -- LOG`)")
    parser.add_argument("--member-means", nargs="+", type=Path, default=[], metavar="CSV",
                        help="earlier runs' member_seed_means.csv, combined with --episodes")
    args = parser.parse_args()
    missing = [str(path) for path in [*args.logs, *args.episodes, *args.member_means] if not path.is_file()]
    if missing:
        raise SystemExit(f"no such file: {', '.join(missing)}")
    per_seed = None  # every input read before anything is written
    if args.episodes or args.member_means:
        per_seed = combined([read_member_means(args.member_means)]
                            + ([member_seed_means(args.episodes)] if args.episodes else []))
    parts = members_table(per_seed) if per_seed is not None else None
    means = seed_means(args.logs).sort_values(["method", "dataset", "seed", "shot"], ignore_index=True)
    if per_seed is not None:
        for note in member_notes(per_seed, means):
            print(note, file=sys.stderr)
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
            per_seed.round({"accuracy": 4}).to_csv(args.out / "member_seed_means.csv", index=False)


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
