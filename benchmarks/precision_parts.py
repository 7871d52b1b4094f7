"""Which of SeBA's products costs accuracy in bf16: one ratio's encoders trained in fp32, in bf16
autocast, and in bf16 with single layers kept in fp32, scored on the same episodes.

Usage (repository root):
    python benchmarks/precision_parts.py --dataset income --ratio 0.1 --seeds 0 1 2 3 4 \
        --modes fp32 bf16 bf16:input bf16:output [--threads N] [--max-epochs E] [--csv OUT.csv]

A mode is `fp32`, `bf16`, or `bf16:PART[+PART]` with PART one of `input` (the encoder's first
layer: the table's columns times its weights), `hidden` (the encoder's second layer), `projector`
(the projector's first layer) and `output` (the projector's last layer, whose output the
similarities are made of): those layers' products run in fp32, the rest as `bf16`. The loss,
the neighbours and the optimiser are fp32 in every mode, as in the pipeline. bf16 is autocast as
`pretrain.precision: bf16` does it, so on a CPU it needs native bf16 to be fast (not to run).

Each seed has its own split, scaled rows and episodes, the same in every mode; the seeds of a mode
train as one stack (on a CPU each seed bit for bit as alone), with the table's own `pretrain`
values of params.yaml but `precision`. Prints each mode's per-seed mean accuracy of the ratio's
encoder per shot, then each mode's difference from the first mode, paired over the seeds (± the
standard error of the seed differences); `--csv` is written after each mode. Not part of the
test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.entry import check_openml_datasets  # noqa: E402
from seba import model  # noqa: E402
from seba.core.config import load_params  # noqa: E402
from seba.core.data import encode_table, load_snapshot, make_split, scale  # noqa: E402
from seba.evaluate import evaluate_seeds  # noqa: E402
from seba.pretrain import SeedData, encode, encoder_config, pretrain_stack  # noqa: E402

PARTS = {"input": ("encoder", 0), "hidden": ("encoder", -1), "projector": ("projector", 0),
         "output": ("projector", -1)}


def parse_mode(text: str) -> tuple[str, frozenset[str]]:
    precision, _, parts = text.partition(":")
    if precision not in ("fp32", "bf16") or (parts and precision != "bf16"):
        raise SystemExit(f"error: mode {text!r}: fp32, bf16 or bf16:PART[+PART]")
    chosen = frozenset(p for p in parts.split("+") if p)
    unknown = sorted(chosen - set(PARTS))
    if unknown:
        raise SystemExit(f"error: mode {text!r}: unknown part(s) {unknown}; parts: {', '.join(PARTS)}")
    return precision, chosen


@contextlib.contextmanager
def fp32_parts(parts: frozenset[str]) -> Iterator[None]:
    """Within the block, stacked encoders and projectors built keep ``parts`` in fp32 under
    autocast (their products on fp32 inputs and weights); the classes are restored afterwards."""
    inits = {"encoder": model.StackedEncoder.__init__, "projector": model.StackedProjector.__init__}
    forward = model.StackedLinear.forward

    def linear_forward(self: model.StackedLinear, x: torch.Tensor) -> torch.Tensor:
        if getattr(self, "keep_fp32", False) and torch.is_autocast_enabled(x.device.type):
            with torch.autocast(x.device.type, enabled=False):
                return forward(self, x.float())
        return forward(self, x)

    def marking(owner: str):
        def init(self, *args, **kwargs):
            inits[owner](self, *args, **kwargs)
            layers = [layer for layer in self.net if isinstance(layer, model.StackedLinear)]
            for part in parts:
                if PARTS[part][0] == owner:
                    layers[PARTS[part][1]].keep_fp32 = True
        return init

    model.StackedLinear.forward = linear_forward
    model.StackedEncoder.__init__ = marking("encoder")
    model.StackedProjector.__init__ = marking("projector")
    try:
        yield
    finally:
        model.StackedLinear.forward = forward
        model.StackedEncoder.__init__ = inits["encoder"]
        model.StackedProjector.__init__ = inits["projector"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--ratio", type=float, default=0.1)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--modes", nargs="+", default=["fp32", "bf16", "bf16:input", "bf16:output"])
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--max-epochs", type=int, default=0, help="a smaller pretrain.max_epochs (a quick check)")
    parser.add_argument("--csv", type=Path, help="write every mode, seed and shot's accuracy here")
    args = parser.parse_args()
    modes = [(text, *parse_mode(text)) for text in args.modes]
    params = load_params(ROOT / "params.yaml")
    check_openml_datasets([args.dataset], params)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    frame, _ = load_snapshot(params.sources[args.dataset].openml_id, ROOT / "data" / "snapshot")
    table = encode_table(frame)
    base = dataclasses.replace(params.pretrain_for(args.dataset), progress_seconds=1e9)
    if args.max_epochs:
        base = dataclasses.replace(base, max_epochs=args.max_epochs)
    seeds = []
    for seed in args.seeds:
        split = make_split(table.y, seed, params.split.test_fraction, params.split.val_fraction)
        X = scale(table, split.train)
        seeds.append((seed, split, X))
    rows = []
    for text, precision, parts in modes:
        cfg = dataclasses.replace(base, precision=precision)
        start = time.perf_counter()
        members = [SeedData(X[split.train], X[split.val], seed) for seed, split, X in seeds]
        with fp32_parts(parts):
            results = pretrain_stack(members, table.groups, args.ratio, cfg, device, label=text)
        seconds = time.perf_counter() - start
        member = f"r{args.ratio:g}"
        features = [encode(result.encoder_state, encoder_config(cfg, X.shape[1]), X[split.test], device).unsqueeze(0)
                    for (_, split, X), result in zip(seeds, results)]
        frames = evaluate_seeds(features, [member], [table.y[split.test] for _, split, _ in seeds],
                                len(table.classes), [seed for seed, _, _ in seeds], params.evaluate, args.dataset)
        for (seed, _, _), result, episodes in zip(seeds, results, frames):
            for shot, acc in episodes[episodes["member"] == member].groupby("shot")["accuracy"].mean().items():
                rows.append({"mode": text, "seed": seed, "shot": int(shot), "accuracy": float(acc),
                             "stop_epoch": result.stop_epoch, "best_val_loss": result.best_val_loss})
        done = pd.DataFrame([r for r in rows if r["mode"] == text])
        if args.csv:  # after every mode, so that a run stopped part-way keeps what it measured
            pd.DataFrame(rows).to_csv(args.csv, index=False)
        print(f"{text}: {seconds:.0f} s of pretraining; per seed (1 / 5 / ... shots): "
              + "; ".join(f"{seed}: " + " / ".join(f"{a:.2f}" for a in g.sort_values("shot")["accuracy"])
                          for seed, g in done.groupby("seed")), flush=True)
    result = pd.DataFrame(rows)
    wide = result.pivot_table(index=["seed", "shot"], columns="mode", values="accuracy")
    first = modes[0][0]
    print(f"\nmean over seeds, and each mode − {first} paired over the seeds (± SE):")
    for shot, g in wide.groupby(level="shot"):
        cells = [f"{first} {g[first].mean():.2f}"]
        for text, *_ in modes[1:]:
            diff = g[text] - g[first]
            se = diff.std(ddof=1) / len(diff) ** 0.5 if len(diff) > 1 else float("nan")
            cells.append(f"{text} {g[text].mean():.2f} ({diff.mean():+.2f} ± {se:.2f})")
        print(f"{shot}-shot: " + "; ".join(cells))


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
