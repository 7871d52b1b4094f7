"""Merging an earlier collection (``collect --merge FOLDER``): the tables it has and this run lacks,
when its experiments ran this run's params and code."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import yaml

from seba.report import checked_numbers
from seba.ablations.variants import current_keys, DEFAULT, differing_keys, EXPERIMENTS, flatten
from seba.ablations.experiments import commits, Experiment
from seba.ablations.queueing import evaluated


CODE_PATHS = ("seba", "stages", "dvc.yaml")  # what the stages run: results of different code are not merged
# under CODE_PATHS but run by no stage: this collector (a package; a single module in earlier commits)
NOT_STAGE_CODE = ("seba/ablations", "seba/ablations.py")
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
