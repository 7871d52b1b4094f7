"""The paper's ablations (tex `sec:ablation`) as DVC experiments: one command queues them, one
collects them into a report against the paper's numbers (docs/ablations.md).

    python -m seba.ablations queue [--ablations ...] [--seeds ...] [--datasets ...] [--run | --start]
    python -m seba.ablations collect [--merge reports/ablations]

``queue`` stages one ``dvc exp run --queue`` experiment per row of ``EXPERIMENTS`` (the default, the
paper's SeBA, is one experiment shared by every ablation's default row). Every experiment sets all
the ablation switches (``DEFAULTS`` overridden by its own), so it is the same whatever params.yaml
holds, and the collector tells the variants apart by their params, not by their names.

``collect`` reads ``dvc exp show --json`` and each experiment's per-episode results
(``reports/episodes/<dataset>.csv`` at the experiment's commit) and writes reports/ablations.md and
reports/ablations/ (CSV tables, one PNG per ablation, the experiments that made them). With
``--merge FOLDER`` it adds the tables an earlier collection has and this run lacks, when that
collection's experiments had this run's params and code (``merge_collected``).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd
import yaml

from seba.core import paths
from seba.core.config import ParamsLoader, parse_params, read_params_file
from seba.core.data import read_manifest
from seba.baselines.base import check_baselines
from seba.core.errors import ConfigError, DataError
from seba.report import checked_numbers
from seba.core.runtime import atomic_path, repo_root, write_text
from seba.validate import data_problems, machine_problems

# ----------------------------------------------------------------------------- the variant table
# The ablation switches and their values in the paper's SeBA (the default row of every ablation).
DEFAULTS: dict[str, Any] = {
    "pretrain.conditioned": True,
    "pretrain.encoder": "mlp",
    "pretrain.normalise": True,
    "pretrain.fill": "zero",
    "ratios": [0.1, 0.2, 0.3, 0.4, 0.5],
    "evaluate.head": "linear",
}
DEFAULT = "default"  # the default experiment's slug


@dataclass(frozen=True)
class Ablation:
    name: str                      # `ablation` in data/reference/paper_ablations.csv
    label: str                     # the paper's table (tex label)
    title: str
    shots: tuple[int, ...]         # the shots the paper reports
    variants: tuple[tuple[str, str], ...]  # (the paper's variant name, experiment slug); the first is the default


# One place: every (ablation, variant) of the paper's tables and the experiment that runs it.
ABLATIONS: tuple[Ablation, ...] = (
    Ablation("conditioning", "tab:conditioned_projector", "Conditioned projector", (1, 5, 10),
             (("Yes (*)", DEFAULT), ("No", "cond-no"))),
    Ablation("encoder", "tab:mlp_and_ft_transformer", "Encoder", (5,),
             (("MLP (*)", DEFAULT), ("FT-Transformer", "enc-ft"))),
    Ablation("norm_imputation", "tab:ablation_norm_imputation", "Preprocessing: normalisation and fill", (5,),
             (("norm=True,fill=zero (*)", DEFAULT), ("norm=True,fill=marginal", "prep-marginal"),
              ("norm=False,fill=zero", "prep-raw"), ("norm=False,fill=marginal", "prep-raw-marginal"))),
    Ablation("ratio_mode", "tab:ablation_masking_ensembling", "Separation ratio: ensemble, single, random", (5,),
             (("Ensemble (*)", DEFAULT), ("Ratio 0.1", "ratio-0.1"), ("Ratio 0.2", "ratio-0.2"),
              ("Ratio 0.3", "ratio-0.3"), ("Ratio 0.4", "ratio-0.4"), ("Ratio 0.5", "ratio-0.5"),
              ("Random ratio", "ratio-random"))),
    Ablation("classifier", "tab:ablation_classifier_5shot", "Few-shot head (5-shot)", (5,),
             (("Linear probe (*)", DEFAULT), ("Proto (eucl)", "head-proto-eucl"), ("Proto (cos)", "head-proto-cos"),
              ("nn (eucl)", "head-nn-eucl"), ("nn (cos)", "head-nn-cos"), ("fine-tuning", "head-finetune"))),
)

# experiment slug -> its switch overrides (beyond DEFAULTS)
EXPERIMENTS: dict[str, dict[str, Any]] = {
    DEFAULT: {},
    "cond-no": {"pretrain.conditioned": False},
    "enc-ft": {"pretrain.encoder": "ft_transformer"},
    "prep-marginal": {"pretrain.fill": "marginal"},
    "prep-raw": {"pretrain.normalise": False},
    "prep-raw-marginal": {"pretrain.normalise": False, "pretrain.fill": "marginal"},
    **{f"ratio-{r:g}": {"ratios": [r]} for r in (0.1, 0.2, 0.3, 0.4, 0.5)},
    "ratio-random": {"ratios": [paths.RANDOM_RATIO]},
    "head-proto-eucl": {"evaluate.head": "prototype_euclidean"},
    "head-proto-cos": {"evaluate.head": "prototype_cosine"},
    "head-nn-eucl": {"evaluate.head": "nn_euclidean"},
    "head-nn-cos": {"evaluate.head": "nn_cosine"},
    "head-finetune": {"evaluate.head": "finetune"},
}

PREFIX = "abl"              # experiment names: <prefix>-<slug>
PAPER_SEEDS = (0, 1, 2, 3, 4)  # the paper's protocol: 5 seeds
MEMBER = "ensemble"         # the member read from the episodes (a single-ratio run's equals its encoder)
COMMON = {"baselines.methods": []}  # what every experiment also sets: no baselines (not compared here)


def ablation(name: str) -> Ablation:
    for a in ABLATIONS:
        if a.name == name:
            return a
    raise KeyError(name)


def signature(slug: str) -> dict[str, Any]:
    """Every switch's value in experiment ``slug``."""
    return {**DEFAULTS, **EXPERIMENTS[slug]}


def experiment_shots(slug: str, ablations: Iterable[Ablation] = ABLATIONS) -> list[int]:
    """The shots an experiment evaluates: those of every ablation it serves (a shot's episodes do
    not depend on the other shots listed)."""
    return sorted({s for a in ablations for _, v in a.variants if v == slug for s in a.shots})


def experiment_label(slug: str) -> str:
    """'ratio_mode: Ratio 0.1' (the default: every ablation's default row)."""
    rows = [f"{a.name}: {v}" for a in ABLATIONS for v, s in a.variants if s == slug]
    return "; ".join(rows) if slug != DEFAULT else "the default, row (*) of every ablation"


# ----------------------------------------------------------------------------- params helpers
def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """{'pretrain': {'fill': 'zero'}} -> {'pretrain.fill': 'zero'}."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            out.update(flatten(value, name))
        else:
            out[name] = value
    return out


# flattened keys that params.yaml has since renamed: an experiment run (or recorded) before the rename
# reads as if run after it
RENAMED = {"pretrain.ratios": "ratios"}


def current_keys(params: dict[str, Any]) -> dict[str, Any]:
    """Flattened params with each key of ``RENAMED`` under its present name."""
    return {RENAMED.get(key, key): value for key, value in params.items()}


def canonical(value: Any) -> Any:
    """A comparable form: lists as tuples, floats rounded (YAML / JSON round trips), bools kept apart."""
    if isinstance(value, (list, tuple)):
        return tuple(canonical(v) for v in value)
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return round(float(value), 9)
    return value


def differing_keys(a: dict[str, Any], b: dict[str, Any], ignore: Iterable[str] = ()) -> list[str]:
    """The (flattened) params whose values differ between a and b, less those in ``ignore``, sorted."""
    ignore = set(ignore)
    return sorted(k for k in set(a) | set(b) if k not in ignore and canonical(a.get(k)) != canonical(b.get(k)))


def short_baselines(chosen: dict[str, Experiment]) -> set[str]:
    """The experiments' baseline commits, 10 hex digits ('' for an experiment without one)."""
    return {e.baseline[:10] for e in chosen.values()}


def commits(chosen: dict[str, Experiment]) -> str:
    """The experiments' baseline commits, short and sorted."""
    return ", ".join(sorted(short_baselines(chosen)))


def commits_by_table(c: "Collected") -> str:
    """Each baseline commit once, with the tables whose results came from its experiments (this run's
    and those of the collections merged in): "abc (cmc, dna); def (income)"."""
    default = c.chosen.get(DEFAULT)
    sources = [(c.chosen, default.datasets if default else c.datasets)]
    sources += [(g.chosen, g.tables) for g in c.merged]
    tables: dict[str, set[str]] = {}
    for chosen, names in sources:
        for commit in sorted(short_baselines(chosen) - {""}):
            tables.setdefault(commit, set()).update(names)
    return "; ".join(f"{commit} ({', '.join(sorted(names))})" for commit, names in tables.items())


def own_switches(params: dict[str, Any], datasets: Iterable[str]) -> list[tuple[str, str, Any]]:
    """(key, switch, value) for each ablation switch that one of ``datasets`` sets for itself in
    these (flattened) params (``sources.<dataset>.pretrain.<switch>``): it overrides the
    experiment's own value on that dataset."""
    return [(f"sources.{d}.{k}", k, params[f"sources.{d}.{k}"]) for d in datasets for k in DEFAULTS
            if f"sources.{d}.{k}" in params]


def identify(params: dict[str, Any]) -> str | None:
    """The experiment slug whose switch values these (flattened) params hold, or None."""
    have = {k: canonical(params.get(k)) for k in DEFAULTS}
    for slug in EXPERIMENTS:
        if have == {k: canonical(v) for k, v in signature(slug).items()}:
            return slug
    return None


