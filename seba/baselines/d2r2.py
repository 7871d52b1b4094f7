"""D2R2-c: diffusion-based representation with random distance matching (self-supervised),
classified inductively with Euclidean prototypes (mean support embeddings)."""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch import nn

from seba.baselines import register
from seba.baselines.base import RepresentationMethod
from seba.core.errors import ConfigError, TrainingDiverged
from seba.core.runtime import derive_seed
from seba.core.schema import Float, Fraction, Int, PositiveFloat, PositiveInt, section


@section
class D2r2Config:
    # Sources: the official code (github.com/Anony11131223/D2R2): main.py's flags and
    # diffusion_feature.py's DiffusionFeatureExtractor defaults; D2R2-c is mean_center=True,
    # iteration_steps=0 (docs/baselines.md#d2r2-c).
    T: PositiveInt = 10  # diffusion steps (main.py: T 10)
    embed_dim: PositiveInt = 10  # the representation's width (main.py: embed_dim 10)
    hidden: PositiveInt = 512  # (main.py: hidden_dim 512)
    layers: PositiveInt = 3  # hidden layers of both networks (main.py: num_layers 3)
    time_dim: PositiveInt = 16  # Fourier features of the timestep (diffusion_feature.py: time_dim 16)
    alpha: Float = 1.0  # weight of the random distance matching loss (main.py: alpha 1)
    col_select_ratio: Fraction = 0.1  # p of the random projections (main.py: col_select_ratio 0.1)
    noise_aug_scale: Float = 1.0  # E's input noise, in column stds (main.py: noise_aug_scale 1)
    categorical_noise: Float = 0.1  # E's input noise std on one-hot columns (datasets.py: cate_perturbation_scale)
    lr: PositiveFloat = 3e-4  # Adam with cosine decay to 0 (diffusion_feature.py: lr 3e-4)
    lr_decay_share: Fraction = 0.6667  # decay over this share of max_steps (official: 100,000 of 150,000 steps)
    batch_size: PositiveInt = 256  # rows drawn afresh each step (main.py: batch_size 256)
    max_steps: PositiveInt = 3000  # step cap (cost budget, a deviation; official: 150,000 steps)
    eval_every: PositiveInt = 200  # steps between pseudo-validations (official: 10,000 of 150,000)
    min_accepted_step: Int = 1000  # first selectable checkpoint (official: 50,000 of 150,000)
    val_clusters: PositiveInt = 2  # pseudo-validation classes (official: the true class count, unknown to fit)
    val_episodes: PositiveInt = 100  # pseudo-validation episodes, fixed up front (official: 100 fresh per test)
    val_kmeans_steps: PositiveInt = 5  # soft k-means steps of the pseudo-labels (datasets.py: 5)
    temperature: PositiveFloat = 1.0  # prototype scores' temperature (main.py: 1; argmax unaffected)

    def __post_init__(self):
        bad = [f"{key} {getattr(self, key)} (need >= 0)" for key in ("alpha", "noise_aug_scale", "categorical_noise")
               if not getattr(self, key) >= 0]
        if self.val_clusters < 2:  # one pseudo-class scores every checkpoint 1.0: the first would be kept
            bad.append(f"val_clusters {self.val_clusters} (need >= 2: the pseudo-validation compares classes)")
        if bad:
            raise ConfigError("params.yaml: baselines.d2r2: " + "; ".join(bad))
        first = max(1, -(-self.min_accepted_step // self.eval_every)) * self.eval_every  # first selectable step
        if first > self.max_steps:
            raise ConfigError(f"params.yaml: baselines.d2r2: no checkpoint would be pseudo-validated: the first is at "
                              f"step {first} (a multiple of 'eval_every' {self.eval_every} from 'min_accepted_step' "
                              f"{self.min_accepted_step}), past 'max_steps' {self.max_steps}; lower min_accepted_step "
                              f"or eval_every")


EPS = 1e-6  # the official code's EPS


def vp_betas(T: int) -> torch.Tensor:
    """The variance-preserving beta schedule of the official code (b_min 0.1, b_max 10), with a
    leading beta_0 = 0 so that alpha_hat_0 = 1: [T + 1]."""
    t = torch.arange(1, T + 1, dtype=torch.float64)
    alpha = torch.exp(-0.1 / T - 0.5 * (10.0 - 0.1) * (2 * t - 1) / T ** 2)
    return torch.cat([torch.zeros(1, dtype=torch.float64), 1 - alpha]).float()


def q_sample(x0: torch.Tensor, t: torch.Tensor, eps: torch.Tensor, alpha_hats: torch.Tensor) -> torch.Tensor:
    """Forward diffusion in closed form: x_t = sqrt(alpha_hat_t) x_0 + sqrt(1 - alpha_hat_t) eps
    (t [B, 1] in 1..T)."""
    a = alpha_hats[t]
    return a.sqrt() * x0 + (1 - a).sqrt() * eps


def random_projection(x: torch.Tensor, numeric: torch.Tensor, categorical: torch.Tensor, p: float,
                      generator: torch.Generator) -> torch.Tensor:
    """The official code's random map of a batch, drawn afresh each step: the numeric columns times
    a uniform matrix in [-A, A], A = sqrt(3 p (1 - p)), the one-hot columns times a Bernoulli(p)
    matrix, each divided by the square root of its width; the two concatenated: [B, D]."""
    n_num, n_cat = int(numeric.sum()), int(categorical.sum())
    a = math.sqrt(3 * p * (1 - p))
    w1 = (torch.rand(n_num, n_num, generator=generator) * 2 - 1) * a / math.sqrt(n_num + EPS)
    w2 = (torch.rand(n_cat, n_cat, generator=generator) < p).float() / math.sqrt(n_cat + EPS)
    return torch.cat([x[:, numeric] @ w1.to(x.device), x[:, categorical] @ w2.to(x.device)], 1)


def rdm_loss(embed: torch.Tensor, projection: torch.Tensor) -> torch.Tensor:
    """Random distance matching: squared distances between each row and its neighbour in the batch
    (row i - 1, cyclically), after normalising the rows, are matched between the embeddings and
    the random projections; the embeddings' norm is not differentiated (official code)."""
    normed = embed / (embed.norm(dim=-1, keepdim=True).detach() + EPS)
    target = projection / (projection.norm(dim=-1, keepdim=True) + EPS)
    embed_dist = ((normed - normed.roll(1, 0)) ** 2).sum(-1)
    rand_dist = ((target - target.roll(1, 0)) ** 2).sum(-1)
    return ((embed_dist - rand_dist) ** 2).mean()


class Mish(nn.Module):
    def forward(self, x):
        return x * torch.tanh(nn.functional.softplus(x))


def mlp(sizes: list[int]) -> nn.Sequential:
    """Dense layers with Mish between them, none after the last (the official MLP)."""
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(Mish())
    return nn.Sequential(*layers)


class TimeMLP(nn.Module):
    """The official DDPM module: fixed Fourier features of the timestep through a small Mish MLP
    (32, 32), concatenated to the input (and the conditioning embedding, if any), then the MLP."""

    def __init__(self, in_features: int, out: int, hidden: int, layers: int, time_dim: int, cond: int = 0):
        super().__init__()
        half = time_dim // 2
        self.register_buffer("freqs", torch.exp(-torch.arange(half) * math.log(10000) / (half - 1)))
        self.time_net = mlp([time_dim, 32, 32])
        self.net = mlp([in_features + 32 + cond] + [hidden] * layers + [out])

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor | None = None) -> torch.Tensor:
        f = t.float() * self.freqs
        parts = [x, self.time_net(torch.cat([f.cos(), f.sin()], -1))] + ([cond] if cond is not None else [])
        return self.net(torch.cat(parts, -1))


class Embedder(nn.Module):
    """The representation E(x): the embedding network at timestep 0 (the official default,
    t_dependent_embedding False)."""

    def __init__(self, net: TimeMLP):
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x, torch.zeros(len(x), 1, device=x.device))


