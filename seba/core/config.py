"""Typed, validated view of ``params.yaml``.

Every stage turns the raw YAML into these frozen sections before doing any work, so a typo or an
out-of-range value fails at once with the key's name instead of after an hour of pretraining.
Each section is a pydantic dataclass (``seba.core.schema``): its fields, types, defaults and range
checks are written once, in the class. Unknown keys are rejected (with a suggestion when one is
close). The ``baselines`` section names its methods and holds each one's settings as given: a
method's module checks them against its own params class (``seba.baselines.base.method_config``),
so that validating the rest of the file needs no method code.
"""

import codecs
import dataclasses
import difflib
import math
import re
import unicodedata
from dataclasses import field
from pathlib import Path
from typing import Annotated, Any

import yaml
import pydantic
from pydantic import AfterValidator, BeforeValidator

from seba.core.errors import ConfigError
from seba.core.paths import LOCAL, RANDOM_RATIO, ratio_tag
from seba.core.schema import (Bool, Float, Int, Ints, IntsOrNone, Numbers, PairBatch, PositiveFloat, PositiveInt, Str, at_most, check,
                              choice, fail, mapping_or_empty, rule, section, unknown_key)

LOCAL_DIR = LOCAL
COMPRESSIONS = (".gz", ".bz2", ".xz", ".zip")  # endings of a compressed CSV or TSV
# a local table's ending -> its format (a .tsv is a CSV whose fields are separated by tabs unless
# `delimiter` says otherwise); only CSV and TSV files may also be compressed
LOCAL_FORMATS = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".xlsx": "excel", ".arff": "arff"}
THOUSANDS = (",", ".", " ", "'")
DECIMALS = (".", ",")
DELIMITERS = (",", ";", "\t", "|")  # field separators of a local CSV
DATE_ORDERS = ("dmy", "mdy")  # how dates written 31/01/2020 (dmy) or 01/31/2020 (mdy) are read


def local_format(path: str | Path) -> str | None:
    """The format of a local table by its path's ending: 'csv', 'tsv' (each possibly compressed:
    ``COMPRESSIONS``), 'parquet', 'excel' or 'arff'; None for an ending not read."""
    name = str(path).lower()
    unpacked = next((name.removesuffix(c) for c in COMPRESSIONS if name.endswith(c)), name)
    kind = LOCAL_FORMATS.get(Path(unpacked).suffix)
    return kind if unpacked == name or kind in ("csv", "tsv") else None


def csv_delimiter(source: "SourceConfig") -> str:
    """The field separator of a local CSV: ``delimiter`` where set, else a tab for a .tsv file and a
    comma for a .csv file."""
    if source.delimiter is not None:
        return source.delimiter
    return "\t" if local_format(source.path) == "tsv" else ","


def _names(value: Any) -> Any:
    if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
        numbers = [c for c in value if isinstance(c, (int, float)) and not isinstance(c, bool)] \
            if isinstance(value, list) else []
        hint = f" (quote a name that is a number: '{numbers[0]}')" if numbers else ""
        raise fail(f"must be a list of column names, got {value!r}{hint}")
    return tuple(column_name(c) for c in value)


# invisible characters that text copied from a web page or joined files may carry at a cell's edges:
# the zero-width space, the word joiner and the byte-order mark (zero-width no-break space)
INVISIBLE = "\u200b\u2060\ufeff"
# Unicode's spaces other than ' ' (no-break, narrow no-break, thin, ideographic, ...), which look
# like one: a header name or cell is read with ' ' in their place
SPACES = {c: " " for c in (0x00A0, 0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000)}


def bare(value: str) -> str:
    """``value`` without surrounding spaces and ``INVISIBLE`` characters, in any mix."""
    while True:
        stripped = value.strip().strip(INVISIBLE)
        if stripped == value:
            return value
        value = stripped


def column_name(name: str) -> str:
    """A column name as a table's header is read: without surrounding spaces and invisible
    characters (``bare``), in Unicode's composed form (NFC), so that 'Größe' typed here finds a
    header that macOS wrote decomposed, and with ' ' for Unicode's other spaces (``SPACES``), so
    that 'body mass' finds a header written with a no-break space."""
    return bare(unicodedata.normalize("NFC", name).translate(SPACES))


def _column(value: str | None) -> str | None:
    """A column name as the table's header is read (``column_name``)."""
    if value is not None and not value.strip():
        raise fail(f"is {value!r}: name the label column")
    return column_name(value) if value is not None else None


def _one_of(allowed: tuple[str, ...], listed: str = "", null: str = ""):
    """A validator of a value among ``allowed`` (shown as ``listed``, else their reprs), or None
    where ``null`` says what None means."""
    shown = listed or ", ".join(repr(c) for c in allowed)

    def check(value: str | None) -> str | None:
        if value is None and null:
            return None
        if value not in allowed:
            raise fail(f"is {value!r}; allowed: {shown}" + (f" or null ({null})" if null else ""))
        return value
    return check


