"""The steps of one `pretrain@<dataset>-<ratio>` stage: every seed's data (checked before any
training), the plan (worker processes, stacks of seeds), and each trained seed's checkpoint,
health check, log entry and tracked metrics.

A stage that stops before its end (killed, Ctrl-C, a lost session) keeps every seed it finished
training in `.dvc/tmp/seba-resume/<dataset>-<ratio>/` (the DVC directory of the repository whose
cache the run uses, so a queued experiment's copy shares it): its rerun trains only the others.
A kept seed is used only when everything its training depends on is the same (its rows, the
`pretrain` values, the ratio, the device, the precision, the torch threads, torch's version and
the code of `seba` and of the stage script); on a CPU its encoder is then the one an
uninterrupted run trains, bit for bit. The folder is removed when the stage ends.

Seeds added to ``seeds`` train alone: when ``seeds`` changed, a seed of the stage's earlier
output (as ``dvc.lock`` records it, in DVC's cache) whose key, stored in its ``log.json`` entry,
is the new run's is reused as a kept seed is."""

from __future__ import annotations

import configparser
import dataclasses
import hashlib
import json
import math
import shutil
import time
from pathlib import Path

from seba.core import paths
from seba.core.paths import ratio_tag
from seba.core.config import Params
from seba.core.data import EncodedTable, check_shots, load_split
from seba.health import check_training
from seba.objective import masked_group_count
from seba.executor import RayExecutor, chunks, executor_for, placement_tags, stage_device
from seba.pretrain import (PretrainResult, ScaledSplit, SeedData, encode, encoder_config, member_bytes, plan_stacks, plan_workers,
                           pretrain_many, shared_table, train_chunk, without_table)
from seba.core.runtime import configure_threads, format_seconds, log, resolve_precision, save_checkpoint


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
    resumed: dict = dataclasses.field(default_factory=dict)  # position in `seeds` -> PretrainResult kept
    keys: list = dataclasses.field(default_factory=list)  # each seed's resume key
    resume_dir: Path | None = None


