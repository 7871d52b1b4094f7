"""Baselines, evaluated on exactly SeBA's episodes.

A method is a class registered in ``METHODS``. It gets one seed's standardised table at a time:
``fit`` sees the unlabeled train and validation parts (self- and semi-supervised methods learn
from them; supervised ones ignore them), then ``scores`` gets the test part and a batch of
episodes (support positions and labels, from ``seba.episodes.sample_episodes``, the sampler
SeBA's evaluation uses) and returns class scores for every test row: [episodes, rows, classes].
The stage takes the argmax and scores the query rows exactly as for SeBA.

Add a method: subclass ``Method``, give it ``name`` (its params section and stage name),
``paper_name`` (its row in paper_results.csv, or None), register it with ``@register`` and add
its config dataclass to ``seba.config.BASELINE_SECTIONS``. See README, "Adding a method".
"""

from __future__ import annotations

import numpy as np
import torch

METHODS: dict[str, type["Method"]] = {}


def register(cls: type["Method"]) -> type["Method"]:
    METHODS[cls.name] = cls
    return cls


class Method:
    name: str = ""
    paper_name: str | None = None

    def __init__(self, cfg, seed: int, device: torch.device):
        self.cfg = cfg
        self.seed = seed
        self.device = device

    def fit(self, x_train: np.ndarray, x_val: np.ndarray, groups: np.ndarray) -> None:
        """Learn from the unlabeled train (and validation) part; supervised methods do nothing."""

    def scores(self, x_test: np.ndarray, support: np.ndarray, support_labels: np.ndarray, n_classes: int,
               shot: int) -> torch.Tensor:
        raise NotImplementedError


@register
class KNN(Method):
    """k nearest support rows (Euclidean, on the standardised features), majority vote; ties go
    to the class of the nearest row. k = 1 for 1-shot, else ``knn.k`` capped at the support size."""

    name = "knn"
    paper_name = "kNN"

    def scores(self, x_test, support, support_labels, n_classes, shot):
        X = torch.as_tensor(x_test, dtype=torch.float32, device=self.device)
        sup = torch.as_tensor(support, device=self.device)  # [E, S]
        labels = torch.as_tensor(support_labels, device=self.device)  # [S]
        k = 1 if shot == 1 else min(self.cfg.k, sup.shape[1])
        out = []
        for first in range(0, len(sup), 10):  # 10 episodes at a time bounds the [E, N, S] distances
            d = torch.cdist(X[None], X[sup[first:first + 10]])  # [e, N, S]
            nearest = d.topk(k, dim=-1, largest=False).indices  # [e, N, k], nearest first
            votes = torch.nn.functional.one_hot(labels[nearest], n_classes).float()  # [e, N, k, C]
            score = votes.sum(2)
            score += 0.5 * votes[:, :, 0]  # tie-break: the nearest neighbour's class
            out.append(score)
        return torch.cat(out)


@register
class LogReg(Method):
    """Multinomial logistic regression (scikit-learn, L2, lbfgs) on the support of each episode:
    the supervised linear floor on the standardised features."""

    name = "logreg"
    paper_name = None

    def scores(self, x_test, support, support_labels, n_classes, shot):
        from sklearn.linear_model import LogisticRegression

        out = np.zeros((len(support), len(x_test), n_classes), dtype=np.float32)
        for e, rows in enumerate(support):
            model = LogisticRegression(C=self.cfg.C, max_iter=self.cfg.max_iter)
            model.fit(x_test[rows], support_labels)
            out[e][:, model.classes_] = model.predict_log_proba(x_test)  # every class is in the support
        return torch.from_numpy(out)


class RepresentationMethod(Method):
    """A self-supervised encoder, evaluated with SeBA's own heads (cosine prototypes for the
    prototype shots, the batched linear probe otherwise) so the comparison isolates pretraining.
    Subclasses implement ``fit`` (training ``self.encoder``)."""

    def __init__(self, cfg, seed: int, device: torch.device, evaluate_cfg=None):
        super().__init__(cfg, seed, device)
        self.evaluate_cfg = evaluate_cfg
        self.encoder = None

    @torch.no_grad()
    def encode(self, x: np.ndarray) -> torch.Tensor:
        self.encoder.eval()
        X = torch.as_tensor(x, dtype=torch.float32, device=self.device)
        return torch.cat([self.encoder(X[i:i + 8192]) for i in range(0, len(X), 8192)]).float()

    def scores(self, x_test, support, support_labels, n_classes, shot):
        from seba.evaluate import head_scores
        from seba.runtime import derive_seed

        scores, _ = head_scores(self.encode(x_test)[None], torch.as_tensor(support, device=self.device),
                                torch.as_tensor(support_labels, device=self.device), n_classes, shot,
                                self.evaluate_cfg, derive_seed(self.seed, shot, "probe", self.name))
        return scores[0]


