"""Data: OpenML and offline-snapshot sources, type-aware encoding, stratified splits, scaling.

The raw table format shared by every source: one row per instance, the label in ``class``
(pandas category), nominal features as pandas categories (in the order the source declares
them), numeric features as float64, missing values as NaN.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from seba.errors import DataError
from seba.runtime import log

LABEL = "class"


# --------------------------------------------------------------------------- sources


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


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


def load_snapshot(openml_id: int, snapshot_dir: Path) -> tuple[pd.DataFrame, dict]:
    """Read the vendored copy of an OpenML table after checking its sha256 against the manifest."""
    manifest = read_manifest(snapshot_dir)
    entry = manifest.get(str(openml_id))
    if entry is None:
        known = ", ".join(f"{v['file'].removesuffix('.parquet')} ({k})" for k, v in manifest.items())
        raise DataError(f"OpenML id {openml_id} is not in the offline snapshot (it has: {known})")
    path = snapshot_dir / entry["file"]
    if not path.exists():
        raise DataError(f"snapshot file {path} is missing")
    digest = sha256_file(path)
    if digest != entry["sha256"]:
        raise DataError(
            f"snapshot file {path} fails verification: sha256 {digest} != manifest {entry['sha256']}"
        )
    frame = pd.read_parquet(path)
    info = {"source": "snapshot", "file": str(path.relative_to(snapshot_dir.parent.parent)),
            "sha256": digest}
    return frame, info


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
    snapshot_dir = root / "data" / "snapshot"
    cache_dir = root / "data" / "openml_cache"
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
            frame, info = load_snapshot(openml_id, snapshot_dir)
            info["openml_error"] = reason
    else:
        frame, info = load_snapshot(openml_id, snapshot_dir)
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


def load_local_table(name: str, source, root: Path) -> tuple[pd.DataFrame, dict]:
    """A user's CSV / parquet table (``sources.<name>.path``) in the raw table format.

    Column types are inferred: text, boolean and pandas-categorical columns are categorical,
    numbers numeric; ``categorical`` forces columns to categorical (e.g. integer codes).
    Rows without a target are dropped; all-missing columns are dropped; a categorical with more
    than ``max_categories`` levels keeps its ``max_categories - 1`` most frequent ones and puts
    the rest into one level "other". Every such change is logged and recorded.
    """
    path = root / source.path
    where = f"dataset '{name}' ({source.path})"
    if not path.is_file():
        raise DataError(f"{where}: file not found")
    try:
        if path.suffix.lower() == ".csv":
            frame = pd.read_csv(path, encoding="utf-8", low_memory=False)
        else:
            frame = pd.read_parquet(path)
    except UnicodeDecodeError as exc:
        raise DataError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start}); "
                        f"save the file as UTF-8") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{where}: cannot be read as {path.suffix.lower()[1:]}: {first}") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    if len(set(frame.columns)) != len(frame.columns):
        dup = sorted({c for c in frame.columns if list(frame.columns).count(c) > 1})
        raise DataError(f"{where}: duplicate column names {dup}")
    if source.target not in frame.columns:
        close = [c for c in frame.columns if c.lower() == source.target.lower()]
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise DataError(f"{where}: target column '{source.target}' not found{hint}; "
                        f"columns: {', '.join(frame.columns[:20])}{' ...' if frame.shape[1] > 20 else ''}")
    missing_cat = [c for c in source.categorical if c not in frame.columns]
    if missing_cat:
        raise DataError(f"{where}: 'categorical' names column(s) not in the file: {missing_cat}")
    if source.target in source.categorical:
        raise DataError(f"{where}: the target '{source.target}' is listed in 'categorical'")
    notes = []
    unlabeled = int(frame[source.target].isna().sum())
    if unlabeled:
        frame = frame[frame[source.target].notna()].reset_index(drop=True)
        notes.append(f"dropped {unlabeled} rows without a target")
    if frame[source.target].nunique() < 2:
        raise DataError(f"{where}: target column '{source.target}' has "
                        f"{frame[source.target].nunique()} distinct value(s); classification needs at least two")
    out = {}
    for column in frame.columns:
        if column == source.target:
            continue
        series = frame[column]
        if series.isna().all():
            notes.append(f"dropped all-missing column '{column}'")
            continue
        is_cat = (column in source.categorical or isinstance(series.dtype, pd.CategoricalDtype)
                  or series.dtype == object or series.dtype == bool or pd.api.types.is_string_dtype(series))
        if not is_cat:
            out[column] = pd.to_numeric(series, errors="coerce").astype("float64")
            continue
        values = series.astype("string").str.strip().astype(object).where(series.notna(), None)
        counts = pd.Series(values).value_counts()
        if len(counts) > source.max_categories:
            keep = set(counts.index[:source.max_categories - 1])
            values = pd.Series(values).where(pd.Series(values).isin(keep) | pd.Series(values).isna(), "other")
            notes.append(f"column '{column}' has {len(counts)} levels > max_categories "
                         f"{source.max_categories}: kept the {len(keep)} most frequent, the rest -> 'other'")
        out[column] = pd.Series(values, index=frame.index).astype("category")
    if not out:
        raise DataError(f"{where}: no feature columns besides the target '{source.target}'")
    result = pd.DataFrame(out)
    if LABEL in result.columns:  # a feature called like the label column: rename it
        result = result.rename(columns={LABEL: f"{LABEL}_feature"})
        notes.append(f"feature column '{LABEL}' renamed to '{LABEL}_feature'")
    result[LABEL] = frame[source.target].astype("string").str.strip().astype("category")
    for note in notes:
        log(f"[fetch {name}] {note}")
    return result, {"source": "local", "file": source.path, "sha256": sha256_file(path),
                    "target": source.target, "notes": notes}


def check_raw_table(name: str, frame: pd.DataFrame) -> None:
    if LABEL not in frame.columns:
        raise DataError(f"dataset '{name}': no '{LABEL}' column")
    if frame.shape[1] < 2:
        raise DataError(f"dataset '{name}': no feature columns")
    if frame[LABEL].nunique() < 2:
        raise DataError(f"dataset '{name}': the target has fewer than two classes")
    counts = frame[LABEL].value_counts()
    if counts.min() < 3:
        raise DataError(f"dataset '{name}': class '{counts.idxmin()}' has {int(counts.min())} row(s); a stratified "
                        f"train / validation / test split needs at least 3 per class")


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
        from seba.runtime import atomic_path

        with atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, **self.__dict__)

    @classmethod
    def load(cls, path: Path) -> "EncodedTable":
        with np.load(path, allow_pickle=False) as z:
            return cls(**{k: z[k] for k in z.files})

    @property
    def n_groups(self) -> int:
        return int(self.groups.max()) + 1


def encode_table(frame: pd.DataFrame) -> EncodedTable:
    """One-hot every categorical column (over its declared categories), keep numerics raw.

    Columns are encoded in their original order, so the group of every encoded column is the
    index of the original column it came from. A missing categorical value becomes an all-zero
    block; a missing numeric value stays NaN until scaling turns it into the train mean (0).
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
                continue
            block = np.zeros((len(frame), n_cat), dtype=np.float32)
            present = codes >= 0
            block[np.nonzero(present)[0], codes[present]] = 1.0
            blocks.append(block)
            groups += [index] * n_cat
            numeric += [False] * n_cat
            names += [f"{column}={c}" for c in cat.cat.categories]
        else:
            blocks.append(pd.to_numeric(series, errors="coerce").to_numpy(np.float32)[:, None])
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


