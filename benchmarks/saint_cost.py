"""Time SAINT's pretraining steps on each table and estimate one seed's cost (docs/baselines.md#saint).

Usage: python benchmarks/saint_cost.py [--datasets cmc dna ...] [--steps 5] [--device cpu]
       [--set key=value ...]   (baselines.saint settings, e.g. --set max_steps=500 --set batch_size=128)

For each table (read from data/snapshot, encoded and split as the pipeline does, seed 0): the
settings SAINT trains with (after the official rules), the parameter count, the training rows,
steps per epoch and the steps one seed runs (epochs x steps per epoch, capped at max_steps), the
median time of ``--steps`` optimiser steps after one warm-up step, the time to encode the test
part, and the estimate: steps x step time + encoding (the probe and episodes are not included).
Prints a markdown table.
"""

import argparse
import ast
import dataclasses
import time

import numpy as np
import pandas as pd
import torch

from seba.baselines.saint import SAINT, SaintNetwork, saint_features, saint_losses, saint_settings, split_features
from seba.baselines.base import method_config
from seba.core.config import load_params
from seba.core.data import encode_table, make_split, scale
from seba.core.runtime import configure_threads, repo_root, resolve_precision

DATASETS = ["cmc", "diabetes", "dna", "income", "karhunen", "optdigits", "pixel", "semeion"]


def main() -> None:
    from entry import positive

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=DATASETS)
    parser.add_argument("--steps", type=positive, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--set", nargs="*", default=[], help="baselines.saint overrides, key=value")
    args = parser.parse_args()
    params = load_params()
    overrides = {k: ast.literal_eval(v) if v not in ("colrow", "col", "row", "cls", "tokens", "fp32", "bf16", "auto",
                                                     "diff", "same") else v
                 for k, v in (s.split("=", 1) for s in args.set)}
    cfg = dataclasses.replace(method_config(params.baselines, "saint"), **overrides)
    configure_threads(args.threads)
    device = torch.device(args.device)
    bf16 = resolve_precision(cfg.precision, device) == "bf16"
    root = repo_root()
    rows = []
    for name in args.datasets:
        table = encode_table(pd.read_parquet(root / "data" / "snapshot" / f"{name}.parquet"))
        split = make_split(table.y, 0, params.split.test_fraction, params.split.val_fraction, name)
        X = scale(table, split.train)
        features = saint_features(table.groups, X[split.train])
        s, rules = saint_settings(cfg, features.n_features)
        torch.manual_seed(0)
        net = SaintNetwork(features, s["embedding_size"], s["depth"], s["heads"], s["ff_dropout"], cfg.attention,
                           cfg.projection).to(device)
        optimiser = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        train = torch.as_tensor(X[split.train], device=device)
        values, codes = split_features(train, features)
        gen = torch.Generator().manual_seed(0)
        n, batch = len(train), s["batch_size"]
        steps_per_epoch = sum(1 for first in range(0, n, batch) if n - first >= 2)
        steps = min(cfg.epochs * steps_per_epoch, cfg.max_steps)
        times = []
        net.train()
        for i in range(args.steps + 1):
            index = torch.randperm(n, generator=gen)[:batch].to(device)
            start = time.perf_counter()
            c, cat, num = saint_losses(net, values[index], codes[index], cfg, gen, bf16)
            loss = cfg.contrastive_weight * c + cfg.categorical_weight * cat + cfg.numeric_weight * num
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            if i:
                times.append(time.perf_counter() - start)
        step = float(np.median(times))
        method = SAINT(cfg, 0, device)
        method.features, method.settings, method.encoder = features, s, net
        start = time.perf_counter()
        method.encode(X[split.test])
        encode = time.perf_counter() - start
        rows.append({"dataset": name, "features": features.n_features, "dim": s["embedding_size"], "batch": batch,
                     "parameters (M)": round(sum(p.numel() for p in net.parameters()) / 1e6, 2),
                     "train rows": n, "steps/epoch": steps_per_epoch,
                     "epochs run": round(steps / steps_per_epoch, 1), "steps": steps,
                     "s/step": round(step, 3), "encode s": round(encode, 1),
                     "estimate s": round(steps * step + encode), "rules": "; ".join(rules)})
        print(rows[-1], flush=True)
        del net, optimiser
    frame = pd.DataFrame(rows)
    print(frame.to_markdown(index=False))
    print(f"\ntotal estimate: {frame['estimate s'].sum() / 60:.1f} min ({device}, {torch.get_num_threads()} threads, "
          f"{'bf16' if bf16 else 'fp32'})")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
