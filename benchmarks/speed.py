"""Speed figures for this machine, all measured in one run (not part of the test suite).

Usage (repository root): python benchmarks/speed.py [--tables karhunen,income] [--skip-dvc]
                        [--skip-steps] [--skip-eval] [--device cuda]

Prints:
1. the plain matrix-multiply peak (fp32 and bf16) of this machine: the baseline;
2. one SeBA training step (encoder + projector + InfoNCE + backward + Adam) on a 1024-row batch
   with each table's real width: ms per step, rows per second, achieved GFLOP/s and the share of
   the matmul peak, fp32 and bf16 autocast; then one process with all threads against one
   one-thread process per core (what `pretrain.workers` does with several seeds);
3. few-shot evaluation of one seed of karhunen from encoded test features to accuracies:
   100 episodes x 3 shots x (5 ratio members + ensemble), with the default evaluate params,
   and what the probes' two batched products alone cost for the same probe-iterations (a floor);
4. with a pipeline run present, the no-op `dvc repro` time (run twice, best taken) and the
   per-stage times read from MLflow (benchmarks/stage_times.py).

With `--device cuda` sections 1-3 run on the GPU (timings synchronise with it), and section 2
adds the share of each step's wall time that the GPU spends in kernels (torch's profiler) and
the host synchronisations of a real training epoch, counted with torch's sync debug mode
(section 2c, with two batch sizes: the count must not grow with the number of batches).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from seba.core.config import load_params  # noqa: E402
from seba.core.data import encode_table, load_snapshot, make_split, scale  # noqa: E402
from seba.evaluate import ENSEMBLE, evaluate_members, summarise  # noqa: E402
from seba.objective import expand_mask, masked_group_count, sample_group_mask  # noqa: E402
from seba.model import StackedEncoder, StackedProjector  # noqa: E402
from seba.pretrain import (StackedStepGraphs, build_models, encode, encoder_config,  # noqa: E402
                           pretrain_encoder, stacked_seba_loss)
from seba.training import make_adam  # noqa: E402


DEVICE = torch.device("cpu")  # --device


def sync() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, repeats: int, warmup: int = 2) -> float:
    """Median seconds of ``fn()`` over ``repeats`` calls after ``warmup`` calls (each call
    waits for the device to finish)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def matmul_peak(dtype: torch.dtype, n: int) -> float:
    a = torch.randn(n, n, device=DEVICE).to(dtype)
    b = torch.randn(n, n, device=DEVICE).to(dtype)
    seconds = timed(lambda: a @ b, repeats=10)
    return 2 * n ** 3 / seconds / 1e9


def step_flops(batch: int, d: int, cfg) -> float:
    """Multiply-add FLOPs of one training step: every Linear costs 2*B*in*out forward and twice
    that backward (input and weight gradients); the [B, B] similarity matrix likewise. The first
    layer's input gradient is not needed, which is ignored (it is small)."""
    linears = [(d, cfg.encoder_hidden), (cfg.encoder_hidden, cfg.encoder_out),
               (cfg.encoder_out + (d if cfg.conditioned else 0), cfg.projector_hidden),
               (cfg.projector_hidden, cfg.projector_out)]
    forward = sum(2 * batch * i * o for i, o in linears) + 2 * batch * batch * cfg.projector_out
    return 3 * forward


def load_table(name: str, params, seed: int = 0):
    """A snapshot table encoded, and ``seed``'s split of it."""
    frame, _ = load_snapshot(params.sources[name].openml_id, ROOT / "data" / "snapshot")
    table = encode_table(frame)
    split = make_split(table.y, seed, params.split.test_fraction, params.split.val_fraction)
    return table, split


def checked_table(name: str, params):
    """``load_table``, or a one-line exit naming the dataset and what is missing (for a benchmark
    that reads every table before its first figure)."""
    from seba.core.errors import DataError

    source = params.sources.get(name)
    if source is None or source.openml_id is None:
        raise SystemExit(f"{name}: not a snapshot dataset of params.yaml's sources")
    try:
        return load_table(name, params)
    except DataError as exc:
        raise SystemExit(f"{name}: {exc}") from None


