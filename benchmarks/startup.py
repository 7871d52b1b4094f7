"""What a DVC stage instance costs beyond its work: `dvc repro` of a pipeline whose stages do
almost nothing, for a baseline revision and for this tree, in the same run.

Usage (repository root):
    python benchmarks/startup.py [--baseline-rev REV] [--datasets cmc,diabetes] [--repeats 2] [--noops 3]

Both trees get the same tiny params (seed 0, the given datasets, all five ratios, one epoch,
two episodes, kNN and logistic regression), are built once with `dvc repro`, then timed:
`dvc repro --force` (every stage instance reruns; alternating baseline / tree, ``--repeats``
times each; 0: none) and a no-op `dvc repro` (``--noops`` times each, alternating). Printed per
tree: wall seconds, stage instances, wall and CPU seconds per instance (CPU: user + system of all processes, robust to a
busy machine; the stages' warm worker, seba/core/worker.py, and the runs it forks included), and the
ratios to the baseline. Each tree runs its own ``seba`` (PYTHONPATH) in this environment.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import psutil
import yaml

ROOT = Path(__file__).resolve().parents[1]


def tiny_params(work: Path, datasets: list[str]) -> None:
    from seba.core.config import ParamsLoader, dump_params

    params = yaml.load((work / "params.yaml").read_text(), Loader=ParamsLoader)
    params["seeds"] = [0]
    params["datasets"] = datasets
    params["pretrain"].update({"max_epochs": 1, "patience": 1})
    params["evaluate"]["episodes"] = 2
    params["baselines"]["methods"] = ["knn", "logreg"]
    (work / "params.yaml").write_text(dump_params(params))


def checkout(rev: str | None, work: Path) -> None:
    """``rev`` extracted from git, or (None) this working tree's files."""
    work.mkdir(parents=True)
    if rev is None:
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.split()
        for name in files:
            if (ROOT / name).is_file():
                (work / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, work / name)
    else:
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(work, filter="data")
    for stale in ("dvc.lock", "reports"):
        path = work / stale
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)


def worker_cpu(work: Path) -> float:
    """CPU seconds of the stages' warm workers started in ``work`` (seba/core/worker.py), with the
    stage runs they forked: they are not this process's children, so getrusage misses them."""
    total = 0.0
    for process in psutil.process_iter(["cmdline", "cwd"]):
        try:
            if "seba.core.worker" in " ".join(process.info["cmdline"] or []) and process.info["cwd"] == str(work):
                t = process.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
    return total


def run(cmd: list[str], work: Path, env: dict) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the process tree and of the workers it used, output)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers_before = worker_cpu(work)
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed in {work}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cpu += worker_cpu(work) - workers_before
    return wall, cpu, result.stdout + result.stderr