_thousands = _one_of(THOUSANDS, null="none")
_decimal = _one_of(DECIMALS)
_delimiter = _one_of(DELIMITERS, f"{', '.join(repr(c) for c in DELIMITERS)} (a tab written \"\\t\" in double quotes)",
                     null="a comma, or a tab in a .tsv file")


def _encoding(value: str) -> str:
    try:
        codecs.lookup(value)
    except LookupError:
        raise fail(f"is {value!r}: not a text encoding Python knows (e.g. 'utf-8', 'cp1252', 'latin-1')") from None
    return value


def _sheet(value: str | int | None) -> str | int | None:
    if isinstance(value, int) and value < 0:
        raise fail(f"is {value}: a sheet's position counts from 0 (or give its name)")
    return value


_date_order = _one_of(DATE_ORDERS, "'dmy' (31/01/2020), 'mdy' (01/31/2020)", null="such dates stay text")


ColumnNames = Annotated[tuple[str, ...], BeforeValidator(_names)]


SPELLINGS = ("case", "spacing", "mark", "number")  # the ways one level may be written (own-table.md)


def _spellings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or any(v not in SPELLINGS for v in value):
        raise fail(f"must be a list of {', '.join(repr(k) for k in SPELLINGS)} (the ways of writing one level "
                   f"to read as one), got {value!r}")
    return tuple(dict.fromkeys(value))


def _missing_values(value: Any) -> tuple[str | float, ...] | dict[str, tuple[str | float, ...]]:
    """The cell values that mark a missing value in the file: a list for every feature column
    (-999, 9999, 'unknown'), or a mapping from column names to such lists ({glucose: [0]}, for the
    columns where a value is missing that elsewhere is one); texts (stripped) and finite numbers."""
    def values(listed: Any, where: str = "") -> tuple[str | float, ...]:
        if not isinstance(listed, list) or not all(
                (isinstance(v, str) and v.strip()) or (isinstance(v, (int, float)) and not isinstance(v, bool)
                                                       and math.isfinite(v)) for v in listed):
            raise fail(f"must be a list of the values that mark a missing cell (numbers or texts, e.g. [-999, "
                       f"'unknown']), or a mapping from columns to such lists ({{glucose: [0]}}), got "
                       f"{value!r}{where}")
        return tuple(v.strip() if isinstance(v, str) else float(v) for v in listed)

    if isinstance(value, dict):
        if not value or not all(isinstance(k, str) and k.strip() for k in value):
            raise fail(f"as a mapping, must name columns (texts), each with a list of values, got {value!r}")
        return {k.strip(): values(v, f" (column '{k}': {v!r})") for k, v in value.items()}
    return values(value)


MissingValues = Annotated[tuple[str | float, ...] | dict[str, tuple[str | float, ...]],
                          BeforeValidator(_missing_values)]


@section
class SourceConfig:
    """Where one dataset comes from: an OpenML id, or a local CSV / TSV / parquet / Excel / ARFF file under
    ``data/local/`` with a named target column."""

    openml_id: PositiveInt | None = None
    path: Str | None = None  # local table, relative to the repository root, under data/local/
    target: Annotated[Str | None, AfterValidator(_column)] = None  # the label column of a local table
    categorical: ColumnNames = ()  # columns to treat as categorical whatever their type
    numeric: ColumnNames = ()  # columns to read as numbers whatever their cells (the rest: missing)
    max_categories: Annotated[Int, rule(lambda v: v >= 2, "must be >= 2")] = 50  # more levels: the most frequent kept
    thousands: Annotated[Str | None, AfterValidator(_thousands)] = None  # separator in numbers as text (none: not read)
    decimal: Annotated[Str, AfterValidator(_decimal)] = "."  # decimal mark in numbers written as text
    delimiter: Annotated[Str | None, AfterValidator(_delimiter)] = None  # field separator (null: by the path)
    date_order: Annotated[Str | None, AfterValidator(_date_order)] = None  # dates like 31/01/2020: dmy or mdy
    encoding: Annotated[Str, AfterValidator(_encoding)] = "utf-8"  # text encoding of a CSV file
    sheet: Annotated[Str | Int | None, AfterValidator(_sheet)] = None  # an Excel workbook's sheet (null: the first)
    # the line of a CSV (the row of a sheet), counted from 1, that holds the column names: the ones
    # above it (a title, notes) are left out
    header_row: Annotated[Int, rule(lambda v: v >= 1, "must be >= 1")] = 1
    # cell values that mark a missing value in feature columns (-999, 'unknown'), or per column ({glucose: [0]})
    missing_values: MissingValues = ()
    # a 0/1 column beside each numeric column with missing cells, 1 where a cell is missing (its mean
    # imputation alone keeps no trace of which rows those were); false: the paper's mean imputation alone
    missing_indicators: Bool = False
    # levels (and classes) written in several ways that are read as one, the spelling most cells use:
    # 'case' (Yes, yes), 'spacing' (New York, New  York), 'mark' ('A, A), 'number' (1, 1.0, 01); []: kept apart
    merge_spellings: Annotated[tuple[str, ...], BeforeValidator(_spellings)] = ()
    # this dataset's own values for `pretrain` keys, over the `pretrain` section
    pretrain: dict[str, Any] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return self.path is not None


