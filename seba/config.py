"""Typed, validated view of ``params.yaml``.

Every stage turns its part of the raw YAML into these frozen dataclasses before doing any work,
so a typo or an out-of-range value fails at once with the key's name instead of after an hour of
pretraining. Unknown keys are rejected (with a suggestion when one is close).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml

from seba.errors import ConfigError


@dataclass(frozen=True)
class SourceConfig:
    """Where one dataset comes from: an OpenML id, or a local CSV / parquet file under
    ``data/local/`` with a named target column."""

    openml_id: int | None = None
    path: str | None = None  # local table, relative to the repository root, under data/local/
    target: str | None = None  # the label column of a local table
    categorical: tuple[str, ...] = ()  # columns to treat as categorical whatever their type
    numeric: tuple[str, ...] = ()  # columns to read as numbers whatever their cells (the rest: missing)
    max_categories: int = 50  # a categorical with more levels keeps its most frequent ones
    thousands: str | None = None  # thousands separator in numbers written as text (none: not read)
    decimal: str = "."  # decimal mark in numbers written as text

    THOUSANDS: ClassVar[tuple[str, ...]] = (",", ".", " ", "'")
    DECIMALS: ClassVar[tuple[str, ...]] = (".", ",")
    # this dataset's own values for `pretrain` keys (all but `ratios`), over the `pretrain` section
    pretrain: dict[str, Any] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return self.path is not None


LOCAL_DIR = "data/local"
LOCAL_SUFFIXES = (".csv", ".parquet")


@dataclass(frozen=True)
class FetchConfig:
    source: str = "auto"  # auto: OpenML, else the offline snapshot | openml | snapshot
    retries: int = 1  # OpenML connection attempts before falling back

    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"source": ("auto", "openml", "snapshot")}
    POSITIVE: ClassVar[tuple[str, ...]] = ("retries",)
    # openml waits 1, 2, ... seconds between attempts: N attempts offline wait N(N-1)/2 s (10: 45 s)
    MAXIMUM: ClassVar[dict[str, int]] = {"retries": 10}


@dataclass(frozen=True)
class SplitConfig:
    test_fraction: float = 1 / 6  # the paper's train : test = 5 : 1
    val_fraction: float = 0.1  # share of the train part used for early stopping


@dataclass(frozen=True)
class PretrainConfig:
    ratios: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5)
    min_masked_columns: int = 1  # k = max(min_masked_columns, floor(ratio * n_columns))
    fill: str = "zero"  # zero (paper) | marginal (ablation: values from a shuffled batch row)
    encoder_hidden: int = 1024
    encoder_out: int = 256
    encoder_out_relu: bool = True
    projector_hidden: int = 1024
    projector_out: int = 256
    conditioned: bool = True  # projector sees the expanded mask
    temperature: float = 1.0
    lr: float = 1e-3
    batch_size: int = 1024
    max_epochs: int = 10000
    max_steps: int = 0  # optimiser-step cap, checked at the end of an epoch (0 = none, as the paper)
    patience: int = 100
    min_delta: float = 0.0  # relative improvement that resets patience (0 = any improvement)
    validation: str = "fixed"  # fixed: seeded masks drawn once | fresh: new masks every epoch
    validation_draws: int = 2  # masks per validation batch (fixed mode)
    precision: str = "fp32"  # fp32 | bf16 (autocast) | tf32 (CUDA: TF32 products) | auto (bf16 where native)
    device: str = "auto"  # auto | cpu | cuda
    threads: int = 0  # torch intra-op threads; 0 = all cores
    workers: int = 0  # processes training seeds at once (CPU), each a stack; 0 = auto: min(seeds, cores)
    stack_size: int = 0  # most seeds trained as one stacked model; 0 = auto: all that fit in memory
    progress_seconds: float = 15.0  # at most one progress line per this many seconds

    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {
        "fill": ("zero", "marginal"), "validation": ("fixed", "fresh"),
        "precision": ("fp32", "bf16", "tf32", "auto"), "device": ("auto", "cpu", "cuda")}
    POSITIVE: ClassVar[tuple[str, ...]] = (
        "min_masked_columns", "encoder_hidden", "encoder_out", "projector_hidden", "projector_out", "temperature",
        "lr", "batch_size", "max_epochs", "patience", "validation_draws", "progress_seconds")


@dataclass(frozen=True)
class EvaluateConfig:
    shots: tuple[int, ...] = (1, 5, 10)
    episodes: int = 100
    prototype_shots: tuple[int, ...] = (1,)  # these shots use cosine prototypes, others a probe
    probe_lr: float = 1e-3
    probe_max_iters: int = 10000
    probe_patience: int = 100  # stop a probe after this many iterations without improvement

    POSITIVE: ClassVar[tuple[str, ...]] = ("episodes", "probe_lr", "probe_max_iters", "probe_patience")
    # evaluation holds every episode of a shot in memory at once (on income's test part the score
    # arrays alone take ~0.8 MB per episode); 100x the paper's 100 episodes
    MAXIMUM: ClassVar[dict[str, int]] = {"episodes": 10_000}


@dataclass(frozen=True)
class AnalysisConfig:
    """The paper's two k-NN analyses (stage `analysis@<dataset>`, docs/analyses.md)."""

    ratio: float = 0.2  # separation ratio of the target views (the paper's 0.2)
    masks: int = 100  # random separations on batches (the paper's 100)
    split_masks: int = 10  # on the whole train split (not in the paper; O(rows^2) per mask: income ~20 s)
    max_k: int = 20  # neighbours inspected: k = 1 .. max_k (the paper does not say)
    batch_rows: int = 1024  # rows per batch of the batch-level fraction (pretraining's batch size)
    consistency_k: int = 10  # neighbours of the label-consistency analysis (the paper's 10)
    seed: int = 0  # draws the masks and the batches

    POSITIVE: ClassVar[tuple[str, ...]] = ("masks", "split_masks", "max_k", "batch_rows", "consistency_k")
    FRACTIONS: ClassVar[tuple[str, ...]] = ("ratio",)
    MAXIMUM: ClassVar[dict[str, int]] = {"masks": 10_000, "split_masks": 10_000, "max_k": 1000,
                                         "consistency_k": 1000}


