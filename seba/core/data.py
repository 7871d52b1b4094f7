"""Data: OpenML and offline-snapshot sources, type-aware encoding and its schema report,
stratified splits, scaling. Every source gives the raw table format (``seba.core.raw``: the
label in ``class``, nominal features as pandas categories in the order the source declares them,
numeric features as float64, missing values as NaN); the user's own tables are read into it by
``seba.core.own_table`` (column types inferred by fixed, reported rules: docs/own-table.md).
"""

from __future__ import annotations

import contextlib
import json
import math
import pickle
import shutil
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from seba.core import paths
from seba.core.errors import ConfigError, DataError
from seba.core.own_table import REPORTED, load_local_table
from seba.core.raw import FEATURES_NEEDED, FLOAT32_MAX, LABEL, SCHEMA_ATTR, sha256_file
from seba.core.runtime import atomic_path, lazy_module, log

pd = lazy_module("pandas")  # pretraining reads encoded tables and splits only: no pandas import


# --------------------------------------------------------------------------- sources


def read_manifest(snapshot_dir: Path) -> dict[str, dict]:
    """The offline snapshot's ``openml_ids`` entries ({id: {file, sha256, ...}}); a missing or
    malformed manifest is a DataError naming it."""
    path = snapshot_dir / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"snapshot manifest {path} cannot be read: {exc}") from None
    entries = manifest.get("openml_ids") if isinstance(manifest, dict) else None
    if not isinstance(entries, dict) or not all(
            isinstance(e, dict) and isinstance(e.get("file"), str) and isinstance(e.get("sha256"), str)
            and Path(e["file"]).name == e["file"] for e in entries.values()):
        raise DataError(f"snapshot manifest {path} is malformed: it needs 'openml_ids' mapping each id to "
                        f"{{file: <name in {snapshot_dir.name}/>, sha256: ...}}")
    return entries


def supplied_copy_missing(entry: dict, snapshot_dir: Path) -> bool:
    """A manifest entry of a table not vendored in the repository (``vendored: false``) whose copy
    the user has not put in the snapshot folder."""
    return entry.get("vendored", True) is False and not (snapshot_dir / entry["file"]).exists()


def load_snapshot(openml_id: int, snapshot_dir: Path) -> tuple[pd.DataFrame, dict]:
    """Read the vendored copy of an OpenML table after checking its sha256 against the manifest."""
    path, digest = verified_snapshot(openml_id, snapshot_dir)
    frame = pd.read_parquet(path)
    info = {"source": "snapshot", "file": str(path.relative_to(snapshot_dir.parent.parent)),
            "sha256": digest}
    return frame, info


def verified_snapshot(openml_id: int, snapshot_dir: Path) -> tuple[Path, str]:
    """The snapshot file of an OpenML table and its sha256, checked against the manifest: a
    DataError naming the problem (not in the snapshot, a copy not supplied, missing, damaged)."""
    manifest = read_manifest(snapshot_dir)
    entry = manifest.get(str(openml_id))
    if entry is None:
        known = ", ".join(f"{v['file'].removesuffix('.parquet')} ({k})" for k, v in manifest.items())
        raise DataError(f"OpenML id {openml_id} is not in the offline snapshot (it has: {known})")
    path = snapshot_dir / entry["file"]
    if supplied_copy_missing(entry, snapshot_dir):
        raise DataError(
            f"{entry.get('dataset', entry['file'])} (OpenML {openml_id}) is not in the repository "
            f"({entry.get('size_mb', '?')} MB): with OpenML reachable, fetch downloads it; offline, put the verified "
            f"copy (sha256 {entry['sha256']}) at {path}, or any copy of the table as your own: "
            f"sources.<name>: {{path: data/local/{entry['file']}, target: class}} (docs/own-table.md)")
    if not path.exists():
        raise DataError(f"snapshot file {path} is missing")
    digest = sha256_file(path)
    if digest != entry["sha256"]:
        raise DataError(
            f"snapshot file {path} fails verification: sha256 {digest} != manifest {entry['sha256']}"
            + ("" if entry.get("vendored", True) is False else
               f" (`git checkout -- {paths.SNAPSHOT}/{entry['file']}` restores the committed copy)")
        )
    return path, digest