def prepare(params: Params, dataset: str, ratio: float | str, root: Path) -> PretrainRun:
    """Every seed's split (it must exist and serve the shots: fail before any training), whose
    rows are scaled when the seed's stack starts, and the plan; logs it."""
    cfg = params.pretrain_for(dataset)  # the `pretrain` section with this dataset's own values over it
    executor = executor_for(params.executor, cfg.device)  # (ray: connected, or a ConfigError, before any work)
    device = stage_device(cfg.device, executor)  # (with Ray it only checks each returned encoder)
    threads = configure_threads(cfg.threads)
    table = EncodedTable.load(paths.processed(root, dataset))
    seeds = []
    for i, seed in enumerate(params.seeds, start=1):
        split = load_split(paths.splits(root, dataset), seed)
        check_shots(table.y[split.test], table.classes, params.evaluate.shots, dataset, seed)
        label = f"[pretrain {dataset} r={ratio_tag(ratio)[1:]} seed {seed} ({i}/{len(params.seeds)})]"
        seeds.append(SeedData(None, None, seed, label, ScaledSplit(table, split.train, split.val, cfg.normalise)))
    stage = f"[pretrain {dataset} r={ratio_tag(ratio)[1:]}]"
    capped = masked_group_count(table.n_groups, 0.0, cfg.min_masked_columns)  # the floor as the masks take it
    if capped < cfg.min_masked_columns:
        log(f"{stage} WARNING {params.pretrain_key(dataset, 'min_masked_columns')} is {cfg.min_masked_columns}, "
            f"but {dataset} has {table.n_groups} columns and the feature view keeps at least one: each mask "
            f"takes {capped}")
    precision = resolve_precision(cfg.precision, device)
    gpus = 0.0
    if executor is None:  # threads as for every seed, so that a resumed seed trains as it would have
        workers, worker_threads = plan_workers(cfg, len(seeds), device)
    else:
        tasks, gpus = executor.plan(len(seeds))
        workers, worker_threads = tasks, params.executor.cpus_per_task
    where = resume_dir(root, dataset, ratio)
    keys = resume_keys(table, [(s.source.train, s.source.val) for s in seeds], params.seeds, ratio, cfg, device,
                       precision, worker_threads)
    resumed = load_resumed(where, seeds, keys)
    if resumed:
        log(f"{stage} {len(resumed)} of {len(seeds)} seeds kept from an interrupted run ({where}): "
            f"{len(seeds) - len(resumed)} to train")
    reused = load_earlier(root, dataset, ratio, seeds, keys, skip=resumed)
    if reused:
        log(f"{stage} {len(reused)} of {len(seeds)} seeds reused from this stage's earlier output, trained on the same "
            f"rows with the same values and code (dvc.lock, DVC's cache): {len(seeds) - len(resumed) - len(reused)} "
            f"to train")
    resumed.update(reused)
    todo = [i for i in range(len(seeds)) if i not in resumed]
    stacks = []
    if todo and executor is None:
        workers = min(workers, len(todo))
        stacks = plan_stacks(len(todo), workers, member_bytes(seeds[0].n_train, seeds[0].n_val, table.X.shape[1], cfg),
                             cfg, device, where=stage)
    elif todo:  # one chunk of seeds per task; each task stacks its chunk to fit its node (seba.pretrain.train_chunk)
        stacks = chunks(list(range(len(todo))), tasks)
    stacks = [[todo[i] for i in stack] for stack in stacks]
    tracked = {"dataset": dataset, "ratio": ratio, "seeds": list(params.seeds), "device": str(device),
               "threads": threads, "precision_used": precision,
               "pretrain": dataclasses.asdict(cfg),
               "dataset_overrides": dict(params.sources[dataset].pretrain),
               "workers": workers, "threads_per_worker": worker_threads,
               "stack_sizes": [len(stack) for stack in stacks], "executor": params.executor.kind}
    log(f"{stage} {len(seeds)} seed{'s' if len(seeds) > 1 else ''}: {seeds[0].n_train} train / "
        f"{seeds[0].n_val} val rows, {table.X.shape[1]} columns, {table.n_groups} groups, on {device} "
        f"({precision}); " + (f"stacks of {', '.join(str(len(s)) for s in stacks)} seeds" if stacks else "nothing to train")
        + (f", {workers} at a time ({worker_threads} torch thread{'s' if worker_threads > 1 else ''} each)"
           if workers > 1 and executor is None else "")
        + (f", as {len(stacks)} Ray task{'s' if len(stacks) > 1 else ''} of {worker_threads} CPU"
           f"{'s' if worker_threads > 1 else ''}{f' and {gpus:g} GPU' if gpus else ''} each" if executor else ""))
    jobs = [{"members": [seeds[i] for i in stack], "groups": table.groups, "ratio": ratio, "cfg": cfg,
             "device": device, "label": f"{stage} stack {n}/{len(stacks)}" if len(stacks) > 1 else stage}
            for n, stack in enumerate(stacks, start=1)]
    return PretrainRun(dataset, ratio, root, cfg, device, seeds, jobs, workers, worker_threads,
                       encoder_config(cfg, table.X.shape[1]), tracked,
                       {"dataset": dataset, "ratio": ratio, "device": str(device), "seeds": {}}, 0.0, executor, gpus,
                       resumed, keys, where)


def resume_dir(root: Path, dataset: str, ratio: float | str) -> Path:
    """`.dvc/tmp/seba-resume/<dataset>-<ratio>` of the repository whose DVC cache this checkout
    uses: a queued experiment's copy (`.dvc/tmp/exps/tmp*`) names the workspace's cache in its
    `.dvc/config.local`, and a rerun of the experiment runs in another copy."""
    cache = dvc_cache_dir(root)
    dvc_dir = cache.parent if cache.name == "cache" and cache.parent.name == ".dvc" else root / ".dvc"
    return dvc_dir / "tmp" / "seba-resume" / f"{dataset}-{ratio_tag(ratio)[1:]}"


