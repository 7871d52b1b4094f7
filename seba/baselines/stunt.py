"""STUNT: a ProtoNet meta-trained on tasks self-generated from the unlabeled table (self-supervised)."""

from __future__ import annotations

import copy
import math

import numpy as np
import torch

from seba.baselines import register
from seba.baselines.base import RepresentationMethod
from seba.core.errors import ConfigError, TrainingDiverged
from seba.model import Encoder
from seba.training import EarlyStopping
from seba.core.runtime import derive_seed, resolve_precision
from seba.core.schema import Fraction, PositiveFloat, PositiveInt, choice, section


@section
class StuntConfig:
    ways: PositiveInt = 10  # k-means clusters = classes per self-generated task (official code: num_ways 10)
    shots: PositiveInt = 1  # support rows per pseudo-class (official: num_shots 1)
    queries: PositiveInt = 15  # query rows per pseudo-class (official: num_shots_test 15)
    tasks_per_step: PositiveInt = 4  # tasks per Adam step (official: batch_size 4)
    min_column_fraction: Fraction = 0.2  # share of original columns chosen per task, drawn in [0.2, 0.5]
    max_column_fraction: Fraction = 0.5  # (official: int(0.2 D) .. int(0.5 D) columns)
    kmeans_iterations: PositiveInt = 20  # Lloyd iterations (official: faiss niter 20)
    kmeans_points_per_cluster: PositiveInt = 256  # k-means on <= ways * 256 sampled rows (faiss's default cap)
    task_pool: PositiveInt = 500  # pseudo-labelled column subsets computed up front, reused with fresh rows/perturbations
    max_rejections: PositiveInt = 20000  # column subsets whose smallest cluster is too small, before giving up
    val_clusters: PositiveInt = 2  # pseudo-validation k-means clusters (official income script: 2)
    val_restarts: PositiveInt = 10  # k-means restarts for the pseudo-validation labels (scikit-learn's n_init then)
    val_queries: PositiveInt = 30  # query rows per pseudo-class in a validation task (official: 30)
    val_tasks: PositiveInt = 200  # fixed pseudo-validation tasks (official: ~1000 fresh ones per evaluation)
    eval_every: PositiveInt = 50  # steps between pseudo-validations (official: eval_step 50)
    patience: PositiveInt = 1000  # steps without a better pseudo-validation accuracy before stopping
    max_steps: PositiveInt = 2000  # step cap (official: 10000 steps, no early stop); the cost budget
    encoder_hidden: PositiveInt = 1024  # as SeBA's encoder
    encoder_out: PositiveInt = 256
    lr: PositiveFloat = 1e-3  # Adam (official)
    precision: choice("fp32", "bf16", "auto") = "auto"
    head: choice("protonet", "seba") = "protonet"  # protonet: Euclidean prototypes at every shot (STUNT's) | seba: SeBA's heads

    def __post_init__(self):
        if self.max_column_fraction < self.min_column_fraction:
            raise ConfigError(f"params.yaml: 'baselines.stunt.max_column_fraction' ({self.max_column_fraction}) must be "
                              f">= min_column_fraction ({self.min_column_fraction})")
        if self.ways < 2:
            raise ConfigError(f"params.yaml: 'baselines.stunt.ways' must be >= 2 (classes of a task), got {self.ways}")
        if self.val_clusters < 2:  # one pseudo-class: no pseudo-validation at all, the final weights kept
            raise ConfigError(f"params.yaml: 'baselines.stunt.val_clusters' must be >= 2 (the pseudo-validation "
                              f"compares classes), got {self.val_clusters}")
        if self.eval_every > self.max_steps:
            raise ConfigError(f"params.yaml: 'baselines.stunt.eval_every' ({self.eval_every}) is past 'max_steps' "
                              f"({self.max_steps}): no pseudo-validation would choose the encoder; lower eval_every")


VAL_KMEANS_ITERATIONS = 100  # the pseudo-validation labels are computed once: iterate longer (scikit-learn: <= 300)