def override_text(value: Any) -> str:
    """A value as `dvc exp run -S key=value` (Hydra's override grammar) reads it back: null,
    booleans, numbers (floats to the last digit), text always quoted (so ``,``, spaces, ``null``
    or ``1e3`` stay text), lists; tests/test_ablations.py checks the round trip through DVC's own
    parser."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(override_text(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        # Hydra's quoted text: a backslash is an escape only before a quote (or the closing one) or ${
        text = re.sub(r"(\\+)(?='|$|\$\{)", lambda m: m.group(1) * 2, value).replace("'", "\\'")
        return "'" + text.replace("${", "\\${") + "'"  # ${...}: no interpolation
    raise ValueError(f"{value!r}: no `dvc exp run -S` text for a {type(value).__name__}")


# ----------------------------------------------------------------------------- queue
@dataclass
class Plan:
    name: str
    slug: str
    overrides: dict[str, Any]
    message: str
    copy_paths: tuple[str, ...] = ()  # inputs git does not hold, copied into the experiment's temporary copy

    def command(self) -> list[str]:
        cmd = ["dvc", "exp", "run", "--queue", "-n", self.name, "-m", self.message]
        for path in self.copy_paths:
            cmd += ["-C", path]
        for key, value in self.overrides.items():
            cmd += ["-S", f"{key}={override_text(value)}"]
        return cmd


def parse_set(items: Iterable[str]) -> dict[str, Any]:
    """`--set KEY=VALUE` (VALUE in YAML) for every experiment; the switches are refused."""
    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"error: --set expects KEY=VALUE, got {item!r}")
        if key in DEFAULTS:
            raise SystemExit(f"error: --set {key}: an ablation switch is set by the variant table, not for all")
        if key in ("seeds", "datasets"):
            raise SystemExit(f"error: --set {key}: use --{key}")
        value = yaml.load(text, Loader=ParamsLoader)  # as DVC reads the value it is given
        if isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value)):
            raise SystemExit(f"error: --set {item}: give each setting its own key (e.g. --set {key}.NAME=VALUE), "
                             f"one value per --set")
        out[key] = value
    return out


def check_prefix(prefix: str) -> None:
    """Experiment names are git references: PREFIX-<variant> must be one."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", prefix) or ".." in prefix or prefix.endswith((".", ".lock")):
        raise SystemExit(f"error: --prefix {prefix!r}: experiment names are git references; use letters, digits "
                         f"and '-', '_', '.' (first a letter or digit; no '..', no '.' or '.lock' at the end)")


def evaluated(prototype_shots: Iterable[int], shots: Iterable[int]) -> list[int]:
    """The prototype shots an experiment evaluates: those among its shots (the others change nothing)."""
    shots = list(shots)
    return [s for s in prototype_shots if s in shots]


def plan(ablations: Iterable[str] | None = None, seeds: Iterable[int] = PAPER_SEEDS,
         datasets: Iterable[str] | None = None, prefix: str = PREFIX, extra: dict[str, Any] | None = None,
         only: Iterable[str] | None = None, prototype_shots: Iterable[int] = (1,)) -> list[Plan]:
    """The experiments to queue: the default first (the others reuse its pretraining through
    DVC's run cache when run after it), then each chosen ablation's variants in table order;
    ``only``: just these experiments (slugs of ``EXPERIMENTS``); ``prototype_shots``: the
    workspace's ``evaluate.prototype_shots``, kept where an experiment evaluates them."""
    chosen = [ablation(a) for a in ablations] if ablations else list(ABLATIONS)
    slugs = list(dict.fromkeys(s for a in chosen for _, s in a.variants))
    if only:
        unknown = sorted(set(only) - set(EXPERIMENTS))
        if unknown:
            raise SystemExit(f"error: no experiment {', '.join(unknown)} in the table ({', '.join(EXPERIMENTS)})")
        slugs = [s for s in EXPERIMENTS if s in set(only)]
        chosen = list(ABLATIONS)
    out = []
    for slug in slugs:
        overrides: dict[str, Any] = {"seeds": [int(s) for s in seeds]}
        if datasets:
            overrides["datasets"] = list(datasets)
        overrides["evaluate.shots"] = experiment_shots(slug, chosen)
        # of the workspace's prototype shots, those evaluated (the evaluate stage warns of the others)
        overrides["evaluate.prototype_shots"] = evaluated(prototype_shots, overrides["evaluate.shots"])
        overrides.update(COMMON)
        overrides.update(extra or {})
        overrides.update(signature(slug))
        out.append(Plan(f"{prefix}-{slug}", slug, overrides, f"seba ablation {slug}: {experiment_label(slug)}"))
    return out


def untracked_inputs(params, datasets: Iterable[str], root: Path) -> list[str]:
    """The tables of ``datasets`` that fetch reads from files git does not hold (a supplied copy in
    data/snapshot/ such as Fashion-MNIST's, an own table in data/local/): DVC builds a queued
    experiment's temporary copy from git, so they must be named to it (`dvc exp run -C`)."""
    candidates = []
    for name in datasets:
        source = params.sources.get(name)
        if source is None:
            continue
        if source.path:
            candidates.append(source.path)
        elif source.openml_id is not None:
            try:
                entry = read_manifest(root / paths.SNAPSHOT).get(str(source.openml_id))
            except DataError:  # the validate stage names a bad manifest
                entry = None
            if entry:
                candidates.append(f"{paths.SNAPSHOT}/{entry['file']}")
    out = []
    for path in dict.fromkeys(candidates):
        if (root / path).exists() and subprocess.run(["git", "ls-files", "--error-unmatch", "--", path], cwd=root,
                                                     capture_output=True).returncode != 0:
            out.append(path)
    return out


def dvc_json(args: list[str], root: Path) -> Any:
    result = subprocess.run(["dvc", *args], cwd=root, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"error: dvc {' '.join(args)} failed:\n{result.stderr.strip()}")
    return json.loads(result.stdout or "[]")


def existing_names(show: list) -> dict[str, str]:
    """Experiment name -> state, for every experiment `dvc exp show --json` lists (queued ones too)."""
    return {e.name: e.state for e in read_show(show)}


def check_site_cache(root: Path) -> None:
    """A relative `core.site_cache_dir` in DVC's config breaks every queued (and `--temp`)
    experiment: DVC resolves it against the working directory, and its executor changes into the
    experiment's copy (.dvc/tmp/exps/tmp*) after opening the repository ("unable to open database
    file"). DVC_SITE_CACHE_DIR (absolute) overrides it."""
    env = os.environ.get("DVC_SITE_CACHE_DIR")
    if env and os.path.isabs(env):
        return
    for name in ("config", "config.local"):
        path = root / ".dvc" / name
        text = path.read_text() if path.exists() else ""
        for value in re.findall(r"^\s*site_cache_dir\s*=\s*(.+?)\s*$", text, flags=re.M):
            if not os.path.isabs(value):
                raise SystemExit(f"error: .dvc/{name} sets site_cache_dir = {value}, a relative path: DVC's queued "
                                 f"experiments fail with it ('unable to open database file'). Remove it (`dvc config "
                                 f"--unset core.site_cache_dir`), make it absolute, or export DVC_SITE_CACHE_DIR")


def check_plans(plans: list[Plan], root: Path) -> None:
    """Every experiment's params (params.yaml with its overrides) checked as its `validate` stage
    will check them, before anything is queued: the file's keys and values, what they need of
    this machine, and (where a table is at hand) its rows against the splits and shots. A bad
    --set value is one error now, not a failed run of every experiment."""
    base = read_params_file(root / "params.yaml")
    seen: dict[str, list[str]] = {}
    for p in plans:
        raw = copy.deepcopy(base)
        for key, value in p.overrides.items():
            node = raw
            *parents, last = key.split(".")
            for part in parents:
                if not isinstance(node.get(part), dict):
                    break
                node = node[part]
            else:
                if last in node:
                    node[last] = copy.deepcopy(value)
                    continue
            raise SystemExit(f"error: {p.name}: params.yaml has no key '{key}', and DVC's -S only changes keys "
                             f"that params.yaml has; add it to params.yaml first. Nothing was queued")
        try:
            params = parse_params(raw)
            check_baselines(params.baselines)
        except ConfigError as exc:
            raise SystemExit(f"error: {p.name} would fail its validate stage, so nothing was queued: {exc}") from None
        own = own_switches(flatten(raw), params.datasets)
        if own:
            shown = ", ".join(f"{k}: {v!r}" for k, _, v in own)
            raise SystemExit(f"error: params.yaml sets ablation switches for single datasets ({shown}): every "
                             f"experiment would train those datasets with them whatever its variant. Remove them "
                             f"(the variant table sets the switches); nothing was queued")
        rows = json.dumps([params.datasets, params.seeds, params.evaluate.shots, raw.get("split"), raw.get("sources"),
                           raw.get("fetch")], sort_keys=True, default=str)  # all the rows' checks read
        machine = json.dumps([raw.get("pretrain", {}).get("device"), raw.get("executor"), raw.get("baselines")],
                             sort_keys=True, default=str)
        checks = ((rows, lambda: data_problems(params, root, say=None)), (machine, lambda: machine_problems(params)))
        for key, check in checks:
            if key not in seen:
                seen[key] = check()
            if seen[key]:
                raise SystemExit(f"error: {p.name} would fail its validate stage, so nothing was queued: "
                                 + "; ".join(seen[key]))


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
        print(" ".join(_quote(c) for c in cmd), flush=True)
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


WORKER_INFO = Path(".dvc") / "tmp" / "exps" / "celery"  # DVC's queue workers: dvc-exp-worker-<n>.json


def queue_worker_alive(root: Path) -> bool | None:
    """Whether one of DVC's queue workers for this repository is running, from the files its
    process manager keeps for each (pid, and a returncode once it has ended); None when there are
    none to read (then nothing can be said)."""
    infos = []
    for path in sorted((root / WORKER_INFO).glob("dvc-exp-worker-*.json")):
        try:
            infos.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    if not infos:
        return None
    return any(isinstance(i, dict) and i.get("returncode") is None and pid_alive(i.get("pid")) for i in infos)