@dataclass(frozen=True)
class KnnConfig:
    k: int = 1  # neighbours for 5- and 10-shot (capped at the support size); 1-shot always uses k = 1

    POSITIVE: ClassVar[tuple[str, ...]] = ("k",)


@dataclass(frozen=True)
class LogregConfig:
    C: float = 1.0  # inverse L2 strength (scikit-learn's default)
    max_iter: int = 1000

    POSITIVE: ClassVar[tuple[str, ...]] = ("C", "max_iter")


@dataclass(frozen=True)
class ScarfConfig:
    corruption_rate: float = 0.6  # SCARF paper's default
    temperature: float = 1.0  # SCARF paper's default
    encoder_hidden: int = 1024  # as SeBA's encoder
    encoder_out: int = 256
    lr: float = 1e-3
    batch_size: int = 256  # SCARF paper: 128; 256 halves the steps on 2 cores
    max_epochs: int = 1000  # cap; early stopping ends earlier
    max_steps: int = 3000  # optimiser-step cap (cost budget, as VIME's and SubTab's)
    patience: int = 20  # SeBA's early-stopping rule (epochs), short for the cost budget
    min_delta: float = 0.001
    precision: str = "auto"

    POSITIVE: ClassVar[tuple[str, ...]] = ("temperature", "encoder_hidden", "encoder_out", "lr", "batch_size",
                                           "max_epochs", "max_steps", "patience")
    FRACTIONS: ClassVar[tuple[str, ...]] = ("corruption_rate",)
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"precision": ("fp32", "bf16", "auto")}


@dataclass(frozen=True)
class CatboostConfig:
    iterations: int = 200  # boosting rounds per episode (CatBoost's default 1000; cost budget, see README)
    learning_rate: float = 0.1  # CatBoost picks ~0.03 for 1000 rounds; 0.1 for 200 rounds
    depth: int = 4  # CatBoost's default 6; 4 is 3-9x faster on 10-class supports at equal accuracy
    border_count: int = 32  # CatBoost's default 254; a support has at most 100 distinct values
    l2_leaf_reg: float = 3.0  # CatBoost's default

    POSITIVE: ClassVar[tuple[str, ...]] = ("iterations", "learning_rate", "depth", "border_count", "l2_leaf_reg")


