"""The pipeline's stages run in one process, table after table, timed: for a machine without DVC
(a GPU box) where each stage's own code should run exactly as `dvc repro` runs it, and where
what finished must survive a time limit.

Usage (repository root of a throwaway checkout: params.yaml is edited for the run and put back
at the end):
    python benchmarks/gpu_protocol.py [--set KEY=VALUE ...] [--datasets cmc diabetes ...]
                                      [--deadline SECONDS] [--stage-deadline SECONDS] [--resume]
                                      [--out DIR] [--validate-only]

`--set` edits params.yaml as `benchmarks/gpu_run.sh start` does (dotted keys, YAML values;
`seeds=N` is seeds 0 .. N-1, `seeds=A..B` seeds A to B). Then, as `python stages/<stage>.py ...` but in this process (so
each stage instance pays no start-up; `runpy`, the script's own `main` and error handling):
`validate`, and for each dataset in turn `fetch`, `preprocess`, `split`, `pretrain` for every
ratio, `evaluate` and `baseline` for every method of `baselines.methods`. A stage that fails
stops the run (its error printed). No new dataset is started after `--deadline` seconds, and no
new pretrain stage after `--stage-deadline` seconds (the run ends there, its finished stages kept).
`--validate-only` runs the `validate` stage on the edited params and stops (`gpu_checks.sh` does so
before its other checks, so that a missing table fails at once, not after them).

`--resume` is for a table longer than one call of a machine that keeps the checkout's ignored
files between calls (the lent GPU machine, while it is warm): a pretrain stage that an earlier
run of this script finished in this checkout, with the same params (all of params.yaml after the
`--set` edits but `datasets`), is not run again; its encoders in data/models are used as they
are and its recorded seconds are counted (marked `resumed` in timings.json). Each finished
pretrain stage leaves its record in `.dvc/tmp/gpu-protocol/` (git-ignored). So a table cut by
`--stage-deadline` in one call is finished by the same command with `--resume` in the next.
Seeds are independent, so a table can also be split by seeds (`seeds=0..49`, then `seeds=50..99`,
on any machine), the logs merged by `benchmarks/protocol_cells.py`; on CUDA a seed's arithmetic
then differs from a 100-seed stack's in rounding only (batched products of another size).
`--cheapest-first` runs the datasets in the order of their measured cost (`CHEAPEST_FIRST`;
others after them), so that a time limit cuts the dearest.

After each dataset, `--out DIR` receives `timings.json` (each stage instance's wall seconds,
the device, the params) and the dataset's outputs packed two datasets to a file,
`tables_<k>.tgz` (its reports/episodes files, SeBA's and the baselines', reports/metrics and
the encoders' log.json; not the stage records of data/tracking, which hold every episode again
and would make the archives too big to carry), so that a run stopped by a time limit keeps every
dataset it finished. Unpack the archives in a checkout with the same params to aggregate them
(`python stages/aggregate.py`, `python benchmarks/seed_spread.py`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import runpy
import signal
import sys
import tarfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DONE = ROOT / ".dvc" / "tmp" / "gpu-protocol"  # a record per finished pretrain stage (--resume)


def edit_params(text: str, settings: list[str]) -> str:
    """params.yaml's text with each KEY=VALUE applied (the comments are lost; the file is put back
    after the run); YAML read as DVC reads it (seba.core.config.ParamsLoader)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from seba.core.config import ParamsLoader, dump_params

    params = yaml.load(text, Loader=ParamsLoader)
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"{item!r}: a setting is KEY=VALUE (--set of gpu_protocol.py, the arguments of gpu_run.sh start)")
        if key == "seeds" and re.fullmatch(r"-?\d+\.\.-?\d+", value.strip()):
            first, last = (int(v) for v in value.split(".."))
            if last < first:
                raise SystemExit(f"--set seeds={value}: the last seed is below the first")
            if first < 0:
                raise SystemExit(f"--set seeds={value}: seeds are whole numbers >= 0")
            value = list(range(first, last + 1))
        else:
            try:
                value = yaml.load(value, Loader=ParamsLoader)
            except yaml.YAMLError as exc:
                raise SystemExit(f"--set {item}: the value is not valid YAML ({str(exc).splitlines()[0]})") from None
        if key == "seeds" and isinstance(value, int):
            if value < 1:
                raise SystemExit(f"--set seeds={value}: a number of seeds is at least 1 (seeds 0 … N−1)")
            value = list(range(value))
        node = params
        for part in key.split(".")[:-1]:
            if not isinstance(node.get(part), dict):
                raise SystemExit(f"params.yaml has no section {part!r} (in {key!r})")
            node = node[part]
        node[key.split(".")[-1]] = value
    return dump_params(params)  # quoted where YAML 1.2 would read text as a number


