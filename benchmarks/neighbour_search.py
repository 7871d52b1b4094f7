"""How often SeBA's positive (each row's nearest other row in the target view of a 1024-row
batch) is not the nearest row, by the arithmetic of the search, and what the search costs.

`torch.cdist` computes a batch's distances as one matrix product, ||a||^2 + ||b||^2 - 2 a.b, the
squared norms being columns of the product's operands. Three ways of computing it, each against
the neighbours of exact float64 differences:
- float32 (`pretrain.neighbour_search: product`, the released code's; a GPU in fp32 likewise),
- TF32: the product's operands rounded to TF32's 10 mantissa bits (to nearest), float32 sums, as
  a GPU computes it under `precision: tf32` (emulated here, so no GPU is needed),
- float64 (`neighbour_search: exact`).
A row counts as wrong when the neighbour chosen is farther, in float64, than its nearest row (a
tie is not wrong). The search's time is measured as a CPU stage computes it (the target columns
selected, one batch at a time, float32 against float64), one thread.

Usage (repository root):
    python benchmarks/neighbour_search.py [--datasets cmc income] [--batches 20] [--seed 0]

Prints per table and ratio the masked encoded columns (of the last batch), the share of rows (in
%) whose positive is wrong in each arithmetic, and the ms per batch of the float32 and float64
searches; then each table over the ratios.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def tf32(x):
    """float32 values rounded to TF32's 10 mantissa bits (to nearest, ties away from zero)."""
    import torch

    bits = x.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def product_distances(target, rounding=None):
    """Euclidean distances as torch.cdist's matrix-product form computes them, in ``target``'s
    dtype, the product's operands passed through ``rounding`` first (None: as they are)."""
    import torch

    norms = target.pow(2).sum(dim=-1, keepdim=True)
    ones = torch.ones_like(norms)
    left = torch.cat([target.mul(-2), norms, ones], dim=-1)
    right = torch.cat([target, ones, norms], dim=-1)
    if rounding is not None:
        left, right = rounding(left), rounding(right)
    return (left @ right.mT).clamp_min(1e-30).sqrt()


def neighbours(distances):
    distances = distances.clone()
    distances.diagonal(dim1=-2, dim2=-1).fill_(float("inf"))
    return distances.argmin(dim=-1)


def timed_search(target, column_mask, exact: bool, repeats: int = 3) -> float:
    """Seconds of seba.objective.target_neighbours on one batch (median of ``repeats``)."""
    from seba.objective import target_neighbours

    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        target_neighbours(target, column_mask, exact=exact)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


ARITHMETIC = ("float32", "TF32", "float64")


def main() -> None:
    from entry import check_openml_datasets, positive

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=None, help="default: params.yaml's datasets")
    parser.add_argument("--batches", type=positive, default=20, help="1024-row batches (one mask each) per ratio")
    parser.add_argument("--seed", type=int, default=0, help="the split's seed and the draws'")
    args = parser.parse_args()

    import torch

    import benchmarks.speed as speed
    from seba.core.config import load_params
    from seba.core.data import scale
    from seba.core.paths import RANDOM_RATIO
    from seba.objective import expand_mask, masked_group_count, sample_group_mask

    params = load_params(ROOT / "params.yaml")
    check_openml_datasets(args.datasets or [], params)
    torch.set_num_threads(1)
    ratios = [r for r in params.ratios if r != RANDOM_RATIO]
    roundings = {"float32": (torch.float32, None), "TF32": (torch.float32, tf32), "float64": (torch.float64, None)}
    print(f"target-view nearest neighbours of {args.batches} batches of 1024 rows per ratio (seed {args.seed}'s "
          f"split); rows whose positive is wrong, in %; ms per batch of the search, one thread")
    print(f"{'table':10s} {'ratio':>5s} {'columns':>7s} " + " ".join(f"{f'wrong, {a}':>15s}" for a in ARITHMETIC)
          + f" {'ms float32':>10s} {'ms float64':>10s}")
    for dataset in args.datasets or params.datasets:
        table, split = speed.load_table(dataset, params, args.seed)
        cfg = params.pretrain_for(dataset)
        X = torch.as_tensor(scale(table, split.train, cfg.normalise)[split.train], dtype=torch.float32)
        groups = torch.as_tensor(table.groups, dtype=torch.long)
        n_groups = int(table.groups.max()) + 1
        generator = torch.Generator().manual_seed(args.seed)
        totals = {"rows": 0, **{a: 0 for a in ARITHMETIC}, "ms32": 0.0, "ms64": 0.0}
        for ratio in ratios:
            k = masked_group_count(n_groups, ratio, cfg.min_masked_columns)
            counts = {"rows": 0, **{a: 0 for a in ARITHMETIC}, "ms32": 0.0, "ms64": 0.0}
            for _ in range(args.batches):
                rows = torch.randperm(len(X), generator=generator)[:min(1024, len(X))]
                mask = expand_mask(sample_group_mask(n_groups, k, generator), groups)
                batch = X[rows]
                target = batch * mask.to(torch.float32)
                exact = torch.cdist(target.double(), target.double(), compute_mode="donot_use_mm_for_euclid_dist")
                exact.diagonal().fill_(float("inf"))
                best = exact.min(dim=1).values
                counts["rows"] += len(rows)
                for name, (dtype, rounding) in roundings.items():
                    chosen = neighbours(product_distances(target.to(dtype), rounding))
                    counts[name] += int((exact.gather(1, chosen.unsqueeze(1)).squeeze(1) > best).sum())
                counts["ms32"] += 1e3 * timed_search(batch, mask, exact=False) / args.batches
                counts["ms64"] += 1e3 * timed_search(batch, mask, exact=True) / args.batches
            for key in totals:
                totals[key] += counts[key] / (len(ratios) if key.startswith("ms") else 1)
            print(f"{dataset:10s} {ratio:5.1f} {int(mask.sum()):7d} "
                  + " ".join(f"{100 * counts[a] / counts['rows']:15.2f}" for a in ARITHMETIC)
                  + f" {counts['ms32']:10.2f} {counts['ms64']:10.2f}")
        print(f"{dataset:10s} {'all':>5s} {'':7s} " + " ".join(f"{100 * totals[a] / totals['rows']:15.2f}"
                                                              for a in ARITHMETIC)
              + f" {totals['ms32']:10.2f} {totals['ms64']:10.2f}")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
