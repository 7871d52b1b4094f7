"""The benchmark scripts' common entry point: ``run_main(main)`` runs a script's ``main()`` and
turns the errors that a user's input causes (a missing or unreadable file, a malformed CSV or JSON
file, seba's named ConfigError and DataError) into one line ``error: ...`` on stderr and exit
status 2, in place of a traceback. Any other exception keeps its traceback: it is a bug to report."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def user_errors() -> tuple[type[BaseException], ...]:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from seba.core.errors import ConfigError, DataError

    kinds: list[type[BaseException]] = [OSError, json.JSONDecodeError, UnicodeDecodeError, ConfigError, DataError]
    pandas = sys.modules.get("pandas")  # only when the script uses it
    if pandas is not None:
        kinds += [pandas.errors.ParserError, pandas.errors.EmptyDataError]
    return tuple(kinds)


def run_main(main):
    """``main()``'s return value, or 2 after one line naming a user's error."""
    try:
        return main()
    except Exception as exc:
        if not isinstance(exc, user_errors()):
            raise
        text = str(exc).strip() or type(exc).__name__
        if isinstance(exc, json.JSONDecodeError):
            text = f"a file given is not valid JSON ({text})"
        elif type(exc).__module__.startswith("pandas"):
            text = f"a file given is not a readable CSV ({text})"
        print(f"error: {text}", file=sys.stderr)
        return 2


def check_openml_datasets(names, params) -> None:
    """Exit with one line naming those of ``names`` that params.yaml's sources do not fetch from
    OpenML (the benchmarks read those tables from the offline snapshot)."""
    known = [n for n, source in params.sources.items() if source.openml_id is not None]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"error: params.yaml's sources have no OpenML dataset {', '.join(unknown)} "
                         f"(known: {', '.join(known)})")


def read_csv(path, needs=(), what: str = "table"):
    """The CSV at ``path`` as a DataFrame with the columns ``needs``, or a one-line exit naming
    the file and what is wrong (unreadable, or no column ..., "not a WHAT")."""
    import pandas as pd

    if not Path(path).is_file():
        raise SystemExit(f"error: no such file: {path}")
    try:
        table = pd.read_csv(path)
    except (OSError, UnicodeDecodeError, EOFError, pd.errors.EmptyDataError, pd.errors.ParserError) as exc:
        lines = str(exc).splitlines()
        raise SystemExit(f"error: {path} cannot be read as a CSV file ({type(exc).__name__}: "
                         f"{lines[0] if lines else ''})") from None
    missing = [c for c in needs if c not in table.columns]
    if missing:
        raise SystemExit(f"error: {path} has no column {', '.join(missing)}: not a {what}")
    return table


def _number(text: str, convert, ok, not_a: str, rule: str):
    """argparse type body: ``convert(text)`` if it converts and passes ``ok``, else an error naming
    ``text`` as not ``not_a`` or against ``rule``."""
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {not_a}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"{text!r}: {rule}")
    return value


def positive(text: str) -> int:
    """argparse type: a whole number >= 1 (a count of seeds, repeats, steps, rows)."""
    return _number(text, int, lambda v: v >= 1, "a whole number", "must be at least 1")


def positives(text: str) -> list[int]:
    """argparse type: comma-separated whole numbers >= 1 (stack sizes)."""
    return [positive(part.strip()) for part in text.split(",")]


def ratio(text: str) -> float:
    """argparse type: a separation ratio, strictly between 0 and 1."""
    return _number(text, float, lambda v: 0 < v < 1, "a number", "a ratio lies strictly between 0 and 1")


def seconds(text: str) -> float:
    """argparse type: a number of seconds >= 0 (a deadline; 0: none)."""
    return _number(text, float, lambda v: v >= 0, "a number of seconds", "seconds are >= 0 (0: none)")


def read_json(path):
    """The JSON file at ``path``, or a one-line exit naming it."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise SystemExit(f"error: no such file: {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SystemExit(f"error: {path} is not a readable JSON file ({exc})") from None