def training_step(table, split, params, precision: str, graph: bool = False, stack: int = 1):
    """A closure running one SeBA training step (r = 0.3) on the first 1024 train rows of one
    seed's split, with the pipeline's models and Adam, on DEVICE (masks drawn ahead and kept
    there, as the pipeline does per epoch), for a stack of ``stack`` models (seeds 0 ..
    stack - 1, each on the same rows under its own mask); returns (step, batch rows, columns,
    config)."""
    X = torch.as_tensor(scale(table, split.train)[split.train], dtype=torch.float32)
    xb = X[:min(1024, len(X))].to(DEVICE).expand(stack, -1, -1).contiguous()
    groups = torch.as_tensor(table.groups, dtype=torch.long)
    n_groups = int(table.groups.max()) + 1
    gen = torch.Generator().manual_seed(0)
    k = masked_group_count(n_groups, 0.3, 1)
    masks = itertools.cycle(torch.stack([
        torch.stack([expand_mask(sample_group_mask(n_groups, k, gen), groups) for _ in range(stack)])
        for _ in range(64)]).to(DEVICE))  # [stack, D] each
    cfg = dataclasses.replace(params.pretrain, precision=precision)
    models = [build_models(X.shape[1], cfg, seed) for seed in range(stack)]
    encoder = StackedEncoder([e for e, _ in models]).to(DEVICE)
    projector = StackedProjector([p for _, p in models], cfg.mask_bias).to(DEVICE)
    optimiser = make_adam(list(encoder.parameters()) + list(projector.parameters()), cfg.lr, DEVICE)

    def step():
        losses = stacked_seba_loss(encoder, projector, xb, next(masks), cfg)
        optimiser.zero_grad(set_to_none=True)
        losses.sum().backward()
        optimiser.step()

    if graph:  # the pipeline's CUDA-graph step (seba.pretrain.StackedStepGraphs), after eager warm-up steps
        for _ in range(3):
            step()
        graphs = StackedStepGraphs(encoder, projector, optimiser, xb, cfg)
        graphs.capture(xb.shape[1])
        rows = torch.arange(xb.shape[1], device=DEVICE).expand(stack, -1).contiguous()

        def step():
            graphs.step(rows, next(masks), None)

    return step, xb.shape[1], X.shape[1], cfg


def step_benchmark(name: str, params, peaks: dict) -> None:
    table, split = load_table(name, params)
    variants = [("fp32", False), ("bf16", False)] + ([("fp32", True)] if DEVICE.type == "cuda" else [])
    for precision, graph in variants:
        step, batch, d, cfg = training_step(table, split, params, precision, graph)
        seconds = timed(step, repeats=20, warmup=3)
        gflops = step_flops(batch, d, cfg) / seconds / 1e9
        peak = peaks[precision]
        label = precision + (" graph" if graph else "")
        print(f"  {name:9s} D={d:4d} B={batch:4d} {label:10s}: {seconds * 1e3:7.2f} ms/step  "
              f"{batch / seconds:8.0f} rows/s  {gflops:7.1f} GFLOP/s  = {100 * gflops / peak:5.1f} % of "
              f"{precision} matmul peak ({100 * gflops / peaks['fp32']:5.1f} % of fp32 peak)"
              + (f"  GPU busy {busy_text(step)}" if DEVICE.type == "cuda" else ""))


def busy_text(step) -> str:
    try:
        return f"{100 * gpu_busy(step):.0f} % of the wall time"
    except Exception as error:  # the profiler's event API differs between torch versions
        return f"not measured ({type(error).__name__}: {error})"


def gpu_busy(step, steps: int = 20) -> float:
    """Share of the wall time of ``steps`` calls that the GPU spends running kernels (torch's
    profiler; kernel intervals merged, so overlapping kernels count once)."""
    from torch.profiler import ProfilerActivity, profile

    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        wall = time.perf_counter() - start
    spans = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                   if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA)
    busy, end = 0.0, -float("inf")
    for a, b in spans:  # microseconds
        if b > end:
            busy += b - max(a, end)
            end = b
    return busy / 1e6 / wall


