"""DVC stage `split@<dataset>`: one stratified train / validation / test split per seed."""

import argparse

import numpy as np

from seba.cli import run_stage
from seba.config import load_params
from seba.data import EncodedTable, check_shots, make_split, save_splits
from seba.runtime import log, repo_root
from seba.tracking import Tracker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    args = parser.parse_args()
    params = load_params()
    root = repo_root()
    table = EncodedTable.load(root / "data" / "processed" / f"{args.dataset}.npz")
    splits = [make_split(table.y, seed, params.split.test_fraction, params.split.val_fraction,
                         args.dataset, table.classes) for seed in params.seeds]
    for s in splits:  # fail here, before any pretraining, if a shot cannot be served
        check_shots(table.y[s.test], table.classes, params.evaluate.shots, args.dataset, s.seed)
    save_splits(root / "data" / "splits" / f"{args.dataset}.npz", splits)
    s = splits[0]
    log(f"[split {args.dataset}] {len(splits)} seeds; train / val / test = {len(s.train)} / {len(s.val)} / "
        f"{len(s.test)}; smallest class in test: {int(np.bincount(table.y[s.test]).min())} rows")
    with Tracker("split", f"split {args.dataset}", tags={"dataset": args.dataset},
                 params={"seeds": list(params.seeds), "split": vars(params.split)}, root=root) as tr:
        tr.log_metrics({"train_rows": len(s.train), "val_rows": len(s.val), "test_rows": len(s.test)})


if __name__ == "__main__":
    run_stage("split", main)
