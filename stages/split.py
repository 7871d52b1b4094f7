"""DVC stage `split@<dataset>`: one stratified train / validation / test split per seed."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's seba before an installed one (docs/ablations.md)

from seba.core.cli import parse_args, run_stage  # first: hands the stage to a warm worker (seba/core/worker.py)

import dataclasses

import numpy as np

from seba.core import paths
from seba.core.config import params_for_dataset
from seba.core.data import EncodedTable, check_shots, make_split, save_splits
from seba.core.runtime import log, repo_root
from seba.core.tracking import Tracker


def main() -> None:
    args = parse_args(__doc__, dataset=str)
    params = params_for_dataset(args.dataset)
    root = repo_root()
    table = EncodedTable.load(paths.processed(root, args.dataset))
    splits = [make_split(table.y, seed, params.split.test_fraction, params.split.val_fraction,
                         args.dataset, table.classes) for seed in params.seeds]
    for s in splits:  # fail here, before any pretraining, if a shot cannot be served
        check_shots(table.y[s.test], table.classes, params.evaluate.shots, args.dataset, s.seed)
    save_splits(paths.splits(root, args.dataset), splits)
    s = splits[0]
    log(f"[split {args.dataset}] {len(splits)} seeds; train / val / test = {len(s.train)} / {len(s.val)} / "
        f"{len(s.test)}; smallest class in test: {int(np.bincount(table.y[s.test]).min())} rows")
    with Tracker("split", f"split {args.dataset}", tags={"dataset": args.dataset}, root=root,
                 params={"seeds": list(params.seeds), "split": dataclasses.asdict(params.split)}) as tr:
        tr.log_metrics({"train_rows": len(s.train), "val_rows": len(s.val), "test_rows": len(s.test)})


if __name__ == "__main__":
    run_stage("split", main)
