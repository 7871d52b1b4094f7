"""The raw table format every source gives (OpenML, the offline snapshots, the user's own files):
one row per instance, the label in ``LABEL`` (pandas category), nominal features as pandas
categories, numeric features as float64, missing values as NaN; what fetch inferred of a local
table's columns rides along in ``frame.attrs[SCHEMA_ATTR]``. Shared by ``seba.core.data`` and
``seba.core.own_table``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

LABEL = "class"
SCHEMA_ATTR = "seba_columns"  # the raw parquet's record of what fetch inferred, column by column
FLOAT32_MAX = float(np.finfo(np.float32).max)  # the encoded table is float32: larger magnitudes do not fit

# why a table needs two feature columns
FEATURES_NEEDED = ("SeBA's pretraining masks at least one column and encodes the others, so a table needs at "
                   "least two feature columns")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