def train_with_early_stopping(modules: list[torch.nn.Module], batch_loss, n_train: int, val_loss, cfg,
                              generator: torch.Generator, label: str) -> dict:
    """Adam over shuffled minibatches; after every epoch ``val_loss()`` decides early stopping
    with SeBA's rule (``seba.pretrain.EarlyStopping``); the weights of the lowest validation loss
    are restored. ``batch_loss(index)`` returns the loss of one minibatch."""
    import copy
    import math

    from seba.errors import TrainingDiverged
    from seba.pretrain import EarlyStopping

    params = [p for m in modules for p in m.parameters()]
    optimiser = torch.optim.Adam(params, lr=cfg.lr)
    stopping, best_state = EarlyStopping(cfg.patience, cfg.min_delta), None
    epoch = 0
    for epoch in range(1, cfg.max_epochs + 1):
        for m in modules:
            m.train()
        order = torch.randperm(n_train, generator=generator)
        for first in range(0, n_train, cfg.batch_size):
            index = order[first:first + cfg.batch_size]
            if len(index) < 2:
                continue
            loss = batch_loss(index)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
        for m in modules:
            m.eval()
        with torch.no_grad():
            current = float(val_loss())
        if not math.isfinite(current):
            raise TrainingDiverged(f"{label}: validation loss is not finite at epoch {epoch}")
        if stopping.update(current, epoch):
            best_state = [copy.deepcopy(m.state_dict()) for m in modules]
        if stopping.should_stop(epoch):
            break
    for m, state in zip(modules, best_state or []):
        m.load_state_dict(state)
    return {"best_epoch": stopping.best_epoch, "stop_epoch": epoch, "best_val_loss": stopping.best}


@register
class SCARF(RepresentationMethod):
    """SCARF (Bahri et al., 2022): each row's view corrupts a random ``corruption_rate`` share of
    its original columns (a one-hot block counts as one column) with the values of the same
    columns in random other training rows, i.e. draws from the empirical marginals; encoder +
    head are trained with InfoNCE between a row's clean and corrupted embeddings, the other rows
    of the batch as negatives. Encoder as SeBA's (same sizes)."""

    name = "scarf"
    paper_name = "Scarf"

    def fit(self, x_train, x_val, groups):
        from seba.model import Encoder
        from seba.runtime import derive_seed, resolve_precision

        cfg = self.cfg
        d = x_train.shape[1]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(self.seed, "scarf", "init"))
            self.encoder = Encoder(d, cfg.encoder_hidden, cfg.encoder_out, True).to(self.device)
            head = torch.nn.Sequential(torch.nn.Linear(cfg.encoder_out, cfg.encoder_hidden), torch.nn.ReLU(),
                                       torch.nn.Linear(cfg.encoder_hidden, cfg.encoder_out)).to(self.device)
        X = torch.as_tensor(x_train, dtype=torch.float32, device=self.device)
        V = torch.as_tensor(x_val, dtype=torch.float32, device=self.device)
        groups_t = torch.as_tensor(groups, dtype=torch.long, device=self.device)
        n_groups = int(groups.max()) + 1
        columns = torch.arange(d, device=self.device)
        bf16 = resolve_precision(cfg.precision, self.device) == "bf16"
        gen = torch.Generator().manual_seed(derive_seed(self.seed, "scarf"))

        def corrupt(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
            chosen = (torch.rand(len(x), n_groups, generator=g) < cfg.corruption_rate).to(self.device)
            donors = torch.randint(0, len(X), (len(x), n_groups), generator=g).to(self.device)
            values = X[donors[:, groups_t], columns]  # each column from its group's donor row
            return torch.where(chosen[:, groups_t], values, x)

        def loss(x: torch.Tensor, x_corrupt: torch.Tensor) -> torch.Tensor:
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=bf16):
                z = head(self.encoder(torch.cat([x, x_corrupt])))
            z = torch.nn.functional.normalize(z.float(), dim=1)
            anchors, positives = z[:len(x)], z[len(x):]
            logits = anchors @ positives.T / cfg.temperature
            return torch.nn.functional.cross_entropy(logits, torch.arange(len(x), device=self.device))

        val_gen = torch.Generator().manual_seed(derive_seed(self.seed, "scarf", "validation"))
        fixed_val = [(V[i:i + cfg.batch_size], corrupt(V[i:i + cfg.batch_size], val_gen))
                     for i in range(0, len(V), cfg.batch_size) if len(V[i:i + cfg.batch_size]) >= 2]

        def val_loss():
            return sum(float(loss(a, b)) * len(a) for a, b in fixed_val) / max(1, sum(len(a) for a, _ in fixed_val))

        self.log = train_with_early_stopping(
            [self.encoder, head], lambda idx: loss(X[idx.to(self.device)], corrupt(X[idx.to(self.device)], gen)),
            len(X), val_loss, cfg, gen, f"[baseline scarf seed {self.seed}]")