def run_stage(script: str, *args: str) -> float:
    """``python stages/<script>.py args`` in this process; its wall seconds. A failure ends the run."""
    argv = sys.argv
    sys.argv = [str(ROOT / "stages" / f"{script}.py"), *args]
    start = time.perf_counter()
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except Stopped:
        raise
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise SystemExit(f"stage {script} {' '.join(args)} failed (exit {exc.code})") from None
    finally:
        sys.argv = argv
    return time.perf_counter() - start


def params_key(params_text: str) -> str:
    """What a finished pretrain stage's record is keyed on: the run's params but `datasets` (a
    second call may name fewer or other tables)."""
    params = yaml.safe_load(params_text)
    params.pop("datasets", None)
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()


def done_record(dataset: str, ratio: float) -> Path:
    return DONE / f"{dataset}-r{ratio}.json"


def mark_done(dataset: str, ratio: float, key: str, seconds: float) -> None:
    """Record that ``dataset``'s pretrain stage for ``ratio`` finished under params ``key``."""
    DONE.mkdir(parents=True, exist_ok=True)
    done_record(dataset, ratio).write_text(json.dumps({"params": key, "seconds": round(seconds, 3)}))


def finished_seconds(dataset: str, ratio: float, key: str) -> float | None:
    """The seconds of ``dataset``'s pretrain stage for ``ratio`` if this checkout finished it under
    params ``key`` and its encoders' log is still there; else None (the stage must run)."""
    from seba.core.config import ratio_tag

    record = done_record(dataset, ratio)
    if not record.exists() or not (ROOT / "data" / "models" / dataset / ratio_tag(ratio) / "log.json").exists():
        return None
    entry = json.loads(record.read_text())
    return float(entry["seconds"]) if entry.get("params") == key else None


