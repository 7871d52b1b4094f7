"""What a no-op `dvc repro` spends reading params: DVC's own YAML parse and `dpath.get` lookups of
the keys the stages list, for this dvc.yaml and params.yaml, against the same keys listed one by
one (the `pretrain` and `evaluate` sections, which the `pretrain@<dataset>-<ratio>` and
`evaluate@<dataset>` stages list whole, expanded into their keys: docs/performance.md, "The
pipeline on the CPU").

Usage (repository root):
    python benchmarks/noop_params.py [--repeats 3]

DVC parses params.yaml once per stage instance that lists keys and looks each key up with
`dpath.get`, which walks every node of the parsed file. Printed: the stage instances, keys and
nodes; per repeat the seconds of the parses, of the lookups as listed and of the lookups key by
key; the best of each and the saving. Nothing is run or written.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def listed_keys(root: Path) -> list[tuple[str, list[str]]]:
    """(stage name, the params.yaml keys it lists) of every stage instance of the root dvc.yaml (what
    `dvc repro` runs; analyses/dvc.yaml's are opt-in) that lists some, as DVC resolves it (a stage
    tracking the whole file lists none: DVC parses the file for it but looks no key up)."""
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        out = []
        for stage in repo.index.stages:
            if Path(stage.path) != root / "dvc.yaml":
                continue
            keys = [key for dep in stage.deps if isinstance(dep, ParamsDependency)
                    and Path(dep.fs_path).name == "params.yaml" for key in dep.params]
            if any(isinstance(dep, ParamsDependency) for dep in stage.deps):
                out.append((stage.addressing, keys))
        return out


SECTIONS = ("pretrain", "evaluate")  # listed whole by their stages


def key_by_key(keys: list[str], config: dict, sections: tuple[str, ...] = SECTIONS) -> list[str]:
    """``keys`` with each of ``sections`` listed whole replaced by its keys, one lookup each."""
    out: list[str] = []
    for key in keys:
        if key in sections and isinstance(config.get(key), dict):
            out += [f"{key}.{name}" for name in config[key]]
        else:
            out.append(key)
    return out


def nodes(obj) -> int:
    if isinstance(obj, dict):
        return 1 + sum(nodes(v) for v in obj.values())
    if isinstance(obj, list):
        return 1 + sum(nodes(v) for v in obj)
    return 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    from entry import positive  # benchmarks/entry.py

    parser.add_argument("--repeats", type=positive, default=3)
    args = parser.parse_args(argv)

    import dpath
    from dvc.fs import LocalFileSystem
    from dvc.utils.serialize import load_yaml

    stages = listed_keys(ROOT)
    fs, path = LocalFileSystem(), str(ROOT / "params.yaml")
    config = load_yaml(path, fs=fs)
    listed = [key for _, keys in stages for key in keys]
    single = [key for _, keys in stages for key in key_by_key(keys, config)]
    print(f"{len(stages)} stage instances list params.yaml keys: {len(listed)} keys as listed, {len(single)} "
          f"key by key; params.yaml has {nodes(config)} nodes")

    def timed(fn) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    def look_up(keys):
        return lambda: [dpath.get(config, key, separator=".") for key in keys]

    times = {"parses": [], "listed": [], "single": []}
    for repeat in range(args.repeats):
        times["parses"].append(timed(lambda: [load_yaml(path, fs=fs) for _ in stages]))
        times["listed"].append(timed(look_up(listed)))
        times["single"].append(timed(look_up(single)))
        print(f"repeat {repeat + 1}: {len(stages)} parses {times['parses'][-1]:.3f} s, {len(listed)} lookups "
              f"{times['listed'][-1]:.3f} s, {len(single)} lookups {times['single'][-1]:.3f} s")
    parses, as_listed, one_by_one = (min(times[k]) for k in ("parses", "listed", "single"))
    print(f"best: parses {parses:.3f} s, lookups as listed {as_listed:.3f} s, key by key {one_by_one:.3f} s "
          f"({one_by_one / as_listed:.1f}x the seconds, {one_by_one - as_listed:.3f} s more)")
    return 0


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
