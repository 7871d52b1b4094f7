"""One table, several seeds, several pretraining / split variants, scored on the same kind of
episodes: for finding out why a cell misses the paper (the alternatives the reference notes list).

Usage (repository root):
  python benchmarks/variants.py --dataset diabetes --seeds 0 1 2 \
      --variant default --variant test_fraction=0.2 --variant validation=fresh \
      --variant encoder_out=1024 --variant precision=fp32,min_delta=0

A variant is `key=value[,key=value]` over `split.*` and `pretrain.*` keys (`default` = params.yaml
as it is). Each variant runs the pipeline's own code in-process (split, pretrain every ratio,
evaluate); prints the ensemble's mean accuracy per shot for each seed as it finishes (with the
seconds spent pretraining and evaluating), then the table of seeds, the mean over seeds, and
the paper's value. Several datasets (`--dataset cmc diabetes ...`) run one after the other in
the same process. `--device cuda` trains and evaluates on the GPU. Not part of the test suite.
"""

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.entry import check_openml_datasets  # noqa: E402
from seba.core.config import load_params  # noqa: E402
from seba.core.data import encode_table, load_snapshot, make_split, scale  # noqa: E402
from seba.evaluate import ENSEMBLE, evaluate_members  # noqa: E402
from seba.pretrain import encode, encoder_config, pretrain_encoder  # noqa: E402
from seba.report import load_paper  # noqa: E402


def parse_variant(text: str) -> dict:
    if text == "default":
        return {}
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"error: --variant {text!r}: each part is key=value (or the variant is 'default')")
        out[key.strip()] = value.strip()
    return out


def variant_configs(params, dataset: str, text: str):
    """The split and pretrain settings of variant ``text`` on ``dataset``, or a one-line exit
    naming the key or value that is wrong (before anything runs)."""
    split_cfg, cfg = params.split, params.pretrain_for(dataset)
    for key, value in parse_variant(text).items():
        target = split_cfg if hasattr(split_cfg, key) else cfg if hasattr(cfg, key) else None
        if target is None:
            raise SystemExit(f"error: --variant {text!r}: {key!r} is neither a split nor a pretrain key")
        try:
            changed = dataclasses.replace(target, **{key: cast(getattr(target, key), value)})
        except (TypeError, ValueError) as exc:
            raise SystemExit(f"error: --variant {text!r}: {key}={value!r}: {exc}") from None
        if target is split_cfg:
            split_cfg = changed
        else:
            cfg = changed
    return split_cfg, cfg


def cast(template, value: str):
    if isinstance(template, bool):
        return value.lower() in ("1", "true", "yes")
    return type(template)(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True, nargs="+")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    args = parser.parse_args()
    params = load_params(ROOT / "params.yaml")
    device = torch.device(args.device)
    check_openml_datasets(args.dataset, params)
    for dataset in args.dataset:  # every variant's settings checked before any runs
        for text in args.variant or ["default"]:
            variant_configs(params, dataset, text)
    for dataset in args.dataset:
        run_dataset(params, dataset, args.seeds, args.variant or ["default"], device)


def run_dataset(params, dataset: str, seeds: list[int], variants: list[str], device: torch.device) -> None:
    frame, _ = load_snapshot(params.sources[dataset].openml_id, ROOT / "data" / "snapshot")
    table = encode_table(frame)
    paper = load_paper(ROOT / "data" / "reference" / "paper_results.csv")
    paper = paper[paper["dataset"] == dataset]
    rows = []
    for text in variants:
        split_cfg, cfg = variant_configs(params, dataset, text)
        cfg = dataclasses.replace(cfg, progress_seconds=1e9)
        start = time.perf_counter()
        for seed in seeds:
            split = make_split(table.y, seed, split_cfg.test_fraction, split_cfg.val_fraction)
            X = scale(table, split.train)
            features = []
            seed_start = time.perf_counter()
            for ratio in params.ratios:
                result = pretrain_encoder(X[split.train], X[split.val], table.groups, ratio, seed, cfg, device)
                features.append(encode(result.encoder_state, encoder_config(cfg, X.shape[1]), X[split.test], device))
            pretrain_seconds = time.perf_counter() - seed_start
            episodes = evaluate_members(torch.stack(features), [f"r{r:g}" for r in params.ratios],
                                        table.y[split.test], len(table.classes), seed, params.evaluate,
                                        dataset)
            evaluate_seconds = time.perf_counter() - seed_start - pretrain_seconds
            ens = episodes[episodes["member"] == ENSEMBLE].groupby("shot")["accuracy"].mean()
            for shot, acc in ens.items():
                rows.append({"variant": text, "seed": seed, "shot": int(shot), "accuracy": float(acc)})
            # each seed as it finishes, so a long run that is stopped keeps what it measured
            cells = " / ".join(f"{acc:.2f}" for acc in ens.values)
            print(f"{dataset} {text} seed {seed}: {cells} (pretraining {pretrain_seconds:.1f} s, evaluation "
                  f"{evaluate_seconds:.1f} s; {time.perf_counter() - start:.0f} s so far)", flush=True)
        print(f"{dataset} {text}: {time.perf_counter() - start:.0f} s", flush=True)
    result = pd.DataFrame(rows)
    table_out = result.pivot_table(index=["variant", "seed"], columns="shot", values="accuracy")
    print(table_out.round(2).to_string())
    means = result.groupby(["variant", "shot"])["accuracy"].mean().unstack()
    means.loc["paper"] = paper.set_index("shot")["paper"]
    print("\nmean over seeds (ensemble accuracy, %):")
    print(means.round(2).to_string())


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
