"""DVC stage `validate`: ``seba-validate`` ahead of every other stage.

Every other stage depends on its output, so DVC runs it first, and when params.yaml (or a
dataset name, a path, a requested device) is wrong it stops `dvc repro` before DVC removes any
other stage's outputs. The output's bytes never change, so a valid edit reruns only the stages
that read the edited keys (docs/failures.md).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's seba before an installed one (docs/ablations.md)

from seba.core.cli import run_stage  # first: hands the stage to a warm worker (seba/core/worker.py)

from seba.validate import main as validate

if __name__ == "__main__":
    run_stage("validate", lambda: sys.exit(validate(["--stamp"])))
