"""Entry-point plumbing shared by the stage scripts: user errors become one clear line and a
non-zero exit, never a traceback."""

from __future__ import annotations

import sys
from typing import Callable

from seba.errors import ConfigError, DataError, EpisodeError, TrainingDiverged

USER_ERRORS = (ConfigError, DataError, EpisodeError, TrainingDiverged, FileNotFoundError)


def run_stage(name: str, main: Callable[[], None]) -> None:
    try:
        main()
    except USER_ERRORS as exc:
        print(f"error in stage '{name}': {exc}", file=sys.stderr, flush=True)
        sys.exit(2)
    except KeyboardInterrupt:
        print(f"stage '{name}' interrupted; nothing partial was kept", file=sys.stderr, flush=True)
        sys.exit(130)