@section
class FetchConfig:
    source: choice("auto", "openml", "snapshot") = "auto"  # auto: OpenML, else the offline snapshot
    # OpenML connection attempts before falling back; openml waits 1, 2, ... seconds between
    # attempts: N attempts offline wait N(N-1)/2 s (10: 45 s)
    retries: Annotated[PositiveInt, at_most(10)] = 1


OpenFraction = Annotated[Float, rule(lambda v: 0 < v < 1, "must lie in (0, 1)")]


@section
class SplitConfig:
    test_fraction: OpenFraction = 1 / 6  # the paper's train : test = 5 : 1
    val_fraction: OpenFraction = 0.1  # share of the train part used for early stopping


def _ratio_list(value: Any) -> tuple[float | str, ...]:
    """A non-empty list of finite numbers and at most one 'random'."""
    if (not isinstance(value, (list, tuple)) or not value
            or not all((isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))
                       or v == RANDOM_RATIO for v in value)):
        raise fail(f"must be a non-empty list of numbers in (0, 1) or '{RANDOM_RATIO}' (a ratio drawn per batch "
                   f"from pretrain.random_ratio_range), got {value!r}")
    return tuple(v if isinstance(v, str) else float(v) for v in value)


def _check_ratios(ratios: tuple[float | str, ...]) -> tuple[float | str, ...]:
    """Each ratio in (0, 1), and canonical: the name of its output directory and ensemble member
    (``ratio_tag``) spells it exactly as DVC does in the stage name and output path
    (``pretrain@<dataset>-<ratio>``, ``data/models/<dataset>/r<ratio>``), so two ratios never
    share a directory and a stage always writes where DVC expects it."""
    if len(set(ratios)) != len(ratios):
        raise fail(f"has duplicates: {list(ratios)}")
    ratios_only = [r for r in ratios if not isinstance(r, str)]
    for r in ratios_only:
        if not 0.0 < r < 1.0:
            raise fail(f"values must lie in (0, 1), got {r}")
    tags: dict[str, float] = {}
    for r in ratios_only:
        tag = ratio_tag(r)
        if tag in tags:
            raise fail(f"values {tags[tag]!r} and {r!r} both name the output directory {tag}; ratios are kept "
                       f"to 6 significant digits")
        tags[tag] = r
    for r in ratios_only:
        if ratio_tag(r) != f"r{r!r}":
            raise fail(f"value {r!r} has more than 6 significant digits; its output directory would be "
                       f"{ratio_tag(r)} while DVC expects r{r!r} (write it as {float(ratio_tag(r)[1:])!r})")
    return ratios


def _count(zero: str):
    """An integer >= 0, where 0 means ``zero``."""
    return Annotated[Int, rule(lambda v: v >= 0, f"must be an integer >= 0 (0 = {zero})")]


def _ratio_range(value: tuple[float, ...]) -> tuple[float, ...]:
    if len(value) != 2 or not 0.0 < value[0] <= value[1] < 1.0:
        raise fail(f"must be [low, high] with 0 < low <= high < 1, got {list(value)}")
    return value


# the separation ratios (top-level `ratios`): one encoder per entry; 'random' (ablation): one encoder
# whose ratio is drawn per batch
Ratios = Annotated[tuple[float | str, ...], BeforeValidator(_ratio_list), AfterValidator(_check_ratios)]


