"""Reading DVC experiments: `dvc exp show --json` into ``Experiment`` records, each experiment's
per-episode results at its commit, and the commits they ran."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from seba.core import paths
from seba.ablations.variants import current_keys, flatten, identify, MEMBER


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


def short_baselines(chosen: dict[str, Experiment]) -> set[str]:
    """The experiments' baseline commits, 10 hex digits ('' for an experiment without one)."""
    return {e.baseline[:10] for e in chosen.values()}


def commits(chosen: dict[str, Experiment]) -> str:
    """The experiments' baseline commits, short and sorted."""
    return ", ".join(sorted(short_baselines(chosen)))


def dvc_json(args: list[str], root: Path) -> Any:
    result = subprocess.run(["dvc", *args], cwd=root, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"error: dvc {' '.join(args)} failed:\n{result.stderr.strip()}")
    return json.loads(result.stdout or "[]")


def existing_names(show: list) -> dict[str, str]:
    """Experiment name -> state, for every experiment `dvc exp show --json` lists (queued ones too)."""
    return {e.name: e.state for e in read_show(show)}
