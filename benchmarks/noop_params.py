"""What a no-op `dvc repro` spends reading params: DVC's own YAML parse and `dpath.get` lookups of
the keys the stages list, for this dvc.yaml and params.yaml, against the same with the
`pretrain@<dataset>-<ratio>` stages listing the `pretrain` section whole (one lookup for all of its keys but `ratios`, which
would have to leave the section: docs/performance.md, "The pipeline on the CPU").

Usage (repository root):
    python benchmarks/noop_params.py [--repeats 3]

DVC parses params.yaml once per stage instance that lists keys and looks each key up with
`dpath.get`, which walks every node of the parsed file. Printed: the stage instances, keys and
nodes; per repeat the seconds of the parses, of the lookups as listed and of the lookups with the
section whole; the best of each and the saving. Nothing is run or written.
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


def whole_section(keys: list[str], section: str = "pretrain", but: str = "ratios") -> list[str]:
    """``keys`` with those of ``section`` (all but ``but``) replaced by the section itself."""
    inner = [k for k in keys if k.startswith(section + ".") and k != f"{section}.{but}"]
    if len(inner) < 2:
        return keys
    return [k for k in keys if k not in inner] + [section]


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
    listed = [key for _, keys in stages for key in keys]
    whole = [key for name, keys in stages for key in (whole_section(keys) if name.startswith("pretrain@") else keys)]
    fs, path = LocalFileSystem(), str(ROOT / "params.yaml")
    config = load_yaml(path, fs=fs)
    print(f"{len(stages)} stage instances list params.yaml keys: {len(listed)} keys as listed, {len(whole)} with "
          f"the pretrain section whole; params.yaml has {nodes(config)} nodes")

    def timed(fn) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    def look_up(keys):
        return lambda: [dpath.get(config, key, separator=".") for key in keys]

    times = {"parses": [], "listed": [], "whole": []}
    for repeat in range(args.repeats):
        times["parses"].append(timed(lambda: [load_yaml(path, fs=fs) for _ in stages]))
        times["listed"].append(timed(look_up(listed)))
        times["whole"].append(timed(look_up(whole)))
        print(f"repeat {repeat + 1}: {len(stages)} parses {times['parses'][-1]:.3f} s, {len(listed)} lookups "
              f"{times['listed'][-1]:.3f} s, {len(whole)} lookups {times['whole'][-1]:.3f} s")
    parses, as_listed, as_whole = (min(times[k]) for k in ("parses", "listed", "whole"))
    print(f"best: parses {parses:.3f} s, lookups as listed {as_listed:.3f} s, with the section whole "
          f"{as_whole:.3f} s ({as_listed / as_whole:.1f}x fewer seconds, {as_listed - as_whole:.3f} s less)")
    return 0


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
