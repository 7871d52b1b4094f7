"""The two commands, ``queue`` and ``collect`` (``python -m seba.ablations``; the package docstring
says what each does)."""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
from pathlib import Path

from seba.core.config import parse_params, read_params_file
from seba.core.errors import ConfigError
from seba.core.runtime import repo_root
from seba.ablations.variants import ABLATIONS, EXPERIMENTS, PAPER_SEEDS, PREFIX
from seba.ablations.experiments import dvc_episodes_reader, dvc_json, existing_names, read_show
from seba.ablations.queueing import (
    check_plans, check_prefix, check_site_cache, follow_queue, parse_set, plan, shell_quote, untracked_inputs,
    warn_stale_running)
from seba.ablations.merging import git_code_diff, read_collected
from seba.ablations.collecting import collect
from seba.ablations.writing import load_paper, write

def queue(args: argparse.Namespace) -> int:
    check_prefix(args.prefix)
    root = repo_root()
    check_site_cache(root)
    try:
        workspace = parse_params(read_params_file(root / "params.yaml"))
    except ConfigError as exc:
        raise SystemExit(f"error: the workspace's {exc}; nothing was queued") from None
    plans = plan(args.ablations, args.seeds, args.datasets, args.prefix, parse_set(args.set or []), args.only,
                 workspace.evaluate.prototype_shots)
    check_plans(plans, root)
    copied = tuple(untracked_inputs(workspace, args.datasets or workspace.datasets, root))
    plans = [dataclasses.replace(p, copy_paths=copied) for p in plans]
    existing = {} if args.dry_run else existing_names(dvc_json(["exp", "show", "--json"], root))
    warn_stale_running(existing, root)
    clash = [p.name for p in plans if p.name in existing]
    if clash and not args.skip_existing:
        listed = ", ".join(f"{n} ({existing[n]})" for n in clash)
        raise SystemExit(f"error: experiments of this commit already have these names: {listed}. Remove them "
                         f"(`dvc exp remove NAME`, `dvc queue remove --failed`), choose another --prefix, "
                         f"or add --skip-existing to queue only the others")
    for p in plans:
        if p.name in existing:
            print(f"skipped {p.name}: exists ({existing[p.name]})")
            continue
        cmd = p.command()
        print(" ".join(shell_quote(c) for c in cmd), flush=True)
        if not args.dry_run and subprocess.run(cmd, cwd=root).returncode != 0:
            done = plans.index(p)
            raise SystemExit(f"error: `dvc exp run --queue` failed for {p.name} (its message is above; a DVC run "
                             f"in this workspace holds its lock until it ends: `dvc queue status`); "
                             f"{done} experiment(s) before it were queued. Queue the rest again with "
                             f"--skip-existing")
    run = None
    if args.run or args.collect:
        run = ["dvc", "exp", "run", "--run-all", "--jobs", str(args.jobs)]
    elif args.start:
        run = ["dvc", "queue", "start", "--jobs", str(args.jobs)]
    if not run:
        return 0
    print(" ".join(run), flush=True)
    collect = "python -m seba.ablations collect" + ("" if args.prefix == PREFIX else f" --prefix {args.prefix}")
    if args.dry_run:
        if args.collect:
            print(collect)
        return 0
    if args.start:
        code = subprocess.run(run, cwd=root).returncode
        print(f"then: {collect} (it names the experiments that failed)", flush=True)
        return code
    code, states = run_all(run, root, [p.name for p in plans])
    # `dvc exp run --run-all` exits 0 when an experiment fails: the states say
    failed = [p.name for p in plans if states.get(p.name) == "failed"]
    if failed:
        print(f"failed: {', '.join(failed)} (`dvc queue logs NAME`)", flush=True)
    code = code or int(bool(failed))
    if not args.collect:
        print(f"then: {collect} (it names the experiments that failed)", flush=True)
        return code
    print(collect, flush=True)  # failed experiments too: the report names them
    collected = main(["collect", "--prefix", args.prefix])
    return code or collected


def run_all(run: list[str], root: Path, names: list[str]) -> tuple[int, dict[str, str]]:
    """`dvc exp run --run-all`, run again while some of `names` are still queued and each run leaves
    fewer: DVC's queue worker can end with tasks still queued (treeverse/dvc#10562, #8165; seen here
    after one experiment of two). Returns the exit status and the experiments' states after it."""
    left: int | None = None
    while True:
        code = follow_queue(run, root)
        states = existing_names(dvc_json(["exp", "show", "--json"], root))
        queued = [n for n in names if states.get(n) == "queued"]
        if code != 0 or not queued:
            return code, states
        if left is not None and len(queued) >= left:
            print(f"still queued, and the last run of the queue ran none of them: {', '.join(queued)} "
                  f"(`dvc queue status`; `dvc exp run --run-all` runs them)", flush=True)
            return 1, states
        print(f"DVC's queue worker ended with {len(queued)} experiment(s) still queued ({', '.join(queued)}): "
              f"running the queue again", flush=True)
        left = len(queued)


