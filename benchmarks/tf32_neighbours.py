"""How often TensorFloat-32 changes SeBA's positives: the target-view nearest neighbour of each
row, searched with the distances that `torch.cdist` computes for 1024-row batches (its
matrix-product form, ||a||^2 + ||b||^2 - 2 a.b, in which the squared norms are columns of the
product's operands), in float32 and with the product's operands rounded to TF32 (10 mantissa
bits, as TF32 tensor cores read float32 operands), each against the neighbours of exact float64
distances.

Runs on a CPU: the TF32 product is emulated (operands rounded to TF32, products accumulated in
float32), so a GPU is not needed to see what TF32 does to the search. A row counts as wrong when
the neighbour chosen is farther, in float64, than its true nearest neighbour (a tie is not
wrong).

Usage (repository root):
    python benchmarks/tf32_neighbours.py [--datasets cmc income] [--batches 20] [--seed 0]

Prints per table and ratio the share of rows (batches x 1024 rows, one mask drawn per batch as a
pretrain stage draws them) whose positive is wrong in float32 and with TF32 products, and the
share whose TF32 positive differs from the float32 one; then per table over the ratios.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def tf32(x):
    """float32 values rounded to TF32's 10 mantissa bits (to nearest, ties away from zero)."""
    import torch

    bits = x.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def product_distances(target, rounding=None):
    """Euclidean distances as torch.cdist's matrix-product form computes them, the product's
    operands passed through ``rounding`` first (None: float32 as they are)."""
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


def main() -> None:
    from entry import positive

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=None, help="default: params.yaml's datasets")
    parser.add_argument("--batches", type=positive, default=20, help="1024-row batches (one mask each) per ratio")
    parser.add_argument("--seed", type=int, default=0, help="the split's seed and the draws'")
    args = parser.parse_args()

    import torch

    from seba.core.config import load_params
    from seba.core.data import encode_table, load_snapshot, make_split, scale
    from seba.core.errors import ConfigError
    from seba.core.paths import RANDOM_RATIO
    from seba.objective import expand_mask, masked_group_count, sample_group_mask

    params = load_params(ROOT / "params.yaml")
    unknown = [d for d in args.datasets or [] if d not in params.sources or params.sources[d].openml_id is None]
    if unknown:
        raise ConfigError(f"params.yaml's sources have no snapshot dataset {', '.join(unknown)}")
    torch.set_num_threads(1)
    ratios = [r for r in params.ratios if r != RANDOM_RATIO]
    print(f"target-view nearest neighbours of {args.batches} batches of 1024 rows per ratio (seed {args.seed}'s "
          f"split); shares of rows in %")
    print(f"{'table':10s} {'ratio':>5s} {'columns':>7s} {'wrong, fp32':>11s} {'wrong, TF32':>11s} "
          f"{'TF32 != fp32':>12s}")
    for dataset in args.datasets or params.datasets:
        frame, _ = load_snapshot(params.sources[dataset].openml_id, ROOT / "data" / "snapshot")
        table = encode_table(frame)
        split = make_split(table.y, args.seed, params.split.test_fraction, params.split.val_fraction, dataset)
        cfg = params.pretrain_for(dataset)
        X = torch.as_tensor(scale(table, split.train, cfg.normalise)[split.train], dtype=torch.float32)
        groups = torch.as_tensor(table.groups, dtype=torch.long)
        n_groups = int(table.groups.max()) + 1
        generator = torch.Generator().manual_seed(args.seed)
        totals = [0, 0, 0, 0]
        for ratio in ratios:
            k = masked_group_count(n_groups, ratio, cfg.min_masked_columns)
            counts = [0, 0, 0, 0]  # rows, wrong fp32, wrong tf32, tf32 != fp32
            for _ in range(args.batches):
                rows = torch.randperm(len(X), generator=generator)[:min(1024, len(X))]
                mask = expand_mask(sample_group_mask(n_groups, k, generator), groups)
                target = X[rows] * mask.to(torch.float32)
                exact = torch.cdist(target.double(), target.double(), compute_mode="donot_use_mm_for_euclid_dist")
                exact.diagonal().fill_(float("inf"))
                best = exact.min(dim=1).values
                chosen = {name: neighbours(product_distances(target, rounding))
                          for name, rounding in (("fp32", None), ("tf32", tf32))}
                reach = {name: exact.gather(1, c.unsqueeze(1)).squeeze(1) for name, c in chosen.items()}
                counts[0] += len(rows)
                counts[1] += int((reach["fp32"] > best).sum())
                counts[2] += int((reach["tf32"] > best).sum())
                counts[3] += int((chosen["tf32"] != chosen["fp32"]).sum())
            totals = [t + c for t, c in zip(totals, counts)]
            n = counts[0]
            print(f"{dataset:10s} {ratio:5.1f} {int(mask.sum()):7d} {100 * counts[1] / n:11.2f} "
                  f"{100 * counts[2] / n:11.2f} {100 * counts[3] / n:12.2f}")
        n = totals[0]
        print(f"{dataset:10s} {'all':>5s} {'':7s} {100 * totals[1] / n:11.2f} {100 * totals[2] / n:11.2f} "
              f"{100 * totals[3] / n:12.2f}")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
