"""What reading a user's table by its rules is worth: accuracy with each rule against the same
column read as text.

Usage (repository root): python benchmarks/own_table_rules.py [--episodes 100] [--epochs 10]

The table: 768 rows, four standard-normal columns x1..x4 (3 decimals), the label the sign of x1
(the one column that carries the signal; chance is 50 %). For each way of writing x1 that a rule
of docs/own-table.md reads (percentages, currency, accounting negatives, dates, times, ...), the
table is written as a CSV and read by `load_local_table` as the fetch stage reads it, twice:
with the source as a user sets it (the rules), and with x1 named in `categorical` (the column
read as text, which is what the table gave before the rule: one level per distinct cell, folded
into `other` beyond `max_categories`). Then what the stages do, in-process: encode, split seed 0,
standardise, a small SeBA encoder (64 -> 32, r = 0.2, 10 epochs) and cosine-prototype
episodes at 1, 5 and 10 shots. Prints the mean ensemble accuracy over the shots (%) of the clean
table and of each case both ways. docs/own-table.md ("What the rules are worth") quotes it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from seba.core.config import EvaluateConfig, PretrainConfig, parse_params, read_params_file  # noqa: E402
from seba.core.data import encode_table, make_split, scale  # noqa: E402
from seba.core.own_table import load_local_table  # noqa: E402
from seba.evaluate import evaluate_members, summarise  # noqa: E402
from seba.pretrain import encode, pretrain_encoder  # noqa: E402


def signal_table(n: int = 768) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(n, 4)).round(3), columns=["x1", "x2", "x3", "x4"])
    frame["label"] = np.where(frame["x1"] > 0, "pos", "neg")
    return frame


def clock(v: float) -> str:
    s = round((v + 5) * 3600)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def dates(fmt: str):
    return lambda v: (pd.Timestamp("2024-03-01") + pd.Timedelta(days=round(v * 100))).strftime(fmt)


def ordinal(v: float) -> str:
    n = max(1, round((v + 4) * 10))
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def fraction(v: float) -> str:
    eighths = round(abs(v) * 8)
    whole, top = divmod(eighths, 8)
    sign = "-" if v < 0 and eighths else ""
    return f"{sign}{whole}" if not top else f"{sign}{whole} {top}/8" if whole else f"{sign}{top}/8"


def angle(v: float) -> str:
    d, rest = divmod(round(abs(v) * 36000), 36000)  # v in degrees, to a tenth of a second
    m, tenths = divmod(rest, 600)
    return f"{d}\u00b0{m}\u2032{tenths / 10:.1f}\u2033{'S' if v < 0 else 'N'}"


def tenth(v: float) -> bool:
    """About one cell in ten, chosen by its value (the table is fixed)."""
    return round(abs(v) * 1000) % 10 == 3


# (case, how x1 is written, the source's options that read it[, the columns so written: x1 alone unless said])
CASES = [
    ("percentages ('12.50%')", lambda v: f"{v * 10:.2f}%", {}),
    ("currency with thousands ('$1,234.00')", lambda v: f"-${abs(v) * 1000:,.2f}" if v < 0 else f"${v * 1000:,.2f}",
     {"thousands": ","}),
    ("accounting negatives ('($1,234.00)')", lambda v: f"(${abs(v) * 1000:,.2f})" if v < 0 else f"${v * 1000:,.2f}",
     {"thousands": ","}),
    ("decimal commas ('0,126'; x2..x4 too)", lambda v: f"{v:.3f}".replace(".", ","), {"decimal": ","},
     ("x1", "x2", "x3", "x4")),
    ("ISO dates ('2024-05-14')", dates("%Y-%m-%d"), {}),
    ("day-first dates ('14/05/2024')", dates("%d/%m/%Y"), {"date_order": "dmy"}),
    ("times ('5:07:34')", clock, {}),
    ("bounds ('<-1.5' below -1.5)", lambda v: "<-1.5" if v < -1.5 else f"{v:.3f}", {}),
    ("fractions ('1 3/8')", fraction, {}),
    ("ordinals ('42nd')", ordinal, {}),
    ("spreadsheet text marks (\"'-1.234\" below 0)", lambda v: f"'{v:.3f}" if v < 0 else f"{v:.3f}", {}),
    ("Fortran exponents ('1.2340D+00')", lambda v: f"{v:.4E}".replace("E", "D"), {}),
    ("angles ('1°14′2.4″S')", angle, {}),
    ("footnote marks ('1.233*' in a tenth)", lambda v: f"{v:.3f}*" if tenth(v) else f"{v:.3f}", {}),
    ("Eurostat flags ('1.233 p' in a tenth)", lambda v: f"{v:.3f} p" if tenth(v) else f"{v:.3f}", {}),
    ("a unit word, named in numeric ('1.233 kg')", lambda v: f"{v:.3f} kg", {"numeric": ["x1"]}),
    ("magnitudes, named in numeric ('1.233k')", lambda v: f"{v:.3f}k" if v > 0 else f"{v * 1000:.0f}",
     {"numeric": ["x1"]}),
]


def accuracy(frame: pd.DataFrame, episodes: int, epochs: int) -> float:
    """The stages' path, in-process: encode, split seed 0, standardise, pretrain one small encoder,
    cosine-prototype episodes; the mean ensemble accuracy over 1, 5 and 10 shots (%)."""
    table = encode_table(frame)
    split = make_split(table.y, 0, 1 / 6, 0.1)
    X = scale(table, split.train)
    cfg = PretrainConfig(encoder_hidden=64, encoder_out=32, projector_hidden=64, projector_out=32,
                         max_epochs=epochs, patience=epochs, progress_seconds=1e9)
    result = pretrain_encoder(X[split.train], X[split.val], table.groups, 0.2, 0, cfg, torch.device("cpu"))
    features = encode(result.encoder_state, {"in_features": X.shape[1], "encoder_hidden": 64, "encoder_out": 32,
                                             "encoder_out_relu": True}, X[split.test], torch.device("cpu"))
    scores = evaluate_members(features[None], ["r0.2"], table.y[split.test], len(table.classes), 0,
                              EvaluateConfig(episodes=episodes, prototype_shots=(1, 5, 10)), "mine")
    summary = summarise(scores)
    return float(summary[summary["member"] == "ensemble"]["accuracy"].mean())


def read(root: Path, frame: pd.DataFrame, options: dict) -> pd.DataFrame:
    """``frame`` written as data/local/mine.csv and read as the fetch stage reads it."""
    frame.to_csv(root / "data" / "local" / "mine.csv", index=False, sep=options.get("delimiter", ","))
    raw = read_params_file(ROOT / "params.yaml")
    raw["sources"]["mine"] = {"path": "data/local/mine.csv", "target": "label", **options}
    raw["datasets"] = ["mine"]
    source = parse_params(raw).sources["mine"]
    with contextlib.redirect_stderr(io.StringIO()):  # the fetch log's notices
        table, _ = load_local_table("mine", source, root)
    return table


def as_text(options: dict) -> dict:
    """A case's options with x1 named in `categorical` (and not in `numeric`: one type per column)."""
    return {**{k: v for k, v in options.items() if k != "numeric"}, "categorical": ["x1"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=100, help="episodes per shot (default 100, the paper's)")
    parser.add_argument("--epochs", type=int, default=10, help="pretraining epochs (default 10)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "data" / "local").mkdir(parents=True)
        clean = accuracy(read(root, signal_table(), {}), args.episodes, args.epochs)
        print(f"clean table: {clean:.2f} % (chance 50)")
        print(f"{'x1 written as':42s} {'by the rules':>12s} {'as text':>8s} {'rules - text':>12s}")
        for case, fmt, options, *columns in CASES:
            frame = signal_table()
            for column in (columns[0] if columns else ("x1",)):
                frame[column] = [fmt(v) for v in frame[column]]
            ruled = accuracy(read(root, frame, options), args.episodes, args.epochs)
            text = accuracy(read(root, frame, as_text(options)), args.episodes, args.epochs)
            print(f"{case:42s} {ruled:12.2f} {text:8.2f} {ruled - text:+12.2f}")
    print(f"({args.episodes} episodes per shot, {args.epochs} epochs; {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