def scale(table: EncodedTable, train_idx: np.ndarray) -> np.ndarray:
    """Standardise numeric columns with statistics of ``train_idx`` only; NaN -> 0 (train mean).

    One-hot columns are left as they are. Constant numeric columns are centred, not divided.
    """
    X = table.X.astype(np.float32, copy=True)
    if table.numeric.any():
        cols = np.nonzero(table.numeric)[0]
        train = X[np.ix_(train_idx, cols)]
        with np.errstate(invalid="ignore"):
            mean = np.nanmean(train, axis=0) if len(train) else np.zeros(len(cols))
            std = np.nanstd(train, axis=0) if len(train) else np.ones(len(cols))
        mean = np.nan_to_num(mean, nan=0.0)
        std = np.where(np.isfinite(std) & (std > 0), std, 1.0)
        X[:, cols] = (X[:, cols] - mean) / std
    return np.nan_to_num(X, nan=0.0, posinf=0.0, neginf=0.0).astype(np.float32)


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
    from seba.errors import ConfigError

    full = np.bincount(y)
    present = np.flatnonzero(full)
    counts = full[present]
    n, n_classes = len(y), len(counts)
    where = f"dataset '{dataset}'" if dataset else "the dataset"
    if counts.min() < 3:
        smallest = present[np.argmin(counts)]
        name = classes[smallest] if classes is not None else smallest
        raise DataError(f"{where}: class '{name}' has {int(counts.min())} row(s); a stratified train / "
                        f"validation / test split needs at least 3 per class")
    n_test = int(np.ceil(test_fraction * n))
    if n_test < n_classes or n - n_test < n_classes:
        raise ConfigError(f"params.yaml: 'split.test_fraction' = {test_fraction} gives {where} a test part of "
                          f"{n_test} of {n} rows; each part needs at least one row per class ({n_classes})")
    n_val = int(np.ceil(val_fraction * (n - n_test)))
    if n_val < n_classes or n - n_test - n_val < max(n_classes, 2):
        raise ConfigError(f"params.yaml: 'split.val_fraction' = {val_fraction} gives {where} a validation part "
                          f"of {n_val} of {n - n_test} train rows; each part needs at least one row per class "
                          f"({n_classes})")