@dataclass(frozen=True)
class StuntConfig:
    ways: int = 10  # k-means clusters = classes per self-generated task (official code: num_ways 10)
    shots: int = 1  # support rows per pseudo-class (official: num_shots 1)
    queries: int = 15  # query rows per pseudo-class (official: num_shots_test 15)
    tasks_per_step: int = 4  # tasks per Adam step (official: batch_size 4)
    min_column_fraction: float = 0.2  # share of original columns chosen per task, drawn in [0.2, 0.5]
    max_column_fraction: float = 0.5  # (official: int(0.2 D) .. int(0.5 D) columns)
    kmeans_iterations: int = 20  # Lloyd iterations (official: faiss niter 20)
    kmeans_points_per_cluster: int = 256  # k-means on <= ways * 256 sampled rows (faiss's default cap)
    task_pool: int = 500  # pseudo-labelled column subsets computed up front, reused with fresh rows/perturbations
    max_rejections: int = 20000  # column subsets whose smallest cluster is too small, before giving up
    val_clusters: int = 2  # pseudo-validation k-means clusters (official income script: 2)
    val_restarts: int = 10  # k-means restarts for the pseudo-validation labels (scikit-learn's n_init then)
    val_queries: int = 30  # query rows per pseudo-class in a validation task (official: 30)
    val_tasks: int = 200  # fixed pseudo-validation tasks (official: ~1000 fresh ones per evaluation)
    eval_every: int = 50  # steps between pseudo-validations (official: eval_step 50)
    patience: int = 1000  # steps without a better pseudo-validation accuracy before stopping
    max_steps: int = 2000  # step cap (official: 10000 steps, no early stop); the cost budget
    encoder_hidden: int = 1024  # as SeBA's encoder
    encoder_out: int = 256
    lr: float = 1e-3  # Adam (official)
    precision: str = "auto"
    head: str = "protonet"  # protonet: Euclidean prototypes at every shot (STUNT's) | seba: SeBA's heads

    POSITIVE: ClassVar[tuple[str, ...]] = ("ways", "shots", "queries", "tasks_per_step", "kmeans_iterations",
                                           "kmeans_points_per_cluster", "task_pool", "max_rejections", "val_clusters",
                                           "val_restarts", "val_queries", "val_tasks", "eval_every", "patience",
                                           "max_steps", "encoder_hidden", "encoder_out", "lr")
    FRACTIONS: ClassVar[tuple[str, ...]] = ("min_column_fraction", "max_column_fraction")
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"precision": ("fp32", "bf16", "auto"), "head": ("protonet", "seba")}


@dataclass(frozen=True)
class VimeConfig:
    p_m: float = 0.3  # corruption probability (VIME's official code default)
    alpha: float = 2.0  # weight of the reconstruction loss (VIME's official code default)
    encoder_hidden: int = 1024  # as SeBA's encoder
    encoder_out: int = 256
    lr: float = 1e-3
    batch_size: int = 128  # VIME's official code default
    max_epochs: int = 1000  # cap; early stopping usually ends earlier
    max_steps: int = 3000  # cap on optimiser steps (cost budget; VIME's code: 10 epochs)
    patience: int = 20  # SeBA's early-stopping rule, shorter patience for the cost budget
    min_delta: float = 0.001
    precision: str = "auto"

    POSITIVE: ClassVar[tuple[str, ...]] = ("alpha", "encoder_hidden", "encoder_out", "lr", "batch_size",
                                           "max_epochs", "max_steps", "patience")
    FRACTIONS: ClassVar[tuple[str, ...]] = ("p_m",)
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"precision": ("fp32", "bf16", "auto")}


@dataclass(frozen=True)
class SubtabConfig:
    n_subsets: int = 4  # SubTab's official config default
    overlap: float = 0.75  # share of a subset's width taken from its neighbour (SubTab default)
    noise: str = "swap"  # noise added to each subset (SubTab default: swap_noise)
    masking_ratio: float = 0.3  # share of a subset's columns that get noise (SubTab default)
    noise_level: float = 0.1  # std of the Gaussian noise (SubTab default; used only by noise: gaussian)
    temperature: float = 0.1  # NT-Xent temperature tau (SubTab default)
    contrastive_weight: float = 1.0  # SubTab adds the losses with weight 1; 0 disables
    distance_weight: float = 1.0
    encoder_hidden: int = 1024  # as SeBA's encoder
    encoder_out: int = 256
    lr: float = 1e-3  # SubTab default
    batch_size: int = 32  # SubTab default
    max_epochs: int = 1000  # cap; early stopping usually ends earlier
    max_steps: int = 2000  # cap on optimiser steps (cost budget; SubTab's code: 15 epochs)
    patience: int = 20  # SeBA's early-stopping rule, shorter patience for the cost budget
    min_delta: float = 0.001
    precision: str = "auto"

    POSITIVE: ClassVar[tuple[str, ...]] = ("n_subsets", "temperature", "encoder_hidden", "encoder_out", "lr",
                                           "batch_size", "max_epochs", "max_steps", "patience")
    FRACTIONS: ClassVar[tuple[str, ...]] = ("overlap", "masking_ratio")
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"noise": ("swap", "gaussian", "zero", "none"),
                                                     "precision": ("fp32", "bf16", "auto")}