def warn_stale_running(states: dict[str, str], root: Path,
                       alive: Callable[[Path], bool | None] = queue_worker_alive) -> list[str]:
    """Warn about experiments that `dvc exp show` lists as running while none of DVC's queue workers
    is alive: their worker died (its terminal closed, its machine went away, or it was killed), so
    they will never finish, and DVC keeps listing them until they are removed. Returns their names."""
    running = sorted(name for name, state in states.items() if state == "running")
    if not running or alive(root) is not False:
        return []
    names = " ".join(running)
    print(f"warning: DVC lists {len(running)} experiment(s) as running, but no queue worker of this repository "
          f"is alive: {', '.join(running)}. They will not finish (their worker has ended); clear them with "
          f"`dvc queue kill {names}` (it may answer that they already aborted) and `dvc queue remove {names}`. "
          f"Stages they completed stay in DVC's run cache, so queueing them again reuses those", flush=True)
    waiting = len(list(paths.tracking(root).glob("*.json")))
    if waiting:  # the records of the stages those experiments finished, written where their copy was not
        print(f"note: {waiting} stage record(s) wait in {paths.TRACKING}/ for MLflow (those of stages the dead "
              f"experiments finished among them): the next `dvc repro` (its `track` stage) or `seba-track` "
              f"pushes them", flush=True)
    return running