def check_shots(y_test: np.ndarray, classes, shots, dataset: str, seed: int) -> None:
    """Raise a ConfigError when a class's test rows cannot serve the largest shot."""
    from seba.errors import ConfigError

    counts = np.bincount(y_test, minlength=len(classes))
    for shot in sorted(shots, reverse=True):
        short = [c for c in range(len(classes)) if counts[c] < shot]
        if short:
            c = min(short, key=lambda k: counts[k])  # the smallest class
            raise ConfigError(
                f"params.yaml: 'evaluate.shots' asks for {shot}-shot episodes, but class '{classes[c]}' of "
                f"dataset '{dataset}' has only {int(counts[c])} test rows (seed {seed}); lower evaluate.shots "
                f"or raise split.test_fraction")


def make_split(y: np.ndarray, seed: int, test_fraction: float, val_fraction: float,
               dataset: str = "", classes=None) -> Split:
    """Stratified train / validation / test indices for one seed (test first, then val from train)."""
    from sklearn.model_selection import train_test_split

    check_split_sizes(y, test_fraction, val_fraction, dataset, classes)
    index = np.arange(len(y))
    train_val, test = train_test_split(index, test_size=test_fraction, stratify=y, random_state=seed)
    train, val = train_test_split(train_val, test_size=val_fraction, stratify=y[train_val],
                                  random_state=seed)
    return Split(seed=seed, train=np.sort(train), val=np.sort(val), test=np.sort(test))


def save_splits(path: Path, splits: list[Split]) -> None:
    from seba.runtime import atomic_path

    arrays = {"seeds": np.asarray([s.seed for s in splits], dtype=np.int64)}
    for s in splits:
        arrays[f"seed{s.seed}_train"] = s.train
        arrays[f"seed{s.seed}_val"] = s.val
        arrays[f"seed{s.seed}_test"] = s.test
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)


def load_split(path: Path, seed: int) -> Split:
    with np.load(path) as z:
        if f"seed{seed}_train" not in z.files:
            raise DataError(f"{path} has no split for seed {seed} (has {list(z['seeds'])})")
        return Split(seed=seed, train=z[f"seed{seed}_train"], val=z[f"seed{seed}_val"],
                     test=z[f"seed{seed}_test"])
