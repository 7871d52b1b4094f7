"""One baseline on one table and seed with some of its settings changed, scored on SeBA's episodes
(100 per shot by default), in this process: for checking a cell against the paper without a DVC
experiment.

Usage (repository root):
    python benchmarks/baseline_variant.py METHOD DATASET [KEY=VALUE ...] [--repo DIR] [--seed 0] [--threads 1]

``DIR`` (default: this repository) holds the pipeline's `params.yaml`, `data/processed/` and
`data/splits/` (run `dvc repro split@DATASET` there first). ``KEY=VALUE`` overrides
`baselines.METHOD.KEY` (VALUE read as YAML). Prints the method's log and one JSON line: the
changes, the seconds and the mean accuracy per shot.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("method")
    parser.add_argument("dataset")
    parser.add_argument("changes", nargs="*", metavar="KEY=VALUE")
    parser.add_argument("--repo", type=Path, default=ROOT)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    import torch

    from seba.core import paths
    from seba.baselines.base import evaluate_baseline, load_method, method_config
    from seba.core.config import load_params
    from seba.core.data import EncodedTable, load_split
    from seba.core.tracking import NullTracker

    from seba.core.config import ParamsLoader
    from seba.core.schema import check

    torch.set_num_threads(args.threads)
    params = load_params(args.repo / "params.yaml")
    bad = [c for c in args.changes if "=" not in c or not c.split("=", 1)[0]]
    if bad:
        raise SystemExit(f"error: each change is KEY=VALUE, got {', '.join(map(repr, bad))}")
    changes = {key: yaml.load(value, Loader=ParamsLoader) for key, value in (c.split("=", 1) for c in args.changes)}
    base = dataclasses.asdict(method_config(params.baselines, args.method))  # (a ConfigError for an unknown method)
    cfg = check(load_method(args.method).Config, {**base, **changes}, f"baselines.{args.method}")  # checked as params.yaml's
    table = EncodedTable.load(paths.processed(args.repo, args.dataset))
    splits = {args.seed: load_split(paths.splits(args.repo, args.dataset), args.seed)}
    start = time.perf_counter()
    frame = evaluate_baseline(load_method(args.method), cfg, table, splits, params.evaluate, args.dataset,
                              torch.device("cpu"), NullTracker())
    accuracy = frame.groupby("shot")["accuracy"].mean()
    print(json.dumps({"method": args.method, "dataset": args.dataset, "seed": args.seed, "changes": changes,
                      "seconds": round(time.perf_counter() - start, 1),
                      **{f"{shot}shot": round(float(a), 2) for shot, a in accuracy.items()}}))


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
