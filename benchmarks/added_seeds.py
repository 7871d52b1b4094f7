"""What adding seeds to a finished pretrain stage costs: `dvc repro` after `seeds` grows, for a
baseline revision (every seed trains again) and for this tree (the earlier seeds are reused), in
the same run.

Usage (repository root):
    python benchmarks/added_seeds.py [--baseline-rev REV] [--dataset karhunen] [--ratio 0.2]
                                     [--seeds 2] [--added 1] [--max-epochs N]

Each tree gets the same params: the one dataset and ratio, seeds 0 .. --seeds - 1, kNN only,
`pretrain.workers: 1` and `pretrain.threads: 1` (fixed threads: see docs/performance.md, "Stacked
seeds"), `pretrain.max_epochs` if given. Each is built with `dvc repro` (not timed), then its
`seeds` grow by --added and `dvc repro` is timed (pretraining of the added seeds, or of all, plus
evaluation and the baseline). Printed per tree: the wall seconds of that second run, the seeds the
stage trained, and whether every checkpoint equals the other tree's bit for bit.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from startup import checkout  # noqa: E402  (the same tree extraction as the start-up benchmark)


def set_params(work: Path, dataset: str, ratio: float, seeds: int, max_epochs: int) -> None:
    sys.path.insert(0, str(ROOT))
    from seba.core.config import ParamsLoader, dump_params

    params = yaml.load((work / "params.yaml").read_text(), Loader=ParamsLoader)
    params.update(seeds=list(range(seeds)), datasets=[dataset], ratios=[ratio])
    params["pretrain"].update({"workers": 1, "threads": 1, **({"max_epochs": max_epochs} if max_epochs else {})})
    params["baselines"]["methods"] = ["knn"]
    (work / "params.yaml").write_text(dump_params(params))


def repro(work: Path, env: dict) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run(["dvc", "repro"], cwd=work, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"dvc repro failed in {work}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return wall, result.stdout + result.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline-rev", default="2c24643", help="git revision of the baseline (before the reuse)")
    parser.add_argument("--dataset", default="karhunen")
    parser.add_argument("--ratio", type=float, default=0.2)
    parser.add_argument("--seeds", type=int, default=2, help="seeds of the first run")
    parser.add_argument("--added", type=int, default=1, help="seeds added for the timed run")
    parser.add_argument("--max-epochs", type=int, default=0, help="pretrain.max_epochs (0: the params' own)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="seba-added-seeds-"))
    trees = {"baseline": args.baseline_rev, "this tree": None}
    results = {}
    try:
        for name, rev in trees.items():
            work = scratch / name.replace(" ", "_")
            checkout(rev, work)
            set_params(work, args.dataset, args.ratio, args.seeds, args.max_epochs)
            env = {**os.environ, "PYTHONPATH": str(work), "DVC_NO_ANALYTICS": "1", "MLFLOW_DISABLE_TELEMETRY": "true",
                   "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
            env.pop("MLFLOW_TRACKING_URI", None)
            for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                        ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "bench"]):
                subprocess.run(cmd, cwd=work, env=env, check=True, capture_output=True)
            first, _ = repro(work, env)
            set_params(work, args.dataset, args.ratio, args.seeds + args.added, args.max_epochs)
            wall, output = repro(work, env)
            trained = len(re.findall(r"\[pretrain [^\]]* seed \d+ \(\d+/\d+\)\] done", output))
            models = work / "data" / "models" / args.dataset / f"r{args.ratio:g}"
            results[name] = {"first": first, "wall": wall, "trained": trained,
                             "checkpoints": {p.name: p.read_bytes() for p in sorted(models.glob("seed*.pt"))}}
            print(f"{name}: first run {first:.1f} s; after adding {args.added} seed(s): {wall:.1f} s, "
                  f"{trained} seed(s) trained", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    base, this = results["baseline"], results["this tree"]
    same = base["checkpoints"] == this["checkpoints"]
    print(f"\n{args.dataset} r={args.ratio:g}, {args.seeds} seed(s) then {args.seeds + args.added}, "
          f"max_epochs {args.max_epochs or 'as params.yaml'}, one worker of one thread")
    print(f"{'tree':<10} {'dvc repro after adding (s)':>27} {'seeds trained':>14}")
    for name in trees:
        print(f"{name:<10} {results[name]['wall']:>27.1f} {results[name]['trained']:>14}")
    print(f"ratio      {base['wall'] / this['wall']:>26.2f}x  (baseline / this tree); checkpoints "
          f"{'equal bit for bit' if same else 'DIFFER'} ({len(this['checkpoints'])} seeds)")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
