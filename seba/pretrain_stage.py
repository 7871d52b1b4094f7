"""The steps of one `pretrain@<dataset>-<ratio>` stage: every seed's data (checked before any
training), the plan (worker processes, stacks of seeds), and each trained seed's checkpoint,
health check, log entry and tracked metrics."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from seba import paths
from seba.paths import ratio_tag
from seba.config import Params
from seba.data import EncodedTable, check_shots, load_split, scale
from seba.health import check_training
from seba.executor import RayExecutor, chunks, executor_for, placement_tags, stage_device
from seba.pretrain import (PretrainResult, SeedData, encode, encoder_config, member_bytes, plan_stacks, plan_workers,
                           pretrain_many, train_chunk)
from seba.runtime import configure_threads, format_seconds, log, resolve_precision, save_checkpoint


@dataclasses.dataclass
class PretrainRun:
    dataset: str
    ratio: float | str
    root: Path
    cfg: object  # the dataset's PretrainConfig
    device: object  # torch.device
    seeds: list[SeedData]
    jobs: list[dict]  # one per stack of seeds (seba.pretrain.pretrain_many)
    workers: int
    worker_threads: int
    model_config: dict
    tracked: dict  # the run's tracked params
    training_log: dict  # data/models/<dataset>/r<ratio>/log.json
    start: float = 0.0
    executor: RayExecutor | None = None  # executor.kind ray: the jobs are Ray tasks (seba.executor)
    gpus_per_task: float = 0.0


def prepare(params: Params, dataset: str, ratio: float | str, root: Path) -> PretrainRun:
    """Every seed's scaled train / validation rows (each seed's split must exist and serve the
    shots: fail before any training), and the plan; logs it."""
    cfg = params.pretrain_for(dataset)  # the `pretrain` section with this dataset's own values over it
    executor = executor_for(params.executor, cfg.device)  # (ray: connected, or a ConfigError, before any work)
    device = stage_device(cfg.device, executor)  # (with Ray it only checks each returned encoder)
    threads = configure_threads(cfg.threads)
    table = EncodedTable.load(paths.processed(root, dataset))
    seeds = []
    for i, seed in enumerate(params.seeds, start=1):
        split = load_split(paths.splits(root, dataset), seed)
        check_shots(table.y[split.test], table.classes, params.evaluate.shots, dataset, seed)
        X = scale(table, split.train, cfg.normalise)
        label = f"[pretrain {dataset} r={ratio_tag(ratio)[1:]} seed {seed} ({i}/{len(params.seeds)})]"
        seeds.append(SeedData(X[split.train], X[split.val], seed, label))
    stage = f"[pretrain {dataset} r={ratio_tag(ratio)[1:]}]"
    precision = resolve_precision(cfg.precision, device)
    gpus = 0.0
    if executor is None:
        workers, worker_threads = plan_workers(cfg, len(seeds), device)
        stacks = plan_stacks(len(seeds), workers, member_bytes(len(seeds[0].x_train), len(seeds[0].x_val),
                                                               table.X.shape[1], cfg), cfg, device, where=stage)
    else:  # one chunk of seeds per task; each task stacks its chunk to fit its node (seba.pretrain.train_chunk)
        tasks, gpus = executor.plan(len(seeds))
        stacks = chunks(list(range(len(seeds))), tasks)
        workers, worker_threads = tasks, params.executor.cpus_per_task
    tracked = {"dataset": dataset, "ratio": ratio, "seeds": list(params.seeds), "device": str(device),
               "threads": threads, "precision_used": precision,
               "pretrain": {k: v for k, v in dataclasses.asdict(cfg).items() if k != "ratios"},
               "dataset_overrides": dict(params.sources[dataset].pretrain),
               "workers": workers, "threads_per_worker": worker_threads,
               "stack_sizes": [len(stack) for stack in stacks], "executor": params.executor.kind}
    log(f"{stage} {len(seeds)} seed{'s' if len(seeds) > 1 else ''}: {len(seeds[0].x_train)} train / "
        f"{len(seeds[0].x_val)} val rows, {table.X.shape[1]} columns, {table.n_groups} groups, on {device} "
        f"({precision}); stacks of {', '.join(str(len(s)) for s in stacks)} seeds"
        + (f", {workers} at a time ({worker_threads} torch thread{'s' if worker_threads > 1 else ''} each)"
           if workers > 1 and executor is None else "")
        + (f", as {len(stacks)} Ray task{'s' if len(stacks) > 1 else ''} of {worker_threads} CPU"
           f"{'s' if worker_threads > 1 else ''}{f' and {gpus:g} GPU' if gpus else ''} each" if executor else ""))
    jobs = [{"members": [seeds[i] for i in stack], "groups": table.groups, "ratio": ratio, "cfg": cfg,
             "device": device, "label": f"{stage} stack {n}/{len(stacks)}" if len(stacks) > 1 else stage}
            for n, stack in enumerate(stacks, start=1)]
    return PretrainRun(dataset, ratio, root, cfg, device, seeds, jobs, workers, worker_threads,
                       encoder_config(cfg, table.X.shape[1]), tracked,
                       {"dataset": dataset, "ratio": ratio, "device": str(device), "seeds": {}}, 0.0, executor, gpus)


def train(run: PretrainRun, tracker) -> None:
    """Train every seed (stacks in worker processes); record each as it arrives."""
    paths.models(run.root, run.dataset, run.ratio).mkdir(parents=True, exist_ok=True)
    run.start = time.perf_counter()
    if run.executor is None:
        stacks = ((stack, None) for stack in pretrain_many(run.jobs, run.workers, run.worker_threads))
    else:
        pieces = [(job["members"], job["groups"], job["ratio"], job["cfg"], job["label"]) for job in run.jobs]
        stacks = run.executor.map(train_chunk, pieces, [job["label"] for job in run.jobs], run.gpus_per_task)
    for data, (result, placement, trained) in zip(run.seeds, arrivals(stacks)):
        record(run, data, result, trained, tracker, placement)
    tracker.log_metrics({"seconds": round(time.perf_counter() - run.start, 3)})


def arrivals(stacks):
    """Each trained seed's result as its stack arrives, with the stack's placement and how many
    seeds have finished training by then: a stack's seeds all finish together."""
    trained = 0
    for stack, placement in stacks:
        trained += len(stack)
        for result in stack:
            yield result, placement, trained


