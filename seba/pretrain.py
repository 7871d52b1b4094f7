"""SeBA pretraining of one encoder (one dataset, one separation ratio, one seed).

The loop is explicit: shuffle, one group mask per batch, feature view, target-view nearest
neighbour, conditioned projector, InfoNCE, Adam; after every epoch the validation objective
decides early stopping and the best weights are restored at the end.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Iterator
from dataclasses import dataclass, field

import numpy as np
import torch

from seba.config import PretrainConfig
from seba.model import Encoder, Projector
from seba.objective import (
    expand_mask,
    feature_view,
    info_nce,
    masked_group_count,
    sample_group_mask,
    target_neighbours,
)
from seba.errors import TrainingDiverged
from seba.runtime import Throttle, derive_seed, format_seconds, log, resolve_precision


@dataclass
class PretrainResult:
    encoder_state: dict
    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    best_epoch: int = 0
    stop_epoch: int = 0
    best_val_loss: float = math.inf
    seconds: float = 0.0
    masked_columns: int = 0
    precision: str = "fp32"
    steps: int = 0
    capped: bool = False  # stopped by pretrain.max_steps, not by patience
    cuda_graphs: bool = False  # steps after the first epoch replayed as CUDA graphs


class EarlyStopping:
    """The stopping rule of every pretraining loop: remember the lowest validation value (and
    the epoch it came at); patience counts epochs since the last improvement of more than
    ``min_delta`` (relative) over the value that last restarted it."""

    def __init__(self, patience: int, min_delta: float):
        self.patience, self.min_delta = patience, min_delta
        self.best, self.best_epoch = math.inf, 0
        self.reference, self.reference_epoch = math.inf, 0

    def update(self, value: float, epoch: int) -> bool:
        """Record one epoch's value; True when it is the lowest so far (save the weights)."""
        if value < self.reference - self.min_delta * abs(self.reference) or not math.isfinite(self.reference):
            self.reference, self.reference_epoch = value, epoch
        if value < self.best:
            self.best, self.best_epoch = value, epoch
            return True
        return False

    def should_stop(self, epoch: int) -> bool:
        return epoch - self.reference_epoch >= self.patience

    def stops_by(self, max_epochs: int) -> int:
        return min(self.reference_epoch + self.patience, max_epochs)


