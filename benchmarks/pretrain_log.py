"""Every encoder's training record of the current pipeline outputs, as one JSON file.

Usage (repository root): python benchmarks/pretrain_log.py OUT.json

Reads `data/models/<dataset>/r<ratio>/log.json` for the datasets and ratios of params.yaml and
writes, per "<dataset> r=<ratio> seed <seed>": best and stop epoch, steps, whether the step cap
stopped it, seconds, best validation objective, masked columns, the precision that ran, and the
validation objective per epoch (5 decimals). This is how `reports/experiments/*/pretrain_log.json` are made.
"""

import argparse
import json
from pathlib import Path

from seba.core.config import load_params, ratio_tag

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("best_epoch", "stop_epoch", "steps", "capped", "seconds", "best_val_loss", "masked_columns")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    params = load_params(ROOT / "params.yaml")
    out = {}
    for dataset in params.datasets:
        for ratio in params.ratios:
            log = json.loads((ROOT / "data" / "models" / dataset / ratio_tag(ratio) / "log.json").read_text())
            for seed, entry in sorted(log["seeds"].items(), key=lambda item: int(item[0])):
                record = {key: entry[key] for key in KEYS}
                record["precision"] = log["precision"]
                record["val_loss"] = [round(value, 5) for value in entry["val_loss"]]
                # the key the committed records and their readers use (benchmarks/encoder_speed.py
                # looks for "<dataset> r="): "cmc r=0.1 seed 0", "cmc r=random seed 0"
                out[f"{dataset} r={ratio_tag(ratio)[1:]} seed {seed}"] = record
    args.out.write_text(json.dumps(out, indent=1))
    print(f"{len(out)} encoders -> {args.out}")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