def collect_command(args: argparse.Namespace) -> int:
    root = repo_root()
    show = dvc_json(["exp", "show", "--json", *(["--all-commits"] if args.all_commits else [])], root)

    def read_log(path: str) -> str | None:
        try:
            return Path(path).read_text(errors="replace")
        except OSError:
            return None

    def named(folder: str) -> str:  # relative to the repository when inside it
        path = Path(folder).resolve()
        return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)

    merge = [read_collected(Path(folder), named(folder)) for folder in args.merge or []]  # before anything is written
    c = collect(show, dvc_episodes_reader(root), load_paper(root), args.prefix, read_log, merge,
                git_code_diff(root), args.allow_code_change)
    if not c.chosen:  # an empty report would replace the one there (the committed collection, say)
        elsewhere = [] if args.all_commits else [
            e for e in read_show(dvc_json(["exp", "show", "--json", "--all-commits"], root))
            if e.name.startswith(f"{args.prefix}-")]
        print(f"collect: no experiment named {args.prefix}-* among the "
              + ("experiments of every commit" if args.all_commits else "current commit's experiments")
              + "; nothing written (reports/ablations.md is kept)"
              + (f". {len(elsewhere)} are on other commits: add --all-commits" if elsewhere else
                 ". Queue them first: python -m seba.ablations queue --collect"), file=sys.stderr)
        return 1
    report = write(c, root)
    missing = c.table[c.table["status"] != "ok"][["ablation", "variant", "status"]].drop_duplicates()
    failed = sorted(e.name for e in c.chosen.values() if e.state == "failed")
    print(f"{report.relative_to(root)}: {len(c.chosen)} experiments"
          + (f"; missing or failed: {len(missing)} variant rows (see its 'Missing and failed')" if len(missing) else "")
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    summary = sys.modules[__package__].__doc__.split("\n\n")[0]  # the package's docstring (loaded before this module)
    parser = argparse.ArgumentParser(prog="python -m seba.ablations", description=summary)
    sub = parser.add_subparsers(dest="command", required=True)
    q = sub.add_parser("queue", help="queue the ablation experiments (dvc exp run --queue)")
    q.add_argument("--ablations", nargs="+", choices=[a.name for a in ABLATIONS],
                   help="which ablations (default: all); the default experiment is always queued")
    q.add_argument("--only", nargs="+", metavar="VARIANT", choices=list(EXPERIMENTS),
                   help="just these experiments, by variant name (e.g. ratio-0.1 head-finetune; default among them)")
    q.add_argument("--seeds", nargs="+", type=int, default=list(PAPER_SEEDS), help="default: 0 1 2 3 4 (the paper's)")
    q.add_argument("--datasets", nargs="+", help="default: the params' datasets")
    q.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="another params override for every experiment (repeatable), e.g. evaluate.episodes=20")
    q.add_argument("--prefix", default=PREFIX, help=f"experiment names: PREFIX-<variant> (default {PREFIX})")
    q.add_argument("--skip-existing", action="store_true", help="queue only the experiments whose names are free")
    runner = q.add_mutually_exclusive_group()
    runner.add_argument("--run", action="store_true",
                        help="then run the queue and wait: dvc exp run --run-all --jobs N (follows the logs)")
    runner.add_argument("--start", action="store_true",
                        help="then start DVC's queue workers in the background: dvc queue start --jobs N")
    q.add_argument("--collect", action="store_true",
                   help="run the queue as --run does, then collect (same --prefix): queue, run and report in one command")
    q.add_argument("--jobs", type=int, default=1,
                   help="experiments at once (default 1: later experiments reuse earlier ones' pretraining)")
    q.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    c = sub.add_parser("collect", help="write reports/ablations.md and reports/ablations/ from the experiments")
    c.add_argument("--prefix", default=PREFIX)
    c.add_argument("--all-commits", action="store_true",
                   help="read the experiments of every commit (default: those of the current commit)")
    c.add_argument("--merge", action="append", metavar="FOLDER",
                   help="add the tables this run lacks from an earlier collection (a folder written by collect, "
                        "e.g. reports/ablations, read before it is overwritten); refused unless its experiments "
                        "had this run's params and code but for the tables (repeatable)")
    c.add_argument("--allow-code-change", action="store_true",
                   help="with --merge: merge experiments of other code too, and say so in the report")
    args = parser.parse_args(argv)
    if args.command == "queue":
        if args.jobs < 1:
            parser.error("--jobs must be at least 1")
        if args.collect and args.start:
            parser.error("--collect waits for the queue (as --run does): it cannot follow --start")
        return queue(args)
    return collect_command(args)