def soft_kmeans_labels(x: torch.Tensor, seeds: torch.Tensor, steps: int, temperature: float) -> torch.Tensor:
    """The official soft k-means (protonet.py's jit_soft_kmeans), batched over episodes: centres
    start at the rows ``seeds`` [E, K]; each step c <- (c + sum_q w_qc q) / (1 + sum_q w_qc), with
    w the softmax over centres of -||q - c||^2 / temperature; labels: the nearest final centre [E, N]."""
    c = x[seeds]  # [E, K, D]
    for _ in range(steps):
        w = torch.softmax(-torch.cdist(x[None].expand(len(c), -1, -1), c) ** 2 / temperature, -1)  # [E, N, K]
        c = (c + w.transpose(1, 2) @ x) / (1 + w.sum(1))[..., None]
    return torch.cdist(x[None].expand(len(c), -1, -1), c).argmin(-1)


def pseudo_validation_tasks(v: torch.Tensor, k: int, episodes: int, steps: int, temperature: float,
                            generator: torch.Generator):
    """The official pseudo-validation episodes (datasets.py's sample_val_batch): ``k`` random
    validation rows are the 1-shot support, labelled 0..k-1, and seed a soft k-means of the raw
    validation rows whose labels are the other rows' pseudo-labels. Returns (support [E, k],
    pseudo-labels [E, N], query mask [E, N])."""
    k = min(k, len(v))
    support = torch.stack([torch.randperm(len(v), generator=generator)[:k] for _ in range(episodes)]).to(v.device)
    labels = soft_kmeans_labels(v, support, steps, temperature)
    query = torch.ones_like(labels, dtype=torch.bool)
    query[torch.arange(episodes, device=v.device)[:, None], support] = False
    return support, labels, query


