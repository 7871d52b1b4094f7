import os
from pathlib import Path
from subprocess import CalledProcessError, run  # bound here: some tests replace subprocess.run

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")


def committed_params(root: Path = ROOT) -> str:
    """The text of ``root``'s params.yaml as committed (git's HEAD), not the workspace's file, which
    a user's edit or `dvc exp run -S` changes: the tests of the defaults, and those that start a
    pipeline of their own from them, read this. Outside a git checkout (an unpacked archive), the file."""
    try:
        return run(["git", "show", "HEAD:./params.yaml"], cwd=root, capture_output=True, encoding="utf-8",
                   check=True).stdout
    except (OSError, CalledProcessError):
        return (root / "params.yaml").read_text(encoding="utf-8")


@pytest.fixture()
def committed_file(tmp_path) -> Path:
    """params.yaml as committed (committed_params), written as tmp_path/params.yaml."""
    path = tmp_path / "params.yaml"
    path.write_text(committed_params(), encoding="utf-8")
    return path


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
