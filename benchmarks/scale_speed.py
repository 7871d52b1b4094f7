"""Scaling a seed's table (`seba.core.data.scale`): the finite-table path against the NaN-aware path that
every table took before it, in the same run, and whether they give the same bits.

Usage (repository root):
    python benchmarks/scale_speed.py [--datasets fashion karhunen ...] [--seeds 3] [--repeats 3]

For each dataset (default: fashion, then params.yaml's datasets; fashion needs its verified copy
in data/snapshot/fashion.parquet), the table is read from the offline snapshot and encoded as the
preprocess stage does; for `--seeds` seeds' train splits (`seba.core.data.make_split`, the split
stage's fractions), `scale` and the general path (`seba.core.data._standardise_general` on a float32
copy, what `scale` ran for every table before the finite path) run alternately, `--repeats` times
each. Prints per dataset: rows x columns, the best seconds per seed of each, their ratio, and
whether every seed's result is bit-identical. The pretrain stage scales each seed once per ratio,
the evaluate stage once per seed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    import numpy as np

    import benchmarks.speed as speed
    from seba.core.config import load_params
    from seba.core.data import _standardise_general, make_split, scale

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="*")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.seeds < 1 or args.repeats < 1:
        raise SystemExit("--seeds and --repeats must be positive")
    params = load_params(ROOT / "params.yaml")
    datasets = args.datasets or ["fashion", *params.datasets]
    tables = {name: speed.checked_table(name, params)[0] for name in datasets}  # every table read (or refused) first
    print(f"{'dataset':<10} {'rows x cols':>13} {'general s/seed':>15} {'scale s/seed':>13} {'ratio':>6}  identical")
    for name, table in tables.items():
        splits = [make_split(table.y, seed, params.split.test_fraction, params.split.val_fraction).train
                  for seed in range(args.seeds)]
        best = {"general": float("inf"), "scale": float("inf")}
        same = True
        for _ in range(args.repeats):
            for label in best:
                start = time.perf_counter()
                results = [scale(table, train) if label == "scale"
                           else _standardise_general(table.X.astype(np.float32, copy=True), table, train)
                           for train in splits]
                best[label] = min(best[label], (time.perf_counter() - start) / len(splits))
                if label == "scale":
                    fast = results
                else:
                    general = results
            same &= all(np.array_equal(a.view(np.int32), b.view(np.int32)) for a, b in zip(fast, general))
            del fast, general
        rows, cols = table.X.shape
        print(f"{name:<10} {f'{rows} x {cols}':>13} {best['general']:>15.3f} {best['scale']:>13.3f} "
              f"{best['general'] / best['scale']:>5.1f}×  {'yes' if same else 'NO'}")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
