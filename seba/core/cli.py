"""Entry-point plumbing shared by the stage scripts: user errors become one clear line and a
non-zero exit, never a traceback."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Callable

from seba.core.errors import ConfigError, DataError, EpisodeError, ExecutorError, OutputError, TrainingDiverged

USER_ERRORS = (ConfigError, DataError, EpisodeError, TrainingDiverged, OutputError, ExecutorError, FileNotFoundError)

if os.environ.get("DVC_STAGE"):
    # Run by `dvc repro` (a stage script imports this module first, before its slow imports; a
    # stage's spawned worker processes import it too). A stage process hands its script to the
    # warm worker when one is running (seba/core/worker.py: it exits here with the script's status);
    # otherwise it runs it itself, and ends with the process that started it.
    if os.environ.get("SEBA_WORKER", "1") != "0":
        from seba.core.worker import delegate

        delegate()
    from seba.core.runtime import exit_with_parent

    exit_with_parent()

# after the hand-over above: a stage process the warm worker serves never loads it (nor numpy)
from seba.core.tracking import keep_for_workspace  # noqa: E402


def parse_args(description: str, **options: type) -> argparse.Namespace:
    """A stage's required options: ``parse_args(__doc__, dataset=str, ratio=float)`` reads
    ``--dataset NAME --ratio 0.2``."""
    parser = argparse.ArgumentParser(description=description)
    for name, kind in options.items():
        parser.add_argument(f"--{name}", required=True, type=kind)
    return parser.parse_args()


class Terminated(KeyboardInterrupt):
    """SIGTERM (a batch job's time limit, `timeout`, `kill`) raised where the stage is, so that it
    ends as after Ctrl-C: worker processes ended, finished seeds kept, a FAILED MLflow record and
    a message. A second SIGTERM ends the process at once."""


def _terminate(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise Terminated()


def run_stage(name: str, main: Callable[[], None]) -> None:
    import threading

    # only where SIGTERM has its default action: a program that runs stages in-process with its
    # own handler (benchmarks/gpu_protocol.py) keeps it
    ours = threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    if ours:
        signal.signal(signal.SIGTERM, _terminate)
    try:
        _run(name, main)
    except BaseException as exc:
        if not isinstance(exc, SystemExit) or exc.code not in (0, None):
            _keep_records()
        raise
    finally:
        if ours:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _keep_records() -> None:
    """A failed stage in a queued experiment's temporary copy: its record and those of the stages
    before it wait in the workspace, where the next push finds them; says so, and moves there any
    that the copy holds (``seba.core.tracking.keep_for_workspace``)."""
    try:
        keep_for_workspace()
    except Exception as exc:  # the stage's own error is the one to show
        print(f"WARNING: the MLflow records of this experiment were not moved to the workspace "
              f"({type(exc).__name__}: {exc})", file=sys.stderr, flush=True)


def _run(name: str, main: Callable[[], None]) -> None:
    try:
        main()
    except USER_ERRORS as exc:
        print(f"error in stage '{name}': {exc}", file=sys.stderr, flush=True)
        sys.exit(2)
    except MemoryError:
        print(f"error in stage '{name}': out of memory; lower the sizes it works with (evaluate.episodes, "
              f"pretrain.batch_size, the layer widths, seeds per stage) or free memory", file=sys.stderr, flush=True)
        sys.exit(2)
    except Terminated:
        print(f"stage '{name}' terminated (SIGTERM): outputs it had begun are incomplete; dvc repro runs it "
              f"again (DVC records a stage only when it ends)", file=sys.stderr, flush=True)
        sys.exit(143)
    except KeyboardInterrupt:
        print(f"stage '{name}' interrupted: outputs it had begun are incomplete; dvc repro runs it again (DVC "
              f"records a stage only when it ends)", file=sys.stderr, flush=True)
        sys.exit(130)