def progress(elapsed: float, trained: int, total: int) -> str:
    """What is left of the stage, from the seconds that ``trained`` of ``total`` seeds took
    (empty once every seed has trained)."""
    left = total - trained
    if left <= 0:
        return ""
    return f"; {left} seed{'s' if left > 1 else ''} still to train, stage ~{format_seconds(elapsed / trained * left)} left"


def record(run: PretrainRun, data: SeedData, result: PretrainResult, trained: int, tracker,
           placement: dict | None = None) -> None:
    """One trained seed: health check, checkpoint, log entry, tracked metrics and series;
    ``trained``: the seeds whose training has finished by now (for the time left); ``placement``:
    where its Ray task ran (seba.executor)."""
    seed, label, cfg, device = data.seed, data.label, run.cfg, run.device
    child = tracker.child(f"seed {seed}", params={"seed": seed}, tags={"seed": seed, **placement_tags(placement)})
    warning = check_training(result.val_loss, encode(result.encoder_state, run.model_config, data.x_val, device),
                             label, cfg.lr)  # a collapsed or diverged encoder is an error (seba.health)
    if warning:
        log(warning)
    save_checkpoint({"encoder": result.encoder_state, "model_config": run.model_config,
                     "pretrain_config": dataclasses.asdict(cfg), "dataset": run.dataset,
                     "ratio": run.ratio, "seed": seed, "best_epoch": result.best_epoch},
                    paths.checkpoint(run.root, run.dataset, run.ratio, seed))
    summary = {"best_epoch": result.best_epoch, "stop_epoch": result.stop_epoch,
               "best_val_loss": result.best_val_loss, "seconds": round(result.seconds, 3),
               "masked_columns": result.masked_columns, "steps": result.steps, "capped": int(result.capped)}
    run.training_log["precision"] = result.precision
    run.training_log["seeds"][str(seed)] = {**summary, "health_warning": warning, "cuda_graphs": result.cuda_graphs,
                                            "stack_size": result.stack_size,
                                            "train_loss": result.train_loss, "val_loss": result.val_loss,
                                            **({"ray": placement} if placement else {})}
    tracker.log_series({"train_loss": list(enumerate(result.train_loss, start=1)),
                        "val_loss": list(enumerate(result.val_loss, start=1))}, child)
    tracker.log_metrics(summary, child)
    tracker.log_series({f"seed{seed}_train_loss": list(enumerate(result.train_loss, start=1)),
                        f"seed{seed}_val_loss": list(enumerate(result.val_loss, start=1))})
    tracker.end_child(child)
    elapsed = time.perf_counter() - run.start
    why = f"step cap {cfg.max_steps} reached" if result.capped else "stopped"
    log(f"{label} done: best val {result.best_val_loss:.4f} at epoch {result.best_epoch}, {why} at "
        f"epoch {result.stop_epoch} ({result.steps} steps), {format_seconds(result.seconds)}"
        + progress(elapsed, trained, len(run.seeds)))
