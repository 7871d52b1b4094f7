"""Check the whole ``params.yaml`` at once, before a long run: ``seba-validate`` (or
``python -m seba.validate``).

First the file itself (every key, type, range and choice). Then, for every dataset whose table
is at hand (fetched into data/raw, or in the offline snapshot), the checks that need its rows:
the split fractions leave every part non-empty for every class, and every seed's test part can
serve the largest shot. Exit 0 when all is well, 2 with one line per problem otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from seba.config import load_params
from seba.data import check_shots, load_local_table, load_snapshot, make_split
from seba.errors import ConfigError, DataError
from seba.runtime import repo_root


def _labels(name: str, params, root: Path):
    """Label codes and class names of a dataset, from data/raw or the snapshot; None if neither."""
    raw = root / "data" / "raw" / f"{name}.parquet"
    source = params.sources[name]
    if raw.exists():
        frame = pd.read_parquet(raw, columns=["class"])
        where = str(raw.relative_to(root))
    elif source.is_local:
        frame, _ = load_local_table(name, source, root)
        where = source.path
    else:
        try:
            frame, _ = load_snapshot(source.openml_id, root / "data" / "snapshot")
        except DataError:
            return None, None, None
        where = "offline snapshot"
    label = frame["class"].dropna().astype("category").cat.remove_unused_categories()
    return label.cat.codes.to_numpy(), [str(c) for c in label.cat.categories], where


def validate(root: Path) -> list[str]:
    """All problems found, as messages (empty when the params are usable)."""
    try:
        params = load_params(root / "params.yaml")
    except ConfigError as exc:
        return [str(exc)]

    problems = []
    for name in params.datasets:
        try:
            y, classes, where = _labels(name, params, root)
            if y is None:
                print(f"  {name}: not fetched yet and not in the snapshot; row-level checks skipped")
                continue
            for seed in params.seeds:
                split = make_split(y, seed, params.split.test_fraction, params.split.val_fraction, name, classes)
                check_shots(y[split.test], classes, params.evaluate.shots, name, seed)
            print(f"  {name}: {len(y)} rows, {len(classes)} classes ({where}): splits and shots OK "
                  f"for {len(params.seeds)} seed(s)")
        except (ConfigError, DataError) as exc:
            problems.append(str(exc))
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=None, help="repository root (default: found from here)")
    args = parser.parse_args(argv)
    root = args.root or repo_root()
    problems = validate(root)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if not problems:
        print(f"{root / 'params.yaml'} is valid")
    return 2 if problems else 0


def main_exit() -> None:
    sys.exit(main())


if __name__ == "__main__":
    main_exit()