@section
class PretrainConfig:
    # the 'random' ratio: uniform on [low, high] per batch (the paper gives no range; its fixed ratios')
    random_ratio_range: Annotated[Numbers, AfterValidator(_ratio_range)] = (0.1, 0.5)
    min_masked_columns: PositiveInt = 1  # k = max(min_masked_columns, floor(ratio * n_columns))
    fill: choice("zero", "marginal") = "zero"  # zero (paper) | marginal (ablation: values from a shuffled batch row)
    # product (released code: torch.cdist's one-product distances in float32) | exact (that product in float64)
    neighbour_search: choice("product", "exact") = "product"
    # standardise numeric columns with the train part's statistics (paper); false (ablation): raw values
    normalise: Bool = True
    encoder: choice("mlp", "ft_transformer") = "mlp"  # mlp (paper) | ft_transformer (ablation)
    encoder_hidden: PositiveInt = 1024
    encoder_out: PositiveInt = 256
    encoder_out_relu: Bool = True
    # FT-Transformer (encoder: ft_transformer): rtdl's default configuration with 3 blocks
    ft_blocks: PositiveInt = 3
    ft_dim: PositiveInt = 192  # token width (a multiple of ft_heads)
    ft_heads: PositiveInt = 8
    ft_attention_dropout: Annotated[Float, rule(lambda v: 0 <= v < 1, "must lie in [0, 1)")] = 0.2
    ft_ffn_dropout: Annotated[Float, rule(lambda v: 0 <= v < 1, "must lie in [0, 1)")] = 0.1
    ft_residual_dropout: Annotated[Float, rule(lambda v: 0 <= v < 1, "must lie in [0, 1)")] = 0.0
    projector_hidden: PositiveInt = 1024
    projector_out: PositiveInt = 256
    conditioned: Bool = True  # projector sees the expanded mask
    mask_bias: Bool = False  # the mask's product computed once per batch as a bias (rounding differs; faster on wide tables)
    temperature: PositiveFloat = 1.0
    lr: PositiveFloat = 1e-3
    batch_size: PairBatch = 1024  # InfoNCE: a batch needs two rows
    max_epochs: PositiveInt = 10000
    max_steps: _count("no cap") = 0  # optimiser-step cap, checked at the end of an epoch (0 = none, as the paper)
    patience: PositiveInt = 100
    # relative improvement that resets patience (0 = any improvement)
    min_delta: Annotated[Float, rule(lambda v: 0 <= v < 1, "must lie in [0, 1)")] = 0.0
    validation: choice("fixed", "fresh") = "fixed"  # fixed: seeded masks drawn once | fresh: new masks every epoch
    validation_draws: PositiveInt = 2  # masks per validation batch (fixed mode)
    # fp32 | bf16 (autocast) | tf32 (CUDA: TF32 products) | tf32_fp32_search (CUDA: TF32 products but the
    # target-view neighbour search's) | auto (bf16 where native)
    precision: choice("fp32", "bf16", "tf32", "tf32_fp32_search", "auto") = "fp32"
    device: choice("auto", "cpu", "cuda") = "auto"
    threads: _count("automatic") = 0  # torch intra-op threads; 0 = all cores
    workers: _count("automatic") = 0  # processes training seeds at once (CPU), each a stack; 0 = min(seeds, cores)
    stack_size: _count("automatic") = 0  # most seeds trained as one stacked model; 0 = all that fit in memory
    progress_seconds: PositiveFloat = 15.0  # at most one progress line per this many seconds

    def __post_init__(self):
        # the token width splits over the heads; the MLP encoder has no heads (the keys are unused)
        if self.encoder == "ft_transformer" and self.ft_dim % self.ft_heads:
            raise ConfigError(f"params.yaml: 'pretrain.ft_dim' ({self.ft_dim}) must be a multiple of "
                              f"'pretrain.ft_heads' ({self.ft_heads})")


def _shots(shots: tuple[int, ...]) -> tuple[int, ...]:
    if any(s <= 0 for s in shots):
        raise fail(f"must be positive, got {list(shots)}")
    if len(set(shots)) != len(shots):
        raise fail(f"has duplicates: {list(shots)}")
    return shots


# the few-shot heads (seba.evaluate.head_scores)
HEADS = ("linear", "prototype_cosine", "prototype_euclidean", "nn_cosine", "nn_euclidean", "finetune")


@section
class EvaluateConfig:
    shots: Annotated[Ints, AfterValidator(_shots)] = (1, 5, 10)
    # evaluation holds every episode of a shot in memory at once (on income's test part the score
    # arrays alone take ~0.8 MB per episode); at most 100x the paper's 100 episodes
    episodes: Annotated[PositiveInt, at_most(10_000)] = 100
    # the shots whose head is cosine prototypes ([]: none; one not in `shots` has no episodes: the evaluate stage warns)
    prototype_shots: Annotated[IntsOrNone, AfterValidator(_shots)] = (1,)
    # the head of the shots not in prototype_shots: linear (paper) | prototype_cosine | prototype_euclidean
    # | nn_cosine | nn_euclidean (1-NN to single support rows) | finetune (encoder and linear head together)
    head: choice(*HEADS) = "linear"
    probe_lr: PositiveFloat = 1e-3  # the linear probe's (and fine-tuning's) Adam learning rate
    probe_max_iters: PositiveInt = 10000
    probe_patience: PositiveInt = 100  # stop a probe after this many iterations without improvement
    # deviation: train_accuracy (the released code's rule: stop at 100 % train accuracy or after
    # probe_patience iterations without improvement, keep the best weights) | none (the paper's
    # "10 000 epochs": every one of probe_max_iters steps, the final weights)
    probe_stop: choice("train_accuracy", "none") = "train_accuracy"
    finetune_chunk: PositiveInt = 10  # episodes fine-tuned together (memory: a copy of the encoder each)

    def unevaluated_prototype_shots(self) -> str | None:
        """A note when ``prototype_shots`` lists a shot that ``shots`` lacks (no episode uses it)."""
        unused = [s for s in self.prototype_shots if s not in self.shots]
        if not unused:
            return None
        return (f"evaluate.prototype_shots lists {', '.join(map(str, unused))}, which evaluate.shots "
                f"{list(self.shots)} lacks: no episode uses it")


# The baselines: every module of seba/baselines/ but base.py is one method, named by its file
# (docs/adding-a-method.md). The names come from the folder, without importing a method: checking
# params.yaml needs no torch, and no stage but a method's own depends on the method's code.
BASELINES_DIR = Path(__file__).resolve().parents[1] / "baselines"
NOT_METHODS = ("__init__", "base")


