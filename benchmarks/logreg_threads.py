"""The logistic-regression baseline with the BLAS library's default threads against one thread,
in the same run: seconds per seed and whether the episodes are the same.

Usage (repository root):
    python benchmarks/logreg_threads.py [--datasets cmc diabetes ...] [--seed 0] [--repeats 2]

For each dataset (default: params.yaml's), the `baseline` stage's scoring of one seed
(`seba.baselines.base.score_seed`: every shot's episodes, params.yaml's settings) runs with
`seba.baselines.logreg.BLAS_THREADS` = None (the library's default, one thread per core) and = 1
(the default since), alternately, `--repeats` times each. Prints the BLAS library, then per
dataset the median seconds of each, their ratio, and whether every episode's accuracy is equal.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    import torch

    from benchmarks.entry import check_openml_datasets, positive
    from threadpoolctl import threadpool_info

    import seba.baselines.logreg as logreg
    from seba.baselines.base import load_method, method_config, score_seed
    from seba.core.config import load_params
    from seba.core.data import encode_table, load_snapshot, make_split

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="*")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=positive, default=2)
    args = parser.parse_args()
    params = load_params(ROOT / "params.yaml")
    cls, cfg = load_method("logreg"), method_config(params.baselines, "logreg")
    blas = [f"{i['internal_api']} {i['version']} ({i['num_threads']} threads)" for i in threadpool_info()
            if i["user_api"] == "blas"]
    print(f"BLAS: {', '.join(blas) or 'none found'}; seed {args.seed}; shots {list(params.evaluate.shots)}, "
          f"{params.evaluate.episodes} episodes each")
    total = {None: 0.0, 1: 0.0}
    check_openml_datasets(args.datasets or [], params)
    for dataset in args.datasets or params.datasets:
        frame, _ = load_snapshot(params.sources[dataset].openml_id, ROOT / "data" / "snapshot")
        table = encode_table(frame)
        split = make_split(table.y, args.seed, params.split.test_fraction, params.split.val_fraction)
        seconds, frames = {None: [], 1: []}, {}
        for _ in range(args.repeats):
            for threads in (None, 1):
                logreg.BLAS_THREADS = threads
                start = time.perf_counter()
                frames[threads], _, _ = score_seed(cls, cfg, table, split, args.seed, params.evaluate, dataset,
                                                   torch.device("cpu"))
                seconds[threads].append(time.perf_counter() - start)
        default, one = statistics.median(seconds[None]), statistics.median(seconds[1])
        total[None] += default
        total[1] += one
        same = frames[None]["accuracy"].equals(frames[1]["accuracy"])
        print(f"  {dataset:10s}: default threads {default:7.2f} s, one thread {one:6.2f} s: {default / one:5.2f}x; "
              f"episodes {'equal' if same else 'DIFFER'}", flush=True)
    print(f"  {'all':10s}: default threads {total[None]:7.2f} s, one thread {total[1]:6.2f} s: "
          f"{total[None] / total[1]:5.2f}x")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