@dataclass(frozen=True)
class PseudolabelConfig:
    hidden: int = 128  # one hidden ReLU layer per episode's MLP (our cost/accuracy measurement)
    steps: int = 300  # fixed Adam steps per episode; all episodes of a shot are trained at once
    batch_size: int = 64  # shared unlabeled rows per step (STUNT: 100); the whole support every step
    lr: float = 1e-3  # STUNT's baselines: Adam, lr 1e-3, weight decay 1e-4
    weight_decay: float = 1e-4
    alpha_f: float = 3.0  # Lee (2013): final pseudo-label weight
    t1_fraction: float = 0.1  # Lee: alpha = 0 before epoch T1 = 100, alpha_f from T2 = 600, here
    t2_fraction: float = 0.6  # read as shares of the steps (as if a 1000-epoch run)
    threshold: float = 0.0  # pseudo-label only rows predicted with this confidence (0: Lee, every row)
    episode_chunk: int = 100  # episodes trained together (memory bound)
    precision: str = "auto"  # fp32 | bf16 (autocast) | auto (bf16 where native); bf16 measured equal

    POSITIVE: ClassVar[tuple[str, ...]] = ("hidden", "steps", "batch_size", "lr", "episode_chunk")
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"precision": ("fp32", "bf16", "auto")}

    def __post_init__(self):
        if not 0 <= self.t1_fraction < self.t2_fraction <= 1:
            raise ConfigError("baselines.pseudolabel: need 0 <= t1_fraction < t2_fraction <= 1, got "
                              f"{self.t1_fraction} and {self.t2_fraction}")
        if not 0 <= self.threshold < 1 or self.alpha_f < 0 or self.weight_decay < 0:
            raise ConfigError("baselines.pseudolabel: need 0 <= threshold < 1, alpha_f >= 0, weight_decay >= 0")


@dataclass(frozen=True)
class MeanteacherConfig:
    hidden: int = 128  # one hidden ReLU layer per episode's MLP (student and teacher)
    steps: int = 300  # fixed Adam steps per episode; all episodes of a shot are trained at once
    batch_size: int = 64  # shared unlabeled rows per step (STUNT: 100); the whole support every step
    lr: float = 1e-3  # STUNT's baselines: Adam, lr 1e-3, weight decay 1e-4
    weight_decay: float = 1e-4
    consistency: float = 1.0  # max consistency weight; STUNT's grid {0.1, 1, 10, 20, 50, 100}, MT code 100
    rampup_fraction: float = 0.3  # sigmoid ramp-up over this share of the steps (MT code: 40k of 150k)
    ema_decay: float = 0.99  # teacher EMA decay (MT code: 0.99 during ramp-up, 0.999 after)
    input_noise: float = 0.15  # std of the Gaussian input noise on the standardised features (MT code)
    episode_chunk: int = 100  # episodes trained together (memory bound)
    precision: str = "auto"  # fp32 | bf16 (autocast) | auto (bf16 where native)

    POSITIVE: ClassVar[tuple[str, ...]] = ("hidden", "steps", "batch_size", "lr", "episode_chunk")
    FRACTIONS: ClassVar[tuple[str, ...]] = ("rampup_fraction",)
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"precision": ("fp32", "bf16", "auto")}

    def __post_init__(self):
        if not 0 <= self.ema_decay < 1 or self.consistency < 0 or self.input_noise < 0 or self.weight_decay < 0:
            raise ConfigError("baselines.meanteacher: need 0 <= ema_decay < 1 and consistency, input_noise, "
                              "weight_decay >= 0")


BASELINE_SECTIONS = {"knn": KnnConfig, "logreg": LogregConfig, "catboost": CatboostConfig, "stunt": StuntConfig,
                     "scarf": ScarfConfig, "vime": VimeConfig, "subtab": SubtabConfig,
                     "pseudolabel": PseudolabelConfig, "meanteacher": MeanteacherConfig}