def sample_columns(groups: torch.Tensor, n_groups: int, min_fraction: float, max_fraction: float,
                   generator: torch.Generator) -> torch.Tensor:
    """A random subset of whole original columns (a one-hot block is one column): its size is
    drawn uniformly from the integers in [floor(min_fraction * G), floor(max_fraction * G)]
    (at least 1) for G original columns. Returns the bool mask over encoded columns [D]."""
    low = max(1, math.floor(min_fraction * n_groups))
    high = max(low, math.floor(max_fraction * n_groups))
    size = int(torch.randint(low, high + 1, (1,), generator=generator))
    chosen = torch.zeros(n_groups, dtype=torch.bool)
    chosen[torch.randperm(n_groups, generator=generator)[:size]] = True
    return chosen.to(groups.device)[groups]


def perturb(x: torch.Tensor, table: torch.Tensor, column_mask: torch.Tensor, groups: torch.Tensor,
            generator: torch.Generator) -> torch.Tensor:
    """STUNT's perturbation: the chosen columns of every row of ``x`` are replaced by the same
    columns of a random row of ``table`` (a draw from the columns' empirical marginals; each
    original column has its own donor row, so a one-hot block is replaced as a whole and stays
    one-hot); the other columns are kept."""
    n_groups = int(groups.max()) + 1
    donors = torch.randint(0, len(table), (len(x), n_groups), generator=generator).to(x.device)
    columns = torch.arange(x.shape[1], device=x.device)
    values = table[donors[:, groups], columns]
    return torch.where(column_mask, values, x)


def _distances(x: torch.Tensor, norms: torch.Tensor | None, centroids: torch.Tensor) -> torch.Tensor:
    """Squared Euclidean distances [B, m, k] of rows x [B, m, d] (squared norms [B, m]) to
    centroids [B, k, d]; without ``norms``, the distances less each row's squared norm (enough
    for the nearest centroid)."""
    partial = torch.baddbmm((centroids * centroids).sum(-1)[:, None, :], x, centroids.transpose(1, 2), alpha=-2)
    return partial if norms is None else (partial + norms[..., None]).clamp_min(0)


