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


def load_snapshot(openml_id: int, snapshot_dir: Path) -> tuple[pd.DataFrame, dict]:
    """Read the vendored copy of an OpenML table after checking its sha256 against the manifest."""
    manifest = json.loads((snapshot_dir / "manifest.json").read_text())["openml_ids"]
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


def fetch_table(name: str, openml_id: int, source: str, root: Path, retries: int = 1
                ) -> tuple[pd.DataFrame, dict]:
    """Return the raw table of one dataset and a record of where it came from.

    ``source='auto'`` tries OpenML and falls back to the verified offline snapshot.
    """
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
    if frame.shape[1] < 2:
        raise DataError(f"dataset '{name}': no feature columns")
    if frame[LABEL].nunique() < 2:
        raise DataError(f"dataset '{name}': the target has fewer than two classes")


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
    blocks, groups, numeric, names = [], [], [], []
    for index, column in enumerate(features):
        series = frame[column]
        if isinstance(series.dtype, pd.CategoricalDtype) or series.dtype == object or series.dtype == bool:
            cat = series.astype("category")
            codes = cat.cat.codes.to_numpy()
            n_cat = len(cat.cat.categories)
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
    return EncodedTable(
        X=np.concatenate(blocks, axis=1),
        y=label.cat.codes.to_numpy().astype(np.int64),
        groups=np.asarray(groups, dtype=np.int64),
        numeric=np.asarray(numeric, dtype=bool),
        columns=np.asarray([str(c) for c in features]),
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


def make_split(y: np.ndarray, seed: int, test_fraction: float, val_fraction: float) -> Split:
    """Stratified train / validation / test indices for one seed (test first, then val from train)."""
    from sklearn.model_selection import train_test_split

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