@dataclass(frozen=True)
class BaselinesConfig:
    methods: tuple[str, ...] = ()  # which baselines run (each is one DVC stage per dataset)
    knn: KnnConfig = field(default_factory=KnnConfig)
    logreg: LogregConfig = field(default_factory=LogregConfig)
    catboost: CatboostConfig = field(default_factory=CatboostConfig)
    stunt: StuntConfig = field(default_factory=StuntConfig)
    scarf: ScarfConfig = field(default_factory=ScarfConfig)
    vime: VimeConfig = field(default_factory=VimeConfig)
    subtab: SubtabConfig = field(default_factory=SubtabConfig)
    pseudolabel: PseudolabelConfig = field(default_factory=PseudolabelConfig)
    meanteacher: MeanteacherConfig = field(default_factory=MeanteacherConfig)


@dataclass(frozen=True)
class Params:
    seeds: tuple[int, ...]
    datasets: tuple[str, ...]
    sources: dict[str, SourceConfig]
    fetch: FetchConfig = field(default_factory=FetchConfig)
    split: SplitConfig = field(default_factory=SplitConfig)
    pretrain: PretrainConfig = field(default_factory=PretrainConfig)
    evaluate: EvaluateConfig = field(default_factory=EvaluateConfig)
    baselines: BaselinesConfig = field(default_factory=BaselinesConfig)
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)

    def pretrain_for(self, dataset: str) -> PretrainConfig:
        """The `pretrain` settings one dataset trains with: the section, with the dataset's own
        values from ``sources.<dataset>.pretrain`` over it."""
        source = self.sources.get(dataset)
        if source is None or not source.pretrain:
            return self.pretrain
        return dataclasses.replace(self.pretrain, **source.pretrain)


def _reject_unknown(section: str, raw: dict, allowed: list[str]) -> None:
    for key in raw:
        if key not in allowed:
            where = f"{section}.{key}" if section else str(key)
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(
                f"params.yaml: unknown key '{where}'{hint}; allowed here: {', '.join(allowed)}"
            )


def _coerce(key: str, value: Any, annotation: str) -> Any:
    """Check one scalar or tuple against its declared type, naming the key on failure."""

    def fail(expected: str) -> ConfigError:
        return ConfigError(f"params.yaml: '{key}' must be {expected}, got {value!r}")

    if annotation == "bool":
        if not isinstance(value, bool):
            raise fail("true or false")
        return value
    if annotation == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail("an integer")
        return value
    if annotation == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise fail("a number")
        if not math.isfinite(value):
            raise fail("a finite number")
        return float(value)
    if annotation == "str":
        if not isinstance(value, str):
            raise fail("a string")
        return value
    if annotation.startswith("tuple[int"):
        if not isinstance(value, list) or not value:
            raise fail("a non-empty list of integers")
        for v in value:
            if isinstance(v, bool) or not isinstance(v, int):
                raise fail("a non-empty list of integers")
        return tuple(value)
    if annotation.startswith("tuple[float"):
        if not isinstance(value, list) or not value:
            raise fail("a non-empty list of numbers")
        for v in value:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise fail("a non-empty list of numbers")
        return tuple(float(v) for v in value)
    raise AssertionError(f"unhandled annotation {annotation}")


