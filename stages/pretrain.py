"""DVC stage `pretrain@<dataset>-<ratio>`: one SeBA encoder per seed for one separation ratio."""

import argparse
import dataclasses
import time

from seba.cli import run_stage
from seba.config import load_params, ratio_tag
from seba.data import check_shots, EncodedTable, load_split, scale
from seba.health import check_training
from seba.pretrain import (SeedData, encode, encoder_config, member_bytes, plan_stacks, plan_workers,
                           pretrain_many)
from seba.runtime import (resolve_precision, configure_threads, format_seconds, log, repo_root, save_checkpoint,
                          select_device, write_json)
from seba.tracking import Tracker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--ratio", required=True, type=float)
    args = parser.parse_args()
    params = load_params()
    cfg = params.pretrain_for(args.dataset)  # the `pretrain` section with this dataset's own values over it
    if not 0 < args.ratio < 1:
        raise SystemExit(f"error: --ratio must lie in (0, 1), got {args.ratio}")
    root = repo_root()
    device = select_device(cfg.device)
    threads = configure_threads(cfg.threads)
    table = EncodedTable.load(root / "data" / "processed" / f"{args.dataset}.npz")
    out_dir = root / "data" / "models" / args.dataset / ratio_tag(args.ratio)
    out_dir.mkdir(parents=True, exist_ok=True)
    model_config = encoder_config(cfg, table.X.shape[1])
    tracked = {"dataset": args.dataset, "ratio": args.ratio, "seeds": list(params.seeds),
               "device": str(device), "threads": threads,
               "precision_used": resolve_precision(cfg.precision, device),
               "pretrain": {k: v for k, v in dataclasses.asdict(cfg).items() if k != "ratios"},
               "dataset_overrides": dict(params.sources[args.dataset].pretrain)}
    training_log = {"dataset": args.dataset, "ratio": args.ratio, "device": str(device), "seeds": {}}
    splits_path = root / "data" / "splits" / f"{args.dataset}.npz"
    seeds = []
    for i, seed in enumerate(params.seeds, start=1):  # every seed's split exists and can serve the shots:
        split = load_split(splits_path, seed)          # fail before any training
        check_shots(table.y[split.test], table.classes, params.evaluate.shots, args.dataset, seed)
        X = scale(table, split.train)
        label = f"[pretrain {args.dataset} r={args.ratio:g} seed {seed} ({i}/{len(params.seeds)})]"
        seeds.append(SeedData(X[split.train], X[split.val], seed, label))
    stage = f"[pretrain {args.dataset} r={args.ratio:g}]"
    workers, worker_threads = plan_workers(cfg, len(seeds), device)
    stacks = plan_stacks(len(seeds), workers, member_bytes(len(seeds[0].x_train), len(seeds[0].x_val),
                                                           table.X.shape[1], cfg), cfg, device, where=stage)
    tracked.update({"workers": workers, "threads_per_worker": worker_threads,
                    "stack_sizes": [len(stack) for stack in stacks]})
    log(f"{stage} {len(seeds)} seed{'s' if len(seeds) > 1 else ''}: {len(seeds[0].x_train)} train / "
        f"{len(seeds[0].x_val)} val rows, {table.X.shape[1]} columns, {table.n_groups} groups, on {device} "
        f"({resolve_precision(cfg.precision, device)}); stacks of {', '.join(str(len(s)) for s in stacks)} seeds"
        + (f", {workers} at a time ({worker_threads} torch thread{'s' if worker_threads > 1 else ''} each)"
           if workers > 1 else ""))
    jobs = [{"members": [seeds[i] for i in stack], "groups": table.groups, "ratio": args.ratio, "cfg": cfg,
             "device": device, "label": f"{stage} stack {n}/{len(stacks)}" if len(stacks) > 1 else stage}
            for n, stack in enumerate(stacks, start=1)]
    stage_start = time.perf_counter()
    with Tracker("pretrain", f"pretrain {args.dataset} r={args.ratio:g}", params=tracked,
                 tags={"dataset": args.dataset, "ratio": f"{args.ratio:g}"}, root=root) as tracker:
        results = (result for stack in pretrain_many(jobs, workers, worker_threads) for result in stack)
        for i, (data, result) in enumerate(zip(seeds, results), start=1):
            seed, label = data.seed, data.label
            child = tracker.child(f"seed {seed}", params={"seed": seed}, tags={"seed": seed})
            check_training(result.val_loss, encode(result.encoder_state, model_config, data.x_val, device),
                           label, cfg.lr)  # a collapsed or diverged encoder is an error (seba.health)
            save_checkpoint({"encoder": result.encoder_state, "model_config": model_config,
                             "pretrain_config": dataclasses.asdict(cfg), "dataset": args.dataset,
                             "ratio": args.ratio, "seed": seed, "best_epoch": result.best_epoch},
                            out_dir / f"seed{seed}.pt")
            summary = {"best_epoch": result.best_epoch, "stop_epoch": result.stop_epoch,
                       "best_val_loss": result.best_val_loss, "seconds": round(result.seconds, 3),
                       "masked_columns": result.masked_columns, "steps": result.steps,
                       "capped": int(result.capped)}
            training_log["precision"] = result.precision
            training_log["seeds"][str(seed)] = {**summary, "cuda_graphs": result.cuda_graphs,
                                                "stack_size": result.stack_size,
                                                "train_loss": result.train_loss, "val_loss": result.val_loss}
            tracker.log_series({"train_loss": list(enumerate(result.train_loss, start=1)),
                                "val_loss": list(enumerate(result.val_loss, start=1))}, child)
            tracker.log_metrics(summary, child)
            tracker.log_series({f"seed{seed}_train_loss": list(enumerate(result.train_loss, start=1)),
                                f"seed{seed}_val_loss": list(enumerate(result.val_loss, start=1))})
            tracker.end_child(child)
            elapsed = time.perf_counter() - stage_start
            why = f"step cap {cfg.max_steps} reached" if result.capped else "stopped"
            log(f"{label} done: best val {result.best_val_loss:.4f} at epoch {result.best_epoch}, {why} at "
                f"epoch {result.stop_epoch} ({result.steps} steps), {format_seconds(result.seconds)}; stage "
                f"~{format_seconds(elapsed / i * (len(params.seeds) - i))} left")
        tracker.log_metrics({"seconds": round(time.perf_counter() - stage_start, 3)})
    write_json(out_dir / "log.json", training_log)


if __name__ == "__main__":
    run_stage("pretrain", main)