def pid_alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
    except (TypeError, ValueError, OverflowError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def follow_queue(run: list[str], root: Path, poll: float = 30.0, patience: int = 3,
                 alive: Callable[[Path], bool | None] = queue_worker_alive,
                 sleep: Callable[[float], None] = time.sleep) -> int:
    """`dvc exp run --run-all`, which follows the queue's logs; stopped (status 0, the caller then
    reads what is still queued) once no queue worker has been alive for ``patience`` polls: a worker
    that crashes (kombu's filesystem broker reading a half-written message, treeverse/dvc-task#73)
    leaves the follower waiting for ever on experiments nobody runs."""
    proc = subprocess.Popen(run, cwd=root)
    dead = 0
    while proc.poll() is None:
        sleep(poll)
        dead = dead + 1 if alive(root) is False else 0
        if dead >= patience and proc.poll() is None:
            print(f"DVC's queue worker has ended (no worker alive for {patience} checks {poll:.0f} s apart) "
                  f"while `{' '.join(run)}` still follows the logs: stopping it", flush=True)
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            return 0
    return proc.returncode


def _quote(text: str) -> str:
    return text if re.fullmatch(r"[\w.,=/@:+-]+", text) else "'" + text.replace("'", "'\\''") + "'"


# ----------------------------------------------------------------------------- reading experiments
@dataclass
class Experiment:
    name: str
    rev: str
    baseline: str
    state: str                     # success | failed | queued | running | ...
    params: dict[str, Any]         # flattened params.yaml
    raw: dict[str, Any] = field(default_factory=dict)  # params.yaml as it is
    timestamp: str = ""
    log: str | None = None         # the queue's log of the run, while DVC keeps it
    slug: str | None = None        # identified from the params
    stages_run: list[str] | None = None

    @property
    def seeds(self) -> list[int]:
        return [int(s) for s in self.params.get("seeds") or []]

    @property
    def datasets(self) -> list[str]:
        return list(self.params.get("datasets") or [])


def read_show(show: list) -> list[Experiment]:
    """Every experiment in `dvc exp show --json` (DVC 3: a list of baseline commits, each with
    ``experiments``: [{"name", "executor": {"state", "local": {"log"}} | null, "revs": [{"rev",
    "name", "data": {"params": {"params.yaml": {"data": ...}}, "timestamp"}, "error"}]}])."""
    out = []
    for baseline in show or []:
        if baseline.get("rev") == "workspace":
            continue
        for exp in baseline.get("experiments") or []:
            executor = exp.get("executor") or {}
            for rev in exp.get("revs") or []:
                data = rev.get("data") or {}
                state = executor.get("state") or ("failed" if rev.get("error") else "success")
                raw = ((data.get("params") or {}).get("params.yaml") or {}).get("data") or {}
                params = current_keys(flatten(raw))
                out.append(Experiment(
                    name=rev.get("name") or exp.get("name") or rev["rev"][:7], rev=rev["rev"],
                    baseline=baseline.get("rev", ""), state=state, params=params, raw=raw,
                    timestamp=data.get("timestamp") or "", log=(executor.get("local") or {}).get("log"),
                    slug=identify(params)))
    return out


def stages_in_log(text: str) -> list[str]:
    """The stages a run's log says DVC ran (not those restored from the run cache or unchanged)."""
    return re.findall(r"Running stage '([^']+)'", text)


def dvc_episodes_reader(root: Path) -> Callable[[Experiment, str], pd.DataFrame]:
    """Reads reports/episodes/<dataset>.csv as the experiment's commit has it (DVC's cache)."""
    from dvc.api import DVCFileSystem

    systems: dict[str, Any] = {}

    def read(exp: Experiment, dataset: str) -> pd.DataFrame:
        if exp.rev not in systems:
            systems[exp.rev] = DVCFileSystem(str(root), rev=exp.rev)
        with systems[exp.rev].open(paths.episodes(Path(), dataset).as_posix(), "r") as handle:
            return pd.read_csv(handle)

    return read


def seed_accuracies(episodes: pd.DataFrame) -> pd.DataFrame:
    """Per (shot, seed): the mean over episodes of the ensemble member's accuracy."""
    part = episodes[episodes["member"] == MEMBER]
    return part.groupby(["shot", "seed"], as_index=False)["accuracy"].mean()


def episode_digests(episodes: pd.DataFrame) -> dict[tuple[int, int], str]:
    """Per (shot, seed): a digest of the ensemble's accuracy in each episode, in episode order (two
    runs can share a seed's mean with different episodes)."""
    part = episodes[episodes["member"] == MEMBER].sort_values("episode")
    return {(int(shot), int(seed)): hashlib.sha256(np.round(g["accuracy"].to_numpy(float), 6).tobytes()).hexdigest()
            for (shot, seed), g in part.groupby(["shot", "seed"])}


# ----------------------------------------------------------------------------- collecting
SIMILAR_RATIO = (0.5, 2.0)  # ours / paper within this range counts as a similar size


@dataclass
class Collected:
    chosen: dict[str, Experiment]            # slug -> the experiment used
    scores: pd.DataFrame                     # slug, dataset, shot, seed, accuracy, default_rev
    table: pd.DataFrame                      # ablation, variant, dataset, shot, ours, ... (one row per cell)
    effects: pd.DataFrame                    # ablation, shot, variant: differences to the default
    best: pd.DataFrame                       # ablation, shot, variant: datasets on which it is best
    datasets: list[str]
    notes: list[str] = field(default_factory=list)
    ignored: list[Experiment] = field(default_factory=list)
    merged: list["Group"] = field(default_factory=list)  # earlier collections whose tables the report adds
    shown: dict[str, str] = field(default_factory=dict)  # table -> rev of the default its report shows


def experiment_for(chosen: dict[str, Experiment], merged: Iterable["Group"], slug: str, dataset: str,
                   default_rev: str | None = None) -> Experiment | None:
    """The experiment whose results a (variant, table) cell shows: a merged collection's where it fills
    that cell, else this run's on this run's tables. A table can hold defaults of several rounds
    (each paired with its own round's variants): ``default_rev`` picks the default shown."""
    merged = list(merged)
    if slug == DEFAULT and default_rev:
        for exp in [chosen.get(DEFAULT)] + [g.chosen.get(DEFAULT) for g in merged if g.supplies(DEFAULT, dataset)]:
            if exp is not None and exp.rev == default_rev:
                return exp
    group = supplier(merged, slug, dataset)
    if group is not None:
        return group.chosen[slug]
    default = chosen.get(DEFAULT)
    if merged and default is not None and dataset not in default.datasets:
        return None
    return chosen.get(slug)


def choose(experiments: list[Experiment], prefix: str) -> tuple[dict[str, Experiment], list[Experiment], list[str]]:
    """Per slug, the experiment to use: the newest finished one, else the newest in any state.
    Only experiments named <prefix>-...; a name that disagrees with the params is noted."""
    notes, ignored = [], []
    candidates: dict[str, list[Experiment]] = {}
    for exp in experiments:
        if not exp.name.startswith(f"{prefix}-"):
            continue
        if exp.slug is None:
            notes.append(f"`{exp.name}` ({exp.rev[:10]}): its ablation switches match no variant of the table; "
                         f"left out ({', '.join(f'{k}={exp.params.get(k)}' for k in DEFAULTS)})")
            ignored.append(exp)
            continue
        named = exp.name[len(prefix) + 1:]
        if named in EXPERIMENTS and named != exp.slug:
            notes.append(f"`{exp.name}` holds the params of variant `{exp.slug}`, not `{named}`: read as `{exp.slug}`")
        candidates.setdefault(exp.slug, []).append(exp)
    chosen = {}
    for slug, exps in candidates.items():
        exps.sort(key=lambda e: (e.state == "success", e.timestamp), reverse=True)
        chosen[slug] = exps[0]
        for other in exps[1:]:
            notes.append(f"`{other.name}` ({other.rev[:10]}, {other.state}) is another run of `{slug}`: "
                         f"`{exps[0].name}` ({exps[0].rev[:10]}) is used")
            ignored.append(other)
    return chosen, ignored, notes


COMPARED_AWAY = set(DEFAULTS) | {"evaluate.shots", "evaluate.prototype_shots"}  # params allowed to differ from the default experiment


def check_comparable(chosen: dict[str, Experiment]) -> list[str]:
    """Notes for experiments whose other params differ from the default experiment's."""
    default = chosen.get(DEFAULT)
    if default is None:
        return []
    notes = []
    for slug, exp in chosen.items():
        if slug == DEFAULT:
            continue
        keys = differing_keys(default.params, exp.params, COMPARED_AWAY)
        if keys:
            shown = ", ".join(f"{k}: {exp.params.get(k)!r} (default {default.params.get(k)!r})" for k in keys[:6])
            notes.append(f"`{exp.name}` differs from the default experiment in more than its switches: {shown}"
                         + (f" and {len(keys) - 6} more" if len(keys) > 6 else ""))
    return notes


def check_code(chosen: dict[str, Experiment], code_diff: Callable[[str, str], list[str] | None] | None) -> list[str]:
    """Notes for experiments of another commit than the default experiment's (`collect
    --all-commits` reads every commit's) whose stage code (CODE_PATHS, by git) differs from it or
    cannot be compared: their differences to the default compare two versions of the code."""
    default = chosen.get(DEFAULT)
    if default is None or code_diff is None:
        return []
    notes, seen = [], {}
    for slug, exp in chosen.items():
        if slug == DEFAULT or exp.baseline == default.baseline:
            continue
        if exp.baseline not in seen:
            seen[exp.baseline] = code_diff(exp.baseline, default.baseline)
        files = seen[exp.baseline]
        if files == []:
            continue
        how = (f"differs from the default experiment's ({default.baseline[:10]}) in {', '.join(files[:8])}"
               + (f" and {len(files) - 8} more" if len(files) > 8 else "") if files
               else f"cannot be compared with the default experiment's ({default.baseline[:10]}): git does not know both")
        notes.append(f"`{exp.name}` ran the code of commit {exp.baseline[:10]}, which {how}: its difference to the "
                     f"default mixes the two (queue both on one commit)")
    return notes


def collect(show: list, read_episodes: Callable[[Experiment, str], pd.DataFrame], paper: pd.DataFrame,
            prefix: str = PREFIX, read_log: Callable[[str], str | None] | None = None,
            merge: Iterable[tuple[pd.DataFrame, list["Group"]]] = (),
            code_diff: Callable[[str, str], list[str] | None] | None = None,
            allow_code_change: bool = False) -> Collected:
    """Everything the report shows, from `dvc exp show --json` (parsed), a reader of an experiment's
    episodes of one dataset, and the paper's numbers (data/reference/paper_ablations.csv). ``merge``:
    earlier collections (`read_collected`) whose other tables the report adds (`merge_collected`)."""
    experiments = read_show(show)
    chosen, ignored, notes = choose(experiments, prefix)
    notes += check_comparable(chosen)
    notes += check_code(chosen, code_diff)
    for exp in chosen.values():
        own = [f"{k}: {v!r}" for k, switch, v in own_switches(exp.params, exp.datasets)
               if canonical(v) != canonical(signature(exp.slug)[switch])]
        if own:
            notes.append(f"`{exp.name}` is not `{exp.slug}` on every table: its params set {', '.join(own)} "
                         f"for those datasets")
    for exp in chosen.values():
        if exp.state == "failed":
            notes.append(f"`{exp.name}` failed" + (f"; its log: {exp.log}" if exp.log else "")
                         + f" (`dvc queue logs {exp.name}`)")
    if read_log:
        for exp in chosen.values():
            text = read_log(exp.log) if exp.log else None
            exp.stages_run = stages_in_log(text) if text is not None else None

    default = chosen.get(DEFAULT)
    merge = list(merge)
    if default is not None:
        datasets = default.datasets
    else:
        datasets = list(dict.fromkeys(d for e in chosen.values() for d in e.datasets)) or \
            list(dict.fromkeys(paper["dataset"]))

    frames, digests = [], {}
    for slug, exp in chosen.items():
        if exp.state != "success":
            continue
        for dataset in exp.datasets:
            try:
                episodes = read_episodes(exp, dataset)
            except (FileNotFoundError, OSError, KeyError) as exc:
                notes.append(f"`{exp.name}`: no episodes of {dataset} at {exp.rev[:10]} ({type(exc).__name__})")
                continue
            digests.update({(slug, dataset, *k): v for k, v in episode_digests(episodes).items()})
            acc = seed_accuracies(episodes)
            acc = acc[acc["seed"].isin(exp.seeds)] if exp.seeds else acc
            want = {(int(shot), seed) for shot in exp.params.get("evaluate.shots") or [] for seed in exp.seeds}
            lacking = sorted(want - set(zip(acc["shot"].astype(int), acc["seed"].astype(int))))
            if lacking:  # a seed its params list and its episodes lack: the pairing leaves it out everywhere
                notes.append(f"`{exp.name}`: its episodes of {dataset} at {exp.rev[:10]} lack {len(lacking)} of the "
                             f"{len(want)} (shot, seed) results its params list (first: {lacking[0][0]}-shot, seed "
                             f"{lacking[0][1]}); its differences pair over the seeds every table has")
            # each row pairs with this run's default (a variant − default difference is of one run)
            frames.append(acc.assign(slug=slug, dataset=dataset, default_rev=default.rev if default else ""))
    scores = (pd.concat(frames, ignore_index=True) if frames
              else pd.DataFrame(columns=["shot", "seed", "accuracy", "slug", "dataset", "default_rev"]))
    scores = scores[SCORE_COLUMNS]

    merged: list[Group] = []
    stray = (scores["slug"] != DEFAULT) & ~scores["dataset"].isin(datasets)
    if merge and stray.any():  # unpaired here, and an earlier collection may supply those tables
        left = scores[stray].groupby("slug", sort=False)["dataset"].unique()
        notes.append("left out of the merge, as this run's default did not run there: "
                     + "; ".join(f"`{chosen[s].name}` on {', '.join(map(str, d))}" for s, d in left.items()))
        scores = scores[~stray]
    for earlier_scores, groups in merge:
        scores, used, merge_notes = merge_collected(Group("experiments", chosen, datasets), scores, earlier_scores,
                                                    groups, [t for g in merged for t in g.tables],
                                                    code_diff, allow_code_change)
        merged += used
        notes += merge_notes
    if merged:
        datasets = sorted(set(datasets) | {t for g in merged for t in g.tables})

    notes += same_as_default(scores, chosen, digests)
    whole = {t: g.chosen[DEFAULT].rev for g in reversed(merged) for t in g.tables if t not in g.variants}
    shown = shown_defaults(scores, default.rev if default else None, whole)
    table = _table(chosen, scores, paper, datasets, merged, shown)
    effects = _effects(scores, paper, datasets)
    best = _best(table)
    return Collected(chosen, scores, table, effects, best, datasets, notes, ignored, merged, shown)


def shown_defaults(scores: pd.DataFrame, preferred: str | None = None,
                   whole: dict[str, str] | None = None) -> dict[str, str]:
    """Per table, the rev of the default that its report shows: where a table holds the defaults of
    several rounds (merged runs whose defaults differ), the one most of its variants pair with; a tie
    goes to ``preferred`` (this run's), then to ``whole``'s default of the table (that of the merged
    collection that supplies it whole, which its own report showed), else to the first rev in sort
    order."""
    shown, whole = {}, whole or {}
    for dataset, part in scores.groupby("dataset"):
        revs = sorted(set(part.loc[part["slug"] == DEFAULT, "default_rev"]))
        if not revs:
            continue
        paired = part[part["slug"] != DEFAULT].groupby("default_rev")["slug"].nunique()
        shown[str(dataset)] = max(revs, key=lambda r: (int(paired.get(r, 0)), r == preferred,
                                                       r == whole.get(str(dataset)), [-ord(ch) for ch in r]))
    return shown


def same_as_default(scores: pd.DataFrame, chosen: dict[str, Experiment],
                    digests: dict[tuple, str] | None = None) -> list[str]:
    """Notes for variants whose every (table, shot, seed) accuracy equals the default's they pair
    with, and every episode's where both have ``digests`` (``episode_digests``, keyed slug, dataset,
    shot, seed): their switch had no effect, as when the code does not read it yet."""
    notes, digests = [], digests or {}
    keys = ["dataset", "default_rev", "shot", "seed"]
    base = scores[scores["slug"] == DEFAULT].set_index(keys)["accuracy"]
    for slug, exp in chosen.items():
        mine = scores[scores["slug"] == slug].set_index(keys)["accuracy"]
        common = mine.index.intersection(base.index)
        episodes_differ = any(digests.get((slug, k[0], *k[2:])) != digests.get((DEFAULT, k[0], *k[2:]))
                              for k in common if (slug, k[0], *k[2:]) in digests and (DEFAULT, k[0], *k[2:]) in digests)
        if (slug != DEFAULT and len(common) and not episodes_differ
                and np.allclose(mine[common], base[common], rtol=0, atol=1e-9)):
            notes.append(f"`{exp.name}` has exactly the default's accuracies on every table, shot and seed: its "
                         f"switch ({', '.join(f'{k}={v}' for k, v in EXPERIMENTS[slug].items())}) changed nothing "
                         f"(does the code read it yet?)")
    return notes


def _status(exp: Experiment | None, has: bool, dataset: str | None = None) -> str:
    if exp is None:
        return "missing (not queued or removed)"
    if exp.state in ("queued", "running"):
        return f"not finished when collected: {exp.state} ({exp.name})"
    if exp.state != "success":
        return f"{exp.state} ({exp.name})"
    if has:
        return "ok"
    if dataset is not None and dataset not in exp.datasets:
        return f"not run on this table ({exp.name} ran on {', '.join(exp.datasets)})"
    return f"no result ({exp.name})"


def _table(chosen: dict[str, Experiment], scores: pd.DataFrame, paper: pd.DataFrame, datasets: list[str],
           merged: Iterable[Group] = (), shown: dict[str, str] | None = None) -> pd.DataFrame:
    rows, merged, shown = [], list(merged), shown or {}
    for a in ABLATIONS:
        for shot in a.shots:
            for variant, slug in a.variants:
                for dataset in datasets:
                    exp = experiment_for(chosen, merged, slug, dataset, shown.get(dataset))
                    part = scores[(scores["slug"] == slug) & (scores["dataset"] == dataset) & (scores["shot"] == shot)]
                    if slug == DEFAULT and dataset in shown:
                        part = part[part["default_rev"] == shown[dataset]]
                    acc = part["accuracy"].to_numpy(dtype=float)
                    # a variant paired with another round's default than the one shown: that default
                    rev = str(part["default_rev"].iloc[0]) if len(part) else ""
                    own = (scores[(scores["slug"] == DEFAULT) & (scores["dataset"] == dataset) & (scores["shot"] == shot)
                                  & (scores["default_rev"] == rev)]["accuracy"]
                           if rev and rev != shown.get(dataset, rev) else pd.Series(dtype=float))
                    other = len(own) > 0
                    ref = paper[(paper["ablation"] == a.name) & (paper["variant"] == variant)
                                & (paper["dataset"] == dataset) & (paper["shot"] == shot)]["accuracy"]
                    rows.append({
                        "ablation": a.name, "variant": variant, "dataset": dataset, "shot": shot,
                        "ours": round(float(acc.mean()), 4) if len(acc) else math.nan,
                        "ours_se": round(float(acc.std(ddof=1) / math.sqrt(len(acc))), 4) if len(acc) > 1 else math.nan,
                        "paper": float(ref.iloc[0]) if len(ref) else math.nan,
                        "seeds": " ".join(str(int(s)) for s in sorted(part["seed"])),
                        "experiment": exp.name if exp else "", "rev": exp.rev[:10] if exp else "",
                        "status": _status(exp, len(acc) > 0, dataset),
                        "default_rev": rev[:10],
                        "own_default": round(float(own.mean()), 4) if other else math.nan,
                    })
    return pd.DataFrame(rows)


PAIRED = ["dataset", "default_rev", "seed"]  # a variant's seed pairs with the same seed of its own run's default


def paired_difference(variant: pd.DataFrame, default: pd.DataFrame) -> tuple[float, float, list[int], list[str]]:
    """Variant − default of the means over tables, paired over seeds: per seed the mean over the
    tables of (variant − default), each variant row against its own round's default (``default_rev``);
    returns (mean over seeds, its standard error std/sqrt(n), the seeds, the tables), on the tables
    and seeds both have (every table for each seed used)."""
    both = variant[PAIRED + ["accuracy"]].merge(default[PAIRED + ["accuracy"]], on=PAIRED, suffixes=("", "_default"))
    if both.empty:
        return math.nan, math.nan, [], []
    diff = both.assign(d=both["accuracy"] - both["accuracy_default"]).pivot_table(
        index="seed", columns="dataset", values="d").dropna(axis=0, how="any")
    tables = list(diff.columns)
    if diff.empty or not tables:
        return math.nan, math.nan, [], []
    per_seed = diff.mean(axis=1).to_numpy()
    se = float(per_seed.std(ddof=1) / math.sqrt(len(per_seed))) if len(per_seed) > 1 else math.nan
    return float(per_seed.mean()), se, [int(s) for s in diff.index], list(tables)


def similar_size(ours: float, se: float, paper: float) -> bool | None:
    """Ours within [0.5, 2] × the paper's difference (same sign), or the paper's within ours ± 2 SE."""
    if math.isnan(ours) or math.isnan(paper):
        return None
    if paper != 0 and SIMILAR_RATIO[0] <= ours / paper <= SIMILAR_RATIO[1]:
        return True
    return bool(not math.isnan(se) and abs(ours - paper) <= 2 * se)


def _effects(scores: pd.DataFrame, paper: pd.DataFrame, datasets: list[str]) -> pd.DataFrame:
    rows = []
    for a in ABLATIONS:
        default_name, default_slug = a.variants[0]
        for shot in a.shots:
            d = scores[(scores["slug"] == default_slug) & (scores["shot"] == shot) & scores["dataset"].isin(datasets)]
            for variant, slug in a.variants[1:]:
                v = scores[(scores["slug"] == slug) & (scores["shot"] == shot) & scores["dataset"].isin(datasets)]
                diff, se, seeds, tables = paired_difference(v, d) if len(v) and len(d) else (math.nan, math.nan, [], [])
                ref = paper[(paper["ablation"] == a.name) & (paper["shot"] == shot)]
                on = [t for t in (tables or datasets) if t in set(ref["dataset"])]
                pv = ref[(ref["variant"] == variant) & ref["dataset"].isin(on)].set_index("dataset")["accuracy"]
                pd_ = ref[(ref["variant"] == default_name) & ref["dataset"].isin(on)].set_index("dataset")["accuracy"]
                common = [t for t in on if t in pv.index and t in pd_.index]
                paper_diff = float((pv[common] - pd_[common]).mean()) if common else math.nan
                sel_v = v[v["seed"].isin(seeds) & v["dataset"].isin(tables)]
                sel_d = d[d["seed"].isin(seeds) & d["dataset"].isin(tables)].merge(
                    sel_v[["dataset", "default_rev"]].drop_duplicates(), on=["dataset", "default_rev"])
                rows.append({
                    "ablation": a.name, "shot": shot, "variant": variant, "default": default_name,
                    "ours_default": _mean_of_tables(sel_d), "ours_variant": _mean_of_tables(sel_v),
                    "ours_diff": round(diff, 4) if not math.isnan(diff) else math.nan,
                    "ours_se": round(se, 4) if not math.isnan(se) else math.nan,
                    "paper_default": round(float(pd_[common].mean()), 4) if common else math.nan,
                    "paper_variant": round(float(pv[common].mean()), 4) if common else math.nan,
                    "paper_diff": round(paper_diff, 4) if not math.isnan(paper_diff) else math.nan,
                    # a difference that rounds to 0 has no sign (nor agrees with the paper's)
                    "same_sign": (None if math.isnan(diff) or math.isnan(paper_diff) or paper_diff == 0
                                  or round(diff, 4) == 0 else bool(np.sign(diff) == np.sign(paper_diff))),
                    "beyond_2se": None if math.isnan(se) else bool(abs(diff) > 2 * se),
                    "similar_size": similar_size(diff, se, paper_diff),
                    "n_seeds": len(seeds), "n_tables": len(tables), "tables": " ".join(tables),
                    "paper_tables": len(common),
                })
    return pd.DataFrame(rows)


def _mean_of_tables(part: pd.DataFrame) -> float:
    """Mean over tables of the mean over seeds."""
    if part.empty:
        return math.nan
    return round(float(part.groupby("dataset")["accuracy"].mean().mean()), 4)


def best_counts(values: pd.DataFrame) -> dict[str, int]:
    """Per variant (columns), the number of datasets (rows) on which it is highest, ties counting
    for each tied variant; values compared at the paper's 2 decimals; rows with a missing value skipped."""
    full = values.dropna(axis=0, how="any").round(2)
    counts = {str(c): 0 for c in values.columns}
    for _, row in full.iterrows():
        top = row.max()
        for c in values.columns:
            if row[c] == top:
                counts[str(c)] += 1
    return counts


def _best(table: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for a in ABLATIONS:
        names = [v for v, _ in a.variants]
        for shot in a.shots:
            part = table[(table["ablation"] == a.name) & (table["shot"] == shot)]
            ours_all = part.pivot(index="dataset", columns="variant", values="ours").reindex(columns=names)
            present = [v for v in names if ours_all[v].notna().any()]
            ours = best_counts(ours_all[present]) if len(present) > 1 else {}
            ref = part.pivot(index="dataset", columns="variant", values="paper").reindex(columns=names)
            paper = best_counts(ref)
            n_ours = int(ours_all[present].dropna(axis=0, how="any").shape[0]) if len(present) > 1 else 0
            for v in names:
                rows.append({"ablation": a.name, "shot": shot, "variant": v,
                             "ours_best": ours.get(v, math.nan) if v in present else math.nan,
                             "paper_best": paper.get(v, 0), "ours_tables": n_ours,
                             "paper_tables": int(ref.dropna(axis=0, how="any").shape[0])})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- merging an earlier collection
CODE_PATHS = ("seba", "stages", "dvc.yaml")  # what the stages run: results of different code are not merged
NOT_STAGE_CODE = ("seba/ablations.py",)    # under CODE_PATHS but run by no stage: this collector
MERGED_AWAY = {"datasets"}                   # the one param a merged collection's experiments may differ in
# params that do not change SeBA's episodes, which are all a collection holds: the other stages'
# sections, where the pieces run (the outputs are the same either way), how often progress is printed
BESIDE_RESULTS = ("analysis.", "theorem.", "executor.", "baselines.", "pretrain.progress_seconds")


# params added after experiments were recorded, with the value that an experiment without the key ran
ADDED_LATER = {"pretrain.mask_bias": False, "evaluate.probe_stop": "train_accuracy",  # the rule before the key
               "pretrain.neighbour_search": "product"}


def effective(params: dict[str, Any]) -> dict[str, Any]:
    """An experiment's params as they act on its results: a key added later at the value the
    experiment ran without it, and ``evaluate.prototype_shots`` only for the shots it evaluates
    (the queue keeps just those; experiments queued before it did listed 1-shot on 5-shot runs)."""
    out = {**ADDED_LATER, **params}
    shots, proto = out.get("evaluate.shots"), out.get("evaluate.prototype_shots")
    if isinstance(shots, list) and isinstance(proto, list):
        out["evaluate.prototype_shots"] = evaluated(proto, shots)
    return out


def merge_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """``differing_keys`` of two experiments' params that a merge must refuse."""
    return [k for k in differing_keys(effective(a), effective(b), MERGED_AWAY) if not k.startswith(BESIDE_RESULTS)]
# default_rev: the rev of the default experiment the row pairs with (a default's row: its own rev);
# a collection written before rounds could differ lacks it (every row pairs with its table's one default)
SCORE_COLUMNS = ["slug", "dataset", "shot", "seed", "accuracy", "default_rev"]


@dataclass
class Group:
    """Experiments and the tables of the report their results fill: this checkout's, or those of an
    earlier collection merged in (`collect --merge`)."""
    origin: str                        # "experiments" (this checkout's) or the folder merged from
    chosen: dict[str, Experiment]
    tables: list[str]
    variants: dict[str, list[str]] = field(default_factory=dict)  # table -> the only variants it fills there

    def supplies(self, slug: str, dataset: str) -> bool:
        return dataset in self.tables and (dataset not in self.variants or slug in self.variants[dataset])


def experiments_from_record(entries: list[dict]) -> dict[str, Experiment]:
    """The experiments of an experiments.yaml record: the default's params as recorded, a variant's
    the default's with the params it records as differing."""
    default = next((e for e in entries if e.get("variant") == DEFAULT), None)
    if default is None or not isinstance(default.get("params"), dict):
        raise ValueError("no default experiment with its params")
    base = current_keys(flatten(default["params"]))
    out = {}
    for e in entries:
        params = dict(base)
        params.update(current_keys(e.get("params_differing_from_default") or {}))
        slug = e["variant"]
        if slug not in EXPERIMENTS:
            raise ValueError(f"unknown variant {slug!r}")
        out[slug] = Experiment(name=e["name"], rev=e["rev"], baseline=e.get("baseline") or "",
                               state=e.get("state") or "success", params=params,
                               raw=e.get("params") or {}, timestamp=str(e.get("timestamp") or ""), slug=slug,
                               stages_run=e.get("stages_run"))
    return out


def read_collected(folder: Path, origin: str | None = None) -> tuple[pd.DataFrame, list[Group]]:
    """An earlier collection (a reports/ablations/ folder, or a copy of one): every seed's score and
    the experiments behind them, with the collections it had merged itself. ``origin``: how the
    report names the folder (default: as given)."""
    files = {name: folder / name for name in ("seed_scores.csv", "experiments.yaml")}
    for name, path in files.items():
        if not path.is_file():
            raise SystemExit(f"collect --merge {folder}: no {name} there (it takes a folder written by "
                             f"`python -m seba.ablations collect`, such as reports/ablations)")
    try:
        scores = pd.read_csv(files["seed_scores.csv"], dtype={"default_rev": str})
    except (OSError, UnicodeDecodeError, pd.errors.EmptyDataError, pd.errors.ParserError) as exc:
        raise SystemExit(f"collect --merge {folder}: seed_scores.csv cannot be read ({type(exc).__name__}: "
                         f"{(str(exc).strip().splitlines() or [''])[0]})") from None
    if list(scores.columns) not in (SCORE_COLUMNS, SCORE_COLUMNS[:-1]):
        raise SystemExit(f"collect --merge {folder}: seed_scores.csv has columns {list(scores.columns)}, "
                         f"not {SCORE_COLUMNS}")
    scores = checked_scores(scores, f"collect --merge {folder}: seed_scores.csv")
    try:
        record = yaml.safe_load(files["experiments.yaml"].read_text()) or {}
        if not isinstance(record, dict):
            raise ValueError(f"a YAML {type(record).__name__}, not a collection's record")
        chosen = experiments_from_record(record.get("experiments") or [])
        groups = [Group(origin or str(folder), chosen, list(record.get("tables") or chosen[DEFAULT].datasets))]
        for m in record.get("merged") or []:
            groups.append(Group(str(m.get("from") or origin or folder), experiments_from_record(m["experiments"]),
                                list(m["tables"]), {str(t): list(v) for t, v in (m.get("variants") or {}).items()}))
    except (KeyError, TypeError, ValueError, AttributeError, yaml.YAMLError) as exc:
        raise SystemExit(f"collect --merge {folder}: experiments.yaml cannot be read: {exc}") from None
    if "default_rev" not in scores:  # written before rounds could differ: one default per table
        scores["default_rev"] = [next((g.chosen[DEFAULT].rev for g in groups if g.supplies(DEFAULT, t)), "")
                                 for t in scores["dataset"]]
    complete_scores(scores, groups, f"collect --merge {folder}")
    return scores, groups


def checked_scores(scores: pd.DataFrame, where: str) -> pd.DataFrame:
    """Seed scores as a collection writes them: a known variant, whole seeds and shots, an accuracy
    in [0, 100] on every row, no row twice; anything else is refused, naming the first bad row."""
    if scores.empty:
        raise SystemExit(f"{where} holds no scores")
    out = scores.copy()
    problems = []
    unknown = ~out["slug"].isin(list(EXPERIMENTS))
    if unknown.any():
        problems.append((int(unknown.to_numpy().argmax()), f"variant {out['slug'][unknown].iloc[0]!r} is not in "
                                                           f"the table"))
    if "default_rev" in out:
        blank = out["default_rev"].isna() | (out["default_rev"].astype(str).str.strip() == "")
        if blank.any():
            problems.append((int(blank.to_numpy().argmax()), "default_rev is blank (every row pairs with a default)"))
    for column, low in (("shot", 1), ("seed", 0), ("accuracy", 0)):
        values, bad = checked_numbers(out[column], column == "accuracy", low)
        if bad.any():
            row = int(bad.to_numpy().argmax())
            shown = out[column].iloc[row]
            shown = "blank" if pd.isna(shown) else repr(shown)
            problems.append((row, f"{column} {shown} is not "
                                  + ("an accuracy in [0, 100]" if column == "accuracy" else "a whole number")))
        out[column] = values
    if problems:
        row, what = min(problems)
        raise SystemExit(f"{where}: line {row + 2}: {what} (a damaged or hand-edited file?)")
    out[["shot", "seed"]] = out[["shot", "seed"]].astype(int)
    twice = out.duplicated(["slug", "dataset", "shot", "seed"] + (["default_rev"] if "default_rev" in out else []))
    if twice.any():
        r = out[twice].iloc[0]
        raise SystemExit(f"{where}: {r['slug']} on {r['dataset']}, {r['shot']}-shot, seed {r['seed']} appears "
                         f"more than once")
    return out


def complete_scores(scores: pd.DataFrame, groups: list[Group], where: str) -> None:
    """Every variant and table of an earlier collection holds a score for each of its experiment's
    seeds and shots, and no scores without an experiment; each variant on a table pairs with one
    default there (``default_rev``) that the file holds: a file cut short is refused, not merged."""
    is_default = scores["slug"] == DEFAULT
    defaults = set(zip(scores.loc[is_default, "dataset"], scores.loc[is_default, "default_rev"]))
    recorded = {g.chosen[DEFAULT].rev for g in groups if DEFAULT in g.chosen}  # a failed one has no rows
    for (slug, dataset), part in scores.groupby(["slug", "dataset"]):
        revs = sorted(set(part["default_rev"]))
        if slug != DEFAULT and len(revs) > 1:
            raise SystemExit(f"{where}: seed_scores.csv pairs {slug} on {dataset} with {len(revs)} defaults "
                             f"({', '.join(r[:10] for r in revs)}), not one")
        if slug != DEFAULT and (dataset, revs[0]) not in defaults and revs[0] not in recorded:
            raise SystemExit(f"{where}: seed_scores.csv pairs {slug} on {dataset} with a default "
                             f"({revs[0][:10]}) it does not hold there")
    for (slug, dataset, rev), part in scores.groupby(["slug", "dataset", "default_rev"]):
        group = (next((g for g in groups if g.supplies(slug, dataset) and slug in g.chosen
                       and g.chosen[DEFAULT].rev == rev), None) if slug == DEFAULT else supplier(groups, slug, dataset))
        if group is None:
            raise SystemExit(f"{where}: seed_scores.csv holds {slug} on {dataset}"
                             + (f" (rev {rev[:10]})" if slug == DEFAULT else "")
                             + ", which no experiment in experiments.yaml supplies")
        exp = group.chosen[slug]
        shots = [int(s) for s in exp.params.get("evaluate.shots") or sorted(set(part["shot"]))]
        want = {(shot, seed) for shot in shots for seed in exp.seeds}
        have = set(zip(part["shot"], part["seed"]))
        if have != want:
            lacking = sorted(want - have)
            raise SystemExit(f"{where}: seed_scores.csv holds {len(have)} of the {len(want)} (shot, seed) scores of "
                             f"{slug} on {dataset}" + (f" (first lacking: {lacking[0][0]}-shot, seed {lacking[0][1]})"
                                                       if lacking else "") + ": cut short or edited?")


def git_code_diff(root: Path) -> Callable[[str, str], list[str] | None]:
    """(commit a, commit b) -> the files under CODE_PATHS (less NOT_STAGE_CODE) that differ, or None if
    git cannot tell."""
    def diff(a: str, b: str) -> list[str] | None:
        result = subprocess.run(["git", "diff", "--name-only", a, b, "--", *CODE_PATHS,
                                 *(f":(exclude){p}" for p in NOT_STAGE_CODE)], cwd=root,
                                capture_output=True, text=True)
        return result.stdout.split() if result.returncode == 0 else None
    return diff


def same_scores(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Two runs' seed scores (shot, seed, accuracy) of one table are the same: the same shots and seeds,
    every accuracy equal (1e-9: a CSV round trip)."""
    x = a.set_index(["shot", "seed"])["accuracy"].sort_index()
    y = b.set_index(["shot", "seed"])["accuracy"].sort_index()
    return bool(len(x) and x.index.equals(y.index) and np.allclose(x.to_numpy(), y.to_numpy(), rtol=0, atol=1e-9))


def supplier(groups: list[Group], slug: str, dataset: str) -> Group | None:
    """The group whose experiment a variant's results on a table come from: one that names the variant
    among the only ones it fills there, else the first that fills the whole table and ran it."""
    named = [g for g in groups if g.supplies(slug, dataset) and dataset in g.variants and slug in g.chosen]
    return next(iter(named), None) or next((g for g in groups if g.supplies(slug, dataset) and slug in g.chosen), None)


def owned_rows(groups: list[Group], group: Group, scores: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """The rows of a collection's scores that ``group`` supplies on a table: its variants' there, and
    its default's (its own rev's: a table can hold the defaults of several rounds)."""
    part = scores[scores["dataset"] == dataset]
    default = group.chosen.get(DEFAULT)
    owner = {slug: supplier(groups, slug, dataset) for slug in set(part["slug"])}
    keep = [(default is not None and rev == default.rev and group.supplies(DEFAULT, dataset)) if slug == DEFAULT
            else owner[slug] is group for slug, rev in zip(part["slug"], part["default_rev"])]
    return part[keep]


def _mean_shift(a: pd.DataFrame, b: pd.DataFrame) -> float | None:
    """Mean accuracy of one default's rows minus another's, over the (shot, seed) both have."""
    both = a.merge(b, on=["shot", "seed"], suffixes=("", "_b"))
    return float((both["accuracy"] - both["accuracy_b"]).mean()) if len(both) else None


def merge_collected(current: Group, scores: pd.DataFrame, earlier_scores: pd.DataFrame, groups: list[Group],
                    taken: list[str], code_diff: Callable[[str, str], list[str] | None] | None = None,
                    allow_code_change: bool = False) -> tuple[pd.DataFrame, list[Group], list[str]]:
    """Adds an earlier collection's results that this run (and the collections merged before it,
    ``taken`` tables, their rows already in ``scores``) does not have. A table this run lacks comes
    whole from the earlier collection. On a table both have, the earlier collection adds the variants
    this run lacks there only if the two defaults are the same run's results (every shot and seed's
    accuracy equal, as the same code, params and seeds give): every variant − default difference stays
    paired within one run's default. Refused, naming why, unless the earlier experiments are this
    run's in everything but their tables: the default's params and each variant's that both have
    (seeds, episodes, switches, ...), and the code (CODE_PATHS at their baseline commits, by git;
    ``allow_code_change`` records a difference as a note instead)."""
    errors, code_errors, notes, used = [], [], [], []
    compared: set[tuple[str, str]] = set()  # (their commit, this run's) whose code was compared
    here = current.chosen.get(DEFAULT)
    if here is None or here.state != "success":
        raise SystemExit("collect --merge: this checkout has no finished default experiment to compare the "
                         "merged experiments with")
    taken = list(current.tables) + list(taken)
    taken_by = {t: "this run's experiments" for t in current.tables}  # else an earlier merged collection's
    for group in groups:
        keys = merge_differences(here.params, group.chosen[DEFAULT].params)
        if keys:
            shown = ", ".join(f"{k}: {group.chosen[DEFAULT].params.get(k)!r} (here {here.params.get(k)!r})"
                              for k in keys[:6])
            errors.append(f"{group.origin}: its default experiment's params differ from this run's in "
                          f"{shown}" + (f" and {len(keys) - 6} more" if len(keys) > 6 else ""))
        for slug, exp in group.chosen.items():
            mine = current.chosen.get(slug)
            if slug == DEFAULT or mine is None:
                continue
            keys = merge_differences(mine.params, exp.params)
            if keys:
                errors.append(f"{group.origin}: `{exp.name}` differs from this run's `{mine.name}` in "
                              + ", ".join(keys[:6]))
        for base in sorted({e.baseline for e in group.chosen.values()} - {e.baseline for e in current.chosen.values()}):
            for mine in sorted({e.baseline for e in current.chosen.values()}):
                if (base, mine) in compared:  # the rounds of one collection share commits: each pair once
                    continue
                compared.add((base, mine))
                files = code_diff(base, mine) if code_diff else None
                if files == []:
                    continue
                problem = (f"{group.origin}: the code its experiments ran (commit {base[:10]}) "
                           + (f"differs from this run's ({mine[:10]}) in {', '.join(files[:8])}"
                              + (f" and {len(files) - 8} more" if len(files) > 8 else "") if files
                              else f"cannot be compared with this run's ({mine[:10]}): git does not know both commits"))
                (notes if allow_code_change else code_errors).append(problem)
    errors = list(dict.fromkeys(errors + code_errors))  # the rounds of one collection repeat its problems
    if errors:
        raise SystemExit("collect --merge: refused, the experiments are not comparable:\n  " + "\n  ".join(errors)
                         + ("\n(--allow-code-change merges across a code change and notes it in the report)"
                            if code_errors else ""))

    decided: list[tuple[Group, list[str], dict[str, list[str]]]] = []
    own_defaults: list[tuple[str, str]] = []  # (table, rev): a round's default kept beside another
    for group in groups:
        tables, variants, beside, overlap, own, own_notes = [], {}, [], [], [], []
        for t in group.tables:
            theirs = owned_rows(groups, group, earlier_scores, t)
            if t not in taken:  # a table this run lacks: as the earlier collection has it
                tables.append(t)
                if t in group.variants:
                    variants[t] = list(group.variants[t])
                taken.append(t)
                taken_by[t] = group.origin
                scores = pd.concat([scores, theirs[SCORE_COLUMNS]], ignore_index=True)
                continue
            mine = scores[scores["dataset"] == t]
            extra = sorted(set(theirs["slug"]) - set(mine["slug"]) - {DEFAULT}, key=list(EXPERIMENTS).index)
            if not extra:
                overlap.append(t)
                continue
            added = theirs[theirs["slug"].isin(extra)]
            for rev in sorted(set(added["default_rev"])):  # one: a group's variants on a table pair with one default
                part = added[added["default_rev"] == rev]
                their_default = earlier_scores[(earlier_scores["dataset"] == t) & (earlier_scores["slug"] == DEFAULT)
                                               & (earlier_scores["default_rev"] == rev)]
                defaults_here = mine[mine["slug"] == DEFAULT]
                same = next((r for r in sorted(set(defaults_here["default_rev"]))
                             if same_scores(defaults_here[defaults_here["default_rev"] == r], their_default)), None)
                names = ", ".join(sorted(set(part["slug"]), key=list(EXPERIMENTS).index))
                if same is not None:  # the same results as a default here: paired with it
                    part = part.assign(default_rev=same)
                    beside.append(t)
                else:  # another round's default: kept beside the one here, paired with its own variants only
                    revs_here = sorted(set(defaults_here["default_rev"]))
                    near = here.rev if here.rev in revs_here else next(iter(revs_here), None)
                    shift = _mean_shift(their_default, defaults_here[defaults_here["default_rev"] == near])
                    own.append(t)
                    own_notes.append(f"{t}: {names} merged from {group.origin} (commit(s) {commits(group.chosen)}) with the "
                               f"default of their own round (rev {rev[:10]}), which is not the one already on the table"
                               + (f" ({shift:+.2f} points from it, mean over shots and seeds)" if shift is not None else "")
                               + "; their differences pair with that default, seed by seed")
                    part = pd.concat([their_default, part], ignore_index=True)
                    own_defaults.append((t, rev))
                scores = pd.concat([scores, part[SCORE_COLUMNS]], ignore_index=True)
            tables.append(t)
            variants[t] = extra
        for source in [s for s in dict.fromkeys(taken_by.get(t, "an earlier merge") for t in overlap)
                       if s != group.origin]:  # a collection's own rounds overlap as they did in it
            names = [t for t in overlap if taken_by.get(t, "an earlier merge") == source]
            notes.append(f"{', '.join(names)}: from {source}, not from {group.origin}")
        notes += own_notes
        decided.append((group, tables, variants))
        whole = [t for t in tables if t not in beside and t not in own]
        if whole:
            notes.append(f"{', '.join(whole)}: merged from {group.origin} (experiments of commit(s) "
                         f"{commits(group.chosen)}, their params this run's but for the tables); each table's "
                         f"variants and default come from the same run")
        for t in dict.fromkeys(beside):
            notes.append(f"{t}: {', '.join(variants[t])} merged from {group.origin} (commit(s) "
                         f"{commits(group.chosen)}) beside the variants already here; its default on {t} equals "
                         f"the one here on every shot and seed, so the differences stay paired")
    for t, rev in own_defaults:  # the group whose default that is supplies it on the table, for the record
        group, tables, variants = next(d for d in decided if d[0].chosen.get(DEFAULT) is not None
                                       and d[0].chosen[DEFAULT].rev == rev)
        if t not in tables:
            tables.append(t)
        variants[t] = list(dict.fromkeys(variants.get(t, []) + [DEFAULT]))
    used = [Group(g.origin, g.chosen, tables, variants) for g, tables, variants in decided if tables]
    return scores, used, notes


# ----------------------------------------------------------------------------- writing
def _f(x: Any, digits: int = 2, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def _table_mean(values: pd.Series) -> str:
    """Mean over tables, '*' when some table has no value."""
    have = values.dropna()
    if have.empty:
        return "–"
    return _f(float(have.mean())) + ("*" if len(have) < len(values) else "")


def _yn(x: Any) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else ("yes" if x else "no")


def markdown(c: Collected, figures: dict[str, str]) -> str:
    default = c.chosen.get(DEFAULT)
    seeds = sorted({s for e in c.chosen.values() for s in e.seeds})
    lines = [
        "# Ablations: this pipeline against the paper",
        "",
        "Generated by `python -m seba.ablations collect` from the DVC experiments below (docs/ablations.md). "
        "Accuracy (%) of the SeBA ensemble (a single-ratio variant: its one encoder), mean over seeds of the "
        "mean over each seed's episodes; the paper: `data/reference/paper_ablations.csv` (5 seeds).",
        "",
        f"- seeds: {' '.join(map(str, default.seeds)) if default else ' '.join(map(str, seeds)) or '–'}",
        f"- datasets: {', '.join(c.datasets)}",
        f"- episodes per shot and seed: {default.params.get('evaluate.episodes') if default else '–'}",
        f"- baseline commit(s): {commits_by_table(c) or '–'}"
        + (f" (earlier rounds merged from {', '.join(sorted({f'`{g.origin}`' for g in c.merged}))})"
           if c.merged else ""),
        "",
        "Difference = variant − default of the means over tables, paired over seeds: per seed the mean over "
        "tables of (variant − default), then its mean and standard error (std / √seeds). *Sign*: ours has the "
        "paper's sign. *Size*: ours within 0.5–2 × the paper's difference, or the paper's within ours ± 2 SE. "
        "*Best on*: datasets on which the variant is highest among the ablation's variants (ties count; two "
        "decimals), ours / the paper's.",
        "",
        "| ablation | shot | variant | ours: mean | ours: variant − default ± SE | paper: mean | paper: variant − default "
        "| sign | size | best on (ours / paper) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for a in ABLATIONS:
        for shot in a.shots:
            for variant, slug in a.variants:
                b = c.best[(c.best["ablation"] == a.name) & (c.best["shot"] == shot) & (c.best["variant"] == variant)]
                best = f"{_f(b['ours_best'].iloc[0], 0)} / {int(b['paper_best'].iloc[0])}" if len(b) else "–"
                cells = c.table[(c.table["ablation"] == a.name) & (c.table["shot"] == shot)
                                & (c.table["variant"] == variant)]
                ours, pap = _table_mean(cells["ours"]), _table_mean(cells["paper"])
                if slug == DEFAULT:
                    lines.append(f"| {a.name} | {shot} | {variant} | {ours} | (default) | {pap} | (default) | | | {best} |")
                    continue
                e = c.effects[(c.effects["ablation"] == a.name) & (c.effects["shot"] == shot)
                              & (c.effects["variant"] == variant)].iloc[0]
                if ours.endswith("*") and not math.isnan(e["ours_default"]):  # the default on the same tables
                    ours += f" (default {_f(e['ours_default'])})"
                diff = (f"{_f(e['ours_diff'], signed=True)} ± {_f(e['ours_se'])}" if not math.isnan(e["ours_diff"])
                        else _status(c.chosen.get(slug), False) if c.chosen.get(slug) is None
                        or c.chosen[slug].state != "success" else "no paired result")
                lines.append(f"| {a.name} | {shot} | {variant} | {ours} | {diff} | {pap} | "
                             f"{_f(e['paper_diff'], signed=True)} | {_yn(e['same_sign'])} | "
                             f"{_yn(e['similar_size'])} | {best} |")
    lines += ["", "*Mean*: over the tables that have a result; a variant missing some tables is marked `*` and "
              "followed by the default's mean over the tables and seeds it has, the pair its difference compares. "
              "The differences are over the tables and seeds both the variant and the default have, the paper's "
              "over the same tables (its default row is its main-table value, a 100-seed mean)."]

    for a in ABLATIONS:
        lines += ["", f"## {a.title} (`{a.name}`, tex `{a.label}`)", ""]
        if a.name in figures:
            lines += [f"![{a.name}]({figures[a.name]})", ""]
        for shot in a.shots:
            part = c.table[(c.table["ablation"] == a.name) & (c.table["shot"] == shot)]
            names = [v for v, _ in a.variants]
            lines += [f"{shot}-shot, ours (± SE over seeds) / paper:", "",
                      "| dataset | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
            own = False
            for dataset in c.datasets:
                cells = []
                for v in names:
                    r = part[(part["dataset"] == dataset) & (part["variant"] == v)]
                    if not len(r):
                        cells.append("–")
                        continue
                    r = r.iloc[0]
                    ours = _f(r["ours"]) + (f" ± {_f(r['ours_se'])}" if not math.isnan(r["ours_se"]) else "")
                    if not math.isnan(r["own_default"]):
                        ours += f" † ({_f(r['own_default'])})"
                        own = True
                    cells.append(f"{ours} / {_f(r['paper'])}")
                lines.append(f"| {dataset} | " + " | ".join(cells) + " |")
            if own:
                lines += ["", "† from a round whose own default (its accuracy in brackets) is not the one shown on "
                          "that table: its difference pairs with that default (`collect --merge`, docs/ablations.md)."]
            lines.append("")

    missing = c.table[c.table["status"] != "ok"]
    lines += ["## Missing and failed", ""]
    if missing.empty:
        lines.append("Every variant has a result on every table.")
    else:
        lines += ["| ablation | variant | status | tables |", "|---|---|---|---|"]
        for (ablation, variant, status), part in missing.groupby(["ablation", "variant", "status"], sort=False):
            lines.append(f"| {ablation} | {variant} | {status} | {', '.join(dict.fromkeys(part['dataset']))} |")
    if c.notes:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in c.notes]

    lines += ["", "## Experiments", ""]
    groups = [("", c.chosen, None)] + [(g.origin, g.chosen, [t + (f" (only {', '.join(g.variants[t])})"
                                                                   if t in g.variants else "") for t in g.tables])
                                       for g in c.merged]
    for origin, chosen, tables in groups:
        if origin:
            lines += ["", f"Merged from `{origin}` (an earlier `collect`), for {', '.join(tables)}:", ""]
        lines += ["| experiment | variant | rev | state | seeds | datasets | stages run (pretrain) |",
                  "|---|---|---|---|---|---|---|"]
        for slug in EXPERIMENTS:
            e = chosen.get(slug)
            if e is None:
                continue
            if e.stages_run is None:
                ran = "–"
            else:
                ran = f"{len(e.stages_run)} ({sum(s.startswith('pretrain@') for s in e.stages_run)})"
            lines.append(f"| {e.name} | {slug} | {e.rev[:10]} | {e.state} | {' '.join(map(str, e.seeds))} | "
                         f"{', '.join(e.datasets)} | {ran} |")
    lines += ["", "Stages run: from the queue's log of the run while DVC keeps it (`–`: no log); a stage "
              "restored from DVC's run cache does not count. Every experiment's params: "
              "`reports/ablations/experiments.yaml`."]
    return "\n".join(lines) + "\n"


def figure(c: Collected, a: Ablation, path: Path) -> None:
    """Per shot: ours (filled, ± SE) beside the paper (hollow) per dataset and variant; and the
    datasets on which each variant is best, ours and the paper's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [v for v, _ in a.variants]
    colours = plt.get_cmap("tab10")
    fig, axes = plt.subplots(len(a.shots), 2, figsize=(15, 3.8 * len(a.shots)), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 1]})
    width = 0.8 / len(names)
    for row, shot in enumerate(a.shots):
        ax, bx = axes[row]
        part = c.table[(c.table["ablation"] == a.name) & (c.table["shot"] == shot)]
        x = np.arange(len(c.datasets))
        for k, v in enumerate(names):
            r = part[part["variant"] == v].set_index("dataset").reindex(c.datasets)
            pos = x - 0.4 + width * (k + 0.5)
            ax.errorbar(pos, r["ours"], yerr=r["ours_se"].fillna(0), fmt="o", color=colours(k), ms=5, capsize=2)
            ax.scatter(pos, r["paper"], marker="D", facecolors="none", edgecolors=colours(k), s=30)
        ax.set_xticks(x, c.datasets, rotation=30, ha="right")
        ax.set_ylabel("accuracy (%)")
        ax.set_title(f"{a.title}, {shot}-shot: ours (filled) and the paper (hollow) per dataset")
        ax.grid(axis="y", alpha=0.3)
        b = c.best[(c.best["ablation"] == a.name) & (c.best["shot"] == shot)].set_index("variant").reindex(names)
        y = np.arange(len(names))
        bx.barh(y - 0.2, b["ours_best"].fillna(0), 0.4, color="#3b75af", label="ours")
        bx.barh(y + 0.2, b["paper_best"], 0.4, color="#ef8636", label="paper")
        bx.set_yticks(y, names)
        bx.invert_yaxis()
        bx.set_xlabel("datasets on which it is best (ties count)")
        bx.grid(axis="x", alpha=0.3)
        if row == 0:
            bx.legend(loc="lower right", fontsize=8)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colours(k), marker="s", ls="", label=v) for k, v in enumerate(names)]
    handles += [Line2D([], [], color="k", marker="o", ls="", label="ours (± SE over seeds)"),
                Line2D([], [], color="k", marker="D", mfc="none", ls="", label="paper")]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.1 / len(a.shots), 1, 1))
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)