def _section(name: str, cls: type, raw: Any) -> Any:
    """``raw`` checked against ``cls`` (its types, ``CHOICES``, ``POSITIVE`` and ``FRACTIONS``);
    errors name keys under ``name``."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"params.yaml: '{name}' must be a mapping of keys to values")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    _reject_unknown(name, raw, list(fields))
    values = {}
    for key, value in raw.items():
        full = f"{name}.{key}"
        value = _coerce(full, value, str(fields[key].type))
        choices = getattr(cls, "CHOICES", {}).get(key)
        if choices and value not in choices:
            raise ConfigError(f"params.yaml: '{full}' is {value!r}; allowed: {', '.join(choices)}")
        if key in getattr(cls, "POSITIVE", ()) and value <= 0:
            raise ConfigError(f"params.yaml: '{full}' must be > 0, got {value!r}")
        if key in getattr(cls, "FRACTIONS", ()) and not 0 < value <= 1:
            raise ConfigError(f"params.yaml: '{full}' must lie in (0, 1], got {value!r}")
        maximum = getattr(cls, "MAXIMUM", {}).get(key)
        if maximum is not None and value > maximum:
            raise ConfigError(f"params.yaml: '{full}' must be <= {maximum}, got {value!r}")
        values[key] = value
    return cls(**values)


def _baselines(raw: Any) -> BaselinesConfig:
    if raw is None:
        return BaselinesConfig()
    if not isinstance(raw, dict):
        raise ConfigError("params.yaml: 'baselines' must be a mapping (methods: [...], one section per method)")
    allowed = ["methods", *BASELINE_SECTIONS]
    _reject_unknown("baselines", raw, allowed)
    methods = raw.get("methods", [])
    if not isinstance(methods, list) or not all(isinstance(m, str) for m in methods):
        raise ConfigError(f"params.yaml: 'baselines.methods' must be a list of method names, got {methods!r}")
    for method in methods:
        if method not in BASELINE_SECTIONS:
            close = difflib.get_close_matches(method, list(BASELINE_SECTIONS), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"params.yaml: 'baselines.methods' has unknown method '{method}'{hint}; "
                              f"allowed: {', '.join(BASELINE_SECTIONS)}")
    if len(set(methods)) != len(methods):
        raise ConfigError(f"params.yaml: 'baselines.methods' has duplicates: {methods}")
    sections = {name: _section(f"baselines.{name}", cls, raw.get(name)) for name, cls in BASELINE_SECTIONS.items()}
    return BaselinesConfig(methods=tuple(methods), **sections)


# A dataset name becomes file names (data/raw/<name>.parquet, data/models/<name>/, reports/...)
# and DVC stage names (fetch@<name>): letters, digits, '_' and '-', so that it cannot leave its
# directory, and names that differ only in case are refused (they collide on macOS and Windows).
DATASET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
SEED_MAX = 2**32 - 1  # numpy's and torch's seed range


def check_dataset_name(name: Any, where: str) -> str:
    """``name`` if it is a valid dataset name, else a ConfigError naming ``where`` it is."""
    if not isinstance(name, str) or not DATASET_NAME.fullmatch(name):
        raise ConfigError(f"params.yaml: dataset name {name!r} in '{where}' must be 1-64 letters, digits, '_' or "
                          f"'-', starting with a letter or digit (it names files under data/ and reports/ "
                          f"and DVC stages)")
    return name


def _source(name: str, entry: Any) -> SourceConfig:
    key = f"sources.{name}"
    if isinstance(entry, int) and not isinstance(entry, bool):
        entry = {"openml_id": entry}
    if not isinstance(entry, dict):
        raise ConfigError(f"params.yaml: '{key}' must be a mapping like {{openml_id: 37}} or "
                          f"{{path: {LOCAL_DIR}/mine.csv, target: label}}")
    allowed = ["openml_id", "path", "target", "categorical", "numeric", "max_categories", "thousands", "decimal",
               "pretrain"]
    _reject_unknown(key, entry, allowed)
    overrides = _pretrain_overrides(f"{key}.pretrain", entry.get("pretrain"))
    entry = {k: v for k, v in entry.items() if k != "pretrain"}
    if ("openml_id" in entry) == ("path" in entry):
        raise ConfigError(f"params.yaml: '{key}' needs exactly one of 'openml_id' (an OpenML dataset) "
                          f"or 'path' (a local CSV / parquet file)")
    if "openml_id" in entry:
        extra = [k for k in entry if k != "openml_id"]
        if extra:
            raise ConfigError(f"params.yaml: '{key}.{extra[0]}' applies only to local tables (with 'path')")
        openml_id = _coerce(f"{key}.openml_id", entry["openml_id"], "int")
        if openml_id <= 0:
            raise ConfigError(f"params.yaml: '{key}.openml_id' must be > 0, got {openml_id}")
        return SourceConfig(openml_id=openml_id, pretrain=overrides)
    path = _coerce(f"{key}.path", entry["path"], "str")
    parts = Path(path).parts
    if Path(path).is_absolute() or ".." in parts or Path(*parts[:2]).as_posix() != LOCAL_DIR or len(parts) < 3:
        raise ConfigError(f"params.yaml: '{key}.path' must be a file under {LOCAL_DIR}/ (relative to the "
                          f"repository root, so DVC tracks it), got {path!r}")
    if Path(path).suffix.lower() not in LOCAL_SUFFIXES:
        raise ConfigError(f"params.yaml: '{key}.path' must end in {' or '.join(LOCAL_SUFFIXES)}, got {path!r}")
    if "target" not in entry:
        raise ConfigError(f"params.yaml: '{key}.target' is missing: name the label column of {path}")
    target = _coerce(f"{key}.target", entry["target"], "str")
    columns = {}
    for option in ("categorical", "numeric"):
        names = entry.get(option, [])
        if not isinstance(names, list) or not all(isinstance(c, str) for c in names):
            raise ConfigError(f"params.yaml: '{key}.{option}' must be a list of column names, got {names!r}")
        columns[option] = tuple(names)
    both = [c for c in columns["numeric"] if c in columns["categorical"]]
    if both:
        raise ConfigError(f"params.yaml: '{key}.numeric' and '{key}.categorical' both list {both}; "
                          f"a column has one type")
    max_categories = _coerce(f"{key}.max_categories", entry.get("max_categories", 50), "int")
    if max_categories < 2:
        raise ConfigError(f"params.yaml: '{key}.max_categories' must be >= 2, got {max_categories}")
    thousands = entry.get("thousands")
    if thousands is not None and thousands not in SourceConfig.THOUSANDS:
        raise ConfigError(f"params.yaml: '{key}.thousands' is {thousands!r}; allowed: "
                          f"{', '.join(repr(c) for c in SourceConfig.THOUSANDS)} or null (none)")
    decimal = entry.get("decimal", ".")
    if decimal not in SourceConfig.DECIMALS:
        raise ConfigError(f"params.yaml: '{key}.decimal' is {decimal!r}; allowed: "
                          f"{', '.join(repr(c) for c in SourceConfig.DECIMALS)}")
    if thousands == decimal:
        raise ConfigError(f"params.yaml: '{key}.thousands' and '{key}.decimal' are both {decimal!r}; "
                          f"they must differ")
    return SourceConfig(path=path, target=target, max_categories=max_categories, thousands=thousands,
                        decimal=decimal, pretrain=overrides, **columns)


def _pretrain_overrides(key: str, raw: Any) -> dict[str, Any]:
    """``sources.<name>.pretrain``: a dataset's own values for `pretrain` keys, checked like the
    section itself. ``ratios`` is shared by all datasets (it names the DVC stages and the
    ensemble's members), so it cannot differ per dataset."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"params.yaml: '{key}' must be a mapping of `pretrain` keys to this dataset's "
                          f"values, like {{precision: fp32}}")
    if "ratios" in raw:
        raise ConfigError(f"params.yaml: '{key}.ratios' is not allowed: the ratios are shared by all "
                          f"datasets (set 'pretrain.ratios')")
    parsed = _section(key, PretrainConfig, raw)
    _check_pretrain(parsed, key)  # keys not given keep their (valid) defaults
    return {name: getattr(parsed, name) for name in raw}


