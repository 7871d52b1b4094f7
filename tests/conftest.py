import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def snapshot_dir(root) -> Path:
    return root / "data" / "snapshot"


@pytest.fixture(scope="session")
def tiny_pipeline(root, tmp_path_factory):
    """(repository, environment, first `dvc repro` output) of the tiny pipeline (tests/tiny_pipeline.py),
    built once for every end-to-end test."""
    from tiny_pipeline import build

    return build(root, tmp_path_factory.mktemp("pipeline") / "repo")
