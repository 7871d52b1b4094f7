"""Seeds trained as one stack against seeds trained one at a time, measured in one run.

Usage (repository root):
    python benchmarks/stacking.py [--dataset karhunen] [--seeds 3] [--ratio 0.3] [--max-epochs 0]
                                  [--device cpu|cuda] [--precision fp32] [--threads 0] [--repeats 2]
                                  [--baseline-rev REV | --baseline-code DIR] [--stacks 1,2,4]
                                  [--compare per-seed|stacks]

Prints:
1. per-model step time against the stack size (``--stacks``; on CUDA the steps are CUDA graphs),
   for the table's real width and a 1024-row batch: ms per model-step and the ratio to a stack
   of one, measured in the same run (``--precision``; on CUDA tf32 as well);
2. the pretraining of ``--seeds`` seeds of one table and ratio with the pipeline's settings
   (``--max-epochs`` > 0 caps the epochs, for a shorter run): the baseline code (the per-seed
   path of the pipeline before seeds were stacked, ``--baseline-rev`` extracted from git, or
   ``--baseline-code`` a directory holding its ``seba`` package) training the seeds one at a
   time, against this tree training them one at a time and as one stack. Each run is its own
   process (run alternately, ``--repeats`` times); printed: wall seconds and process CPU seconds
   (medians; on a busy machine CPU time is the steadier figure), the ratios, and whether every
   seed's stop epoch and validation losses equal the baseline's. ``--compare stacks`` measures a
   change of the stacked loop instead: the baseline (then a revision that stacks, such as
   ``HEAD~1``) and this tree each train the seeds as one stack.
"""

from __future__ import annotations

import argparse
import os
import dataclasses
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE_REV = "61acc39"  # the last commit that trained seeds one at a time (seba.pretrain.pretrain_encoder)


def worker(args) -> None:
    """One timed training run in this process: ``--worker-mode alone`` trains the seeds one at a
    time with the ``seba`` package found first on the path, ``stacked`` as one stack."""
    import numpy as np
    import torch

    from seba.core.config import PretrainConfig
    from seba.core.data import encode_table, load_snapshot, make_split, scale
    import seba.pretrain as pretrain

    job = json.loads(args.worker)
    if job["threads"]:
        torch.set_num_threads(job["threads"])
    known = {f.name for f in dataclasses.fields(PretrainConfig)}
    cfg = PretrainConfig(**{k: (tuple(v) if isinstance(v, list) else v)
                            for k, v in job["pretrain"].items() if k in known})
    frame, _ = load_snapshot(job["openml_id"], ROOT / "data" / "snapshot")
    table = encode_table(frame)
    data = []
    for seed in job["seeds"]:
        split = make_split(table.y, seed, job["test_fraction"], job["val_fraction"])
        X = scale(table, split.train)
        data.append((X[split.train], X[split.val], seed))
    device = torch.device(job["device"])
    if device.type == "cuda":
        torch.cuda.synchronize()
    start, cpu_start = time.perf_counter(), time.process_time()
    if args.worker_mode == "stacked":
        results = pretrain.pretrain_stack([pretrain.SeedData(x, v, s) for x, v, s in data], table.groups,
                                          job["ratio"], cfg, device)
    else:
        results = [pretrain.pretrain_encoder(x, v, table.groups, job["ratio"], s, cfg, device) for x, v, s in data]
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    first = next(iter(results[0].encoder_state.values()))
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds, "stop_epochs": [r.stop_epoch for r in results],
                      "val_loss": [r.val_loss for r in results],
                      "checksum": float(np.sum([float(t.double().sum()) for r in results
                                                for t in r.encoder_state.values()])),
                      "rows": len(data[0][0]), "columns": int(first.shape[1])}))