def dvc_cache_dir(root: Path) -> Path:
    """The DVC cache of the repository at ``root``: ``[cache] dir`` of ``.dvc/config.local`` or
    ``.dvc/config`` (relative to ``.dvc``), else ``.dvc/cache``."""
    dvc_dir = root / ".dvc"
    for name in ("config.local", "config"):
        config = configparser.ConfigParser()
        try:
            config.read(dvc_dir / name)
            cache = Path(config.get("cache", "dir"))
        except (configparser.Error, OSError):
            continue
        return cache if cache.is_absolute() else dvc_dir / cache
    return dvc_dir / "cache"


def code_digest() -> str:
    """sha256 of every source file of the `seba` package and of the stage script beside it
    (what a seed's training runs)."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    script = package.parent / "stages" / "pretrain.py"
    for path in sorted(package.rglob("*.py")) + ([script] if script.is_file() else []):
        digest.update(str(path.relative_to(package.parent)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def resume_keys(table: EncodedTable, rows: list, seeds: list[int], ratio, cfg, device, precision: str,
                threads: int) -> list[str]:
    """Each seed's key: a digest of everything its trained encoder depends on (the table, the
    seed's training and validation rows, which determine its scaled inputs, and the settings)."""
    import numpy as np
    import torch

    settings = {k: v for k, v in dataclasses.asdict(cfg).items() if k != "progress_seconds"}
    common = hashlib.sha256(json.dumps({"pretrain": settings, "ratio": ratio, "device": str(device),
                                        "precision": precision, "threads": threads, "torch": torch.__version__,
                                        "code": code_digest()}, sort_keys=True, default=str).encode())
    for array in (table.X, table.groups, table.numeric):
        common.update(str((array.shape, array.dtype)).encode())
        common.update(np.ascontiguousarray(array))  # the bytes, without a copy (the table may be GBs)
    keys = []
    for seed, (train, val) in zip(seeds, rows):
        digest = common.copy()
        for array in (train, val):
            digest.update(str((array.shape, array.dtype)).encode())
            digest.update(np.ascontiguousarray(array))
        digest.update(str(seed).encode())
        keys.append(digest.hexdigest()[:32])
    return keys


def resume_file(where: Path, seed: int, key: str) -> Path:
    return where / f"seed{seed}-{key}.pt"


def load_resumed(where: Path, seeds: list[SeedData], keys: list[str]) -> dict:
    """The seeds an interrupted run of the same training finished (unreadable files are ignored)."""
    import torch

    kept = {}
    for i, (data, key) in enumerate(zip(seeds, keys)):
        path = resume_file(where, data.seed, key)
        if not path.exists():
            continue
        try:
            kept[i] = PretrainResult(**torch.load(path, map_location="cpu", weights_only=True))
        except Exception as exc:  # a damaged or foreign file: train the seed again
            log(f"{data.label} the kept result {path} cannot be read ({type(exc).__name__}); training it again")
    return kept


def earlier_output(root: Path, dataset: str, ratio: float | str) -> dict[str, Path]:
    """The files of this stage's output as the repository's ``dvc.lock`` last recorded it, in DVC's
    cache (relative path -> cached file; DVC removes the output itself before it runs the stage):
    {} when there is none or it cannot be read."""
    import yaml

    stage = f"pretrain@{dataset}-{ratio_tag(ratio)[1:]}"
    output = paths.models(Path(), dataset, ratio).as_posix()
    objects = dvc_cache_dir(root) / "files" / "md5"
    try:
        lock = yaml.load((root / "dvc.lock").read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        [md5] = [out["md5"] for out in lock["stages"][stage]["outs"] if out["path"] == output]
        listing = json.loads((objects / md5[:2] / md5[2:]).read_text())
        return {entry["relpath"]: objects / entry["md5"][:2] / entry["md5"][2:] for entry in listing}
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError):
        return {}