def baseline_names() -> tuple[str, ...]:
    """The methods there are: the modules of seba/baselines/ (but base.py), by file name."""
    return tuple(sorted(p.stem for p in BASELINES_DIR.glob("*.py") if p.stem not in NOT_METHODS))


def _methods(methods: Any) -> tuple[str, ...]:
    if not isinstance(methods, list) or not all(isinstance(m, str) for m in methods):
        raise fail(f"must be a list of method names, got {methods!r}")
    known = baseline_names()
    for method in methods:
        if method not in known:
            close = difflib.get_close_matches(method, list(known), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise fail(f"has unknown method '{method}'{hint}; allowed: {', '.join(known)}")
    if len(set(methods)) != len(methods):
        raise fail(f"has duplicates: {methods}")
    return tuple(methods)


def _baselines(raw: Any) -> Any:
    """``baselines``: ``methods`` and one section per method, named by its module; the sections
    are kept as given (their keys are the method's to check)."""
    raw = mapping_or_empty(raw)
    if not isinstance(raw, dict):
        raise fail("must be a mapping of keys to values")
    unknown_key("baselines", raw, ["methods", *baseline_names()])
    sections = {}
    for name, given in raw.items():
        if name == "methods":
            continue
        if given is not None and not isinstance(given, dict):
            raise ConfigError(f"params.yaml: 'baselines.{name}' must be a mapping of keys to values")
        sections[name] = dict(given or {})
    out = {"sections": sections}
    if "methods" in raw:
        out["methods"] = raw["methods"]
    return out


@section
class BaselinesConfig:
    """Which methods run (each is one DVC stage per dataset), and each method's settings as given
    in params.yaml: ``seba.baselines.base.method_config`` checks a section against the method's
    params class (the baseline stage for its method, ``seba-validate`` for every one), and a
    method without a section runs with that class's defaults."""

    methods: Annotated[tuple[str, ...], BeforeValidator(_methods)] = ()
    sections: dict[str, dict] = field(default_factory=dict)


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


def _seeds(seeds: tuple[int, ...]) -> tuple[int, ...]:
    if len(set(seeds)) != len(seeds):
        raise fail(f"has duplicates: {list(seeds)}")
    if any(s < 0 for s in seeds):
        raise fail(f"must be >= 0, got {list(seeds)}")
    if any(s > SEED_MAX for s in seeds):
        raise fail(f"must be <= {SEED_MAX} (2**32 - 1, the seed range of numpy and torch), got {max(seeds)}")
    return seeds


def _datasets(datasets: Any) -> tuple[str, ...]:
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
    return tuple(datasets)


def _sources(raw: Any) -> dict[str, SourceConfig]:
    if not isinstance(raw, dict):
        raise ConfigError("params.yaml: 'sources' must map dataset names to {openml_id: N}")
    return {str(name): _source(check_dataset_name(name, "sources"), entry) for name, entry in raw.items()}


def _source(name: str, entry: Any) -> SourceConfig:
    key = f"sources.{name}"
    if isinstance(entry, int) and not isinstance(entry, bool):
        entry = {"openml_id": entry}
    if not isinstance(entry, dict):
        raise ConfigError(f"params.yaml: '{key}' must be a mapping like {{openml_id: 37}} or "
                          f"{{path: {LOCAL_DIR}/mine.csv, target: label}}")
    overrides = _pretrain_overrides(f"{key}.pretrain", entry.get("pretrain"))
    source = check(SourceConfig, {**entry, "pretrain": overrides}, key)
    if (entry.get("openml_id") is None) == (entry.get("path") is None):  # a key left empty is not given
        raise ConfigError(f"params.yaml: '{key}' needs exactly one of 'openml_id' (an OpenML dataset) "
                          f"or 'path' (a local CSV, TSV, parquet, Excel or ARFF file)")
    if source.openml_id is not None:
        extra = [k for k, v in entry.items() if k not in ("openml_id", "pretrain") and v is not None]
        if extra:
            raise ConfigError(f"params.yaml: '{key}.{extra[0]}' applies only to local tables (with 'path')")
        return source
    path = source.path
    parts = Path(path).parts
    if Path(path).is_absolute() or ".." in parts or Path(*parts[:2]).as_posix() != LOCAL_DIR or len(parts) < 3:
        raise ConfigError(f"params.yaml: '{key}.path' must be a file under {LOCAL_DIR}/ (relative to the "
                          f"repository root, so DVC tracks it), got {path!r}")
    kind = local_format(path)
    if kind is None:
        ending = Path(path).suffix.lower()
        hint = {".xls": "an Excel 97-2003 workbook: save it as .xlsx (Excel Workbook) or CSV",
                ".xlsm": "a workbook with macros: save it as .xlsx (Excel Workbook) or CSV",
                ".ods": "an OpenDocument spreadsheet: save it as .xlsx or CSV",
                ".txt": "text: if it holds a table, name it .csv or .tsv as its fields are separated",
                ".dat": "text: if it holds a table, name it .csv or .tsv as its fields are separated",
                ".feather": "Arrow's format: write it as parquet (frame.to_parquet)",
                ".json": "JSON is not read: write the table as CSV or parquet"}.get(ending)
        raise ConfigError(f"params.yaml: '{key}.path' must end in .csv or .tsv (compressed or not: "
                          f"{', '.join(COMPRESSIONS)} after it), .parquet, .xlsx or .arff, got {path!r}"
                          + (f" ({hint})" if hint else ""))
    if source.target is None:
        raise ConfigError(f"params.yaml: '{key}.target' is missing: name the label column of {path}")
    both = [c for c in source.numeric if c in source.categorical]
    if both:
        raise ConfigError(f"params.yaml: '{key}.numeric' and '{key}.categorical' both list {both}; "
                          f"a column has one type")
    for option, formats, what in (("delimiter", ("csv", "tsv"), "a CSV file"),
                                  ("encoding", ("csv", "tsv", "arff"), "a CSV or ARFF file"),
                                  ("sheet", ("excel",), "an Excel file (.xlsx)"),
                                  ("header_row", ("csv", "tsv", "excel"), "a CSV or Excel file")):
        if entry.get(option) is not None and kind not in formats:
            raise ConfigError(f"params.yaml: '{key}.{option}' applies only to {what}, not {path!r}")
    if source.thousands == source.decimal:
        raise ConfigError(f"params.yaml: '{key}.thousands' and '{key}.decimal' are both {source.decimal!r}; "
                          f"they must differ")
    return source


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
                          f"datasets (set the top-level 'ratios')")
    unknown_key(key, raw, [f.name for f in dataclasses.fields(PretrainConfig)])
    # each key alone (its type and range); how the values go together is checked on the section
    # they join (Params.pretrain_for), not on the defaults
    return {name: getattr(check(PretrainConfig, {name: value}, key), name) for name, value in raw.items()}