def build_models(n_features: int, cfg: PretrainConfig, seed: int) -> tuple[Encoder, Projector]:
    """Models initialised from ``seed`` alone (the global RNG is restored afterwards)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        encoder = Encoder(n_features, cfg.encoder_hidden, cfg.encoder_out, cfg.encoder_out_relu)
        projector = Projector(cfg.encoder_out, n_features, cfg.projector_hidden, cfg.projector_out,
                              conditioned=cfg.conditioned)
    return encoder, projector


def _batches(n_rows: int, batch_size: int, order: torch.Tensor) -> list[torch.Tensor]:
    """Consecutive slices of ``order``; the last partial batch is kept unless it has one row
    (a single row has no neighbour), in which case it joins the previous batch."""
    cuts = list(range(0, n_rows, batch_size))
    batches = [order[i:i + batch_size] for i in cuts]
    if len(batches) > 1 and len(batches[-1]) < 2:
        batches[-2] = torch.cat([batches[-2], batches[-1]])
        batches.pop()
    return [b for b in batches if len(b) >= 2]


def make_adam(params: list, lr: float, device: torch.device) -> torch.optim.Optimizer:
    """Adam with torch's fused kernel where the device has one (the same update, one pass over
    the weights instead of several: ~10 % of a CPU step here), else the default. On CUDA it
    keeps its step count on the device (``capturable``), so that a step can be a CUDA graph."""
    try:
        return torch.optim.Adam(params, lr=lr, fused=device.type in ("cpu", "cuda"),
                                capturable=device.type == "cuda")
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(params, lr=lr)


class StepGraphs:
    """Training steps (gather the batch's rows, SeBA loss, backward, Adam) captured as CUDA
    graphs, one per batch length, and replayed: a step is then one launch instead of about a
    hundred kernels each launched from Python, which on a GPU cost more than the kernels
    themselves (benchmarks/speed.py --device cuda). The kernels are those of the eager step, on
    the same tensors, so a replayed step computes what the eager one would. Captured after a
    first eager epoch (which creates Adam's state and warms the libraries up)."""

    def __init__(self, encoder: Encoder, projector: Projector, optimiser: torch.optim.Optimizer,
                 X: torch.Tensor, cfg: PretrainConfig):
        self.encoder, self.projector, self.optimiser = encoder, projector, optimiser
        self.X, self.cfg = X, cfg
        self.graphs: dict[int, tuple] = {}

    def capture(self, n_rows: int) -> None:
        device = self.X.device
        rows = torch.zeros(n_rows, dtype=torch.long, device=device)
        mask = torch.zeros(self.X.shape[1], dtype=torch.bool, device=device)
        perm = torch.arange(n_rows, device=device) if self.cfg.fill == "marginal" else None
        graph = torch.cuda.CUDAGraph()
        self.optimiser.zero_grad(set_to_none=True)  # the graph's backward writes the gradients
        with torch.cuda.graph(graph):
            loss = seba_loss(self.encoder, self.projector, self.X[rows], mask, self.cfg, perm)
            loss.backward()
            self.optimiser.step()
        # the loss without its autograd graph: nodes kept alive from one capture (or from an
        # eager step) make the next capture fail, their stream being another
        self.graphs[n_rows] = (graph, rows, mask, perm, loss.detach())

    def step(self, rows: torch.Tensor, mask: torch.Tensor, perm: torch.Tensor | None) -> torch.Tensor:
        graph, static_rows, static_mask, static_perm, loss = self.graphs[len(rows)]
        static_rows.copy_(rows)
        static_mask.copy_(mask)
        if static_perm is not None:
            static_perm.copy_(perm)
        graph.replay()
        return loss


def seba_loss(encoder: Encoder, projector: Projector, x: torch.Tensor, column_mask: torch.Tensor,
              cfg: PretrainConfig, permutation: torch.Tensor | None = None) -> torch.Tensor:
    """The SeBA objective on one batch under one mask."""
    positives = target_neighbours(x, column_mask)
    x_f = feature_view(x, column_mask, cfg.fill, permutation)
    autocast = (torch.autocast(x.device.type, dtype=torch.bfloat16)
                if cfg.precision == "bf16" else contextlib.nullcontext())
    with autocast:
        z = projector(encoder(x_f), column_mask)
    return info_nce(z.float(), positives, cfg.temperature)


def pretrain_encoder(
    x_train: np.ndarray,
    x_val: np.ndarray,
    groups: np.ndarray,
    ratio: float,
    seed: int,
    cfg: PretrainConfig,
    device: torch.device,
    label: str = "",
    on_epoch=None,
    cuda_graphs: bool = True,
) -> PretrainResult:
    """Train one SeBA encoder; returns the best (lowest validation objective) weights.

    On CUDA in fp32, steps after the first epoch are replayed as CUDA graphs (``StepGraphs``;
    ``cuda_graphs=False`` keeps every step eager); if capturing fails, training goes on eagerly."""
    cfg = dataclasses.replace(cfg, precision=resolve_precision(cfg.precision, device))
    run_seed = derive_seed(seed, ratio)
    encoder, projector = build_models(x_train.shape[1], cfg, run_seed)
    encoder.to(device)
    projector.to(device)
    params = list(encoder.parameters()) + list(projector.parameters())
    optimiser = make_adam(params, cfg.lr, device)

    X = torch.as_tensor(x_train, dtype=torch.float32, device=device)
    V = torch.as_tensor(x_val, dtype=torch.float32, device=device)
    groups_t = torch.as_tensor(groups, dtype=torch.long)
    n_groups = int(groups.max()) + 1
    k = masked_group_count(n_groups, ratio, cfg.min_masked_columns)
    gen = torch.Generator().manual_seed(run_seed)  # shuffles and training masks (CPU: cheap, exact)
    val_gen = torch.Generator().manual_seed(derive_seed(seed, ratio, "validation"))

    def column_mask(generator: torch.Generator) -> torch.Tensor:
        """One training-view mask over the encoded columns, drawn on the CPU generator."""
        return expand_mask(sample_group_mask(n_groups, k, generator), groups_t)

    # Validation batches are consecutive rows. Their fixed masks and row permutations (drawn in
    # both validation modes, so that the generator's later draws do not depend on the mode) go
    # to the device in one copy each: draw j of batch i is entry i * draws + j.
    val_batches = _batches(len(V), cfg.batch_size, torch.arange(len(V)))
    val_rows = [(int(b[0]), int(b[0]) + len(b)) for b in val_batches]
    draws = cfg.validation_draws
    val_masks = [column_mask(val_gen) for _ in val_batches for _ in range(draws)]
    val_perms = [torch.randperm(len(b), generator=val_gen) for b in val_batches for _ in range(draws)]
    if val_batches:
        fixed_val_masks = torch.stack(val_masks).to(device)
        fixed_val_perms = torch.cat(val_perms).to(device)
        perm_starts = np.cumsum([0] + [len(p) for p in val_perms]).tolist()

    @torch.no_grad()
    def validation_loss() -> float:
        encoder.eval()
        projector.eval()
        # summed on the device in float64 (the same arithmetic as Python floats): one
        # synchronisation per validation pass, not one per batch and draw
        total, weight = torch.zeros((), dtype=torch.float64, device=device), 0
        for i, (first, end) in enumerate(val_rows):
            xb = V[first:end]
            if cfg.validation == "fixed":
                views = [(fixed_val_masks[i * draws + j],
                          fixed_val_perms[perm_starts[i * draws + j]:perm_starts[i * draws + j + 1]])
                         for j in range(draws)]
            else:
                views = [(column_mask(val_gen).to(device),
                          torch.randperm(end - first, generator=val_gen).to(device))]
            for mask, perm in views:
                total += seba_loss(encoder, projector, xb, mask, cfg, perm).double() * (end - first)
                weight += end - first
        encoder.train()
        projector.train()
        return float(total) / max(weight, 1)

    result = PretrainResult(encoder_state={}, masked_columns=k, precision=cfg.precision)
    best_state = None
    stopping = EarlyStopping(cfg.patience, cfg.min_delta)
    # Every epoch has the same number of batches, so the step cap is an epoch limit: training
    # stops after the first epoch that reaches pretrain.max_steps optimiser steps.
    steps_per_epoch = len(_batches(len(X), cfg.batch_size, torch.arange(len(X))))
    epoch_limit = cfg.max_epochs
    if cfg.max_steps and steps_per_epoch:
        epoch_limit = min(epoch_limit, math.ceil(cfg.max_steps / steps_per_epoch))
    throttle = Throttle(cfg.progress_seconds)
    graphs: StepGraphs | None = None
    start = time.perf_counter()
    for epoch in range(1, epoch_limit + 1):
        # The epoch's shuffle, masks and permutations are drawn on the CPU generator (the same
        # draws on every device) and moved to the device once per epoch, not once per batch.
        order = torch.randperm(len(X), generator=gen)
        batches = _batches(len(X), cfg.batch_size, order)
        masks, perms = [], []
        for idx in batches:
            masks.append(column_mask(gen))
            perms.append(torch.randperm(len(idx), generator=gen) if cfg.fill == "marginal" else None)
        order_d = order.to(device)
        masks_d = torch.stack(masks).to(device)
        perms_d = torch.cat(perms).to(device) if cfg.fill == "marginal" else None  # batch b's at its rows
        epoch_loss = torch.zeros((), device=device)  # summed on the device: no per-batch sync
        position = 0
        for b, idx in enumerate(batches):
            rows = order_d[position:position + len(idx)]
            perm = perms_d[position:position + len(idx)] if perms_d is not None else None
            position += len(idx)
            if graphs is not None:
                loss = graphs.step(rows, masks_d[b], perm)
            else:
                loss = seba_loss(encoder, projector, X[rows], masks_d[b], cfg, perm)
                optimiser.zero_grad(set_to_none=True)
                loss.backward()
                optimiser.step()
            epoch_loss += loss.detach() * len(idx)
        loss = None  # frees the last eager step's autograd graph (a graph capture needs it gone)
        train_loss = float(epoch_loss) / len(X)
        val_loss = validation_loss() if len(val_batches) else train_loss
        if not (math.isfinite(train_loss) and math.isfinite(val_loss)):
            raise TrainingDiverged(
                f"{label}: loss is not finite at epoch {epoch} (train {train_loss}, validation {val_loss})"
            )
        result.train_loss.append(train_loss)
        result.val_loss.append(val_loss)
        if stopping.update(val_loss, epoch):
            result.best_val_loss, result.best_epoch = val_loss, epoch
            best_state = copy.deepcopy(encoder.state_dict())
        result.stop_epoch = epoch
        if on_epoch is not None:
            on_epoch(epoch, train_loss, val_loss)
        if stopping.should_stop(epoch):
            break
        if epoch == 1 and cuda_graphs and device.type == "cuda" and cfg.precision == "fp32":
            graphs = StepGraphs(encoder, projector, optimiser, X, cfg)
            try:
                for n_rows in sorted({len(idx) for idx in batches}):
                    graphs.capture(n_rows)
                result.cuda_graphs = True
            except RuntimeError as error:
                log(f"  {label}: CUDA graph capture failed ({error}); training on without graphs")
                graphs = None
                optimiser.zero_grad(set_to_none=True)
        if throttle.ready() and epoch > 1:
            elapsed = time.perf_counter() - start
            per_epoch = elapsed / epoch
            stop_by = stopping.stops_by(epoch_limit)
            log(f"  {label} epoch {epoch:5d}  loss {train_loss:.4f}  val {val_loss:.4f}  "
                f"best {result.best_val_loss:.4f}@{result.best_epoch}  {format_seconds(elapsed)} elapsed, "
                f"stops by epoch {stop_by} if no improvement (~{format_seconds((stop_by - epoch) * per_epoch)} left)")
    result.seconds = time.perf_counter() - start
    result.steps = result.stop_epoch * steps_per_epoch
    result.capped = bool(cfg.max_steps and result.steps >= cfg.max_steps
                         and not stopping.should_stop(result.stop_epoch))
    encoder.load_state_dict(best_state if best_state is not None else encoder.state_dict())
    result.encoder_state = {k: v.detach().cpu() for k, v in encoder.state_dict().items()}
    return result


def plan_workers(cfg: PretrainConfig, n_seeds: int, device: torch.device) -> tuple[int, int]:
    """(processes, torch threads each) for training ``n_seeds`` seeds of one stage.

    ``pretrain.workers`` 0 (auto) trains min(seeds, cores) seeds at once on a CPU, one on CUDA;
    the ``pretrain.threads`` budget (0 = all cores) is shared out among them. On two cores two
    one-thread processes stepping together train 1.21x the rows per second of one two-thread
    process (benchmarks/speed.py: the per-step products are too small to keep two threads busy)."""
    cores = os.cpu_count() or 1
    budget = cfg.threads if cfg.threads > 0 else cores
    if device.type != "cpu":
        workers = 1
    elif cfg.workers > 0:
        workers = cfg.workers
    else:
        workers = min(n_seeds, budget)
    workers = max(1, min(workers, n_seeds))
    return workers, max(1, budget // workers)


def _train_in_worker(threads: int, kwargs: dict) -> PretrainResult:
    torch.set_num_threads(threads)
    return pretrain_encoder(**kwargs)


def pretrain_many(tasks: list[dict], workers: int, threads: int) -> Iterator[PretrainResult]:
    """``pretrain_encoder(**task)`` for every task, yielded in task order. With ``workers`` > 1
    the tasks run in that many spawned processes with ``threads`` torch threads each (a task's
    result depends only on its own arguments and the thread count)."""
    if workers <= 1 or len(tasks) <= 1:
        for task in tasks:
            yield pretrain_encoder(**task)
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = [pool.submit(_train_in_worker, threads, task) for task in tasks]
        try:
            for future in futures:
                yield future.result()
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def encoder_config(cfg: PretrainConfig, in_features: int) -> dict:
    """The encoder's shape as a checkpoint records it (``model_config``) and ``encode`` reads it."""
    return {"in_features": int(in_features), "encoder_hidden": cfg.encoder_hidden,
            "encoder_out": cfg.encoder_out, "encoder_out_relu": cfg.encoder_out_relu}


@torch.no_grad()
def encode(encoder_state: dict, cfg_dict: dict, x: np.ndarray, device: torch.device,
           batch_size: int = 8192) -> torch.Tensor:
    """Encoder outputs [rows, out] for ``x`` with the weights of a checkpoint."""
    encoder = Encoder(cfg_dict["in_features"], cfg_dict["encoder_hidden"], cfg_dict["encoder_out"],
                      cfg_dict["encoder_out_relu"])
    encoder.load_state_dict(encoder_state)
    encoder.to(device).eval()
    X = torch.as_tensor(x, dtype=torch.float32, device=device)
    return torch.cat([encoder(X[i:i + batch_size]) for i in range(0, len(X), batch_size)]).float()