def batched_kmeans(x: torch.Tensor, k: int, iterations: int, generator: torch.Generator, init: str = "random"
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Lloyd's k-means for B independent problems at once, x [B, m, d] (zero padding columns add
    nothing to the distances): seeds at ``k`` random rows (``init="random"``, as faiss, which
    STUNT uses for its tasks) or by greedy k-means++ (``"++"``, as scikit-learn, which STUNT uses
    for its pseudo-validation), then ``iterations`` assign / update rounds; an emptied cluster is
    re-seeded at a random row. Returns labels [B, m] and inertia [B]."""
    b, m, d = x.shape
    k = min(k, m)
    norms = (x * x).sum(-1)
    batch = torch.arange(b, device=x.device)
    if init == "random":
        seeds = torch.stack([torch.randperm(m, generator=generator)[:k] for _ in range(b)]).to(x.device)
        centroids = x[batch[:, None], seeds]
    else:
        first = torch.randint(0, m, (b,), generator=generator).to(x.device)
        chosen = [x[batch, first]]
        nearest = _distances(x, norms, chosen[0][:, None])[..., 0]
        trials = 2 + int(math.log(k))  # greedy k-means++ as scikit-learn: the best of a few D^2-weighted draws
        for _ in range(1, k):
            weights = (nearest + 1e-12).cpu()
            candidates = torch.multinomial(weights, trials, replacement=True, generator=generator).to(x.device)
            reach = torch.minimum(nearest[..., None], _distances(x, norms, x[batch[:, None], candidates]))
            best = reach.sum(1).argmin(1)  # the candidate that lowers the potential most
            chosen.append(x[batch, candidates[batch, best]])
            nearest = reach[batch, :, best]
        centroids = torch.stack(chosen, 1)  # [B, k, d]
    for _ in range(iterations):
        assign = torch.nn.functional.one_hot(_distances(x, None, centroids).argmin(-1), k).to(x.dtype)  # [B, m, k]
        counts = assign.sum(1)  # [B, k]
        centroids = (assign.transpose(1, 2) @ x) / counts.clamp_min(1)[..., None]
        empty = torch.nonzero(counts == 0)  # [e, 2]: (problem, cluster)
        if len(empty):
            rows = torch.randint(0, m, (len(empty),), generator=generator).to(x.device)
            centroids[empty[:, 0], empty[:, 1]] = x[empty[:, 0], rows]
    inertia, labels = _distances(x, norms, centroids).min(-1)
    return labels, inertia.sum(1)


def chosen_columns(table: torch.Tensor, rows: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """For each problem b, the rows ``rows[b]`` of ``table`` restricted to its chosen columns
    ``masks[b]``, zero-padded to the largest choice: [B, m, max chosen]."""
    counts = masks.sum(1)
    width = int(counts.max())
    order = torch.argsort((~masks).to(torch.int8), dim=1, stable=True)[:, :width]  # chosen columns first
    padded = torch.cat([table, torch.zeros(len(table), 1, dtype=table.dtype, device=table.device)], 1)
    order = torch.where(torch.arange(width, device=masks.device) < counts[:, None], order, table.shape[1])
    return padded[rows[:, :, None], order[:, None, :]]


def task_pool(table: torch.Tensor, groups: torch.Tensor, n_groups: int, cfg, generator: torch.Generator,
              size: int, column_masks: torch.Tensor | None = None, batch: int = 32):
    """Pseudo-labelled column subsets for ``size`` tasks (STUNT draws a new one per task; a pool
    reused with fresh rows and perturbations amortises the k-means): each draws its columns
    (``sample_columns``) and a row subsample (at most ``kmeans_points_per_cluster`` rows per
    cluster, as faiss samples) and labels those rows by k-means on the chosen columns only,
    ``batch`` subsets at a time. A subset with a cluster smaller than shots + queries is dropped
    and another drawn (STUNT's rule). Returns (column masks [P, D], rows [P, m], labels [P, m],
    dropped count); with ``column_masks`` [P, D] given, those subsets are labelled, none dropped."""
    if column_masks is not None:
        size = len(column_masks)
    n = len(table)
    m = min(n, cfg.kmeans_points_per_cluster * cfg.ways)
    need = cfg.shots + cfg.queries
    masks, rows, labels, dropped = [], [], [], 0
    while sum(len(r) for r in rows) < size:
        if column_masks is not None:
            mask = column_masks[sum(len(r) for r in rows):][:batch].to(table.device)
        else:
            mask = torch.stack([sample_columns(groups, n_groups, cfg.min_column_fraction, cfg.max_column_fraction,
                                               generator) for _ in range(batch)])
        sample = torch.stack([torch.randperm(n, generator=generator)[:m] for _ in range(len(mask))]).to(table.device)
        found, _ = batched_kmeans(chosen_columns(table, sample, mask), cfg.ways, cfg.kmeans_iterations, generator)
        counts = torch.zeros(len(mask), cfg.ways, dtype=torch.long, device=table.device).scatter_add_(
            1, found, torch.ones_like(found))
        keep = (counts.min(1).values >= need).cpu()
        if column_masks is not None:
            keep[:] = True
        dropped += int((~keep).sum())
        if dropped > cfg.max_rejections:
            raise TrainingDiverged(f"{dropped} column subsets gave a k-means cluster with fewer than shots + queries = "
                                   f"{need} rows ({n} train rows, {cfg.ways} ways); lower stunt.ways or stunt.queries")
        masks.append(mask[keep.to(mask.device)])
        rows.append(sample[keep.to(sample.device)])
        labels.append(found[keep.to(found.device)])
    return torch.cat(masks)[:size], torch.cat(rows)[:size], torch.cat(labels)[:size], dropped


def sample_tasks(table: torch.Tensor, groups: torch.Tensor, pool, cfg, generator: torch.Generator, count: int):
    """``count`` episodes from random pool entries: for each of the ``ways`` clusters (the task's
    classes), ``shots`` support + ``queries`` query rows drawn at random among its rows; the
    chosen columns of every picked row are perturbed (``perturb``). Returns support
    [T, ways * shots, D] (class-major), query [T, ways * queries, D] and query labels."""
    masks, rows, labels = pool[:3]
    need = cfg.shots + cfg.queries
    entries = torch.randint(0, len(masks), (count,), generator=generator).to(table.device)
    lab = labels[entries]  # [T, m]
    keys = lab.float() + torch.rand(lab.shape, generator=generator).to(table.device)  # cluster + random tie-break
    by_cluster = torch.gather(rows[entries], 1, torch.argsort(keys, dim=1))  # rows grouped by cluster, shuffled
    counts = torch.zeros(count, cfg.ways, dtype=torch.long, device=table.device).scatter_add_(1, lab,
                                                                                               torch.ones_like(lab))
    starts = torch.cumsum(counts, 1) - counts  # first position of each cluster
    picks = torch.gather(by_cluster, 1, (starts[..., None] + torch.arange(need, device=table.device)).flatten(1))
    picks = picks.view(count, cfg.ways, need)
    picked = torch.cat([picks[:, :, :cfg.shots].flatten(1), picks[:, :, cfg.shots:].flatten(1)], 1)
    x = table[picked]  # [T, ways * need, D]: support then query rows, class-major
    x = perturb(x.flatten(0, 1), table, masks[entries].repeat_interleave(picked.shape[1], 0), groups,
                generator).view_as(x)
    n_support = cfg.ways * cfg.shots
    query_labels = torch.arange(cfg.ways, device=table.device).repeat_interleave(cfg.queries).expand(count, -1)
    return x[:, :n_support], x[:, n_support:], query_labels


def protonet_logits(support: torch.Tensor, query: torch.Tensor, ways: int) -> torch.Tensor:
    """Negative squared Euclidean distances of query embeddings [..., Q, E] to the class means of
    class-major support embeddings [..., ways * shots, E]: [..., Q, ways]."""
    prototypes = support.unflatten(-2, (ways, -1)).mean(-2)
    return -(query.unsqueeze(-2) - prototypes.unsqueeze(-3)).pow(2).sum(-1)


def pseudo_validation(V: torch.Tensor, cfg, generator: torch.Generator):
    """STUNT's pseudo-validation: k-means (``val_clusters``, all columns) on the validation rows
    gives pseudo-labels; fixed ``val_tasks`` episodes of all those clusters, 1 support row and up
    to ``val_queries`` query rows each. Returns (support idx [T, ways], query idx [T, ways * q],
    ways) or None when fewer than two clusters have two rows."""
    if len(V) < 4:
        return None
    labels, inertia = batched_kmeans(V.expand(cfg.val_restarts, -1, -1), cfg.val_clusters, VAL_KMEANS_ITERATIONS,
                                     generator, init="++")
    labels = labels[int(inertia.argmin())].cpu()  # the restart with the lowest inertia
    counts = torch.bincount(labels, minlength=cfg.val_clusters)
    clusters = torch.nonzero(counts >= 2).flatten()
    if len(clusters) < 2:
        return None
    queries = min(cfg.val_queries, int(counts[clusters].min()) - 1)
    members = [torch.nonzero(labels == c).flatten() for c in clusters.tolist()]
    support = torch.empty(cfg.val_tasks, len(clusters), dtype=torch.long)
    query = torch.empty(cfg.val_tasks, len(clusters) * queries, dtype=torch.long)
    for t in range(cfg.val_tasks):
        picks = [m[torch.randperm(len(m), generator=generator)[:1 + queries]] for m in members]
        support[t] = torch.stack([p[0] for p in picks])
        query[t] = torch.cat([p[1:] for p in picks])
    return support, query, len(clusters)


@register
class STUNT(RepresentationMethod):
    """STUNT (Nam et al., ICLR 2023): every training task takes a random 20-50 % of the original
    columns (a one-hot block is one column), runs k-means on those columns of the unlabeled rows
    and uses the clusters as pseudo-classes of a ``ways``-way ``shots``-shot episode with
    ``queries`` query rows per class; the chosen columns of the episode's rows are replaced by
    draws from their empirical marginals, so the label cannot be read off the input. The encoder
    (SeBA's) is meta-trained with the ProtoNet loss (cross-entropy over negative squared Euclidean
    distances to the support means), ``tasks_per_step`` tasks per Adam step. Early stopping on
    STUNT's pseudo-validation: k-means pseudo-labels of the validation rows, ProtoNet accuracy
    every ``eval_every`` steps; the best step's weights are kept."""

    name = "stunt"
    paper_name = "STUNT"  # its row in data/reference/paper_results.csv (None: the paper has none)
    Config = StuntConfig

    def fit(self, x_train, x_val, groups):
        cfg = self.cfg
        d = x_train.shape[1]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(self.seed, "stunt", "init"))
            self.encoder = Encoder(d, cfg.encoder_hidden, cfg.encoder_out, True).to(self.device)
        X = torch.as_tensor(x_train, dtype=torch.float32, device=self.device)
        V = torch.as_tensor(x_val, dtype=torch.float32, device=self.device)
        groups_t = torch.as_tensor(np.unique(groups, return_inverse=True)[1].reshape(-1), dtype=torch.long,
                                   device=self.device)
        n_groups = int(groups_t.max()) + 1
        bf16 = resolve_precision(cfg.precision, self.device) == "bf16"
        gen = torch.Generator().manual_seed(derive_seed(self.seed, "stunt", "tasks"))
        validation = pseudo_validation(V, cfg, torch.Generator().manual_seed(derive_seed(self.seed, "stunt", "val")))

        def embed(x: torch.Tensor) -> torch.Tensor:
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=bf16):
                return self.encoder(x).float()

        def val_accuracy() -> float:
            support, query, ways = validation
            self.encoder.eval()
            with torch.no_grad():
                z = embed(V)
                logits = protonet_logits(z[support.to(self.device)], z[query.to(self.device)], ways)
            self.encoder.train()
            truth = torch.arange(ways, device=self.device).repeat_interleave(query.shape[1] // ways)
            return float((logits.argmax(-1) == truth).float().mean())

        if len(X) < cfg.ways * (cfg.shots + cfg.queries):
            raise ConfigError(f"baselines.stunt: {len(X)} train rows cannot fill a {cfg.ways}-way task of "
                              f"{cfg.shots} + {cfg.queries} rows per class; lower ways, shots or queries")
        try:
            pool = task_pool(X, groups_t, n_groups, cfg, gen, cfg.task_pool)
        except TrainingDiverged as error:
            raise TrainingDiverged(f"[baseline stunt seed {self.seed}]: {error}") from None
        optimiser = torch.optim.Adam(self.encoder.parameters(), lr=cfg.lr)
        stopping = EarlyStopping(max(1, math.ceil(cfg.patience / cfg.eval_every)), 0.0)
        best_state, step = None, 0
        self.encoder.train()
        for step in range(1, cfg.max_steps + 1):
            support, query, labels = sample_tasks(X, groups_t, pool, cfg, gen, cfg.tasks_per_step)
            z = embed(torch.cat([support.flatten(0, 1), query.flatten(0, 1)]))
            n_support = support.shape[0] * support.shape[1]
            logits = protonet_logits(z[:n_support].unflatten(0, support.shape[:2]),
                                     z[n_support:].unflatten(0, query.shape[:2]), cfg.ways)
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
            if not torch.isfinite(loss):
                raise TrainingDiverged(f"[baseline stunt seed {self.seed}]: ProtoNet loss is not finite at step {step}")
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            if validation is not None and step % cfg.eval_every == 0:
                evaluation = step // cfg.eval_every
                if stopping.update(1.0 - val_accuracy(), evaluation):
                    best_state = copy.deepcopy(self.encoder.state_dict())
                if stopping.should_stop(evaluation):
                    break
        if best_state is not None:
            self.encoder.load_state_dict(best_state)
        self.encoder.eval()
        self.log = {"best_step": stopping.best_epoch * cfg.eval_every if best_state is not None else step,
                    "stop_step": step,
                    "best_val_accuracy": None if best_state is None else round(1.0 - stopping.best, 4),
                    "dropped_column_subsets": pool[3]}

    def scores(self, x_test, support, support_labels, n_classes, shot):
        """STUNT classifies with ProtoNet's rule at every shot: the negative squared Euclidean
        distance to each class mean of the support embeddings (``head: seba`` uses SeBA's heads)."""
        if self.cfg.head == "seba":
            return super().scores(x_test, support, support_labels, n_classes, shot)
        z = self.encode(x_test)  # [N, F]
        onehot = torch.nn.functional.one_hot(torch.as_tensor(support_labels, device=self.device), n_classes).float()
        prototypes = torch.einsum("esf,sc->ecf", z[torch.as_tensor(support, device=self.device)], onehot)
        prototypes = prototypes / onehot.sum(0)[None, :, None]  # [E, C, F]
        return -((z * z).sum(-1)[None, :, None] - 2 * torch.einsum("nf,ecf->enc", z, prototypes)
                 + (prototypes * prototypes).sum(-1)[:, None, :])
