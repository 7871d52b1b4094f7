"""How often SeBA's target view misses all of a row's information on a sparse table (not part of
the test suite).

Usage (repository root): python benchmarks/sparse_views.py [--dataset cnae9]
                        [--ratios 0.1,0.2,0.3,0.4,0.5] [--draws 2000] [--out FILE]

On a table whose rows are mostly zeros (cnae-9: word counts), a target view of r * G random
original columns can hold none of a row's non-zero columns; the row's target view is then all
zeros, the same as every other such row's, and its nearest neighbour in that view carries no
information about it. For the table's vendored snapshot (seed 0's training rows, the rows a
pretrain stage reads) this prints:

1. the original columns G and the mean, median and range of the non-zero columns per row;
2. per ratio, the view size k = seba.objective.masked_group_count(G, r) and the share of rows whose
   target view holds none of their non-zero columns: exact (the hypergeometric probability
   C(G - n, k) / C(G, k) for a row with n non-zero columns, averaged over the rows) and drawn
   (``--draws`` masks from seba.objective.sample_group_mask, as pretraining draws them, with the
   standard error over the masks).

A one-hot categorical's block counts as one original column, non-zero when its row has a value
(the mask drops whole groups). ``--out`` writes the same lines to a file as well.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import speed  # noqa: E402
from seba.core.config import load_params  # noqa: E402
from seba.objective import masked_group_count, sample_group_mask  # noqa: E402


def nonzero_groups(X: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """[rows, G] bool: whether each row has a non-zero (non-missing) value in each original column."""
    present = np.nan_to_num(X, nan=0.0) != 0
    n_groups = int(groups.max()) + 1
    out = np.zeros((len(X), n_groups), dtype=bool)
    for g in range(n_groups):
        out[:, g] = present[:, groups == g].any(axis=1)
    return out


def empty_share_exact(counts: np.ndarray, n_groups: int, k: int) -> float:
    """Mean over rows of C(G - n, k) / C(G, k): the chance that k random columns miss all n."""
    total = math.comb(n_groups, k)
    return float(np.mean([math.comb(n_groups - int(n), k) / total for n in counts]))


def empty_share_drawn(nonzero: np.ndarray, k: int, draws: int, seed: int = 0) -> tuple[float, float]:
    """The share over ``draws`` masks, and its standard error over the masks (the rows of one
    mask share its columns, so the masks, not the rows, are the independent draws)."""
    generator = torch.Generator().manual_seed(seed)
    shares = []
    for _ in range(draws):
        mask = sample_group_mask(nonzero.shape[1], k, generator).numpy()
        shares.append(float(np.mean(~nonzero[:, mask].any(axis=1))))
    spread = float(np.std(shares, ddof=1)) / math.sqrt(draws) if draws > 1 else float("nan")
    return float(np.mean(shares)), spread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="cnae9")
    parser.add_argument("--ratios", default="0.1,0.2,0.3,0.4,0.5")
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    ratios = [float(r) for r in args.ratios.split(",")]
    if args.draws < 1:
        raise SystemExit(f"--draws must be at least 1, got {args.draws}")

    params = load_params(ROOT / "params.yaml")
    table, split = speed.checked_table(args.dataset, params)
    groups = np.asarray(table.groups)
    nonzero = nonzero_groups(table.X[split.train], groups)
    counts = nonzero.sum(axis=1)
    n_groups = nonzero.shape[1]

    lines = [
        f"{args.dataset}: seed 0's {len(counts)} training rows, G = {n_groups} original columns",
        f"non-zero columns per row: mean {counts.mean():.2f}, median {np.median(counts):.0f}, "
        f"min {counts.min()}, max {counts.max()}; rows with none: {int((counts == 0).sum())}",
        "share of the rows whose target view holds none of their non-zero columns:",
        f"{'ratio':>5} {'k':>5} {'exact':>8} {'drawn (' + str(args.draws) + ' masks)':>22}",
    ]
    for r in ratios:
        k = masked_group_count(n_groups, r)
        exact = empty_share_exact(counts, n_groups, k)
        drawn, spread = empty_share_drawn(nonzero, k, args.draws)
        lines.append(f"{r:>5} {k:>5} {100 * exact:>6.1f} % {100 * drawn:>12.1f} ± {100 * spread:.1f} %")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
