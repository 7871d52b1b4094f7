"""DVC stage `pretrain@<dataset>-<ratio>`: one SeBA encoder per seed for one separation ratio."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's seba before an installed one (docs/ablations.md)

from seba.core.cli import parse_args, run_stage  # first: hands the stage to a warm worker (seba/core/worker.py)

from seba.core import paths
from seba.core.config import params_for_dataset
from seba.core.errors import ConfigError
from seba.pretrain_stage import finish, prepare, train
from seba.core.runtime import repo_root, write_json
from seba.core.tracking import Tracker


def main() -> None:
    args = parse_args(__doc__, dataset=str, ratio=paths.parse_ratio)
    params = params_for_dataset(args.dataset)
    if args.ratio not in params.ratios:  # (each lies in (0, 1) or is 'random')
        raise ConfigError(f"--ratio {args.ratio} is not in ratios {list(params.ratios)}: "
                          f"dvc.yaml has a pretrain stage for those only")
    name = paths.ratio_tag(args.ratio)[1:]
    root = repo_root()
    run = prepare(params, args.dataset, args.ratio, root)
    with Tracker("pretrain", f"pretrain {args.dataset} r={name}", params=run.tracked,
                 tags={"dataset": args.dataset, "ratio": name}, root=root) as tracker:
        train(run, tracker)
    write_json(paths.training_log(root, args.dataset, args.ratio), run.training_log)
    finish(run)  # the seeds kept for a rerun are no longer needed


if __name__ == "__main__":
    run_stage("pretrain", main)