def sync_benchmark(params, name: str = "income") -> None:
    """Host synchronisations of real training epochs (pretrain_encoder, r = 0.3) on the GPU, at
    two batch sizes: per-batch round trips would make the count grow with the batches. Per
    epoch = (count of a 5-epoch run - count of a 3-epoch run) / 2 (set-up counted out)."""
    from seba.core.runtime import count_cuda_syncs

    table, split = load_table(name, params)
    X = scale(table, split.train)
    for batch_size in (1024, 128):
        counts = {}
        for epochs in (3, 5):
            cfg = dataclasses.replace(params.pretrain_for(name), max_epochs=epochs, batch_size=batch_size,
                                      progress_seconds=1e9)
            counts[epochs], result = count_cuda_syncs(
                lambda: pretrain_encoder(X[split.train], X[split.val], table.groups, 0.3, 0, cfg, DEVICE))
        batches = -(-len(split.train) // batch_size)
        print(f"  {name}, batch {batch_size}, {batches} training batches per epoch: {counts[3]} host "
              f"synchronisations in 3 epochs, {counts[5]} in 5: {(counts[5] - counts[3]) / 2:.1f} per epoch "
              f"(CUDA graphs: {'yes' if result.cuda_graphs else 'no'})")


def _steps_in_process(name: str, threads: int, steps: int, queue, barrier) -> None:
    """Run ``steps`` training steps of ``name`` (precision auto) with ``threads`` threads,
    starting together with the other processes (``barrier``, after loading and warm-up); put
    (start, end, rows trained) on ``queue``."""
    from seba.core.runtime import resolve_precision

    torch.set_num_threads(threads)
    params = load_params(ROOT / "params.yaml")
    table, split = load_table(name, params)
    step, batch, _, _ = training_step(table, split, params, resolve_precision("auto", torch.device("cpu")))
    for _ in range(3):
        step()
    barrier.wait()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    queue.put((start, time.perf_counter(), batch * steps))


def workers_benchmark(name: str = "income", steps: int = 60) -> None:
    """Rows per second of one process with all threads against one process per core with one
    thread each (what `pretrain.workers` does with several seeds), same steps, same run."""
    import multiprocessing

    cores = torch.get_num_threads()
    context = multiprocessing.get_context("spawn")
    results = {}
    for processes, threads in ((1, cores), (cores, 1)):
        queue, barrier = context.Queue(), context.Barrier(processes)
        procs = [context.Process(target=_steps_in_process, args=(name, threads, steps, queue, barrier))
                 for _ in range(processes)]
        for p in procs:
            p.start()
        spans = [queue.get() for _ in procs]
        for p in procs:
            p.join()
        wall = max(end for _, end, _ in spans) - min(start for start, _, _ in spans)
        results[(processes, threads)] = sum(rows for _, _, rows in spans) / wall
        print(f"  {name}: {processes} process(es) x {threads} thread(s): {results[(processes, threads)]:8.0f} rows/s")
    print(f"  one-thread processes / one {cores}-thread process: "
          f"{results[(cores, 1)] / results[(1, cores)]:.2f}x rows per second")


def evaluation_benchmark(params) -> None:
    table, split = load_table("karhunen", params)
    x_all = scale(table, split.train)
    ratios = list(params.ratios)
    # The pipeline's trained encoders when `dvc repro` has made them (the probes' work depends on
    # how separable the features are), else encoders trained here for 30 epochs.
    cfg = dataclasses.replace(params.pretrain_for("karhunen"), max_epochs=30, progress_seconds=1e9)
    features, source = [], "the pipeline's trained encoders"
    for ratio in ratios:
        path = ROOT / "data" / "models" / "karhunen" / f"r{ratio:g}" / "seed0.pt"
        if path.exists():
            checkpoint = torch.load(path, map_location="cpu", weights_only=True)
            state, model_config = checkpoint["encoder"], checkpoint["model_config"]
        else:
            source = "encoders trained here for 30 epochs (no pipeline run yet)"
            result = pretrain_encoder(x_all[split.train], x_all[split.val], table.groups, ratio, 0, cfg, DEVICE)
            state = result.encoder_state
            model_config = encoder_config(cfg, x_all.shape[1])
        features.append(encode(state, model_config, x_all[split.test], DEVICE))
    features = torch.stack(features)
    members = [f"r{r}" for r in ratios]
    y_test = table.y[split.test]
    timings = []
    for _ in range(3):
        sync()
        start = time.perf_counter()
        episodes = evaluate_members(features, members, y_test, len(table.classes), 0, params.evaluate, "karhunen")
        sync()
        timings.append(time.perf_counter() - start)
    summary = summarise(episodes)
    ens = summary[summary["member"] == ENSEMBLE]
    shots = params.evaluate.shots
    print(f"  karhunen seed 0: {params.evaluate.episodes} episodes x {len(shots)} shots x "
          f"({len(ratios)} members + ensemble), test rows {len(y_test)}, features {features.shape[-1]}: "
          f"median {statistics.median(timings):.2f} s of {len(timings)} runs "
          f"(released code: 189 s; ratio {189 / statistics.median(timings):.0f}x)")
    print(f"  features from {source}; ensemble accuracy: " +
          ", ".join(f"{r.shot}-shot {r.accuracy:.2f}" for r in ens.itertuples()))
    iters = episodes[episodes["probe_iterations"] >= 0].groupby("shot")["probe_iterations"].mean()
    print("  mean probe iterations per shot: " + ", ".join(f"{s}: {v:.0f}" for s, v in iters.items()))
    probe_products_floor(features, episodes, len(table.classes), statistics.median(timings),
                         params.evaluate.prototype_shots)


def probe_products_floor(features: torch.Tensor, episodes, n_classes: int, measured: float,
                         prototype_shots, slots: int = 32) -> None:
    """What the probes' two batched products alone cost for the probe-iterations this evaluation
    ran (logits [C, F+1] x [F+1, S] and gradient [C, S] x [S, F+1] per probe and iteration),
    timed on their own in batches of ``slots`` probes: a floor for any exact batched schedule."""
    probes = episodes[(episodes["probe_iterations"] >= 0) & ~episodes["shot"].isin(list(prototype_shots))]
    total, flops = 0.0, 0.0
    for shot, group in probes.groupby("shot"):
        n_iters = int((group["probe_iterations"] + 1).sum())  # iteration 0 evaluates the initial weights
        support = n_classes * int(shot)
        x = torch.randn(slots, support, features.shape[-1] + 1, device=DEVICE)
        w = torch.randn(slots, n_classes, features.shape[-1] + 1, device=DEVICE)
        logits = torch.empty(slots, n_classes, support, device=DEVICE)
        grad = torch.empty_like(w)

        def pair():
            torch.bmm(w, x.transpose(1, 2), out=logits)
            torch.bmm(logits, x, out=grad)
        seconds = timed(pair, repeats=200, warmup=20) * n_iters / slots
        total += seconds
        flops += 4.0 * n_classes * (features.shape[-1] + 1) * support * n_iters
        print(f"  {shot}-shot: {n_iters} probe-iterations; their two products alone: {seconds:.2f} s")
    print(f"  probe products alone: {total:.2f} s ({flops / total / 1e9:.0f} GFLOP/s, {flops / 1e9:.0f} GFLOP), "
          f"{total / measured:.0%} of the measured evaluation")


def dvc_benchmark() -> None:
    if not (ROOT / "dvc.lock").exists():
        print("  no dvc.lock: run `dvc repro` first for the no-op and per-stage figures")
        return
    times = []
    for _ in range(2):
        start = time.perf_counter()
        done = subprocess.run(["dvc", "repro"], cwd=ROOT, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            print("  dvc repro failed:\n" + done.stdout[-2000:] + done.stderr[-2000:])
            return
    ran = [line for line in done.stdout.splitlines() if line.startswith("Running stage")]
    print(f"  no-op dvc repro: {min(times):.2f} s (best of 2; stages run: {len(ran)})")
    print("  per-stage times of the last pipeline run (MLflow):")
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "stage_times.py")], cwd=ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", default="diabetes,karhunen,income,semeion",
                        help="tables whose widths the step benchmark uses")
    parser.add_argument("--skip-dvc", action="store_true", help="leave out the dvc figures")
    parser.add_argument("--skip-eval", action="store_true", help="leave out the evaluation figure")
    parser.add_argument("--skip-steps", action="store_true", help="leave out sections 1-2 (peak, steps, workers)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where sections 1-3 run")
    args = parser.parse_args()
    global DEVICE
    DEVICE = torch.device(args.device)
    params = load_params(ROOT / "params.yaml")
    torch.manual_seed(0)
    gpu = f", {torch.cuda.get_device_name()}" if DEVICE.type == "cuda" else ""
    print(f"machine: {torch.get_num_threads()} torch threads, torch {torch.__version__}, "
          f"CUDA {'yes' if torch.cuda.is_available() else 'no'}; running on {DEVICE}{gpu}")
    if not args.skip_steps:
        n = 8192 if DEVICE.type == "cuda" else 2048
        print(f"1. matmul peak ({n} x {n} @ {n} x {n}" + (", fp32 without TF32)" if DEVICE.type == "cuda" else ")"))
        peaks = {"fp32": matmul_peak(torch.float32, n), "bf16": matmul_peak(torch.bfloat16, n)}
        for name, value in peaks.items():
            print(f"  {name}: {value:9.1f} GFLOP/s")
        print("2. one SeBA training step on a 1024-row batch (r = 0.3)")
        for name in args.tables.split(","):
            step_benchmark(name.strip(), params, peaks)
        if DEVICE.type == "cuda":
            print("2c. host synchronisations of real training epochs (pretrain_encoder)")
            sync_benchmark(params)
        elif torch.get_num_threads() > 1:
            print("2b. several seeds at once (pretrain.workers): processes x threads, 1024-row income steps")
            workers_benchmark()
    if not args.skip_eval:
        print("3. few-shot evaluation from encoded features")
        evaluation_benchmark(params)
    if not args.skip_dvc and DEVICE.type == "cpu":
        print("4. pipeline")
        dvc_benchmark()


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