def parse_params(raw: Any) -> Params:
    """Validate a parsed params.yaml and return typed params (raises ConfigError)."""
    if not isinstance(raw, dict):
        raise ConfigError("params.yaml must be a mapping at the top level")
    # `theorem` is read and checked by seba.theorem (its own stage, no data)
    top = ["seeds", "datasets", "sources", "fetch", "split", "pretrain", "evaluate", "baselines", "analysis",
           "theorem"]
    _reject_unknown("", raw, top)
    for key in ("seeds", "datasets", "sources"):
        if key not in raw:
            raise ConfigError(f"params.yaml: missing required key '{key}'")

    seeds = _coerce("seeds", raw["seeds"], "tuple[int, ...]")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"params.yaml: 'seeds' has duplicates: {list(seeds)}")
    if any(s < 0 for s in seeds):
        raise ConfigError(f"params.yaml: 'seeds' must be >= 0, got {list(seeds)}")
    if any(s > SEED_MAX for s in seeds):
        raise ConfigError(f"params.yaml: 'seeds' must be <= {SEED_MAX} (2**32 - 1, the seed range of numpy "
                          f"and torch), got {max(seeds)}")

    datasets = raw["datasets"]
    if not isinstance(datasets, list) or not datasets or not all(isinstance(d, str) for d in datasets):
        raise ConfigError("params.yaml: 'datasets' must be a non-empty list of dataset names")
    for name in datasets:
        check_dataset_name(name, "datasets")
    if len(set(datasets)) != len(datasets):
        raise ConfigError(f"params.yaml: 'datasets' has duplicates: {datasets}")
    folded = [d.casefold() for d in datasets]
    if len(set(folded)) != len(folded):
        twins = sorted(d for d in datasets if folded.count(d.casefold()) > 1)
        raise ConfigError(f"params.yaml: 'datasets' has names that differ only in case: {twins} (their files "
                          f"collide on case-insensitive file systems)")

    raw_sources = raw["sources"]
    if not isinstance(raw_sources, dict):
        raise ConfigError("params.yaml: 'sources' must map dataset names to {openml_id: N}")
    sources = {}
    for name, entry in raw_sources.items():
        sources[str(name)] = _source(check_dataset_name(name, "sources"), entry)
    for name in datasets:
        if name not in sources:
            raise ConfigError(
                f"params.yaml: dataset '{name}' is listed in 'datasets' but has no entry in 'sources'"
            )

    params = Params(
        seeds=seeds,
        datasets=tuple(datasets),
        sources=sources,
        fetch=_section("fetch", FetchConfig, raw.get("fetch")),
        split=_section("split", SplitConfig, raw.get("split")),
        pretrain=_section("pretrain", PretrainConfig, raw.get("pretrain")),
        evaluate=_section("evaluate", EvaluateConfig, raw.get("evaluate")),
        baselines=_baselines(raw.get("baselines")),
        analysis=_section("analysis", AnalysisConfig, raw.get("analysis")),
    )
    _check_ranges(params)
    return params