def _section(cls: type) -> Any:
    return Annotated[cls, BeforeValidator(mapping_or_empty)]


@section
class AnalysisConfig:
    """The paper's two k-NN analyses (stage `analysis` in analyses/dvc.yaml, docs/analyses.md)."""

    # separation ratio of the target views (the paper's 0.2); 1 would leave no feature view
    ratio: Annotated[Float, rule(lambda v: 0 < v < 1, "must lie in (0, 1)")] = 0.2
    masks: Annotated[PositiveInt, at_most(10_000)] = 100  # random separations on batches (the paper's 100)
    # on the whole train split (not in the paper; O(rows^2) per mask: income ~20 s on 2 cores)
    split_masks: Annotated[PositiveInt, at_most(10_000)] = 10
    max_k: Annotated[PositiveInt, at_most(1000)] = 20  # neighbours inspected: k = 1 .. max_k (the paper does not say)
    batch_rows: PositiveInt = 1024  # rows per batch of the batch-level fraction (pretraining's batch size)
    consistency_k: Annotated[PositiveInt, at_most(1000)] = 10  # the label-consistency analysis's (the paper's 10)
    # draws the masks and the batches
    seed: Annotated[Int, rule(lambda v: 0 <= v <= SEED_MAX, f"must lie in [0, {SEED_MAX}]")] = 0

    def __post_init__(self):
        # a batch needs more rows than the neighbours inspected, or no batch is used
        if self.batch_rows <= self.max_k:
            raise ConfigError(f"params.yaml: 'analysis.batch_rows' ({self.batch_rows}) must exceed 'analysis.max_k' "
                              f"({self.max_k}): a batch of at most k rows has no k nearest neighbours besides a row")


def _gpus(value: Any) -> Any:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
        raise fail(f"must be null (automatic) or a number of GPUs > 0, got {value!r}")
    return value


@section
class ExecutorConfig:
    """Where the independent pieces of the pretrain, evaluate and baseline stages run (docs/scale-out.md):
    ``local`` (this machine's processes) or ``ray`` (tasks on a Ray cluster). No stage lists it as
    a DVC param: a stage's outputs do not depend on where its pieces ran."""

    kind: choice("local", "ray") = "local"
    # ray: the cluster to join ('ray://host:10001', 'host:6379', 'auto'); null: $RAY_ADDRESS when
    # set, else a local Ray instance started for the stage
    address: Str | None = None
    cpus_per_task: PositiveInt = 1  # ray: CPUs a task asks for, and its torch threads
    # ray: GPUs a task asks for; null = 1 when the cluster has GPUs and pretrain.device is not cpu, else 0
    gpus_per_task: Annotated[float | None, BeforeValidator(_gpus)] = None
    tasks: _count("as many as the cluster runs at once") = 0  # ray: tasks a stage's seeds are split into
    local_cpus: _count("all cores") = 0  # ray without a cluster: CPUs of the local instance
    # ray: times Ray reruns a task whose worker process or node died (a lost spot node, an OOM kill);
    # a task that raised is never rerun (its error is the stage's). A rerun gives the same result.
    retries: _count("none") = 0