def device_description() -> dict:
    import torch

    info = {"python": platform.python_version(), "torch": torch.__version__, "cpu": platform.processor()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def pack(out: Path, datasets: list[str], index: int) -> None:
    """The outputs of ``datasets`` into ``out/tables_<index>.tgz`` (written whole, then renamed)."""
    members = []
    for dataset in datasets:
        members += sorted((ROOT / "reports" / "episodes").glob(f"{dataset}.csv"))  # SeBA's
        members += sorted((ROOT / "reports" / "episodes").glob(f"*/{dataset}.csv"))  # the baselines'
        members += [p for p in [ROOT / "reports" / "metrics" / f"{dataset}.json"] if p.exists()]
        members += sorted((ROOT / "data" / "models" / dataset).glob("*/log.json"))
    tmp = out / f".tables_{index}.tgz"
    with tarfile.open(tmp, "w:gz") as tar:
        for path in members:
            tar.add(path, arcname=str(path.relative_to(ROOT)))
    tmp.replace(out / f"tables_{index}.tgz")


# The eight tables by SeBA's cost on an H100, the same order at 10 and at 100 seeds
# (docs/performance.md: "Stacked seeds on an H100", "Precision on an H100").
CHEAPEST_FIRST = ("diabetes", "cmc", "semeion", "karhunen", "dna", "pixel", "optdigits", "income")


def cheapest_first(datasets: list[str]) -> list[str]:
    """``datasets`` in CHEAPEST_FIRST's order, any others after them in their own order."""
    return sorted(datasets, key=lambda d: CHEAPEST_FIRST.index(d) if d in CHEAPEST_FIRST else len(CHEAPEST_FIRST))


class Stopped(SystemExit):
    """The run stopped by a signal (not a stage's failure)."""


def restore_on_sigterm() -> None:
    """SIGTERM (`timeout`'s signal, a call's time limit) as SystemExit in this process, so that
    `main`'s `finally` puts params.yaml back (the default action ends the process without it);
    a forked child keeps the default action."""
    parent = os.getpid()

    def stop(signum, frame):
        if os.getpid() != parent:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Stopped(f"stopped by signal {signum} (a time limit?): params.yaml put back; "
                      "the tables packed in --out so far are complete")

    signal.signal(signal.SIGTERM, stop)


def main() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from benchmarks.entry import seconds

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--datasets", nargs="*", help="in this order (default: params.yaml's datasets)")
    parser.add_argument("--cheapest-first", action="store_true", help="the datasets in CHEAPEST_FIRST's order")
    parser.add_argument("--deadline", type=seconds, default=0, help="start no dataset after this many seconds")
    parser.add_argument("--stage-deadline", type=seconds, default=0,
                        help="start no pretrain stage after this many seconds (see --resume)")
    parser.add_argument("--resume", action="store_true",
                        help="skip the pretrain stages an earlier run finished here with the same params")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--validate-only", action="store_true",
                        help="the validate stage on the edited params only (a missing table or wheel found before "
                             "a GPU call's other checks), params.yaml put back")
    args = parser.parse_args()
    if args.out:
        if args.out.exists() and not args.out.is_dir():
            raise SystemExit(f"--out {args.out}: a file, not a folder")
        args.out.mkdir(parents=True, exist_ok=True)

    params_file = ROOT / "params.yaml"
    original = params_file.read_text()
    settings = list(args.set)
    if args.datasets:
        settings.append(f"datasets=[{','.join(args.datasets)}]")
    edited = edit_params(original, settings)
    key = params_key(edited)
    restore_on_sigterm()
    params_file.write_text(edited)
    try:
        sys.path.insert(0, str(ROOT))
        from seba.core.config import load_params

        params = load_params(params_file)
        timings = {"device": device_description(), "params": yaml.safe_load(params_file.read_text()),
                   "stages": [], "datasets": {}}
        start = time.perf_counter()

        def timed(script: str, *stage_args: str) -> float:
            seconds = run_stage(script, *stage_args)
            timings["stages"].append({"stage": script, "args": list(stage_args), "seconds": round(seconds, 3)})
            print(f"== {script} {' '.join(stage_args)}: {seconds:.1f} s", flush=True)
            return seconds

        def pretrain(dataset: str, ratio: float) -> float | None:
            """The stage's seconds (run now, or by an earlier run with --resume); None: not started
            (--stage-deadline)."""
            stage_args = ("--dataset", dataset, "--ratio", str(ratio))
            earlier = finished_seconds(dataset, ratio, key) if args.resume else None
            if earlier is not None:
                timings["stages"].append({"stage": "pretrain", "args": list(stage_args), "seconds": earlier,
                                          "resumed": True})
                print(f"== pretrain {' '.join(stage_args)}: finished by an earlier run ({earlier:.1f} s)", flush=True)
                return earlier
            if args.stage_deadline and time.perf_counter() - start > args.stage_deadline:
                return None
            done_record(dataset, ratio).unlink(missing_ok=True)  # its encoders are about to be replaced
            seconds = timed("pretrain", *stage_args)
            mark_done(dataset, ratio, key, seconds)
            return seconds

        timed("validate")
        if args.validate_only:
            return
        done: list[str] = []
        stopped = False
        for dataset in cheapest_first(params.datasets) if args.cheapest_first else params.datasets:
            if args.deadline and time.perf_counter() - start > args.deadline:
                print(f"== deadline: {dataset} and the datasets after it not started", flush=True)
                break
            seconds = {"fetch": timed("fetch", "--dataset", dataset),
                       "preprocess": timed("preprocess", "--dataset", dataset),
                       "split": timed("split", "--dataset", dataset), "pretrain": 0.0}
            for ratio in params.ratios:
                ratio_seconds = pretrain(dataset, ratio)
                if ratio_seconds is None:
                    print(f"== stage deadline: pretrain {dataset} r={ratio} and the stages after it not started "
                          "(the same command with --resume on this machine goes on from there)", flush=True)
                    stopped = True
                    break
                seconds["pretrain"] += ratio_seconds
            if stopped:
                break
            seconds["evaluate"] = timed("evaluate", "--dataset", dataset)
            seconds["baselines"] = sum(timed("baseline", "--method", method, "--dataset", dataset)
                                       for method in params.baselines.methods)
            timings["datasets"][dataset] = {k: round(v, 2) for k, v in seconds.items()}
            done.append(dataset)
            print(f"== {dataset}: {sum(seconds.values()):.1f} s of stage bodies "
                  f"({', '.join(f'{k} {v:.1f}' for k, v in seconds.items())}); "
                  f"{time.perf_counter() - start:.0f} s since the start", flush=True)
            if args.out:
                index = (len(done) - 1) // 2
                pack(args.out, done[2 * index:], index)
                (args.out / "timings.json").write_text(json.dumps(timings, indent=1))
        timings["total_seconds"] = round(time.perf_counter() - start, 1)
        if args.out:
            (args.out / "timings.json").write_text(json.dumps(timings, indent=1))
        print(f"== {len(done)} datasets in {timings['total_seconds']} s", flush=True)
    finally:
        params_file.write_text(original)


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
