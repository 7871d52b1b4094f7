"""Reading a user's CSV table (`seba.core.data.load_local_table`, what `fetch` and `validate` do
with `sources.<name>.path`), this tree against a baseline revision, in the same run.

The table is written by this script: ``--rows`` x ``--columns`` numbers (integers 0-255, seven
in ten of them 0, as a flattened image is written) and an integer label, or with
``--decimals`` numbers written with that many decimals; with ``--missing F`` that fraction of the
numbers is written as empty cells and the label first, so that the last column has empty cells
(a file the reader reads a second time to count each row's fields); with ``--text K`` the first K
columns are words instead, drawn from twelve levels written as a survey's categories are
('Sales/Service', 'Self-emp-not-inc', ...: a column read as categorical text). With
``--snapshot NAME`` the table is instead a benchmark table of ``data/snapshot/`` written as CSV
(``income``: 48,842 rows, eight columns of words; its last column the target). Each reader runs in its own process, in
turn, ``--repeats`` times; the frames they return (values, dtypes, the schema records) are
compared.

Usage (repository root):
    python benchmarks/local_read.py [--rows 10000] [--columns 784] [--decimals 0] [--missing 0]
                                    [--text 0] [--snapshot NAME] [--repeats 3] [--baseline-rev REV]

Prints per reader the wall seconds of each run and their median, µs per cell, the ratio to the
baseline, and whether its frame equals the baseline's.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worker(table_root: str, out: str, target: str) -> None:
    """Read the table with the ``seba`` found first on the path; time it; pickle the frame."""
    import time

    from seba.core.config import SourceConfig
    from seba.core.data import load_local_table

    source = SourceConfig(path="data/local/table.csv", target=target)
    start = time.perf_counter()
    frame, _ = load_local_table("table", source, Path(table_root))
    seconds = time.perf_counter() - start
    with open(out, "wb") as fh:
        pickle.dump((frame, dict(frame.attrs)), fh)
    print(json.dumps({"seconds": seconds}))


LEVELS = ("Private", "Self-emp-not-inc", "Local-gov", "Sales/Service", "Tech-support", "Craft-repair",
          "Adm-clerical", "Never-worked", "Prof-specialty", "Other (unknown)", "Farming-fishing", "Armed-Forces")


def write_table(path: Path, rows: int, columns: int, decimals: int, missing: float = 0.0, text: int = 0) -> None:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    if decimals:
        values = np.round(rng.normal(size=(rows, columns)) * 100, decimals)
    else:
        values = rng.integers(0, 256, size=(rows, columns)) * (rng.random((rows, columns)) < 0.3)
    frame = pd.DataFrame(values, columns=[f"x{i}" for i in range(columns)])
    frame["label"] = rng.integers(0, 10, rows)
    if missing:
        blank = rng.random((rows, columns)) < missing
        features = frame.drop(columns="label").astype("float64" if decimals else "Int64").mask(blank)
        frame = pd.concat([frame[["label"]], features], axis=1)
    for i in range(text):
        frame[f"x{i}"] = np.asarray(LEVELS, dtype=object)[rng.integers(0, len(LEVELS), rows)]
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False, float_format=f"%.{decimals}f" if decimals else None)


def main() -> None:
    from entry import positive

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=positive, default=10000)
    parser.add_argument("--columns", type=positive, default=784)
    parser.add_argument("--decimals", type=int, default=0, choices=range(0, 10), metavar="0-9")
    parser.add_argument("--missing", type=float, default=0.0, metavar="F",
                        help="the fraction of numbers written as empty cells, with the label first (default: 0)")
    parser.add_argument("--text", type=int, default=0, metavar="K",
                        help="the first K columns written as words, read as categorical text (default: 0)")
    parser.add_argument("--snapshot", default=None, metavar="NAME",
                        help="read data/snapshot/NAME.parquet written as CSV instead of a written table")
    parser.add_argument("--repeats", type=positive, default=3)
    parser.add_argument("--baseline-rev", default="HEAD", help="the revision to compare with (default: HEAD)")
    parser.add_argument("--worker", nargs=3, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(*args.worker)
    work = Path(tempfile.mkdtemp(prefix="seba-local-read-"))
    if not 0 <= args.missing < 1:
        raise SystemExit(f"error: --missing is {args.missing}; a fraction from 0 up to 1")
    if not 0 <= args.text <= args.columns:
        raise SystemExit(f"error: --text is {args.text}; from 0 up to --columns ({args.columns})")
    table = work / "data" / "local" / "table.csv"
    if args.snapshot:
        import pandas as pd

        snapshot = ROOT / "data" / "snapshot" / f"{args.snapshot}.parquet"
        if not snapshot.is_file():
            raise SystemExit(f"error: --snapshot {args.snapshot}: no {snapshot.relative_to(ROOT)}")
        frame = pd.read_parquet(snapshot)
        table.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(table, index=False)
        target, (args.rows, args.columns) = str(frame.columns[-1]), (len(frame), frame.shape[1] - 1)
    else:
        write_table(table, args.rows, args.columns, args.decimals, args.missing, args.text)
        target = "label"
    archive = subprocess.run(["git", "archive", args.baseline_rev, "seba"], cwd=ROOT, capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"error: git archive {args.baseline_rev} failed: {archive.stderr.decode().strip()}")
    baseline = work / "baseline"
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(baseline, filter="data")
    readers = {f"baseline ({args.baseline_rev})": baseline, "this tree": ROOT}
    times = {name: [] for name in readers}
    for _ in range(args.repeats):
        for name, code in readers.items():
            out = work / f"{len(times[name])}-{name.split()[0]}.pkl"
            env = {**os.environ, "PYTHONPATH": str(code)}
            done = subprocess.run([sys.executable, __file__, "--worker", str(work), str(out), target], cwd=ROOT,
                                  env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"reader {name} failed:\n{done.stderr[-3000:]}")
            times[name].append(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])
    frames = {name: pickle.loads((work / f"0-{name.split()[0]}.pkl").read_bytes()) for name in readers}
    cells = args.rows * (args.columns + 1)
    reference = next(iter(readers))
    base = statistics.median(times[reference])
    what = (f"data/snapshot/{args.snapshot}.parquet as CSV" if args.snapshot
            else 'integers' if not args.decimals else f'{args.decimals} decimals')
    print(f"{args.rows} rows x {args.columns + 1} columns ({cells} cells, {what}"
          f"{f', {args.missing:g} of them empty, the label first' if args.missing else ''}"
          f"{f', the first {args.text} columns words' if args.text else ''}), {args.repeats} runs each, "
          f"in turn")
    for name in readers:
        seconds = statistics.median(times[name])
        frame, attrs = frames[name]
        same = frame.equals(frames[reference][0]) and repr(attrs) == repr(frames[reference][1])
        print(f"  {name:24s} {seconds:7.2f} s (runs: {', '.join(f'{t:.2f}' for t in times[name])}), "
              f"{seconds / cells * 1e6:5.2f} µs per cell, {base / seconds:5.2f}x the baseline's speed; "
              f"frame and schema records {'equal' if same else 'DIFFER from'} the baseline's")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