def imports(stages=("pretrain", "evaluate", "baseline", "split"), repeats: int = 3) -> dict:
    """A stage process's start-up alone: ``python stages/<stage>.py --help`` as DVC runs it (with
    DVC_STAGE set), importing for itself (SEBA_WORKER=0) and through a warm worker: median wall s."""
    sock = Path(tempfile.mkdtemp(prefix="seba-w-")) / "w.sock"
    env = {**os.environ, "DVC_STAGE": "startup-benchmark", "SEBA_WORKER_SOCKET": str(sock), "SEBA_WORKER_IDLE": "60"}
    subprocess.run([sys.executable, "stages/pretrain.py", "--help"], cwd=ROOT, env=env, capture_output=True)
    deadline = time.time() + 120
    while not sock.exists() and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(5)  # its imports done
    out = {}
    for stage in stages:
        for mode in ("0", "1"):
            walls = []
            for _ in range(repeats):
                start = time.perf_counter()
                subprocess.run([sys.executable, f"stages/{stage}.py", "--help"], cwd=ROOT,
                               env={**env, "SEBA_WORKER": mode}, capture_output=True, check=True)
                walls.append(time.perf_counter() - start)
            out[f"{stage} {'worker' if mode == '1' else 'alone'}"] = statistics.median(walls)
        print(f"{stage:<10} alone {out[stage + ' alone']:.2f} s, through the warm worker {out[stage + ' worker']:.2f} s",
              flush=True)
    for process in psutil.process_iter(["cmdline"]):
        if str(sock) in " ".join(process.info["cmdline"] or []):
            process.kill()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline-rev", default="4769afd",
                        help="git revision of the baseline (default: stages that import MLflow)")
    parser.add_argument("--datasets", default="cmc,diabetes")
    parser.add_argument("--repeats", type=int, default=2, help="forced runs per tree (0: the no-op runs only)")
    parser.add_argument("--noops", type=int, default=3, help="no-op runs per tree")
    parser.add_argument("--json", help="also write every measurement and the medians to this file")
    parser.add_argument("--imports-only", action="store_true",
                        help="only the stage processes' start-up alone, without and with the worker")
    args = parser.parse_args()
    if args.imports_only:
        result = imports()
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
        return
    datasets = args.datasets.split(",")
    scratch = Path(tempfile.mkdtemp(prefix="seba-startup-"))
    trees = {"baseline": args.baseline_rev, "this tree": None}
    env_of, results = {}, {name: {"wall": [], "cpu": [], "instances": [], "noop": []} for name in trees}
    try:
        for name, rev in trees.items():
            work = scratch / name.replace(" ", "_")
            checkout(rev, work)
            tiny_params(work, datasets)
            env = {**os.environ, "PYTHONPATH": str(work), "DVC_NO_ANALYTICS": "1",
                   "MLFLOW_DISABLE_TELEMETRY": "true",
                   "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
            env.pop("MLFLOW_TRACKING_URI", None)
            for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                        ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "bench"]):
                subprocess.run(cmd, cwd=work, env=env, check=True, capture_output=True)
            run(["dvc", "repro"], work, env)  # builds it (and creates its MLflow store)
            env_of[name] = (work, env)
        for _ in range(args.repeats):
            for name in trees:
                work, env = env_of[name]
                wall, cpu, output = run(["dvc", "repro", "--force"], work, env)
                n = len(re.findall(r"Running stage '", output))
                results[name]["wall"].append(wall)
                results[name]["cpu"].append(cpu)
                results[name]["instances"].append(n)
                print(f"{name}: dvc repro --force {wall:.1f} s wall, {cpu:.1f} s CPU, {n} stage instances",
                      flush=True)
        for _ in range(args.noops):
            for name in trees:
                work, env = env_of[name]
                results[name]["noop"].append(run(["dvc", "repro"], work, env)[0])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.repeats == 0:
        print(f"\nno-op `dvc repro`, {args.noops} runs per tree (datasets {args.datasets}, 5 ratios)")
        for name in trees:
            noop = results[name]["noop"]
            print(f"{name:<10} {' '.join(f'{t:.2f}' for t in noop)} s; median {statistics.median(noop):.2f} s")
        base, this = (statistics.median(results[name]["noop"]) for name in trees)
        print(f"ratio      {base / this:.2f}x  (baseline / this tree)")
    else:
        print(f"\nmedians over {args.repeats} forced runs (datasets {args.datasets}, 5 ratios, 1 epoch, 2 episodes, "
              f"kNN + logistic regression) and {args.noops} no-op runs")
        print(f"{'tree':<10} {'instances':>9} {'wall s':>8} {'wall s/inst':>11} {'CPU s/inst':>10} {'no-op s':>8}")
        base = None
        for name in trees:
            r = results[name]
            n = statistics.median(r["instances"])
            row = (statistics.median(r["wall"]), statistics.median(r["wall"]) / n, statistics.median(r["cpu"]) / n,
                   statistics.median(r["noop"]))
            base = base or row
            print(f"{name:<10} {n:>9.0f} {row[0]:>8.1f} {row[1]:>11.2f} {row[2]:>10.2f} {row[3]:>8.2f}")
        print(f"ratio      {'':>9} {base[0] / row[0]:>7.2f}x {base[1] / row[1]:>10.2f}x {base[2] / row[2]:>9.2f}x "
              f"{base[3] / row[3]:>7.2f}x  (baseline / this tree)")
    if args.json:
        Path(args.json).write_text(json.dumps({"baseline_rev": args.baseline_rev, "datasets": datasets,
                                               "runs": results}, indent=1) + "\n")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
