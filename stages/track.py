"""DVC stage `track`: pushes the stage records waiting in data/tracking/ into the MLflow store.

Stages write their runs as records instead of importing MLflow (seba/core/tracking.py); this stage,
last in the graph, sends them, each with its own start and end times."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's seba before an installed one (docs/ablations.md)

from seba.core.cli import run_stage
from seba.core.tracking import flush

if __name__ == "__main__":
    run_stage("track", flush)
