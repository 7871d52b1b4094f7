"""DVC stage `fetch@<dataset>`: the raw table from OpenML, or the verified offline snapshot."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's seba before an installed one (docs/ablations.md)

from seba.core.cli import parse_args, run_stage  # first: hands the stage to a warm worker (seba/core/worker.py)

import time

from seba.core import paths
from seba.core.config import params_for_dataset
from seba.core.data import fetch_table
from seba.core.runtime import atomic_path, log, repo_root, write_json
from seba.core.tracking import Tracker


def main() -> None:
    args = parse_args(__doc__, dataset=str)
    params = params_for_dataset(args.dataset)
    source, root, start = params.sources[args.dataset], repo_root(), time.perf_counter()
    frame, info = fetch_table(args.dataset, source.openml_id, params.fetch.source, root, params.fetch.retries,
                              local=source if source.is_local else None)
    with atomic_path(paths.raw_table(root, args.dataset)) as tmp:
        frame.to_parquet(tmp)
    write_json(paths.raw_info(root, args.dataset), info)
    write_json(paths.own_pretrain(root, args.dataset), dict(source.pretrain))  # what its pretrain stages depend on
    log(f"[fetch {args.dataset}] {info['rows']} rows x {info['features']} features from {info['source']} "
        f"({time.perf_counter() - start:.1f}s)")
    tracked = {"openml_id": source.openml_id, "path": source.path, "fetch.source": params.fetch.source,
               "source_used": info["source"]}
    with Tracker("fetch", f"fetch {args.dataset}", params=tracked, tags={"dataset": args.dataset}, root=root) as tracker:
        tracker.log_metrics({k: info[k] for k in ("rows", "features", "categorical_features",
                                                  "numeric_features", "classes", "missing_cells")})


if __name__ == "__main__":
    run_stage("fetch", main)