def _check_pretrain(cfg: PretrainConfig, section: str) -> None:
    """Range checks of `pretrain` values under the name ``section`` (``pretrain`` or a dataset's
    ``sources.<name>.pretrain``)."""
    for key in ("max_steps", "threads", "workers", "stack_size"):
        value = getattr(cfg, key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"params.yaml: '{section}.{key}' must be an integer >= 0 (0 = "
                              f"{'no cap' if key == 'max_steps' else 'automatic'}), got {value!r}")
    if not 0.0 <= cfg.min_delta < 1.0:
        raise ConfigError(f"params.yaml: '{section}.min_delta' must lie in [0, 1), got {cfg.min_delta}")


def _check_ratios(ratios: tuple[float, ...]) -> None:
    """Each ratio in (0, 1), and canonical: the name of its output directory and ensemble member
    (``ratio_tag``) spells it exactly as DVC does in the stage name and output path
    (``pretrain@<dataset>-<ratio>``, ``data/models/<dataset>/r<ratio>``), so two ratios never
    share a directory and a stage always writes where DVC expects it."""
    for r in ratios:
        if not 0.0 < r < 1.0:
            raise ConfigError(f"params.yaml: 'pretrain.ratios' values must lie in (0, 1), got {r}")
    if len(set(ratios)) != len(ratios):
        raise ConfigError(f"params.yaml: 'pretrain.ratios' has duplicates: {list(ratios)}")
    tags: dict[str, float] = {}
    for r in ratios:
        tag = ratio_tag(r)
        if tag in tags:
            raise ConfigError(f"params.yaml: 'pretrain.ratios' values {tags[tag]!r} and {r!r} both name the "
                              f"output directory {tag}; ratios are kept to 6 significant digits")
        tags[tag] = r
    for r in ratios:
        if ratio_tag(r) != f"r{r!r}":
            raise ConfigError(f"params.yaml: 'pretrain.ratios' value {r!r} has more than 6 significant digits; "
                              f"its output directory would be {ratio_tag(r)} while DVC expects r{r!r} "
                              f"(write it as {float(ratio_tag(r)[1:])!r})")


def _check_ranges(p: Params) -> None:
    _check_ratios(p.pretrain.ratios)
    _check_pretrain(p.pretrain, "pretrain")
    for frac_key, frac in (("split.test_fraction", p.split.test_fraction),
                           ("split.val_fraction", p.split.val_fraction)):
        if not 0.0 < frac < 1.0:
            raise ConfigError(f"params.yaml: '{frac_key}' must lie in (0, 1), got {frac}")
    if any(s <= 0 for s in p.evaluate.shots):
        raise ConfigError(f"params.yaml: 'evaluate.shots' must be positive, got {list(p.evaluate.shots)}")
    if len(set(p.evaluate.shots)) != len(p.evaluate.shots):
        raise ConfigError(f"params.yaml: 'evaluate.shots' has duplicates: {list(p.evaluate.shots)}")
    if p.analysis.ratio >= 1:  # a target view of every column leaves no feature view
        raise ConfigError(f"params.yaml: 'analysis.ratio' must lie in (0, 1), got {p.analysis.ratio}")
    if not 0 <= p.analysis.seed <= SEED_MAX:
        raise ConfigError(f"params.yaml: 'analysis.seed' must lie in [0, {SEED_MAX}], got {p.analysis.seed}")
    if p.evaluate.prototype_shots and any(s <= 0 for s in p.evaluate.prototype_shots):
        raise ConfigError("params.yaml: 'evaluate.prototype_shots' must be positive")


def ratio_tag(ratio: float) -> str:
    """The directory / member name of a ratio: 0.1 -> 'r0.1'."""
    return f"r{ratio:g}"


def load_params(path: str | Path = "params.yaml") -> Params:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path} not found (run from the repository root)")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    return parse_params(raw)
