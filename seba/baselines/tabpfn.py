"""TabPFN (Hollmann et al., 2023; v2: Nature 2025): a pretrained transformer that classifies in
context, "fitted" on each episode's support rows with no training of its own (supervised; the
support set only). The ``tabpfn`` package (an optional extra: ``pip install -e ".[tabpfn]"``) runs
it; its pretrained weights are in no wheel and are not downloaded here: the method reads a local
checkpoint (``baselines.tabpfn.model_path``, else the folder named by ``TABPFN_MODEL_CACHE_DIR``)
and refuses to start without one. ``check`` refuses, at stage start, a table TabPFN cannot take
(more than 10 classes; more feature columns than ``max_features``, unless told how to handle them),
a missing package and a missing checkpoint. See docs/baselines.md#tabpfn."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import torch

from seba.baselines import register
from seba.baselines.base import Method
from seba.core.data import sha256_file
from seba.core.errors import ConfigError, DataError
from seba.core.runtime import derive_seed, repo_root, select_device
from seba.core.schema import Bool, PositiveFloat, PositiveInt, Str, choice, section


@section
class TabpfnConfig:
    # The pretrained weights are in no wheel and are not downloaded here: a local checkpoint file (or a
    # folder holding one classifier checkpoint), relative to the repository root; None: the folder named
    # by TABPFN_MODEL_CACHE_DIR (the tabpfn package's own variable). See docs/baselines.md#tabpfn.
    model_path: Str | None = None
    n_estimators: PositiveInt = 8  # TabPFN's default ensemble size (tabpfn >= 2.1; 2.0.x: 4)
    softmax_temperature: PositiveFloat = 0.9  # TabPFN v2's default
    average_before_softmax: Bool = False  # TabPFN's default: average the members' probabilities
    balance_probabilities: Bool = False  # TabPFN's default (a support set is balanced anyway)
    inference_precision: choice("auto", "autocast", "fp32", "fp64") = "auto"  # TabPFN's default (autocast where fast)
    max_features: PositiveInt = 500  # TabPFN v2's pretraining limit on feature columns (v2.5 and later: 2000)
    too_many_features: choice("error", "subsample", "ignore_limits") = "error"  # above max_features: refuse
    # (TabPFN's own behaviour) | a random max_features columns per episode | every column, with TabPFN's
    # ignore_pretraining_limits
    device: choice("stage", "cpu", "cuda") = "stage"  # stage: the baseline stage's device (pretrain.device)


MAX_CLASSES = 10  # TabPFN's output head has 10 classes (every released checkpoint); not configurable
CACHE_VARIABLE = "TABPFN_MODEL_CACHE_DIR"  # the tabpfn package's own setting for its checkpoint folder
REPOSITORY = "https://huggingface.co/Prior-Labs/TabPFN-v2-clf"  # TabPFN v2's classifier weights (open)
CHECKPOINT = "tabpfn-v2-classifier.ckpt"  # the v2 release's default classifier checkpoint
SUFFIXES = (".ckpt", ".safetensors")  # the checkpoint formats tabpfn reads
PRECISIONS = {"auto": "auto", "autocast": "autocast", "fp32": torch.float32, "fp64": torch.float64}

INSTALL = ("baseline 'tabpfn' needs the tabpfn package, an optional extra of this project: "
           "pip install -e \".[tabpfn]\"")
WHERE = (f"TabPFN's pretrained weights are in no wheel and are not downloaded by this pipeline: download "
         f"the v2 classifier checkpoint {CHECKPOINT} from {REPOSITORY} ({REPOSITORY}/resolve/main/{CHECKPOINT}), "
         f"keep it outside the repository's tracked files (e.g. ~/.cache/tabpfn/), and set "
         f"'baselines.tabpfn.model_path' in params.yaml to that file (or to its folder), or the environment "
         f"variable {CACHE_VARIABLE} to its folder")


def checkpoint(cfg, root: Path | None = None) -> Path:
    """The checkpoint file to load: ``cfg.model_path`` (a file, or a folder holding one classifier
    checkpoint; relative to the repository root ``root``), else the folder named by
    ``$TABPFN_MODEL_CACHE_DIR``; a ConfigError that says where to get one otherwise."""
    if cfg.model_path is not None:
        where, key = Path(cfg.model_path).expanduser(), "'baselines.tabpfn.model_path'"
        if not where.is_absolute():
            where = (root or repo_root()) / where
    elif os.environ.get(CACHE_VARIABLE, "").strip():
        where, key = Path(os.environ[CACHE_VARIABLE].strip()).expanduser(), f"${CACHE_VARIABLE}"
    else:
        raise ConfigError(f"baseline 'tabpfn' has no checkpoint: 'baselines.tabpfn.model_path' is null and "
                          f"{CACHE_VARIABLE} is not set. {WHERE}")
    if where.is_file():
        return where
    if not where.is_dir():
        raise ConfigError(f"baseline 'tabpfn': {key} is {where}, which does not exist. {WHERE}")
    found = sorted(p for p in where.iterdir() if p.is_file() and p.suffix in SUFFIXES and "regressor" not in p.name)
    if not found:
        raise ConfigError(f"baseline 'tabpfn': {key} is the folder {where}, which holds no TabPFN classifier "
                          f"checkpoint ({', '.join('*' + s for s in SUFFIXES)}). {WHERE}")
    if len(found) > 1:
        raise ConfigError(f"baseline 'tabpfn': the folder {where} ({key}) holds {len(found)} classifier "
                          f"checkpoints ({', '.join(p.name for p in found)}); set 'baselines.tabpfn.model_path' "
                          f"to the one to use")
    return found[0]


def import_classifier():
    """``tabpfn.TabPFNClassifier``, imported with the package's telemetry off."""
    # tabpfn 2.x reports usage (tabpfn-common-utils) unless this is set before the import; 9.2.0 has no
    # telemetry and, given a local checkpoint, no network access (only its downloads and licence check)
    os.environ["TABPFN_DISABLE_TELEMETRY"] = "1"
    try:
        from tabpfn import TabPFNClassifier
    except ImportError as exc:
        raise ConfigError(f"{INSTALL} ({type(exc).__name__}: {exc})") from exc
    return TabPFNClassifier