def load_earlier(root: Path, dataset: str, ratio: float | str, seeds: list[SeedData], keys: list[str],
                 skip: dict) -> dict:
    """The seeds (position in ``seeds`` -> PretrainResult) that this stage's earlier output holds
    with the same key (``resume_keys``: the same rows, `pretrain` values, ratio, device,
    precision, threads, torch and code), when that output has other seeds than ``seeds`` (seeds
    added or removed): a run of the same seeds (`dvc repro --force`) trains them all. Positions
    in ``skip`` and files that cannot be read are left to train."""
    import torch

    files = earlier_output(root, dataset, ratio)
    if "log.json" not in files:
        return {}
    try:
        entries = json.loads(files["log.json"].read_text())["seeds"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    if not isinstance(entries, dict) or set(entries) == {str(data.seed) for data in seeds}:
        return {}
    fields = {f.name for f in dataclasses.fields(PretrainResult)} - {"encoder_state"}  # the rest: log.json's
    reused = {}
    for i, (data, key) in enumerate(zip(seeds, keys)):
        entry = entries.get(str(data.seed))
        checkpoint = files.get(paths.checkpoint(Path(), dataset, ratio, data.seed).name)
        if i in skip or not isinstance(entry, dict) or entry.get("key") != key or checkpoint is None:
            continue
        try:
            encoder = torch.load(checkpoint, map_location="cpu", weights_only=True)["encoder"]
            values = {k: entry[k] for k in fields}
            reused[i] = PretrainResult(encoder_state=encoder, **{**values, "capped": bool(values["capped"])})
        except Exception as exc:  # a damaged or foreign file: train the seed
            log(f"{data.label} its earlier encoder {checkpoint} cannot be read ({type(exc).__name__}); training it")
    return reused


def keep_for_resume(run: PretrainRun, i: int, result: PretrainResult) -> None:
    """Keep a trained seed until the stage ends (a failure to write only warns: it is a cache)."""
    try:
        run.resume_dir.mkdir(parents=True, exist_ok=True)
        save_checkpoint(dataclasses.asdict(result), resume_file(run.resume_dir, run.seeds[i].seed, run.keys[i]))
    except OSError as exc:
        log(f"{run.seeds[i].label} warning: not kept for a rerun ({exc})")


def keep_stack(run: PretrainRun, n: int, results: list[PretrainResult]) -> None:
    """Keep the seeds of job ``n``, a stack that finished before an earlier one when the stage
    failed or was interrupted (the others are kept as they arrive, in order)."""
    position = {id(data): i for i, data in enumerate(run.seeds)}
    for data, result in zip(run.jobs[n]["members"], results):
        keep_for_resume(run, position[id(data)], result)


def finish(run: PretrainRun) -> None:
    """The stage's outputs are written: the kept seeds are no longer needed."""
    shutil.rmtree(run.resume_dir, ignore_errors=True)


def train(run: PretrainRun, tracker) -> None:
    """Train every seed (stacks in worker processes); record each as it arrives."""
    paths.models(run.root, run.dataset, run.ratio).mkdir(parents=True, exist_ok=True)
    run.start = time.perf_counter()
    if not run.jobs:
        stacks = iter(())
    elif run.executor is None:
        stacks = ((stack, None) for stack in pretrain_many(run.jobs, run.workers, run.worker_threads,
                                                           salvage=lambda n, results: keep_stack(run, n, results)))
    else:
        table = shared_table(run.seeds)  # into the object store once, not with each task's seeds
        ref = run.executor.put(table) if table is not None else None
        pieces = [(without_table(job["members"]) if ref is not None else job["members"], job["groups"], job["ratio"],
                   job["cfg"], job["label"], ref) for job in run.jobs]
        stacks = run.executor.map(train_chunk, pieces, [job["label"] for job in run.jobs], run.gpus_per_task,
                                  salvage=lambda n, done: keep_stack(run, n, done[0]))
    fresh, to_train = arrivals(stacks), len(run.seeds) - len(run.resumed)
    try:
        for i, data in enumerate(run.seeds):
            if i in run.resumed:
                record(run, data, run.resumed[i], tracker, None, progress_of=None)  # kept
                continue
            result, placement, trained, arrived = next(fresh)
            if trained < to_train:  # stacks are still training: keep this seed for a rerun (the last
                keep_for_resume(run, i, result)  # stack's seeds are only recorded, as they would be then)
            record(run, data, result, tracker, placement,
                   progress_of=(trained, to_train, arrived, len(run.jobs), run.workers))
    finally:  # a seed that fails its check ends the stacks still training (not waited for at exit)
        fresh.close()
        if hasattr(stacks, "close"):
            stacks.close()
    tracker.log_metrics({"seconds": round(time.perf_counter() - run.start, 3)})


def arrivals(stacks):
    """Each trained seed's result as its stack arrives, with the stack's placement, how many
    seeds have finished training by then (a stack's seeds all finish together) and how many
    stacks have arrived."""
    trained = 0
    for arrived, (stack, placement) in enumerate(stacks, start=1):
        trained += len(stack)
        for result in stack:
            yield result, placement, trained, arrived


def progress(elapsed: float, trained: int, total: int, arrived: int, stacks: int, parallel: int) -> str:
    """What is left of the stage once ``trained`` of its ``total`` seeds, ``arrived`` of its
    ``stacks``, have trained in ``elapsed`` seconds (empty once every seed has): the stacks train
    in rounds of ``parallel`` at once, so a stack that arrives first has the others of its round
    about to arrive too."""
    left = total - trained
    if left <= 0:
        return ""
    parallel = max(1, min(parallel, stacks))
    done, rounds = math.ceil(arrived / parallel), math.ceil(stacks / parallel)
    seeds = f"{left} seed{'s' if left > 1 else ''} still to train"
    if done == rounds:
        return f"; {seeds}, finishing beside this stack"
    return f"; {seeds}, stage ~{format_seconds(elapsed / done * (rounds - done))} left"


def record(run: PretrainRun, data: SeedData, result: PretrainResult, tracker, placement: dict | None,
           progress_of: tuple[int, int, int, int, int] | None) -> None:
    """One trained seed: health check, checkpoint, log entry, tracked metrics and series;
    ``placement``: where its Ray task ran (seba.executor); ``progress_of``: ``progress``'s
    arguments but the seconds (the seeds this run has trained by now and all it trains, the
    stacks arrived, all stacks, how many train at once), None for a seed kept from an
    interrupted run of the stage."""
    seed, label, cfg, device = data.seed, data.label, run.cfg, run.device
    child = tracker.child(f"seed {seed}", params={"seed": seed, "precision": result.precision},
                          tags={"seed": seed, **placement_tags(placement)})  # (a Ray node resolves its own)
    warning = check_training(result.val_loss, encode(result.encoder_state, run.model_config, data.val_rows(), device),
                             label, cfg.lr)  # a collapsed or diverged encoder is an error (seba.health)
    data.release()
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
    key = run.keys[[s.seed for s in run.seeds].index(seed)]  # what a later run with more seeds reuses it by
    run.training_log["seeds"][str(seed)] = {**summary, "key": key, "precision": result.precision,
                                            "health_warning": warning,
                                            "cuda_graphs": result.cuda_graphs,
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
    kept = progress_of is None
    log(f"{label} {'kept' if kept else 'done'}: best val {result.best_val_loss:.4f} at epoch {result.best_epoch}, "
        f"{why} at epoch {result.stop_epoch} ({result.steps} steps), {format_seconds(result.seconds)}"
        + ("" if kept else progress(elapsed, *progress_of)))