@contextlib.contextmanager
def reading(path: Path, stage: str):
    """Reading ``path``, a file that ``stage`` of the pipeline wrote: a file that cannot be read (cut
    short, damaged, not what the stage writes) is a DataError naming it and the stage to rerun,
    not a traceback from the reader."""
    try:
        yield
    except DataError:
        raise
    except FileNotFoundError:
        raise DataError(f"{path} does not exist: the {stage} stage writes it (`dvc repro {stage}`)") from None
    except PermissionError as exc:
        raise DataError(f"{path} cannot be read: {exc.strerror or 'permission denied'} (its owner or mode)") from None
    except (OSError, EOFError, ValueError, KeyError, TypeError, RuntimeError, zipfile.BadZipFile,
            pickle.UnpicklingError) as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise DataError(f"{path} cannot be read ({type(exc).__name__}{': ' + first if first else ''}): damaged or "
                        f"cut short; rerun {stage} (`dvc repro {stage}`)") from None


def _openml_dataset_cache(cache_dir: Path, openml_id: int) -> list[Path]:
    """Folders in which openml keeps one dataset (it deletes them on a failed download)."""
    return [p for p in cache_dir.glob(f"**/datasets/{openml_id}") if p.is_dir()]


def load_openml(openml_id: int, cache_dir: Path, retries: int) -> tuple[pd.DataFrame, dict]:
    """Download (or read from the openml cache) one dataset with the real openml client.

    openml removes a dataset's whole cache folder when any download inside ``get_dataset``
    fails; we back the folder up first and put it back on failure, so an earlier good cache
    survives a cut connection.
    """
    import openml

    cache_dir.mkdir(parents=True, exist_ok=True)
    openml.config.set_root_cache_directory(str(cache_dir))
    openml.config.connection_n_retries = retries
    backup_root = cache_dir / ".backup"
    backups = []
    for folder in _openml_dataset_cache(cache_dir, openml_id):
        if backup_root in folder.parents:
            continue
        target = backup_root / folder.relative_to(cache_dir)
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(folder, target)
        backups.append((folder, target))
    try:
        dataset = openml.datasets.get_dataset(
            openml_id, download_data=True, download_qualities=False,
            download_features_meta_data=False,
        )
        features, target, categorical, names = dataset.get_data(
            target=dataset.default_target_attribute, dataset_format="dataframe"
        )
    except Exception:
        for folder, target_copy in backups:
            if folder.exists():
                shutil.rmtree(folder)
            shutil.copytree(target_copy, folder)
        raise
    finally:
        for _, target_copy in backups:
            shutil.rmtree(target_copy, ignore_errors=True)
    frame = features.copy()
    for column, is_categorical in zip(names, categorical):
        if is_categorical:
            frame[column] = frame[column].astype("category")
        else:
            frame[column] = frame[column].astype("float64")
    if LABEL in frame.columns:  # a feature called like the label column: a free name, as for a local table
        free = next(n for n in (f"{LABEL}_feature", *(f"{LABEL}_feature_{i}" for i in range(2, frame.shape[1] + 2)))
                    if n not in frame.columns)
        frame = frame.rename(columns={LABEL: free})
        log(f"[fetch] OpenML {openml_id}: feature column '{LABEL}' renamed to '{free}'")
    frame[LABEL] = pd.Series(target, index=frame.index).astype("category")
    info = {"source": "openml", "openml_name": dataset.name,
            "openml_version": int(getattr(dataset, "version", 0) or 0),
            "openml_target": dataset.default_target_attribute}
    return frame.reset_index(drop=True), info