def check_limits(cfg, n_classes: int, n_features: int, dataset: str | None = None) -> None:
    """A DataError for a table beyond TabPFN's class limit, or beyond ``max_features`` feature
    columns when ``too_many_features`` is ``error``."""
    where = f"baseline 'tabpfn' on dataset '{dataset}'" if dataset else "baseline 'tabpfn'"
    if n_classes > MAX_CLASSES:
        raise DataError(f"{where}: the table has {n_classes} classes; TabPFN classifies at most {MAX_CLASSES} (its "
                        f"pretrained output head; no setting lifts it): leave tabpfn out of 'baselines.methods' "
                        f"or this dataset out of 'datasets'")
    if n_features > cfg.max_features and cfg.too_many_features == "error":
        raise DataError(f"{where}: the table has {n_features} feature columns (after encoding), more than "
                        f"'baselines.tabpfn.max_features' ({cfg.max_features}; TabPFN v2's pretraining limit is "
                        f"500). Set 'baselines.tabpfn.too_many_features' to subsample (a random "
                        f"{cfg.max_features} columns per episode) or ignore_limits (every column, with TabPFN's "
                        f"ignore_pretraining_limits)")


@register
class TabPFN(Method):
    """One TabPFN classifier per episode, given the episode's support rows as its context and
    asked for the class probabilities of every test row (the standardised, one-hot encoded
    features every method gets). Its ensemble is seeded per seed, shot and episode."""

    name = "tabpfn"
    paper_name = "TabPFN"  # its row in data/reference/paper_results.csv (None: the paper has none)
    Config = TabpfnConfig

    @classmethod
    def check_setup(cls, cfg):
        if importlib.util.find_spec("tabpfn") is None:  # without importing it (seconds)
            raise ConfigError(INSTALL)
        checkpoint(cfg)
        if cfg.device != "stage":
            select_device(cfg.device, "baselines.tabpfn.device")

    @classmethod
    def check(cls, cfg, table, dataset):
        check_limits(cfg, len(table.classes), table.X.shape[1], dataset)
        import_classifier()
        cls.check_setup(cfg)

    def __init__(self, cfg, seed: int, device: torch.device):
        super().__init__(cfg, seed, device)
        self.checkpoint = checkpoint(cfg)
        self.run_device = device if cfg.device == "stage" else select_device(cfg.device, "baselines.tabpfn.device")
        self.log = f"checkpoint {self.checkpoint} (sha256 {sha256_file(self.checkpoint)[:16]}) on {self.run_device}"

    def arguments(self, random_state: int) -> dict:
        """The keyword arguments of ``TabPFNClassifier`` for one episode."""
        cfg = self.cfg
        return {"model_path": str(self.checkpoint), "device": str(self.run_device), "n_estimators": cfg.n_estimators,
                "softmax_temperature": cfg.softmax_temperature, "average_before_softmax": cfg.average_before_softmax,
                "balance_probabilities": cfg.balance_probabilities,
                "inference_precision": PRECISIONS[cfg.inference_precision],
                "ignore_pretraining_limits": cfg.too_many_features == "ignore_limits", "random_state": random_state}

    def scores(self, x_test, support, support_labels, n_classes, shot):
        cfg, n_features = self.cfg, x_test.shape[1]
        check_limits(cfg, n_classes, n_features)
        classifier = import_classifier()
        subsample = n_features > cfg.max_features and cfg.too_many_features == "subsample"
        out = np.zeros((len(support), len(x_test), n_classes), dtype=np.float32)
        for e, rows in enumerate(support):
            seed = derive_seed(self.seed, shot, e, "tabpfn")
            X = x_test
            if subsample:
                X = x_test[:, np.sort(np.random.default_rng(seed).choice(n_features, cfg.max_features, replace=False))]
            model = classifier(**self.arguments(seed % 2**31))
            model.fit(X[rows], support_labels)
            out[e][:, np.asarray(model.classes_).astype(int)] = np.asarray(model.predict_proba(X), dtype=np.float32)
        return torch.from_numpy(out)
