"""Host memory of a pretrain stage before its first stack trains: each seed kept as its split,
scaled when its stack starts (the stage's `prepare`, seba.pretrain_stage), against every seed's
scaled rows held at once (scaling up front), measured in the same run.

Usage (repository root):
    python benchmarks/pretrain_memory.py [--dataset fashion] [--seeds 20]

The dataset's table is read from the offline snapshot and encoded as the preprocess stage does
(fashion needs its verified copy in data/snapshot/fashion.parquet); `--seeds` splits are made as
the split stage makes them, in a temporary repository whose params.yaml is this one's with those
seeds. `prepare` runs under tracemalloc (numpy's arrays are counted), then every seed's rows are
scaled and held at once. Prints, in MB, what each holds once done and its peak, and the rows of
one seed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def traced(work):
    """(result, bytes held after, peak bytes) of ``work()``."""
    tracemalloc.start()
    result = work()
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result, held, peak


def main() -> None:
    import yaml

    import benchmarks.speed as speed
    from seba.core.config import ParamsLoader, dump_params, load_params
    from seba.core.data import make_split, save_splits
    from seba.pretrain_stage import prepare

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="fashion")
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    if args.seeds < 1:
        raise SystemExit("--seeds must be positive")
    params = load_params(ROOT / "params.yaml")
    table = speed.checked_table(args.dataset, params)[0]
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        raw = yaml.load((ROOT / "params.yaml").read_text(), Loader=ParamsLoader)
        raw.update(seeds=list(range(args.seeds)), datasets=[args.dataset])
        (repo / "params.yaml").write_text(dump_params(raw))
        shutil.copy(ROOT / "dvc.yaml", repo / "dvc.yaml")
        for folder in ("processed", "splits"):
            (repo / "data" / folder).mkdir(parents=True)
        table.save(repo / "data" / "processed" / f"{args.dataset}.npz")
        save_splits(repo / "data" / "splits" / f"{args.dataset}.npz",
                    [make_split(table.y, seed, params.split.test_fraction, params.split.val_fraction)
                     for seed in range(args.seeds)])
        del table
        run, held, peak = traced(lambda: prepare(load_params(repo / "params.yaml"), args.dataset, 0.3, repo))
        _, rows_held, rows_peak = traced(lambda: [seed.source.rows() for seed in run.seeds])
    first = run.seeds[0]
    seed_mb = (first.n_train + first.n_val) * first.n_features * 4 / 1e6
    print(f"{args.dataset}: {args.seeds} seeds, {first.n_train} train + {first.n_val} val rows x "
          f"{first.n_features} columns = {seed_mb:.1f} MB of float32 rows per seed")
    print(f"{'':<36} {'held MB':>9} {'peak MB':>9}")
    print(f"{'prepare (each seed as its split)':<36} {held / 1e6:>9.1f} {peak / 1e6:>9.1f}")
    print(f"{'+ every seed scaled and held':<36} {(held + rows_held) / 1e6:>9.1f} {(held + rows_peak) / 1e6:>9.1f}")
    print(f"ratio of held bytes: {(held + rows_held) / held:.1f}x")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
