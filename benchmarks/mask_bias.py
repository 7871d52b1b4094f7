"""`pretrain.mask_bias` against the concatenated projector input, in the same run: the training
step's time per model-step, per table.

Usage (repository root):
    python benchmarks/mask_bias.py [--datasets fashion income ...] [--stacks 2] [--device cpu|cuda]
                                   [--precision fp32] [--repeats 10]

For each dataset (default: fashion, then params.yaml's datasets; fashion needs its verified copy
in data/snapshot/fashion.parquet) and stack size, the SeBA training step of `benchmarks/speed.py`
(seed 0's split, a 1024-row batch, r = 0.3, the table's real width and its own pretrain values
(`sources.<dataset>.pretrain` over the section), feature view, encoder,
conditioned projector, InfoNCE, backward, Adam; on CUDA a replayed CUDA graph) is built with
`mask_bias` false and true and timed in turn, twice each (median of `--repeats` steps each time,
the better of the two kept). Prints ms per model-step of each and their ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    import torch

    import benchmarks.speed as speed
    from seba.core.config import load_params
    from seba.core.runtime import configure_threads

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="*")
    parser.add_argument("--stacks", default="2")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    params = load_params(ROOT / "params.yaml")
    stacks = [int(s) for s in args.stacks.split(",") if s.strip().isdigit() and int(s) > 0]
    if len(stacks) != len(args.stacks.split(",")):
        raise SystemExit(f"--stacks must list positive integers, got {args.stacks!r}")
    if args.repeats < 1:
        raise SystemExit(f"--repeats must be positive, got {args.repeats}")
    datasets = args.datasets or ["fashion", *params.datasets]
    tables = {name: speed.checked_table(name, params) for name in datasets}  # every table read (or refused) first
    configure_threads(args.threads)
    speed.DEVICE = torch.device(args.device)
    graph = args.device == "cuda"
    print(f"device {args.device}, precision {args.precision}, torch threads {torch.get_num_threads()}")
    print(f"{'dataset':<10} {'D':>4} {'stack':>5} {'concatenated ms':>16} {'mask_bias ms':>13} {'ratio':>6}")
    for name, (table, split) in tables.items():
        for stack in stacks:
            best = {}
            for _ in range(2):
                for bias in (False, True):
                    variant = SimpleNamespace(pretrain=dataclasses.replace(params.pretrain_for(name), mask_bias=bias))
                    step, _, width, _ = speed.training_step(table, split, variant, args.precision, graph=graph,
                                                            stack=stack)
                    seconds = speed.timed(step, repeats=args.repeats, warmup=3) / stack
                    best[bias] = min(best.get(bias, float("inf")), seconds)
                    del step
            print(f"{name:<10} {width:>4} {stack:>5} {best[False] * 1e3:>16.3f} {best[True] * 1e3:>13.3f} "
                  f"{best[False] / best[True]:>5.2f}×", flush=True)


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
