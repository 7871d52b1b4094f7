"""Planning the experiments (one ``Plan`` per variant), checking them before anything is queued, and
following DVC's queue while it runs them."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from seba.core import paths
from seba.core.config import ParamsLoader, parse_params, read_params_file
from seba.core.data import read_manifest
from seba.baselines.base import check_baselines
from seba.core.errors import ConfigError, DataError
from seba.validate import data_problems, machine_problems
from seba.ablations.variants import (
    ablation, ABLATIONS, COMMON, DEFAULTS, experiment_label, experiment_shots, EXPERIMENTS, flatten,
    override_text, own_switches, PAPER_SEEDS, PREFIX, signature)


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


def shell_quote(text: str) -> str:
    """A command's word as a POSIX shell reads it back (quoted only where it needs to be)."""
    return text if re.fullmatch(r"[\w.,=/@:+-]+", text) else "'" + text.replace("'", "'\\''") + "'"