def fetch_table(name: str, openml_id: int | None, source: str, root: Path, retries: int = 1,
                local=None) -> tuple[pd.DataFrame, dict]:
    """Return the raw table of one dataset and a record of where it came from.

    ``source='auto'`` tries OpenML and falls back to the verified offline snapshot; ``local``
    (a SourceConfig with a path) reads the user's own file instead.
    """
    if local is not None:
        frame, info = load_local_table(name, local, root)
        return _describe(name, frame, info, None)
    snapshot_dir = root / paths.SNAPSHOT
    cache_dir = root / paths.OPENML_CACHE
    info: dict
    if source in ("auto", "openml"):
        try:
            frame, info = load_openml(openml_id, cache_dir, retries)
        except Exception as exc:  # the openml client raises many kinds; all mean "not available"
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            if source == "openml":
                raise DataError(f"dataset '{name}': OpenML id {openml_id} could not be fetched "
                                f"({reason}); set fetch.source: snapshot to use the offline copy") from None
            log(f"[fetch {name}] OpenML unreachable ({reason}); using the offline snapshot")
            try:
                frame, info = load_snapshot(openml_id, snapshot_dir)
            except DataError as exc:
                raise DataError(f"dataset '{name}': OpenML could not be reached ({reason}), and {exc}") from None
            info["openml_error"] = reason
    else:
        try:
            frame, info = load_snapshot(openml_id, snapshot_dir)
        except DataError as exc:
            raise DataError(f"dataset '{name}': {exc}") from None
    unlabeled = int(frame[LABEL].isna().sum()) if LABEL in frame.columns else 0
    if unlabeled:  # as for a local table: counted in the fetch record and the schema report
        frame = frame[frame[LABEL].notna()].reset_index(drop=True)
        frame.attrs[SCHEMA_ATTR] = json.dumps({"rows_without_target": unlabeled})
        info["dropped_rows"] = unlabeled
        log(f"[fetch {name}] dropped {unlabeled} rows without a target")
    return _describe(name, frame, info, openml_id)


def _describe(name: str, frame: pd.DataFrame, info: dict, openml_id: int | None) -> tuple[pd.DataFrame, dict]:
    check_raw_table(name, frame)
    n_cat = sum(isinstance(frame[c].dtype, pd.CategoricalDtype) for c in frame.columns if c != LABEL)
    info.update({
        "dataset": name, "openml_id": openml_id, "rows": int(len(frame)),
        "features": int(frame.shape[1] - 1), "categorical_features": int(n_cat),
        "numeric_features": int(frame.shape[1] - 1 - n_cat),
        "classes": int(frame[LABEL].nunique()), "missing_cells": int(frame.drop(columns=LABEL).isna().sum().sum()),
    })
    return frame, info


def check_raw_table(name: str, frame: pd.DataFrame) -> None:
    if LABEL not in frame.columns:
        raise DataError(f"dataset '{name}': no '{LABEL}' column")
    if frame.shape[1] < 3:
        raise DataError(f"dataset '{name}': {'no feature columns' if frame.shape[1] < 2 else 'one feature column'}; "
                        f"{FEATURES_NEEDED}")
    if frame[LABEL].nunique() < 2:
        raise DataError(f"dataset '{name}': the target has fewer than two classes")
    counts = frame[LABEL].value_counts()
    if counts.min() < 3:
        raise DataError(_too_few_rows(f"dataset '{name}'", counts))


def _too_few_rows(where: str, counts: pd.Series) -> str:
    """The error for classes (``counts``: rows per class) of fewer than 3 rows: the smallest, and
    how many such classes there are when it is not the only one."""
    small = int((counts < 3).sum())
    others = f" ({small} of the {len(counts)} classes have fewer than 3)" if small > 1 else ""
    return (f"{where}: class '{counts.idxmin()}' has {int(counts.min())} row(s){others}; a stratified train / "
            f"validation / test split needs at least 3 per class")


# --------------------------------------------------------------------------- encoding


@dataclass
class EncodedTable:
    """A table after type-aware encoding, before scaling (scaling depends on the seed's split).

    ``groups[j]`` is the original column of encoded column ``j``: a one-hot block shares one
    group, so a mask over groups never splits a categorical variable.
    """

    X: np.ndarray  # float32 [rows, encoded columns]; numerics raw (NaN kept), one-hot blocks 0/1
    y: np.ndarray  # int64 [rows]
    groups: np.ndarray  # int64 [encoded columns]
    numeric: np.ndarray  # bool [encoded columns]
    columns: np.ndarray  # str [original columns]
    encoded_names: np.ndarray  # str [encoded columns]
    classes: np.ndarray  # str [classes]

    def save(self, path: Path) -> None:
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, **self.__dict__)

    @classmethod
    def load(cls, path: Path) -> "EncodedTable":
        if not Path(path).is_file():
            raise DataError(f"{path} does not exist: the preprocess stage writes it (`dvc repro preprocess@"
                            f"{Path(path).stem}`, with {Path(path).stem} in params.yaml's `datasets`)")
        with reading(path, f"preprocess@{Path(path).stem}"), np.load(path, allow_pickle=False) as z:
            return cls(**{k: z[k] for k in z.files})

    @property
    def n_groups(self) -> int:
        return int(self.groups.max()) + 1