def experiments_record(c: Collected) -> dict:
    """The experiments behind the report: name, rev, baseline, state, variant, params that differ
    from the default experiment's (the default: all its params)."""
    default = c.chosen.get(DEFAULT)
    merged_tables = {t for g in c.merged for t in g.tables if t not in g.variants}
    out = {"experiments": _record_entries(c.chosen),
           "tables": default.datasets if default else [t for t in c.datasets if t not in merged_tables],
           "ignored": [f"{e.name} {e.rev[:10]} ({e.state})" for e in c.ignored]}
    if c.merged:
        out["merged"] = [{"from": g.origin, "tables": g.tables, **({"variants": g.variants} if g.variants else {}),
                          "experiments": _record_entries(g.chosen)} for g in c.merged]
    return out


def _record_entries(chosen: dict[str, Experiment]) -> list[dict]:
    default = chosen.get(DEFAULT)
    entries = []
    for slug in EXPERIMENTS:
        e = chosen.get(slug)
        if e is None:
            continue
        entry = {"name": e.name, "variant": slug, "label": experiment_label(slug), "rev": e.rev,
                 "baseline": e.baseline, "state": e.state, "timestamp": e.timestamp}
        if slug == DEFAULT or default is None:
            entry["params"] = e.raw
        else:
            entry["params_differing_from_default"] = {k: e.params.get(k) for k in differing_keys(e.params, default.params)}
        if e.stages_run is not None:
            entry["stages_run"] = e.stages_run
        entries.append(entry)
    return entries