def run_worker(code: Path, mode: str, job: dict) -> dict:
    done = subprocess.run([sys.executable, __file__, "--worker", json.dumps(job), "--worker-mode", mode],
                          cwd=ROOT, capture_output=True, text=True, env={**_env(), "PYTHONPATH": os.pathsep.join([str(code), *filter(None, [os.environ.get("PYTHONPATH")])])})
    if done.returncode != 0:
        raise SystemExit(f"benchmark worker ({mode}, {code}) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _env() -> dict:
    import os

    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def baseline_code(args) -> Path:
    if args.baseline_code:
        return Path(args.baseline_code).resolve()
    archive = subprocess.run(["git", "archive", args.baseline_rev, "seba"], cwd=ROOT, capture_output=True, check=True)
    target = Path(tempfile.mkdtemp(prefix="seba-baseline-"))
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(target, filter="data")
    return target


def step_section(args, params) -> None:
    import torch

    sys.path.insert(0, str(ROOT))
    import benchmarks.speed as speed

    speed.DEVICE = torch.device(args.device)
    table, split = speed.load_table(args.dataset, params)
    precisions = [args.precision] + (["tf32"] if args.device == "cuda" and args.precision != "tf32" else [])
    for precision in precisions:
        first = None
        for stack in args.stacks:
            from seba.core.runtime import matmul_precision

            with matmul_precision(precision):
                step, batch, d, _ = speed.training_step(table, split, params, "fp32" if precision == "tf32" else precision,
                                                        graph=args.device == "cuda", stack=stack)
                repeats = 10 if stack > 10 else 20
                cpu_start = time.process_time()
                seconds = speed.timed(step, repeats=repeats, warmup=3)
                cpu = (time.process_time() - cpu_start) / (repeats + 3)
            per_model = seconds / stack
            first = first or per_model
            print(f"  {args.dataset} D={d} B={batch} {precision}: stack {stack:4d}: {seconds * 1e3:8.2f} ms/step, "
                  f"{per_model * 1e3:7.3f} ms per model-step ({first / per_model:5.2f}x the model-steps per "
                  f"second of a stack of one)" + (f"; process CPU time {cpu / stack * 1e3:7.3f} ms per model-step"
                                                  if args.device == "cpu" else ""), flush=True)


def main() -> None:
    from entry import positive, positives, ratio

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="karhunen")
    parser.add_argument("--seeds", type=positive, default=3)
    parser.add_argument("--ratio", type=ratio, default=0.3)
    parser.add_argument("--max-epochs", type=int, default=0)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--repeats", type=positive, default=2)
    parser.add_argument("--stacks", type=positives, default="1,2,4", help="stack sizes of section 1")
    parser.add_argument("--skip-steps", action="store_true")
    parser.add_argument("--skip-training", action="store_true")
    parser.add_argument("--baseline-rev", default="", help=f"default: {BASELINE_REV} (per-seed)")
    parser.add_argument("--baseline-code", default="")
    parser.add_argument("--compare", default="per-seed", choices=["per-seed", "stacks"],
                        help="section 2: the per-seed baseline against this tree (default), or a stacking "
                             "baseline's stack against this tree's")
    parser.add_argument("--worker", default="")
    parser.add_argument("--worker-mode", default="alone")
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    if not (args.baseline_rev or args.baseline_code):
        if args.compare == "stacks":
            parser.error("--compare stacks needs --baseline-rev REV or --baseline-code DIR: a revision that "
                         "stacks seeds, such as HEAD~1")
        args.baseline_rev = BASELINE_REV
    sys.path.insert(0, str(ROOT))
    from seba.core.config import load_params

    params = load_params(ROOT / "params.yaml")
    print(f"{args.dataset}, ratio {args.ratio}, device {args.device}, precision {args.precision}")
    if not args.skip_steps:
        print("1. per-model step time against the stack size")
        step_section(args, params)
    if args.skip_training:
        return
    cfg = dataclasses.replace(params.pretrain_for(args.dataset), precision=args.precision, device=args.device,
                              progress_seconds=1e9)
    if args.max_epochs:
        cfg = dataclasses.replace(cfg, max_epochs=args.max_epochs)
    job = {"pretrain": dataclasses.asdict(cfg), "openml_id": params.sources[args.dataset].openml_id,
           "seeds": list(range(args.seeds)), "ratio": args.ratio, "device": args.device, "threads": args.threads,
           "test_fraction": params.split.test_fraction, "val_fraction": params.split.val_fraction}
    old = baseline_code(args)
    if args.compare == "stacks":
        runs = {"baseline, one stack": (old, "stacked"), "this tree, one stack": (ROOT, "stacked")}
    else:
        runs = {"baseline, one at a time": (old, "alone"), "this tree, one at a time": (ROOT, "alone"),
                "this tree, one stack": (ROOT, "stacked")}
    first = next(iter(runs))
    print(f"2. {args.seeds} seeds of {args.dataset} r={args.ratio}"
          f"{f', at most {args.max_epochs} epochs' if args.max_epochs else ''} ({args.repeats} alternating runs each; "
          f"baseline: {args.baseline_code or args.baseline_rev})")
    times = {name: [] for name in runs}
    cpu = {name: [] for name in runs}
    outputs = {}
    for _ in range(args.repeats):
        for name, (code, mode) in runs.items():
            outputs[name] = run_worker(code, mode, job)
            times[name].append(outputs[name]["seconds"])
            cpu[name].append(outputs[name]["cpu_seconds"])
    reference = outputs[first]
    base = statistics.median(times[first])
    base_cpu = statistics.median(cpu[first])
    print(f"  {reference['rows']} training rows; stop epochs {reference['stop_epochs']}")
    for name in runs:
        out, seconds, cpu_seconds = outputs[name], statistics.median(times[name]), statistics.median(cpu[name])
        same = out["stop_epochs"] == reference["stop_epochs"] and out["val_loss"] == reference["val_loss"]
        print(f"  {name:26s}: {seconds:8.2f} s wall (runs: {', '.join(f'{t:.2f}' for t in times[name])}), "
              f"{cpu_seconds:8.2f} s process CPU time; {base / seconds:5.2f}x the baseline's wall speed, "
              f"{base_cpu / cpu_seconds:5.2f}x its CPU-time speed; stop epochs and validation losses "
              f"{'equal' if same else 'DIFFER from'} the baseline's"
              + ("" if out["checksum"] == reference["checksum"] else " (weights differ)"))


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
