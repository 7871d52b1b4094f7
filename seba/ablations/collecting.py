"""Collecting: choosing one experiment per variant, checking that they are comparable, and computing
the tables, the paired differences to the default and the "best on" counts."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np
import pandas as pd

from seba.ablations.variants import (
    ABLATIONS, canonical, DEFAULT, DEFAULTS, differing_keys, EXPERIMENTS, own_switches, PREFIX, signature)
from seba.ablations.experiments import episode_digests, Experiment, read_show, seed_accuracies, stages_in_log
from seba.ablations.merging import Group, merge_collected, SCORE_COLUMNS, supplier


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


def cell_status(exp: Experiment | None, has: bool, dataset: str | None = None) -> str:
    """A table cell's status in the report: "ok", or why the variant has no result there."""
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
                        "status": cell_status(exp, len(acc) > 0, dataset),
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
