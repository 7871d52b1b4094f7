"""SeBA pretraining: the encoders of one dataset and separation ratio, one per seed, trained
side by side as one stacked model (weights [seeds, out, in], batched products); a seed alone is
a stack of one.

The loop is explicit. Per seed: shuffle, one group mask per batch, feature view, target-view
nearest neighbour, conditioned projector, InfoNCE. The seeds' losses are summed, so each seed's
gradient is its own, and one Adam step updates them all (Adam is element-wise). After every epoch
each seed's validation objective decides its own early stopping; a seed that stops leaves the
stack, and its best weights are kept. Every seed draws its shuffles and masks from its own
generators in the order a seed trained alone draws them, so on a CPU a seed's encoder is the same,
bit for bit, whatever the stack it trained in (tests/test_stacked.py).

With ``pretrain.encoder: ft_transformer`` (the encoder ablation, seba/ft_transformer.py) every
seed is a stack of one (an FT-Transformer is not batched across seeds), its dropout draws from
torch's global generator seeded from the seed and ratio for the stack's run (and restored
afterwards), and its steps stay eager on CUDA (no CUDA graphs).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np
import torch

from seba.core import paths
from seba.core.config import PretrainConfig
from seba.core.data import EncodedTable, reading, scale
from seba.core.errors import ConfigError, DataError, ExecutorError, TrainingDiverged
from seba.core.paths import RANDOM_RATIO
from seba.ft_transformer import FTTransformer, StackedFTTransformer, ffn_hidden
from seba.model import Encoder, Projector, StackedEncoder, StackedProjector, select_members
from seba.objective import (
    expand_mask,
    masked_group_count,
    sample_group_mask,
    stacked_feature_view,
    stacked_info_nce,
    stacked_target_neighbours,
)
from seba.core.runtime import (TF32_MODES, Throttle, available_bytes, derive_seed, format_seconds, log,
                               matmul_precision, resolve_precision, select_device)
from seba.training import EarlyStopping, FusedAdam, batch_slices

# With CUDA graphs a stack is compacted (stopped seeds dropped, graphs captured again) once this
# share of its seeds has stopped; without graphs, as soon as one has.
GRAPH_COMPACT_SHARE = 0.25


@dataclass
class PretrainResult:
    encoder_state: dict
    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    best_epoch: int = 0
    stop_epoch: int = 0
    best_val_loss: float = math.inf
    seconds: float = 0.0  # from the stack's start to this seed's stop (the seeds of a stack share it)
    masked_columns: int = 0
    precision: str = "fp32"
    steps: int = 0
    capped: bool = False  # stopped by pretrain.max_steps, not by patience
    cuda_graphs: bool = False  # steps after the first epoch replayed as CUDA graphs
    stack_size: int = 1  # seeds in the stack this seed started in


@dataclass
class ScaledSplit:
    """One seed's rows as its split and the table give them, scaled when asked:
    ``scale(table, train, normalise)`` (seba.core.data) at its rows. The validation rows of the last
    ``rows()`` are kept until ``release()`` for the stage's health check."""
    table: EncodedTable
    train: np.ndarray  # row indices into table.X
    val: np.ndarray
    normalise: bool = True
    kept_val: np.ndarray | None = field(default=None, repr=False)

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        X = scale(self.table, self.train, self.normalise)
        self.kept_val = X[self.val]
        return X[self.train], self.kept_val

    def val_rows(self) -> np.ndarray:
        if self.kept_val is not None:
            return self.kept_val
        return scale(self.table, self.train, self.normalise)[self.val]