def encode_table(frame: pd.DataFrame, notes: dict | None = None) -> EncodedTable:
    """One-hot every categorical column (over its declared categories), keep numerics raw.

    Columns are encoded in their original order, so the group of every encoded column is the
    index of the original column it came from. A missing categorical value becomes an all-zero
    block; a missing numeric value stays NaN until scaling turns it into the train mean (0);
    an infinite value, or one beyond the float32 range, is missing too. ``notes`` (a dict), when
    given, receives per column what was converted or dropped here.
    """
    frame = frame[frame[LABEL].notna()].reset_index(drop=True)
    label = frame[LABEL].astype("category").cat.remove_unused_categories()
    features = [c for c in frame.columns if c != LABEL]
    blocks, groups, numeric, names, kept = [], [], [], [], []
    for column in features:
        series = frame[column]
        index = len(kept)  # groups are numbered densely over the columns kept
        if isinstance(series.dtype, pd.CategoricalDtype) or series.dtype == object or series.dtype == bool:
            cat = series.astype("category")
            codes = cat.cat.codes.to_numpy()
            n_cat = len(cat.cat.categories)
            if n_cat == 0:  # no value at all: nothing to encode
                if notes is not None:
                    notes[str(column)] = {"dropped": "no value in any row"}
                continue
            block = np.zeros((len(frame), n_cat), dtype=np.float32)
            present = codes >= 0
            block[np.nonzero(present)[0], codes[present]] = 1.0
            blocks.append(block)
            groups += [index] * n_cat
            numeric += [False] * n_cat
            names += [f"{column}={c}" for c in cat.cat.categories]
        else:
            values = pd.to_numeric(series, errors="coerce").to_numpy(np.float64)
            with np.errstate(invalid="ignore"):
                unusable = np.isinf(values) | (np.abs(values) > FLOAT32_MAX)
            if unusable.any():
                values = np.where(unusable, np.nan, values)
                if notes is not None:
                    notes.setdefault(str(column), {})["non_finite"] = int(unusable.sum())
            stored, precision = _float32_column(values)
            if precision and notes is not None:
                notes.setdefault(str(column), {})["float32"] = precision
            blocks.append(stored[:, None])
            groups.append(index)
            numeric.append(True)
            names.append(str(column))
        kept.append(column)
    if not kept:
        raise DataError("no usable feature column (all are empty)")
    return EncodedTable(
        X=np.concatenate(blocks, axis=1),
        y=label.cat.codes.to_numpy().astype(np.int64),
        groups=np.asarray(groups, dtype=np.int64),
        numeric=np.asarray(numeric, dtype=bool),
        columns=np.asarray([str(c) for c in kept]),
        encoded_names=np.asarray(names),
        classes=np.asarray([str(c) for c in label.cat.categories]),
    )


def _float32_column(values: np.ndarray) -> tuple[np.ndarray, dict | None]:
    """A numeric column (float64, NaN for missing) as the encoded table's float32, and what float32
    did to it: None when it keeps every distinct value apart (every benchmark table); else, for
    values too close for their magnitude (100000001 and 100000002 are one float32), the column
    stored less the midpoint of its range when that keeps more of them apart (standardisation
    removes the shift), with the counts of distinct values: the file's, plain float32's and
    stored; ``merged``: the first two of the file's values that the stored column still makes one."""
    stored = values.astype(np.float32)
    finite = np.isfinite(values)
    if np.array_equal(stored[finite], values[finite]):  # exact (integers, most files): nothing to count
        return stored, None
    distinct = np.unique(values[finite])
    plain = distinct.astype(np.float32)
    if len(distinct) < 2 or np.diff(plain).all():
        return stored, None
    offset = float((distinct[0] + distinct[-1]) / 2)
    shifted = (distinct - offset).astype(np.float32)
    apart = int(len(np.unique(plain)))
    use_offset = len(np.unique(shifted)) > apart
    final = shifted if use_offset else plain
    record = {"offset": offset if use_offset else None, "distinct": int(len(distinct)), "distinct_float32": apart,
              "distinct_stored": int(len(np.unique(final)))}
    same = np.flatnonzero(np.diff(final) == 0)
    if len(same):
        record["merged"] = [float(distinct[same[0]]), float(distinct[same[0] + 1])]
    return ((values - offset).astype(np.float32) if use_offset else stored), record