def write(c: Collected, root: Path) -> Path:
    folder = paths.ablation_reports(root)
    folder.mkdir(parents=True, exist_ok=True)
    figures = {}
    for a in ABLATIONS:
        name = f"{a.name}.png"
        figure(c, a, folder / name)
        figures[a.name] = f"ablations/{name}"
    scores = c.scores.sort_values(["slug", "dataset", "shot", "seed"], kind="stable")
    for frame, name in ((c.table, "ablations.csv"), (c.effects, "effects.csv"), (c.best, "best_counts.csv"),
                        (scores, "seed_scores.csv")):
        with atomic_path(folder / name) as tmp:
            frame.to_csv(tmp, index=False)
    with atomic_path(folder / "experiments.yaml") as tmp:
        tmp.write_text(yaml.safe_dump(experiments_record(c), sort_keys=False))
    report = paths.report(root, "ablations.md")
    write_text(report, markdown(c, figures))
    return report


def load_paper(root: Path) -> pd.DataFrame:
    paper = pd.read_csv(root / paths.PAPER_ABLATIONS)
    paper["shot"] = paper["shot"].astype(int)
    return paper


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
    parser = argparse.ArgumentParser(prog="python -m seba.ablations", description=__doc__.split("\n\n")[0])
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


if __name__ == "__main__":
    sys.exit(main())