@dataclass
class SeedData:
    """One seed of a stack: its scaled training and validation rows, as arrays, or as the
    ``ScaledSplit`` (``source``; ``x_train`` and ``x_val`` None) that scales them when the
    stack starts. A stage gives sources: it then holds the rows of the stack in training, not
    every seed's (100 Fashion-MNIST seeds' rows are about 18 GB)."""
    x_train: np.ndarray | None
    x_val: np.ndarray | None
    seed: int
    label: str = ""
    source: ScaledSplit | None = None

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        return (self.x_train, self.x_val) if self.source is None else self.source.rows()

    def val_rows(self) -> np.ndarray:
        return self.x_val if self.source is None else self.source.val_rows()

    def release(self) -> None:
        """Drop the validation rows a source keeps (the seed is done)."""
        if self.source is not None:
            self.source.kept_val = None

    @property
    def n_train(self) -> int:
        return len(self.x_train) if self.source is None else len(self.source.train)

    @property
    def n_val(self) -> int:
        return len(self.x_val) if self.source is None else len(self.source.val)

    @property
    def n_features(self) -> int:
        return self.x_train.shape[1] if self.source is None else self.source.table.X.shape[1]


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``tensor`` on ``device``; to a GPU through pinned memory without waiting for the copy (a
    host synchronisation per copy would otherwise add to the epoch's few)."""
    if device.type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


def make_encoder(n_features: int, cfg: PretrainConfig | dict) -> Encoder | FTTransformer:
    """The encoder ``pretrain.encoder`` names (mlp: ``Encoder``; ft_transformer: ``FTTransformer``
    with the ``pretrain.ft_*`` settings), from a config or a checkpoint's ``model_config`` (one
    without ``encoder``, written before the FT-Transformer existed, is an MLP's)."""
    get = cfg.get if isinstance(cfg, dict) else lambda key, default=None: getattr(cfg, key)
    if get("encoder", "mlp") == "ft_transformer":
        return FTTransformer(n_features, get("encoder_out"), get("encoder_out_relu"), d=get("ft_dim"),
                             n_blocks=get("ft_blocks"), n_heads=get("ft_heads"),
                             attention_dropout=get("ft_attention_dropout"), ffn_dropout=get("ft_ffn_dropout"),
                             residual_dropout=get("ft_residual_dropout"))
    return Encoder(n_features, get("encoder_hidden"), get("encoder_out"), get("encoder_out_relu"))


def build_models(n_features: int, cfg: PretrainConfig, seed: int) -> tuple[Encoder | FTTransformer, Projector]:
    """Models initialised from ``seed`` alone (the global RNG is restored afterwards)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        encoder = make_encoder(n_features, cfg)
        projector = Projector(cfg.encoder_out, n_features, cfg.projector_hidden, cfg.projector_out,
                              conditioned=cfg.conditioned)
    return encoder, projector


def stack_encoders(encoders: list[Encoder | FTTransformer]) -> StackedEncoder | StackedFTTransformer:
    """The stacked form of the seeds' encoders: MLPs as one batched model, an FT-Transformer as a
    stack of one."""
    if isinstance(encoders[0], FTTransformer):
        if len(encoders) != 1:
            raise ValueError(f"an FT-Transformer trains in stacks of one, got {len(encoders)} encoders")
        return StackedFTTransformer(encoders[0])
    return StackedEncoder(encoders)


@contextlib.contextmanager
def seeded_dropout(cfg: PretrainConfig, seed: int, device: torch.device) -> Iterator[None]:
    """For the FT-Transformer (whose dropout draws from torch's global generator): that generator
    (the CPU's and ``device``'s) seeded with ``seed`` for the block, and restored afterwards, so
    that a seed's training depends on its own seed alone. The MLP draws nothing from it: no-op."""
    if cfg.encoder != "ft_transformer":
        yield
        return
    devices = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def stacked_seba_loss(encoder: StackedEncoder, projector: StackedProjector, x: torch.Tensor,
                      column_masks: torch.Tensor, cfg: PretrainConfig,
                      permutations: torch.Tensor | None = None) -> torch.Tensor:
    """The SeBA objective of every seed on its own batch ([S, B, D]) under its own mask ([S, D]):
    [S] losses."""
    # tf32_fp32_search: the search's product in full fp32 (a CUDA graph keeps it)
    with matmul_precision("fp32") if cfg.precision == "tf32_fp32_search" else contextlib.nullcontext():
        positives = stacked_target_neighbours(x, column_masks, exact=cfg.neighbour_search == "exact")
    x_f = stacked_feature_view(x, column_masks, cfg.fill, permutations)
    autocast = (torch.autocast(x.device.type, dtype=torch.bfloat16)
                if cfg.precision == "bf16" else contextlib.nullcontext())
    with autocast:
        z = projector(encoder(x_f), column_masks)
    return stacked_info_nce(z.float(), positives, cfg.temperature)


def member_bytes(n_rows: int, n_val_rows: int, n_features: int, cfg: PretrainConfig) -> int:
    """A generous estimate of the memory one seed takes in a stack: its rows, weights, gradients,
    Adam's moments and best weights, one step's activations kept for the backward pass and the
    backward pass's gradients of them (MLP: all at once; FT-Transformer: one block's at a time).

    The FT-Transformer's activations grow with the tokens T = columns + 1: per row and block about
    ``10 d + 5 h`` floats of token activations and ``3 heads T`` of attention (probabilities,
    their dropout and its mask: B x heads x T^2 each per block, as torch keeps them on a CPU); its
    last block attends from the CLS token only. On dna (361 tokens) autograd keeps 8.5 M floats
    per row (32 GiB at batch 1024; this estimate: 65 GiB), and a 128-row step peaked at 4.7 GiB
    resident (estimate: 8.2 GiB); docs/performance.md."""
    D, H, O = n_features, cfg.encoder_hidden, cfg.encoder_out
    Hp, P = cfg.projector_hidden, cfg.projector_out
    projector = (O + (D if cfg.conditioned else 0)) * Hp + Hp + Hp * P + P
    B = min(cfg.batch_size, max(n_rows, n_val_rows, 2) + 1)
    shared = 4 * D + 2 * Hp + 2 * P + 4 * B  # per row: views, projector, similarities
    if cfg.neighbour_search == "exact":
        shared += 2 * (D + B)  # the target view and its distances in float64
    if cfg.encoder == "ft_transformer":
        d, L, heads, h, T = cfg.ft_dim, cfg.ft_blocks, cfg.ft_heads, ffn_hidden(cfg.ft_dim), D + 1
        block = 4 * (d * d + d) + 2 * d * h + 2 * h + h * d + d + 4 * d  # attention, FFN, LayerNorms
        encoder = 2 * D * d + d + L * block + 2 * d + d * O + O
        full = T * (10 * d + 5 * h + 3 * heads * T)  # per row, a block over every token
        last = 3 * T * d + 3 * heads * T + 10 * d + 5 * h  # the CLS-only block: keys and values of all
        kept = B * (shared + T * d + (L - 1) * full + last + 3 * d + 3 * O)
        transient = B * (shared + 2 * heads * T * T + T * (4 * d + 2 * h))  # one block's gradients
    else:
        encoder = D * H + H + H * O + O
        kept = transient = B * (shared + 2 * H + 3 * O)
    floats = (n_rows + n_val_rows) * D + 4 * (encoder + projector) + encoder + kept + transient
    return int(1.5 * 4 * floats)


class _Member:
    """One seed's own state in a stack: its generators, fixed validation views, early stopping
    and result. Draws come in the order ``pretrain_encoder`` made them for a seed alone."""

    def __init__(self, data: SeedData, ratio: float | str, cfg: PretrainConfig, k: int, n_groups: int,
                 groups: torch.Tensor, val_batches: list[torch.Tensor]):
        self.data, self.cfg, self.k, self.n_groups, self.groups = data, cfg, k, n_groups, groups
        self.random_ratio = ratio == RANDOM_RATIO
        self.run_seed = derive_seed(data.seed, ratio)
        self.gen = torch.Generator().manual_seed(self.run_seed)  # shuffles and training masks
        self.val_gen = torch.Generator().manual_seed(derive_seed(data.seed, ratio, "validation"))
        # Fixed validation views, drawn in both validation modes so that the generator's later
        # draws do not depend on the mode: draw j of batch i is entry i * draws + j.
        draws = cfg.validation_draws
        self.val_masks = [self.column_mask(self.val_gen) for _ in val_batches for _ in range(draws)]
        self.val_perms = [torch.randperm(len(b), generator=self.val_gen) for b in val_batches for _ in range(draws)]
        self.stopping = EarlyStopping(cfg.patience, cfg.min_delta)
        self.result = PretrainResult(encoder_state={}, masked_columns=k, precision=cfg.precision)
        self.running = True

    def column_mask(self, generator: torch.Generator) -> torch.Tensor:
        """One training-view mask over the encoded columns, drawn on a CPU generator. The
        'random' ratio first draws its ratio, uniform on ``pretrain.random_ratio_range``."""
        k = self.k
        if self.random_ratio:
            low, high = self.cfg.random_ratio_range
            ratio = low + (high - low) * float(torch.rand((), generator=generator, dtype=torch.float64))
            k = masked_group_count(self.n_groups, ratio, self.cfg.min_masked_columns)
        return expand_mask(sample_group_mask(self.n_groups, k, generator), self.groups)

    def draw_epoch(self, n_rows: int, batch_size: int) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor | None]:
        """This epoch's row order, one mask per batch and (marginal fill) each batch's row
        permutation, concatenated in batch order."""
        order = torch.randperm(n_rows, generator=self.gen)
        masks, perms = [], []
        for idx in batch_slices(n_rows, batch_size, order):
            masks.append(self.column_mask(self.gen))
            if self.cfg.fill == "marginal":
                perms.append(torch.randperm(len(idx), generator=self.gen))
        return order, masks, (torch.cat(perms) if perms else None)

    def fresh_view(self, n_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.column_mask(self.val_gen), torch.randperm(n_rows, generator=self.val_gen)


class StackedStepGraphs:
    """Training steps of a stack (gather each seed's rows, SeBA losses, backward, Adam) captured
    as CUDA graphs, one per batch length, and replayed: a step is then one launch instead of
    about a hundred kernels each launched from Python, which on a GPU cost more than the kernels
    themselves (benchmarks/speed.py --device cuda). The kernels are those of the eager step, on
    the same tensors, so a replayed step computes what the eager one would. Captured after a
    first eager epoch (which creates Adam's state and warms the libraries up), and again after
    the stack is compacted (its tensors are new)."""

    def __init__(self, encoder: StackedEncoder, projector: StackedProjector, optimiser: torch.optim.Optimizer,
                 X: torch.Tensor, cfg: PretrainConfig):
        self.encoder, self.projector, self.optimiser = encoder, projector, optimiser
        self.X, self.cfg = X, cfg
        self.members = torch.arange(X.shape[0], device=X.device).unsqueeze(1)
        self.graphs: dict[int, tuple] = {}

    def capture(self, n_rows: int) -> None:
        S, device = self.X.shape[0], self.X.device
        rows = torch.zeros(S, n_rows, dtype=torch.long, device=device)
        masks = torch.zeros(S, self.X.shape[2], dtype=torch.bool, device=device)
        perms = (torch.arange(n_rows, device=device).expand(S, -1).contiguous()
                 if self.cfg.fill == "marginal" else None)
        graph = torch.cuda.CUDAGraph()
        self.optimiser.zero_grad(set_to_none=True)  # the graph's backward writes the gradients
        with torch.cuda.graph(graph):
            losses = stacked_seba_loss(self.encoder, self.projector, self.X[self.members, rows], masks,
                                       self.cfg, perms)
            losses.sum().backward()
            self.optimiser.step()
        # the losses without their autograd graph: nodes kept alive from one capture (or from an
        # eager step) make the next capture fail, their stream being another
        self.graphs[n_rows] = (graph, rows, masks, perms, losses.detach())

    def step(self, rows: torch.Tensor, masks: torch.Tensor, perms: torch.Tensor | None) -> torch.Tensor:
        graph, static_rows, static_masks, static_perms, losses = self.graphs[rows.shape[1]]
        static_rows.copy_(rows)
        static_masks.copy_(masks)
        if static_perms is not None:
            static_perms.copy_(perms)
        graph.replay()
        return losses


def pretrain_stack(
    members: list[SeedData],
    groups: np.ndarray,
    ratio: float | str,
    cfg: PretrainConfig,
    device: torch.device,
    label: str = "",
    cuda_graphs: bool = True,
) -> list[PretrainResult]:
    """Train one SeBA encoder per seed of ``members`` as one stack; returns, in member order,
    each seed's best (lowest validation objective) weights and its training record.

    The seeds must have the same numbers of training and validation rows (the seeds of one
    table's split do). On CUDA in fp32 or a TF32 mode, steps after the first epoch are replayed as CUDA
    graphs (``cuda_graphs=False`` keeps every step eager); if capturing fails, training goes on
    eagerly."""
    if not members:
        return []
    shapes = {(m.n_train, m.n_val, m.n_features) for m in members}
    if len(shapes) > 1:
        raise ValueError(f"pretrain_stack: the seeds' (training rows, validation rows, columns) differ: {sorted(shapes)}")
    if cfg.encoder == "ft_transformer" and len(members) > 1:  # stacks of one, in turn
        return [result for m in members
                for result in pretrain_stack([m], groups, ratio, cfg, device, label, cuda_graphs)]
    cfg = dataclasses.replace(cfg, precision=resolve_precision(cfg.precision, device))
    try:
        with matmul_precision(cfg.precision), seeded_dropout(cfg, derive_seed(members[0].seed, ratio, "dropout"),
                                                             device):
            return _train_stack(members, groups, ratio, cfg, device, label, cuda_graphs)
    except (torch.OutOfMemoryError, RuntimeError) as error:
        # a CPU's allocator fails with a plain RuntimeError (a memory limit, strict overcommit)
        if not isinstance(error, torch.OutOfMemoryError) and "DefaultCPUAllocator" not in str(error):
            raise
        # a stack of one seed cannot be split further: stack_size below 1 (0) is "all that fit"
        advice = (f"set pretrain.stack_size below {len(members)}" if len(members) > 1 else
                  "one seed does not fit: lower pretrain.batch_size or the model widths"
                  + (", or pretrain.workers (they share the machine's memory)" if device.type == "cpu" else ""))
        raise ConfigError(
            f"{label or 'pretrain'}: a stack of {len(members)} seed{'s' if len(members) > 1 else ''} ran out of "
            f"memory on {device} ({str(error).splitlines()[0][:160]}); {advice}") from None


def stacked_rows(members: list[SeedData], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The seeds' training and validation rows as float32 ``[seeds, rows, columns]`` tensors on
    ``device``, filled seed by seed (a seed given as a source is scaled then): no host copy of
    the whole stack on the way to a GPU (a stack of 100 Fashion-MNIST seeds is 16.5 GB)."""
    first = members[0]
    out = [torch.empty((len(members), n, first.n_features), dtype=torch.float32, device=device)
           for n in (first.n_train, first.n_val)]
    for i, member in enumerate(members):
        for tensor, rows in zip(out, member.rows()):
            tensor[i].copy_(torch.from_numpy(np.require(rows, np.float32, ["C", "W"])))
    return out[0], out[1]


def _train_stack(members: list[SeedData], groups: np.ndarray, ratio: float | str, cfg: PretrainConfig,
                 device: torch.device, label: str, cuda_graphs: bool) -> list[PretrainResult]:
    n_rows, n_val = members[0].n_train, members[0].n_val
    groups_t = torch.as_tensor(groups, dtype=torch.long)
    n_groups = int(groups.max()) + 1
    # masked original columns per view; 0 for the 'random' ratio, whose views draw their own
    k = 0 if ratio == RANDOM_RATIO else masked_group_count(n_groups, ratio, cfg.min_masked_columns)
    val_batches = batch_slices(n_val, cfg.batch_size, torch.arange(n_val))
    val_rows = [(int(b[0]), int(b[0]) + len(b)) for b in val_batches]
    draws = cfg.validation_draws
    seeds = [_Member(m, ratio, cfg, k, n_groups, groups_t, val_batches) for m in members]
    models = [build_models(members[0].n_features, cfg, s.run_seed) for s in seeds]
    encoder = stack_encoders([e for e, _ in models]).to(device)
    projector = StackedProjector([p for _, p in models], cfg.mask_bias).to(device)
    del models
    optimiser = FusedAdam(list(encoder.parameters()) + list(projector.parameters()), cfg.lr)

    # The stack's tensors; ``active`` lists the seeds (indices into ``seeds``) still in it.
    active = list(range(len(seeds)))
    X, V = stacked_rows(members, device)
    if val_batches:  # to the device in one copy each
        val_masks = torch.stack([torch.stack(s.val_masks) for s in seeds]).to(device)  # [S, views, D]
        val_perms = torch.stack([torch.cat(s.val_perms) for s in seeds]).to(device)  # [S, views' rows]
        perm_starts = np.cumsum([0] + [len(p) for p in seeds[0].val_perms]).tolist()
    best = {name: value.detach().clone() for name, value in encoder.stacked_state().items()}  # [all seeds, ...]

    @torch.no_grad()
    def validation_losses() -> torch.Tensor:
        """Every seed's validation objective, [seeds] float64 on the device: launched, not
        waited for (summed on the device in float64, the same arithmetic as Python floats)."""
        encoder.eval()
        projector.eval()
        total = torch.zeros(len(active), dtype=torch.float64, device=device)
        weight = 0
        for i, (first, end) in enumerate(val_rows):
            xb = V[:, first:end]
            if cfg.validation == "fixed":
                views = [(val_masks[:, i * draws + j],
                          val_perms[:, perm_starts[i * draws + j]:perm_starts[i * draws + j + 1]])
                         for j in range(draws)]
            else:
                fresh = [seeds[g].fresh_view(end - first) for g in active]
                views = [(torch.stack([m for m, _ in fresh]).to(device), torch.stack([p for _, p in fresh]).to(device))]
            for masks, perms in views:
                total += stacked_seba_loss(encoder, projector, xb, masks, cfg, perms).double() * (end - first)
                weight += end - first
        encoder.train()
        projector.train()
        return total / max(weight, 1)

    # Every epoch has the same number of batches, so the step cap is an epoch limit: training
    # stops after the first epoch that reaches pretrain.max_steps optimiser steps.
    sizes = [len(b) for b in batch_slices(n_rows, cfg.batch_size, torch.arange(n_rows))]  # every epoch's
    steps_per_epoch = len(sizes)
    epoch_limit = cfg.max_epochs
    if cfg.max_steps and steps_per_epoch:
        epoch_limit = min(epoch_limit, math.ceil(cfg.max_steps / steps_per_epoch))
    throttle = Throttle(cfg.progress_seconds)
    # not for the FT-Transformer: its dropout under graph capture is not verified
    use_graphs = (cuda_graphs and device.type == "cuda" and cfg.precision in ("fp32", *TF32_MODES)
                  and cfg.encoder == "mlp")
    graphs: StackedStepGraphs | None = None
    start = time.perf_counter()

    def finish(s: _Member, epoch: int) -> None:
        r = s.result
        r.stop_epoch, r.seconds = epoch, time.perf_counter() - start
        r.steps = epoch * steps_per_epoch
        r.capped = bool(cfg.max_steps and r.steps >= cfg.max_steps and not s.stopping.should_stop(epoch))
        r.stack_size = len(seeds)
        r.cuda_graphs = graphs is not None
        s.running = False

    def compact() -> None:
        """Drop the stopped seeds from the stack: its weights, Adam's state and data."""
        nonlocal optimiser, X, V, val_masks, val_perms, graphs, active
        keep = [i for i, g in enumerate(active) if seeds[g].running]
        index = torch.tensor(keep, device=device)
        select_members(encoder, index)
        select_members(projector, index)
        optimiser = optimiser.select(list(encoder.parameters()) + list(projector.parameters()), index)
        X, V = X[index], V[index]
        if val_batches:
            val_masks, val_perms = val_masks[index], val_perms[index]
        active = [active[i] for i in keep]
        if graphs is not None:
            graphs = capture_graphs()

    def capture_graphs() -> StackedStepGraphs | None:
        captured = StackedStepGraphs(encoder, projector, optimiser, X, cfg)
        try:
            for n in sorted(set(sizes)):
                captured.capture(n)
            return captured
        except RuntimeError as error:
            log(f"  {label}: CUDA graph capture failed ({error}); training on without graphs")
            optimiser.zero_grad(set_to_none=True)
            return None

    # Each seed's shuffle, masks and permutations come from its own CPU generator (the same draws
    # on every device) and go to the device once per epoch, not once per batch. An epoch's draws
    # are made while the device computes the epoch before (its steps and validation are launched
    # before the host waits for their losses), so that a GPU does not idle while the host draws.
    # A seed's generator serves its training draws alone: the draws of a seed that then stops
    # are dropped, and change nothing of its run.
    def draw_epoch() -> dict[int, tuple]:
        return {g: seeds[g].draw_epoch(n_rows, cfg.batch_size) for g in active}

    drawn = draw_epoch()
    for epoch in range(1, epoch_limit + 1):
        epoch_draws = [drawn[g] for g in active]
        orders = to_device(torch.stack([order for order, _, _ in epoch_draws]), device)  # [S, rows]
        masks = to_device(torch.stack([torch.stack(m) for _, m, _ in epoch_draws], dim=1), device)  # [batches, S, D]
        perms = to_device(torch.stack([p for _, _, p in epoch_draws]), device) if cfg.fill == "marginal" else None
        members_index = torch.arange(len(active), device=device).unsqueeze(1)
        epoch_loss = torch.zeros(len(active), device=device)  # summed on the device: no per-batch sync
        position = 0
        for b, size in enumerate(sizes):
            rows = orders[:, position:position + size]
            perm = perms[:, position:position + size] if perms is not None else None
            position += size
            if graphs is not None:
                losses = graphs.step(rows, masks[b], perm)
            else:
                losses = stacked_seba_loss(encoder, projector, X[members_index, rows], masks[b], cfg, perm)
                optimiser.zero_grad(set_to_none=True)
                losses.sum().backward()
                optimiser.step()
            epoch_loss += losses.detach() * size
        losses = None  # frees the last eager step's autograd graph (a graph capture needs it gone)
        val_total = validation_losses() if val_batches else None
        drawn = draw_epoch() if epoch < epoch_limit else {}
        # one synchronisation per epoch: the training and the validation losses in one copy
        both = epoch_loss.double() if val_total is None else torch.cat([epoch_loss.double(), val_total])
        both = both.tolist()
        train_losses = [value / n_rows for value in both[:len(active)]]
        val_losses = both[len(active):] if val_total is not None else train_losses
        improved = []
        for i, g in enumerate(active):
            s = seeds[g]
            if not s.running:  # stopped, waiting to leave the stack
                continue
            train_loss, val_loss = train_losses[i], val_losses[i]
            if not (math.isfinite(train_loss) and math.isfinite(val_loss)):
                raise TrainingDiverged(f"{s.data.label or f'seed {s.data.seed}'}: loss is not finite at epoch "
                                       f"{epoch} (train {train_loss}, validation {val_loss})")
            s.result.train_loss.append(train_loss)
            s.result.val_loss.append(val_loss)
            if s.stopping.update(val_loss, epoch):
                s.result.best_val_loss, s.result.best_epoch = val_loss, epoch
                improved.append((i, g))
            if s.stopping.should_stop(epoch) or epoch == epoch_limit:
                finish(s, epoch)
        if improved:
            local, overall = to_device(torch.tensor(improved).T, device)
            for name, value in encoder.stacked_state().items():
                best[name][overall] = value.detach()[local]
        running = sum(seeds[g].running for g in active)
        if running == 0:
            break
        if throttle.ready() and epoch > 1:
            elapsed = time.perf_counter() - start
            stop_by = max(seeds[g].stopping.stops_by(epoch_limit) for g in active if seeds[g].running)
            means = [(train_losses[i], val_losses[i]) for i, g in enumerate(active) if seeds[g].running]
            log(f"  {label} epoch {epoch:5d}: {running} of {len(seeds)} seed{'s' if len(seeds) > 1 else ''} "
                f"training, loss {np.mean([t for t, _ in means]):.4f}  val {np.mean([v for _, v in means]):.4f} "
                f"(means), "
                f"{format_seconds(elapsed)} elapsed, stops by epoch {stop_by} if no improvement "
                f"(~{format_seconds((stop_by - epoch) * elapsed / epoch)} left)")
        stopped = len(active) - running
        if stopped and stopped >= (GRAPH_COMPACT_SHARE * len(active) if graphs is not None else 1):
            compact()
        if epoch == 1 and use_graphs:
            graphs = capture_graphs()
    for g, s in enumerate(seeds):
        s.result.encoder_state = {name: value[g].detach().cpu().clone() for name, value in best.items()}
    return [s.result for s in seeds]


def pretrain_encoder(x_train: np.ndarray, x_val: np.ndarray, groups: np.ndarray, ratio: float | str, seed: int,
                     cfg: PretrainConfig, device: torch.device, label: str = "",
                     cuda_graphs: bool = True) -> PretrainResult:
    """Train one SeBA encoder (a stack of one); returns the best (lowest validation objective)
    weights."""
    return pretrain_stack([SeedData(x_train, x_val, seed, label)], groups, ratio, cfg, device, label,
                          cuda_graphs)[0]


def plan_workers(cfg: PretrainConfig, n_seeds: int, device: torch.device) -> tuple[int, int]:
    """(processes, torch threads each) for training ``n_seeds`` seeds of one stage.

    ``pretrain.workers`` 0 (auto) trains min(seeds, cores) stacks at once on a CPU, one on
    CUDA; the ``pretrain.threads`` budget (0 = all cores) is shared out among them. On two cores
    two one-thread processes stepping together train 1.21x the rows per second of one two-thread
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


def plan_stacks(n_seeds: int, workers: int, seed_bytes: int, cfg: PretrainConfig, device: torch.device,
                free_bytes: int | None = None, where: str = "pretrain") -> list[list[int]]:
    """The seeds (as positions 0 .. n_seeds - 1) of each stack: one stack per worker, split
    further while a stack would exceed ``pretrain.stack_size`` or 90 % of the memory free to
    it (the device's free memory, shared among the workers). Raises a ConfigError naming the
    sizes when one seed does not fit."""
    free = available_bytes(device) if free_bytes is None else free_bytes
    fits = int(0.9 * free / workers) // max(seed_bytes, 1)
    if fits < 1:
        raise ConfigError(
            f"{where}: one seed needs about {seed_bytes / 2**30:.2f} GiB on {device} but "
            f"{free / 2**30:.2f} GiB is free{f' for {workers} workers' if workers > 1 else ''}: lower "
            f"pretrain.batch_size or the model widths, or pretrain.workers")
    size = math.ceil(n_seeds / workers)
    size = min(size, fits, cfg.stack_size or size)
    if cfg.encoder == "ft_transformer":  # not batched into one model: stacks of one
        size = 1
    return [list(range(i, min(i + size, n_seeds))) for i in range(0, n_seeds, size)]


def _train_in_worker(threads: int, kwargs: dict) -> list[PretrainResult]:
    torch.set_num_threads(threads)
    return pretrain_stack(**kwargs)


def _train_here(threads: int, kwargs: dict) -> list[PretrainResult]:
    """``pretrain_stack(**kwargs)`` in this process with ``threads`` torch threads, its own count
    restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return pretrain_stack(**kwargs)
    finally:
        torch.set_num_threads(before)


def pretrain_many(stacks: list[dict], workers: int, threads: int,
                  salvage: Callable[[int, list[PretrainResult]], None] | None = None) -> Iterator[list[PretrainResult]]:
    """``pretrain_stack(**stack)`` for every stack, yielded in order, each with ``threads`` torch
    threads (a stack's results depend only on its own arguments and the thread count, which on a
    CPU changes the float rounding). With ``workers`` > 1 the stacks run in that many spawned
    processes; otherwise here (as a resumed stage's one stack left, planned for more workers).

    When a stack fails (or the caller stops early: Ctrl-C, a seed found collapsed), the stacks
    still training are ended at once, not waited for: their seeds would be thrown away with the
    failure. Stacks that had already finished but were not yet yielded (they finished before an
    earlier one) go to ``salvage(index, results)`` first, so that a rerun need not train them
    again. A worker process that dies (killed, out of memory) breaks the pool: an ExecutorError
    naming the stage and the seeds that did not finish."""
    if workers <= 1 or len(stacks) <= 1:
        for stack in stacks:
            yield _train_here(threads, stack)
        return
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
    futures, handed = [], 0
    try:
        futures += [pool.submit(_train_in_worker, threads, stack) for stack in stacks]
        for future, stack in zip(futures, stacks):
            try:
                result = future.result()
            except BrokenProcessPool:  # the pool's every unfinished stack fails: name their seeds
                seeds = ", ".join(str(m.seed) for f, s in zip(futures, stacks) if not (f.done() and not f.exception())
                                  for m in s["members"])
                raise ExecutorError(f"{stack.get('label') or '[pretrain]'}: a worker process ended abruptly (killed, "
                                    f"or out of memory: lower pretrain.workers, pretrain.stack_size or "
                                    f"pretrain.batch_size); seeds {seeds} did not finish training") from None
            handed += 1  # before the yield: a caller that fails on this stack has had it
            yield result
    except BaseException:
        processes = list((pool._processes or {}).values())  # (ProcessPoolExecutor has no public kill)
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.kill()
        for process in processes:
            process.join()
        if salvage is not None:
            for index, future in finished_after(futures, handed):
                try:
                    salvage(index, future.result())
                except Exception as exc:  # keeping is a cache: never hide the failure being raised
                    log(f"{stacks[index].get('label') or '[pretrain]'} warning: a finished stack was not kept ({exc})")
        raise
    pool.shutdown()


def finished_after(futures: list, start: int) -> list:
    """(index, future) of the futures from ``start`` on that finished with a result."""
    return [(i, f) for i, f in enumerate(futures) if i >= start and f.done() and not f.cancelled()
            and f.exception() is None]


def shared_table(members: list[SeedData]) -> EncodedTable | None:
    """The one table every member's source scales its rows from, or None (arrays, or several tables)."""
    tables = {id(m.source.table): m.source.table for m in members if m.source is not None}
    return next(iter(tables.values())) if len(tables) == 1 and all(m.source for m in members) else None


def without_table(members: list[SeedData]) -> list[SeedData]:
    """Copies of the members whose sources name no table: a Ray stage puts the table into the
    object store once for all its tasks (``train_chunk``'s ``table``) instead of sending it with
    each task's seeds (220 MB per task for Fashion-MNIST)."""
    return [m if m.source is None else dataclasses.replace(m, source=dataclasses.replace(m.source, table=None,
                                                                                       kept_val=None))
            for m in members]


def with_table(members: list[SeedData], table: EncodedTable) -> list[SeedData]:
    """``without_table``'s members given their table again (in the Ray task)."""
    return [m if m.source is None or m.source.table is not None
            else dataclasses.replace(m, source=dataclasses.replace(m.source, table=table)) for m in members]


def train_chunk(members: list[SeedData], groups: np.ndarray, ratio: float | str, cfg: PretrainConfig,
                label: str, table: EncodedTable | None = None) -> list[PretrainResult]:
    """The seeds of one Ray task (seba.executor), trained where the task runs: on that node's
    device (``pretrain.device``), in stacks that fit its free memory, one after another. The
    results are those of the same seeds trained here, for the same torch thread count.
    ``table``: the table of members sent ``without_table``."""
    device = select_device(cfg.device)
    if table is not None:
        members = with_table(members, table)
    # arrays from Ray's object store are read-only: torch would warn on each
    members = [m if m.source is not None else dataclasses.replace(m, x_train=np.array(m.x_train), x_val=np.array(m.x_val))
               for m in members]  # (a source's scaled rows are new arrays)
    groups = np.array(groups)
    stacks = plan_stacks(len(members), 1, member_bytes(members[0].n_train, members[0].n_val, members[0].n_features, cfg),
                         cfg, device, where=label)
    return [result for stack in stacks
            for result in pretrain_stack([members[i] for i in stack], groups, ratio, cfg, device, label)]


FT_KEYS = ("ft_blocks", "ft_dim", "ft_heads", "ft_attention_dropout", "ft_ffn_dropout", "ft_residual_dropout")


def encoder_config(cfg: PretrainConfig, in_features: int) -> dict:
    """The encoder's kind and shape as a checkpoint records it (``model_config``) and ``encode``
    reads it: the MLP's widths, or the FT-Transformer's ``ft_*`` settings."""
    config = {"encoder": cfg.encoder, "in_features": int(in_features), "encoder_out": cfg.encoder_out,
              "encoder_out_relu": cfg.encoder_out_relu}
    if cfg.encoder == "ft_transformer":
        return {**config, **{key: getattr(cfg, key) for key in FT_KEYS}}
    return {**config, "encoder_hidden": cfg.encoder_hidden}


def load_checkpoint(root, dataset: str, ratio: float | str, seed: int) -> dict:
    """The checkpoint that ``pretrain@<dataset>-<ratio>`` wrote for ``seed``; one that cannot be read
    or lacks the encoder is a DataError naming the stage to rerun."""
    path = paths.checkpoint(root, dataset, ratio, seed)
    stage = f"pretrain@{dataset}-{ratio}"
    with reading(path, stage):
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(checkpoint, dict) or not {"encoder", "model_config"} <= set(checkpoint):
        raise DataError(f"{path} is not a checkpoint of the pretrain stage (no encoder or model_config): rerun "
                        f"{stage} (`dvc repro {stage}`)")
    return checkpoint


def normalised_input(checkpoint: dict) -> bool:
    """Whether a checkpoint's encoder was trained on standardised numeric columns
    (``pretrain.normalise``; checkpoints from before the switch were)."""
    return bool(checkpoint.get("pretrain_config", {}).get("normalise", True))


@torch.no_grad()
def encode(encoder_state: dict, cfg_dict: dict, x: np.ndarray, device: torch.device,
           batch_size: int = 8192) -> torch.Tensor:
    """Encoder outputs [rows, out] for ``x`` with the weights of a checkpoint, in eval mode (no
    dropout). A ``model_config`` without ``encoder`` (older checkpoints) is an MLP's. The
    FT-Transformer encodes in batches whose token activations stay near 256 MiB."""
    encoder = make_encoder(cfg_dict["in_features"], cfg_dict)
    encoder.load_state_dict(encoder_state)
    encoder.to(device).eval()
    if isinstance(encoder, FTTransformer):
        per_row = (cfg_dict["in_features"] + 1) * 2 * ffn_hidden(cfg_dict["ft_dim"])
        batch_size = max(1, min(batch_size, 2**26 // per_row))
    X = torch.as_tensor(x, dtype=torch.float32, device=device)
    return torch.cat([encoder(X[i:i + batch_size]) for i in range(0, len(X), batch_size)]).float()