@section
class Params:
    seeds: Annotated[Ints, AfterValidator(_seeds)]
    datasets: Annotated[tuple[str, ...], BeforeValidator(_datasets)]
    ratios: Ratios  # the separation ratios: one encoder (and pretrain stage) per entry, ensembled
    sources: Annotated[dict[str, SourceConfig], BeforeValidator(_sources)]
    fetch: _section(FetchConfig) = field(default_factory=FetchConfig)
    split: _section(SplitConfig) = field(default_factory=SplitConfig)
    pretrain: _section(PretrainConfig) = field(default_factory=PretrainConfig)
    evaluate: _section(EvaluateConfig) = field(default_factory=EvaluateConfig)
    baselines: Annotated[BaselinesConfig, BeforeValidator(_baselines)] = field(default_factory=BaselinesConfig)
    analysis: _section(AnalysisConfig) = field(default_factory=AnalysisConfig)
    executor: _section(ExecutorConfig) = field(default_factory=ExecutorConfig)
    # read and checked by seba.theorem (its stage needs nothing else); kept here as given
    theorem: Annotated[dict, BeforeValidator(mapping_or_empty)] = field(default_factory=dict)

    def __post_init__(self):
        for name in self.datasets:
            if name not in self.sources:
                close = difflib.get_close_matches(name, list(self.sources), n=1)
                raise ConfigError(f"params.yaml: dataset '{name}' is listed in 'datasets' but has no entry in "
                                  f"'sources'" + (f" (did you mean '{close[0]}'?)" if close else ""))
        for name in self.datasets:
            self.pretrain_for(name)  # a dataset's own values fit the section's
        if self.evaluate.head == "finetune":
            for name in self.datasets:
                if self.pretrain_for(name).encoder != "mlp":
                    raise ConfigError(f"params.yaml: 'evaluate.head' finetune needs the MLP encoder, but dataset "
                                      f"'{name}' has {self.pretrain_key(name, 'encoder')} "
                                      f"{self.pretrain_for(name).encoder}")

    def pretrain_key(self, dataset: str, key: str) -> str:
        """Where a dataset's `pretrain` value ``key`` comes from: 'sources.<dataset>.pretrain.<key>'
        when the dataset sets its own, else 'pretrain.<key>'."""
        source = self.sources.get(dataset)
        return f"sources.{dataset}.pretrain.{key}" if source is not None and key in source.pretrain else f"pretrain.{key}"

    def pretrain_for(self, dataset: str) -> PretrainConfig:
        """The `pretrain` settings one dataset trains with: the section, with the dataset's own
        values from ``sources.<dataset>.pretrain`` over it."""
        source = self.sources.get(dataset)
        if source is None or not source.pretrain:
            return self.pretrain
        try:
            return dataclasses.replace(self.pretrain, **source.pretrain)
        except pydantic.ValidationError as exc:  # a check of how the values go together
            causes = [(e.get("ctx") or {}).get("error") for e in exc.errors()]
            detail = next((str(c).removeprefix("params.yaml: ") for c in causes if isinstance(c, ConfigError)),
                          exc.errors()[0]["msg"])
            given = ", ".join(f"{k}: {v}" for k, v in source.pretrain.items())
            raise ConfigError(f"params.yaml: dataset '{dataset}' trains with the 'pretrain' section and its own "
                              f"values 'sources.{dataset}.pretrain' ({given}), which do not go together: "
                              f"{detail}") from None


def moved_ratios(raw: dict) -> None:
    """The separation ratios are the top-level ``ratios`` (a key of their own, so that the pretrain
    stages can list the `pretrain` section whole and adding a ratio still trains only the new one):
    a ConfigError for a params file that keeps them in the section."""
    if isinstance(raw.get("pretrain"), dict) and "ratios" in raw["pretrain"]:
        value = raw["pretrain"]["ratios"]
        raise ConfigError(f"params.yaml: 'pretrain.ratios' is now the top-level key 'ratios': move it there "
                          f"(`ratios: {value}` beside `seeds` and `datasets`; with DVC, "
                          f"`dvc exp run -S 'ratios=[...]'`)")


def parse_params(raw: Any) -> Params:
    """Validate a parsed params.yaml and return typed params (raises ConfigError)."""
    if not isinstance(raw, dict):
        raise ConfigError("params.yaml must be a mapping at the top level")
    moved_ratios(raw)
    return check(Params, raw, "")