def scale(table: EncodedTable, train_idx: np.ndarray, normalise: bool = True) -> np.ndarray:
    """Standardise numeric columns with statistics of ``train_idx`` only; NaN -> 0 (train mean).

    One-hot columns are left as they are. Constant numeric columns are centred, not divided; a
    numeric column with no finite train value is 0 in every row (the train mean, as a missing value).
    The result is always finite: a column whose float32 statistics are not (an infinite value,
    or magnitudes whose squares overflow float32) is standardised in float64 over its finite
    values, and its infinite values count as missing.

    ``normalise=False`` (the ablation ``pretrain.normalise: false``) keeps the numeric values as
    they are; a missing or infinite value becomes the mean of the column's finite train values
    (the value it takes when standardised), 0 for a column with none.
    """
    if not normalise:
        return _raw(table, train_idx)
    X = table.X.astype(np.float32, copy=True)
    if table.numeric.any() and len(train_idx) and _standardise_finite(X, table.numeric, train_idx):
        return X
    return _standardise_general(X, table, train_idx)


def _standardise_general(X: np.ndarray, table: EncodedTable, train_idx: np.ndarray) -> np.ndarray:
    """``scale`` for any values: NaN-aware statistics, wide columns in float64, NaN and infinities 0."""
    if table.numeric.any():
        cols = np.nonzero(table.numeric)[0]
        train = X[np.ix_(train_idx, cols)]
        with np.errstate(invalid="ignore", over="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a column without a train value: handled below
            mean = np.nanmean(train, axis=0) if len(train) else np.zeros(len(cols))
            std = np.nanstd(train, axis=0) if len(train) else np.ones(len(cols))
            wide = np.isinf(train).any(0) | (np.isfinite(train).any(0) & ~(np.isfinite(mean) & np.isfinite(std)))
        mean = np.nan_to_num(mean, nan=0.0)
        std = np.where(np.isfinite(std) & (std > 0), std, 1.0)
        with np.errstate(invalid="ignore", over="ignore"):
            X[:, cols] = (X[:, cols] - mean) / std
        for j in cols[wide]:
            X[:, j] = _standardise_wide(table.X[:, j], train_idx)
        X[:, cols[~np.isfinite(train).any(0)]] = 0.0  # no train statistics: every row at the (unknown) train mean
    return np.nan_to_num(X, nan=0.0, posinf=0.0, neginf=0.0).astype(np.float32)


def _standardise_finite(X: np.ndarray, numeric: np.ndarray, train_idx: np.ndarray) -> bool:
    """``scale``'s arithmetic, in place and without its NaN handling, for numeric columns that
    hold no missing or infinite value (every benchmark table; on Fashion-MNIST's 70,000 x 784 it
    is 7.6 times as fast, benchmarks/scale_speed.py): the same float32 sums in the same order as
    ``np.nanmean`` / ``np.nanstd``, so the same bits. False (``X`` untouched) where the general
    path is needed: a non-finite value, or statistics that overflow float32."""
    every = bool(numeric.all())
    cols = None if every else np.nonzero(numeric)[0]
    block = X if every else X[:, cols]
    if not np.isfinite(block).all():
        return False
    train = block[train_idx]
    with np.errstate(invalid="ignore", over="ignore"):
        mean = train.mean(axis=0)
        std = train.std(axis=0)
    del train
    if not (np.isfinite(mean).all() and np.isfinite(std).all()):
        return False
    std = np.where(std > 0, std, 1.0)
    with np.errstate(invalid="ignore", over="ignore"):
        if every:
            X -= mean
            X /= std
        else:
            X[:, cols] = (block - mean) / std
    if not np.isfinite(X).all():  # a difference or quotient beyond float32: 0, as np.nan_to_num in scale
        np.nan_to_num(X, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
    return True


def _raw(table: EncodedTable, train_idx: np.ndarray) -> np.ndarray:
    """Numeric columns unscaled, missing and infinite values replaced by the train mean."""
    X = table.X.astype(np.float64, copy=True)
    X[~np.isfinite(X)] = np.nan
    for j in np.nonzero(table.numeric)[0]:
        train = X[train_idx, j]
        train = train[np.isfinite(train)]
        mean = float(train.mean()) if len(train) else 0.0
        column = X[:, j]
        column[np.isnan(column)] = mean if np.isfinite(mean) else 0.0
    with np.errstate(over="ignore"):
        X = X.astype(np.float32)
    return np.nan_to_num(X, nan=0.0, posinf=0.0, neginf=0.0)


def _standardise_wide(column: np.ndarray, train_idx: np.ndarray) -> np.ndarray:
    """One column standardised in float64 with the statistics of its finite train values;
    non-finite values become NaN (missing)."""
    values = column.astype(np.float64)
    values[~np.isfinite(values)] = np.nan
    train = values[train_idx]
    train = train[np.isfinite(train)]
    mean = float(train.mean()) if len(train) else 0.0
    std = float(train.std()) if len(train) else 1.0
    std = std if np.isfinite(std) and std > 0 else 1.0
    return ((values - mean) / std).astype(np.float32)


def read_raw_table(root: Path, name: str) -> pd.DataFrame:
    """The fetch stage's table of dataset ``name`` (``data/raw/<name>.parquet``)."""
    path = paths.raw_table(root, name)
    if not path.is_file():
        raise DataError(f"{path} does not exist: the fetch stage writes it (`dvc repro fetch@{name}`, "
                        f"with {name} in params.yaml's `datasets`)")
    with reading(path, f"fetch@{name}"):
        return pd.read_parquet(path)


def log_schema(name: str, table: EncodedTable, report: dict, report_path: Path) -> None:
    """The preprocess stage's lines: the encoded table's shape, the schema summary, its warnings."""
    log(f"[preprocess {name}] {table.X.shape[0]} rows, {len(table.columns)} columns -> "
        f"{table.X.shape[1]} encoded ({int(table.numeric.sum())} numeric), {len(table.classes)} classes")
    log(f"[preprocess {name}] {report['summary_line']} ({report_path})")
    for warning in report["warnings"]:
        log(f"[preprocess {name}] WARNING {warning}")


def schema_metrics(table: EncodedTable, report: dict) -> dict:
    """The preprocess stage's tracked metrics."""
    return {"rows": table.X.shape[0], "columns": len(table.columns), "encoded_columns": table.X.shape[1],
            "classes": len(table.classes),
            **{f"schema_{k}": v for k, v in report["summary"].items() if k not in ("rows", "classes")}}


def schema_report(name: str, frame: pd.DataFrame, table: EncodedTable, notes: dict) -> dict:
    """What became of every column of a raw table: numeric, categorical (levels kept, levels
    folded into "other") or dropped (why), its missing cells, and every value converted to
    missing, by fetch (``frame.attrs[SCHEMA_ATTR]``, local tables) or by ``encode_table``
    (``notes``); a one-line summary and one warning per column that lost information."""
    fetched = json.loads(frame.attrs.get(SCHEMA_ATTR, "{}"))
    records = fetched.get("columns") or [{"column": str(c)} for c in frame.columns if c != LABEL]
    groups = {str(c): g for g, c in enumerate(table.columns)}
    columns, warnings = [], []
    for record in records:
        column = record.get("renamed", record["column"])
        entry = {"column": column, **{k: record[k] for k in REPORTED if record.get(k)}}
        lines = list(record.get("warnings", []))
        note = notes.get(column, {})
        if column in groups:
            block = table.X[:, table.groups == groups[column]]
            if table.numeric[table.groups == groups[column]].all():
                entry.update(kind="numeric", missing=int(np.isnan(block[:, 0]).sum()))
            else:
                names = table.encoded_names[table.groups == groups[column]]
                entry.update(kind="categorical", missing=int((block.sum(1) == 0).sum()),
                             levels=[str(n)[len(column) + 1:] for n in names])
                if "folded" in record:
                    entry["folded_into_other"] = record["folded"]
        else:
            entry.update(kind="dropped", reason=record.get("reason") or note.get("dropped", "not encoded"))
        converted = dict(record.get("converted", {}))
        for key in ("infinite", "out_of_range"):
            if key in record:
                converted[key.replace("_", " ")] = record[key]["cells"]
        precision = note.get("float32")
        if precision:
            if precision["offset"] is not None:
                entry["stored_less"] = precision["offset"]
            if "merged" in precision:
                lines.append(f"column '{column}': {precision['distinct']} distinct values are "
                             f"{precision['distinct_stored']} in float32, the encoded table's precision "
                             f"(values too close for their magnitude: {precision['merged'][0]!r} and "
                             f"{precision['merged'][1]!r} are one value)")
        if note.get("non_finite"):
            converted["infinite or beyond float32"] = note["non_finite"]
            lines.append(f"column '{column}': {note['non_finite']} infinite or out-of-float32-range value(s) "
                         f"read as missing")
        if converted:
            entry["converted_to_missing"] = converted
        if lines:
            entry["warnings"] = lines
            warnings += lines
        columns.append(entry)
    kinds = [c["kind"] for c in columns]
    summary = {"rows": int(len(table.y)), "classes": len(table.classes), "numeric": kinds.count("numeric"),
               "categorical": kinds.count("categorical"), "dropped": kinds.count("dropped"),
               "folded_columns": sum("folded_into_other" in c for c in columns),
               "converted_cells": int(sum(sum(c.get("converted_to_missing", {}).values()) for c in columns)),
               "missing_cells": int(sum(c.get("missing", 0) for c in columns)),
               "columns_with_warnings": sum("warnings" in c for c in columns)}
    for key in ("rows_without_target", "rows_without_features", "total_row", "repeated_rows", "repeated_once_folded",
                "rows_sharing_features", "columns_giving_the_class"):
        if fetched.get(key):
            summary[key] = fetched[key]
    dropped = ", ".join(f"'{c['column']}' ({c['reason']})" for c in columns if c["kind"] == "dropped")
    parts = [f"{summary['numeric']} numeric", f"{summary['categorical']} categorical"
             + (f" ({summary['folded_columns']} with levels folded into 'other')" if summary["folded_columns"] else ""),
             f"{summary['dropped']} dropped" + (f" ({dropped})" if dropped else "")]
    line = (f"schema: {summary['rows']} rows, {summary['classes']} classes; {', '.join(parts)}; "
            f"{summary['missing_cells']} missing cells ({summary['converted_cells']} converted to missing); "
            f"{summary['columns_with_warnings']} column(s) lost information")
    return {"dataset": name, "target": fetched.get("target", LABEL), "summary": summary, "summary_line": line,
            "columns": columns, "warnings": warnings,
            "classes": [str(c) for c in table.classes]}


# --------------------------------------------------------------------------- splits


@dataclass
class Split:
    seed: int
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray


def check_split_sizes(y: np.ndarray, test_fraction: float, val_fraction: float, dataset: str = "",
                      classes=None) -> None:
    """Raise a ConfigError naming the key when a fraction leaves a part too small to stratify:
    every part needs at least one row per class (and training at least two rows)."""
    full = np.bincount(y)
    present = np.flatnonzero(full)
    counts = full[present]
    n, n_classes = len(y), len(counts)
    where = f"dataset '{dataset}'" if dataset else "the dataset"
    if counts.min() < 3:
        names = [classes[c] if classes is not None else c for c in present]
        raise DataError(_too_few_rows(where, pd.Series(counts, index=names)))
    n_test = int(np.ceil(test_fraction * n))
    if n_test < n_classes or n - n_test < n_classes:
        raise ConfigError(f"params.yaml: 'split.test_fraction' = {test_fraction} gives {where} a test part of "
                          f"{n_test} of {n} rows; each part needs at least one row per class ({n_classes})")
    n_val = int(np.ceil(val_fraction * (n - n_test)))
    if n_val < n_classes or n - n_test - n_val < max(n_classes, 2):
        raise ConfigError(f"params.yaml: 'split.val_fraction' = {val_fraction} gives {where} a validation part "
                          f"of {n_val} of {n - n_test} train rows; each part needs at least one row per class "
                          f"({n_classes})")


def check_shots(y_test: np.ndarray, classes, shots, dataset: str, seed: int, y_all: np.ndarray | None = None,
                test_fraction: float | None = None) -> None:
    """Raise a ConfigError when a class's test rows cannot serve the largest shot: its support
    and at least one query row (without one the class would not be scored at all). With the
    table's labels ``y_all`` and ``split.test_fraction`` the message says how many rows the class
    has and about how many it would need."""
    counts = np.bincount(y_test, minlength=len(classes))
    for shot in sorted(shots, reverse=True):
        short = [c for c in range(len(classes)) if counts[c] <= shot]
        if short:
            c = min(short, key=lambda k: counts[k])  # the smallest class
            have = int(counts[c])
            fixes = ([f"lower evaluate.shots (at most {have - 1} here)"] if have >= 2 else []) + [
                "raise split.test_fraction"] + (["merge or drop the class"] if have < 2 else [])
            table = ""
            if y_all is not None and test_fraction:
                total = int(np.sum(y_all == c))
                table = (f"; the class has {total} rows in the table, and at split.test_fraction {test_fraction:g} "
                         f"{shot + 1} test rows take about {math.ceil((shot + 1) / test_fraction)}")
            raise ConfigError(
                f"params.yaml: 'evaluate.shots' asks for {shot}-shot episodes, but class '{classes[c]}' of "
                f"dataset '{dataset}' has only {have} test rows (seed {seed}), and an episode needs "
                f"{shot} for its support and at least one more to query{table}; {', '.join(fixes[:-1])}"
                f"{' or ' if len(fixes) > 1 else ''}{fixes[-1]}")


def make_split(y: np.ndarray, seed: int, test_fraction: float, val_fraction: float,
               dataset: str = "", classes=None) -> Split:
    """Stratified train / validation / test indices for one seed (test first, then val from train)."""
    from sklearn.model_selection import train_test_split

    check_split_sizes(y, test_fraction, val_fraction, dataset, classes)
    index = np.arange(len(y))
    train_val, test = train_test_split(index, test_size=test_fraction, stratify=y, random_state=seed)
    left = np.bincount(y[train_val], minlength=len(np.bincount(y)))
    if (left == 1).any():  # the stratified validation split needs 2 rows of every class it sees
        c = int(np.flatnonzero(left == 1)[0])
        name = classes[c] if classes is not None else c
        where = f"dataset '{dataset}'" if dataset else "the dataset"
        raise ConfigError(f"params.yaml: 'split.test_fraction' = {test_fraction} leaves class '{name}' of {where} 1 of "
                          f"its {int(np.sum(y == c))} rows outside the test part (seed {seed}), which the stratified "
                          f"train / validation split cannot divide; lower split.test_fraction, or merge or drop the class")
    train, val = train_test_split(train_val, test_size=val_fraction, stratify=y[train_val],
                                  random_state=seed)
    return Split(seed=seed, train=np.sort(train), val=np.sort(val), test=np.sort(test))


def save_splits(path: Path, splits: list[Split]) -> None:
    arrays = {"seeds": np.asarray([s.seed for s in splits], dtype=np.int64)}
    for s in splits:
        arrays[f"seed{s.seed}_train"] = s.train
        arrays[f"seed{s.seed}_val"] = s.val
        arrays[f"seed{s.seed}_test"] = s.test
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)


def load_split(path: Path, seed: int) -> Split:
    with reading(path, f"split@{Path(path).stem}"), np.load(path, allow_pickle=False) as z:
        if f"seed{seed}_train" not in z.files:
            raise DataError(f"{path} has no split for seed {seed} (has {[int(s) for s in z['seeds']]}): rerun "
                            f"split@{Path(path).stem} (`dvc repro split@{Path(path).stem}`)")
        return Split(seed=seed, train=z[f"seed{seed}_train"], val=z[f"seed{seed}_val"],
                     test=z[f"seed{seed}_test"])