def pseudo_validation_accuracy(z: torch.Tensor, tasks) -> float:
    """The mean accuracy with which the 1-shot prototype classifier on embeddings ``z`` [N, F]
    predicts the pseudo-labels of the query rows."""
    support, labels, query = tasks
    predicted = torch.cdist(z[None].expand(len(support), -1, -1), z[support]).argmin(-1)  # [E, N]
    hits = ((predicted == labels) & query).sum(1).float() / query.sum(1).clamp_min(1)
    return float(hits.mean())


@register
class D2R2(RepresentationMethod):
    """D2R2 (Liu et al., NeurIPS 2024), variant c: an embedding network E(x) conditions a DDPM
    noise predictor eps(x_t, t, E(x)) trained on the unlabeled rows (T steps, VP schedule); E sees
    the row with Gaussian noise of ``noise_aug_scale`` times each column's std (one-hot columns:
    ``categorical_noise``) and is also trained by random distance matching (weight ``alpha``).
    The representation is E(x). Checkpoints every ``eval_every`` steps from ``min_accepted_step``
    are compared by the official pseudo-validation and the best kept. D2R2-c classifies with the
    mean support embedding of each class as prototype (negative squared Euclidean distance; no
    iterative refinement with the queries)."""

    name = "d2r2"
    paper_name = "D2R2-c"  # its row in data/reference/paper_results.csv (None: the paper has none)
    Config = D2r2Config

    def fit(self, x_train, x_val, groups):
        cfg = self.cfg
        d = x_train.shape[1]
        groups = np.asarray(groups).reshape(-1)
        sizes = np.bincount(np.unique(groups, return_inverse=True)[1].reshape(-1))
        categorical_np = sizes[np.unique(groups, return_inverse=True)[1].reshape(-1)] > 1  # one-hot block columns
        categorical = torch.as_tensor(categorical_np, device=self.device)
        numeric = ~categorical
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(self.seed, "d2r2", "init"))
            embed_net = TimeMLP(d, cfg.embed_dim, cfg.hidden, cfg.layers, cfg.time_dim).to(self.device)
            noise_net = TimeMLP(d, d, cfg.hidden, cfg.layers, cfg.time_dim, cond=cfg.embed_dim).to(self.device)
        self.encoder = Embedder(embed_net)
        X = torch.as_tensor(x_train, dtype=torch.float32, device=self.device)
        V = torch.as_tensor(x_val, dtype=torch.float32, device=self.device)
        sigma = torch.where(categorical, torch.full((d,), cfg.categorical_noise, device=self.device),
                            X.std(0)) * cfg.noise_aug_scale
        alpha_hats = torch.cumprod(1 - vp_betas(cfg.T), 0).to(self.device)
        gen = torch.Generator().manual_seed(derive_seed(self.seed, "d2r2", "train"))
        tasks = (pseudo_validation_tasks(V, cfg.val_clusters, cfg.val_episodes, cfg.val_kmeans_steps, 1.0,
                                         torch.Generator().manual_seed(derive_seed(self.seed, "d2r2", "val")))
                 if len(V) > cfg.val_clusters else None)
        params = list(embed_net.parameters()) + list(noise_net.parameters())
        optimiser = torch.optim.Adam(params, lr=cfg.lr)
        horizon = max(1, round(cfg.lr_decay_share * cfg.max_steps))
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimiser, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, horizon) / horizon)))
        best, best_state, best_step, history = -1.0, None, None, []
        for step in range(1, cfg.max_steps + 1):
            embed_net.train(), noise_net.train()
            x = X[torch.randperm(len(X), generator=gen)[:cfg.batch_size].to(self.device)]
            t = torch.randint(1, cfg.T + 1, (len(x), 1), generator=gen).to(self.device)
            eps = torch.randn(x.shape, generator=gen).to(self.device)
            jitter = torch.randn(x.shape, generator=gen).to(self.device)
            projection = random_projection(x, numeric, categorical, cfg.col_select_ratio, gen)
            z = embed_net(x + sigma * jitter, torch.zeros_like(t))
            noise_loss = ((noise_net(q_sample(x, t, eps, alpha_hats), t, z) - eps) ** 2).sum(-1).mean()
            loss = noise_loss + cfg.alpha * rdm_loss(z, projection)
            if not torch.isfinite(loss):
                raise TrainingDiverged(f"[baseline d2r2 seed {self.seed}]: loss is not finite at step {step}")
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            schedule.step()
            if tasks is not None and step % cfg.eval_every == 0 and step >= cfg.min_accepted_step:
                accuracy = pseudo_validation_accuracy(self.encode(x_val), tasks)
                history.append((step, round(accuracy, 4)))
                if accuracy > best:
                    best, best_step, best_state = accuracy, step, copy.deepcopy(embed_net.state_dict())
        if best_state is not None:
            embed_net.load_state_dict(best_state)
        self.encoder.eval()
        self.log = {"best_step": best_step or cfg.max_steps, "best_val_accuracy": round(best, 4) if best_state else None,
                    "pseudo_validation": history}

    def scores(self, x_test, support, support_labels, n_classes, shot):
        """D2R2-c's classifier: the negative squared Euclidean distance to each class's mean
        support embedding (the official protonet with mean_center, iteration_steps 0; its
        exp(-d / temperature) has the same argmax)."""
        z = self.encode(x_test)  # [N, F]
        onehot = torch.nn.functional.one_hot(torch.as_tensor(support_labels, device=self.device), n_classes).float()
        prototypes = torch.einsum("esf,sc->ecf", z[torch.as_tensor(support, device=self.device)], onehot)
        prototypes = prototypes / onehot.sum(0)[None, :, None]  # [E, C, F]
        return -((z * z).sum(-1)[None, :, None] - 2 * torch.einsum("nf,ecf->enc", z, prototypes)
                 + (prototypes * prototypes).sum(-1)[:, None, :]) / self.cfg.temperature