class ParamsLoader(yaml.SafeLoader):
    """YAML as DVC reads params.yaml (ruamel, YAML 1.2), where PyYAML (YAML 1.1) differs: a key
    given twice in one mapping is an error (PyYAML keeps the last, silently dropping the first
    section), and plain scalars resolve as YAML 1.2 resolves them: ``010`` is 10 (to PyYAML, 8),
    ``0o10`` is 8, ``yes`` / ``no`` / ``on`` / ``off`` are text (to PyYAML, booleans), ``1:30`` is
    text (to PyYAML, 90), ``1e-4`` and ``-.5`` are numbers (to PyYAML, text)
    (tests/test_config.py compares the two readers)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _YAML + "merge":  # `<<: *anchor`: PyYAML merges it (an explicit key wins)
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ConfigError(f"params.yaml: the key '{key}' appears twice in one mapping (lines {seen[key]} and "
                                  f"{line}); DVC refuses such a file: keep one")
            seen[key] = line
        return super().construct_mapping(node, deep)


_YAML = "tag:yaml.org,2002:"
# PyYAML's resolvers but those of booleans, integers and floats, which follow YAML 1.2 below
ParamsLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_YAML + "bool", _YAML + "int", _YAML + "float")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
ParamsLoader.add_implicit_resolver(_YAML + "bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
ParamsLoader.add_implicit_resolver(
    _YAML + "int", re.compile(r"^[-+]?(?:0b[01_]+|0o[0-7_]+|0x[0-9a-fA-F_]+|_*[0-9][0-9_]*)$"), list("-+0123456789"))
ParamsLoader.add_implicit_resolver(
    _YAML + "float", re.compile(r"""^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                                    |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
                                    |[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?  # (here the exponent's sign is required)
                                    |[-+]?\.(?:inf|Inf|INF)
                                    |\.(?:nan|NaN|NAN))$""", re.X), list("-+.0123456789"))


def _yaml12_int(loader: ParamsLoader, node) -> int:
    """A YAML 1.2 integer: decimal even with leading zeros; 0b, 0o and 0x prefixes; '_' ignored."""
    text = loader.construct_scalar(node).replace("_", "")
    sign = -1 if text.startswith("-") else 1
    text = text.lstrip("+-")
    return sign * (int(text, 0) if text[:2].lower() in ("0b", "0o", "0x") else int(text, 10))


ParamsLoader.add_constructor(_YAML + "int", _yaml12_int)


class ParamsDumper(yaml.SafeDumper):
    """YAML that ``ParamsLoader`` (and DVC) read back as the values written: PyYAML quotes the
    text that YAML 1.1 would take for a number or a boolean, but writes ``1e3``, ``0o10`` or
    ``-.5`` plain, which YAML 1.2 reads as numbers; such text is quoted here."""


def _text(dumper: ParamsDumper, value: str):
    try:
        plain = yaml.load(value, Loader=ParamsLoader) == value  # noqa: S506 (ParamsLoader is a SafeLoader)
    except (yaml.YAMLError, ConfigError):
        plain = False
    node = dumper.represent_str(value)
    if not plain and node.style is None and "\n" not in value:
        node.style = "'"
    return node


ParamsDumper.add_representer(str, _text)


def dump_params(params: Any) -> str:
    """``params`` as params.yaml text (keys in their order) that DVC and the stages read back unchanged."""
    return yaml.dump(params, Dumper=ParamsDumper, sort_keys=False, allow_unicode=True)


def read_params_file(path: str | Path = "params.yaml") -> Any:
    """The parsed YAML of a params file (``ParamsLoader``); a missing or unparsable one is a ConfigError."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path} not found (run from the repository root)")
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=ParamsLoader)
    except UnicodeDecodeError as exc:
        data = path.read_bytes()
        line = data[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{path} is not UTF-8 text: byte 0x{data[exc.start]:02x} on line {line} (DVC reads "
                          f"params.yaml as UTF-8: save it so)") from None
    except ConfigError:  # a key given twice (ParamsLoader)
        raise
    except (yaml.YAMLError, ValueError, TypeError, KeyError) as exc:  # (ValueError: e.g. a number like 0x_)
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None


# keys dvc.yaml expands its stages from (`foreach` / `matrix`): without them DVC cannot even read it
DVC_EXPANDS = {("ratios",): "one pretrain stage per ratio; the paper's: [0.1, 0.2, 0.3, 0.4, 0.5]",
               ("baselines", "methods"): "one baseline stage per method; [] runs none"}


def load_params(path: str | Path = "params.yaml") -> Params:
    raw = read_params_file(path)
    if isinstance(raw, dict):
        moved_ratios(raw)
        for keys, what in DVC_EXPANDS.items():
            node = raw
            for key in keys[:-1]:
                node = node.get(key)
                if not isinstance(node, dict):
                    break
            if not isinstance(node, dict) or keys[-1] not in node:
                raise ConfigError(f"params.yaml: '{'.'.join(keys)}' is missing; dvc.yaml builds its stages from "
                                  f"it ({what}): add it")
    params = parse_params(raw)
    for method in params.baselines.methods:  # known methods, all of them (parse_params checked)
        if method not in raw["baselines"]:
            raise ConfigError(f"params.yaml: 'baselines.{method}' is missing; a listed method's stages read its "
                              f"section (DVC refuses the run without it): add `{method}: {{}}` for its defaults")
    return params


def params_for_dataset(name: str, path: str | Path = "params.yaml") -> Params:
    """params.yaml, checked, for a stage of dataset ``name`` (its ``--dataset``): a ConfigError
    naming the datasets ``sources`` has where it lacks ``name``."""
    params = load_params(path)
    if name not in params.sources:
        raise ConfigError(f"dataset '{name}' has no entry in params.yaml 'sources' (it has: "
                          f"{', '.join(params.sources)})")
    return params
