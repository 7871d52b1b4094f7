"""Every path the pipeline reads or writes, in one place, each under the repository root ``root``.

dvc.yaml spells the same paths literally (DVC needs them there); tests/test_paths.py checks that
the two agree.
"""

from pathlib import Path

LOCAL = "data/local"  # the user's own tables (params.yaml `sources.<name>.path`)
SNAPSHOT = "data/snapshot"  # the offline copy of the OpenML tables
OPENML_CACHE = "data/openml_cache"  # the openml client's cache (not tracked)
VALIDATED = "data/validated.txt"  # the validate stage's stamp
PAPER_RESULTS = "data/reference/paper_results.csv"
PAPER_ABLATIONS = "data/reference/paper_ablations.csv"  # every number of the paper's ablation tables (seba.ablations)
REPORTS = "reports"
TRACKING = "data/tracking"  # stage runs waiting for the `track` stage (seba.core.tracking)


RANDOM_RATIO = "random"  # a `ratios` entry: a ratio drawn per batch (pretrain.random_ratio_range)


def ratio_tag(ratio: float | str) -> str:
    """The directory / member name of a ratio: 0.1 -> 'r0.1', 'random' -> 'rrandom'."""
    return f"r{ratio}" if isinstance(ratio, str) else f"r{ratio:g}"


def parse_ratio(text: str) -> float | str:
    """A stage's ``--ratio`` argument: a number, or 'random'."""
    return text if text == RANDOM_RATIO else float(text)


def raw_table(root: Path, dataset: str) -> Path:
    """The fetched table, as fetched."""
    return root / "data" / "raw" / f"{dataset}.parquet"


def raw_info(root: Path, dataset: str) -> Path:
    """Where the fetched table came from, and its shape."""
    return root / "data" / "raw" / f"{dataset}.json"


def own_pretrain(root: Path, dataset: str) -> Path:
    """The dataset's own `pretrain` values (``sources.<name>.pretrain``) as its fetch stage read
    them: its pretrain stages depend on this file, not on the whole source entry, so an edit of how
    the table is read reruns pretraining only when the table or these values change."""
    return root / "data" / "raw" / f"{dataset}.pretrain.json"


def processed(root: Path, dataset: str) -> Path:
    """The encoded table (seba.core.data.EncodedTable)."""
    return root / "data" / "processed" / f"{dataset}.npz"


def schema_report(root: Path, dataset: str) -> Path:
    """What became of every column of the table."""
    return root / "data" / "processed" / f"{dataset}.schema.json"


def splits(root: Path, dataset: str) -> Path:
    """Every seed's train / validation / test split."""
    return root / "data" / "splits" / f"{dataset}.npz"


def models(root: Path, dataset: str, ratio: float | str) -> Path:
    """The encoders of one dataset and separation ratio (one checkpoint per seed, and the log)."""
    return root / "data" / "models" / dataset / ratio_tag(ratio)


def checkpoint(root: Path, dataset: str, ratio: float | str, seed: int) -> Path:
    return models(root, dataset, ratio) / f"seed{seed}.pt"


def training_log(root: Path, dataset: str, ratio: float | str) -> Path:
    return models(root, dataset, ratio) / "log.json"


def episodes(root: Path, dataset: str, method: str | None = None) -> Path:
    """Every episode's scores: SeBA's (``method`` None) or one baseline's."""
    folder = root / REPORTS / "episodes"
    return (folder if method is None else folder / method) / f"{dataset}.csv"


def metrics(root: Path, dataset: str) -> Path:
    """SeBA's summary metrics of one dataset."""
    return root / REPORTS / "metrics" / f"{dataset}.json"


def report(root: Path, name: str) -> Path:
    """One of the aggregate stage's outputs: results.md, results.csv, comparison.csv,
    summary.json, params_used.yaml, figures (a folder)."""
    return root / REPORTS / name


def tracking(root: Path) -> Path:
    """The stage runs waiting for the `track` stage to push them into MLflow (seba.core.tracking)."""
    return root / TRACKING


def ablation_reports(root: Path) -> Path:
    """The ablation report's tables, figures and experiment record (``python -m seba.ablations collect``;
    the report itself is ``report(root, "ablations.md")``)."""
    return root / REPORTS / "ablations"


def analysis_reports(root: Path) -> Path:
    """The k-NN analyses' outputs (stage `analysis` in analyses/dvc.yaml)."""
    return root / REPORTS / "analysis"
