"""Tables (Markdown, CSV), flat metrics JSON and PNG figures from per-dataset episode results."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from seba.core import paths
from seba.baselines.base import load_method
from seba.core.config import dump_params, read_params_file
from seba.core.errors import DataError
from seba.evaluate import ENSEMBLE, summarise
from seba.core.paths import ratio_tag
from seba.core.runtime import atomic_path, write_json, write_text


# The paper's tables of results (data/reference/paper_results.csv): the main table's eight datasets
# and the challenging table's three (opt-in in params.yaml); their dataset names are disjoint.
PAPER_TABLES = ("main", "challenging")
# The paper's dataset names that differ from the names of their `sources` entries in params.yaml
PAPER_DATASET_NAMES = {"cnae": "cnae9"}


def paper_rows(paper_all: pd.DataFrame, tables: tuple[str, ...] = PAPER_TABLES) -> pd.DataFrame:
    """The rows of the paper's results in `tables`, datasets named as in params.yaml's `sources`."""
    rows = paper_all[paper_all["table"].isin(tables)].copy()
    rows["dataset"] = rows["dataset"].replace(PAPER_DATASET_NAMES)
    return rows


def load_paper(path: Path, method: str = "SeBA", tables: tuple[str, ...] = PAPER_TABLES) -> pd.DataFrame:
    paper = paper_rows(pd.read_csv(path), tables)
    paper = paper[paper["method"] == method]
    return paper[["dataset", "shot", "accuracy"]].rename(columns={"accuracy": "paper"})


def results_table(episodes_by_dataset: dict[str, pd.DataFrame], paper: pd.DataFrame) -> pd.DataFrame:
    """One row per dataset, shot and member: mean, std, balanced accuracy, paper value, difference."""
    rows = []
    for dataset, episodes in episodes_by_dataset.items():
        summary = summarise(episodes)
        summary.insert(0, "dataset", dataset)
        rows.append(summary)
    table = pd.concat(rows, ignore_index=True)
    table = table.merge(paper, on=["dataset", "shot"], how="left")
    # the paper reports the ensemble; single-ratio rows carry its value for reference only
    table["difference"] = np.where(table["member"] == ENSEMBLE, table["accuracy"] - table["paper"], np.nan)
    return table


def _fmt(mean: float, std: float) -> str:
    return f"{mean:.2f} ± {std:.2f}" if np.isfinite(std) else f"{mean:.2f}"


def markdown(table: pd.DataFrame, run_info: dict) -> str:
    members = [m for m in table["member"].unique() if m != ENSEMBLE]
    lines = [
        "# SeBA few-shot accuracy (%)",
        "",
        f"Seeds: {run_info['seeds']} · episodes per shot and seed: {run_info['episodes']} · "
        f"ratios: {run_info['ratios']} · encoder output: {run_info['encoder_out']} · "
        f"test fraction: {run_info['test_fraction']:.4g}.",
        "Mean ± std over seeds × episodes. *paper*: the SeBA value the paper reports "
        "(100 seeds × 100 episodes); *diff*: ensemble − paper; *balanced*: the ensemble's balanced "
        "accuracy (mean per-class recall on the query; the query sets of imbalanced tables such as "
        "diabetes and income are mostly one class). Single-ratio columns: mean accuracy of each "
        "ratio's encoder on the same episodes.",
        "Regenerate with `dvc repro` (params: params.yaml, recorded in reports/params_used.yaml).",
        "",
    ]
    header = "| dataset | shot | ensemble | paper | diff | balanced | " + " | ".join(members) + " |"
    lines += [header, "|" + "---|" * (6 + len(members))]
    ens = table[table["member"] == ENSEMBLE]
    for _, row in ens.iterrows():
        per_member = table[(table["dataset"] == row["dataset"]) & (table["shot"] == row["shot"])]
        cells = []
        for m in members:
            hit = per_member[per_member["member"] == m]
            cells.append(f"{hit['accuracy'].iloc[0]:.2f}" if len(hit) else "")
        paper = f"{row['paper']:.2f}" if np.isfinite(row["paper"]) else "–"
        diff = f"{row['difference']:+.2f}" if np.isfinite(row["difference"]) else "–"
        lines.append(f"| {row['dataset']} | {row['shot']} | {_fmt(row['accuracy'], row['accuracy_std'])} | "
                     f"{paper} | {diff} | {row['balanced_accuracy']:.2f} | " + " | ".join(cells) + " |")
    lines += ["", "Mean over datasets:", "", "| shot | ensemble | paper | diff |", "|---|---|---|---|"]
    for shot, group in ens.groupby("shot"):
        complete = group["paper"].notna().all()  # a mean over a subset would mislead
        paper_mean = f"{group['paper'].mean():.2f}" if complete else "–"
        diff_mean = f"{group['difference'].mean():+.2f}" if complete else "–"
        lines.append(f"| {shot} | {group['accuracy'].mean():.2f} | {paper_mean} | {diff_mean} |")
    diffs = ens["difference"].dropna()
    if len(diffs):
        lines += ["", f"Mean absolute difference to the paper over {len(diffs)} cells: "
                      f"{diffs.abs().mean():.2f} points; cells within 2 points or above: "
                      f"{int((diffs >= -2).sum())} of {len(diffs)}."]
    return "\n".join(lines) + "\n"


def summary_metrics(table: pd.DataFrame) -> dict[str, float]:
    """Flat metrics for `dvc metrics show` / `dvc exp show`."""
    out: dict[str, float] = {}
    for _, row in table.iterrows():
        key = f"{row['dataset']}_{row['shot']}shot_{row['member']}"
        out[key] = round(float(row["accuracy"]), 4)
    ens = table[table["member"] == ENSEMBLE]
    for shot, group in ens.groupby("shot"):
        out[f"mean_{shot}shot_ensemble"] = round(float(group["accuracy"].mean()), 4)
    diffs = ens["difference"].dropna()
    if len(diffs):
        out["mean_abs_diff_vs_paper"] = round(float(diffs.abs().mean()), 4)
    return out


def figure(table: pd.DataFrame, path: Path | None = None) -> bytes:
    """Grouped bars per dataset, one panel per shot: our ensemble (with std) vs the paper (PNG bytes;
    written to ``path`` when given)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ens = table[table["member"] == ENSEMBLE]
    shots = sorted(ens["shot"].unique())
    fig, axes = plt.subplots(1, len(shots), figsize=(5 * len(shots), 4.2), squeeze=False)
    for ax, shot in zip(axes[0], shots):
        part = ens[ens["shot"] == shot]
        x = np.arange(len(part))
        ax.bar(x - 0.2, part["accuracy"], 0.4, yerr=part["accuracy_std"].fillna(0), capsize=2,
               label="ours (ensemble)", color="#3b75af")
        ax.bar(x + 0.2, part["paper"], 0.4, label="paper", color="#ef8636")
        ax.set_xticks(x, part["dataset"], rotation=45, ha="right")
        ax.set_title(f"{shot}-shot")
        ax.set_ylim(0, 100)
        ax.set_ylabel("accuracy (%)")
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(loc="lower left")
    fig.suptitle("SeBA few-shot accuracy: this pipeline vs the paper")
    return _written(fig, path)


# --------------------------------------------------------------------------- baselines


def check_same_episodes(seba: pd.DataFrame, other: pd.DataFrame, method: str, dataset: str) -> None:
    """Every baseline must have been scored on SeBA's support sets: compare the fingerprints."""
    keys = ["seed", "shot", "episode"]
    if "support_hash" not in seba.columns or "support_hash" not in other.columns:
        raise DataError(f"dataset '{dataset}': episode files without support fingerprints (written by an older "
                        f"version); rerun evaluate and baseline@{method}-{dataset}")
    ours = seba[seba["member"] == ENSEMBLE][keys + ["support_hash"]]
    theirs = other[keys + ["support_hash"]]
    joined = theirs.merge(ours, on=keys, how="left", suffixes=("", "_seba"))
    bad = joined[joined["support_hash"] != joined["support_hash_seba"]]
    if len(bad):
        row = bad.iloc[0]
        raise DataError(f"baseline '{method}' on dataset '{dataset}' was not scored on SeBA's episodes "
                        f"(seed {row['seed']}, shot {row['shot']}, episode {row['episode']}); rerun it "
                        f"with the same seeds, shots and episodes")


TIE_DECIMALS = 9  # mean accuracies (%) closer than this are a tie: float noise, not a difference


def comparison_table(seba: dict[str, pd.DataFrame], baselines: dict[tuple[str, str], pd.DataFrame],
                     paper_all: pd.DataFrame, paper_names: dict[str, str | None]) -> pd.DataFrame:
    """One row per method, dataset and shot: our mean accuracy, the paper's value for that method,
    and the method's rank among the methods run (1 = best; ties share the mean rank)."""
    rows = []
    for dataset, episodes in seba.items():
        ens = episodes[episodes["member"] == ENSEMBLE]
        for shot, group in ens.groupby("shot"):
            rows.append({"method": "SeBA", "dataset": dataset, "shot": shot, "accuracy": group["accuracy"].mean(),
                         "paper_method": "SeBA"})
    for (method, dataset), episodes in baselines.items():
        check_same_episodes(seba[dataset], episodes, method, dataset)
        for shot, group in episodes.groupby("shot"):
            rows.append({"method": method, "dataset": dataset, "shot": shot, "accuracy": group["accuracy"].mean(),
                         "paper_method": paper_names.get(method)})
    table = pd.DataFrame(rows)
    paper = paper_rows(paper_all)[["method", "dataset", "shot", "accuracy"]].rename(
        columns={"method": "paper_method", "accuracy": "paper"})
    table = table.merge(paper, on=["paper_method", "dataset", "shot"], how="left")
    # ranked on means rounded to TIE_DECIMALS: the same correct counts summed in another order can
    # differ in the last bits (comparison_markdown's bold is this rank's best)
    key = table["accuracy"].round(TIE_DECIMALS)
    table["rank"] = key.groupby([table["dataset"], table["shot"]]).rank(ascending=False, method="average")
    return table.drop(columns="paper_method")


def comparison_markdown(table: pd.DataFrame) -> str:
    """The paper's layout: one table per shot, methods as rows, datasets as columns, the best of
    ours in bold, the paper's value for the same method in brackets, and the average rank."""
    datasets = list(dict.fromkeys(table["dataset"]))
    methods = list(dict.fromkeys(table["method"]))
    lines = ["# Comparison with baselines (accuracy %, same episodes for every method)", "",
             "Each cell: ours (paper's value for that method, – where the paper has none). Bold: the best "
             "of ours per dataset. Rank: mean over datasets of the method's rank among the methods run "
             "here (1 = best).", ""]
    for shot, part in table.groupby("shot"):
        lines += [f"## {shot}-shot", "", "| method | " + " | ".join(datasets) + " | avg rank |",
                  "|---|" + "---|" * (len(datasets) + 1)]
        best = part.groupby("dataset")["rank"].min()
        for method in methods:
            cells = []
            for dataset in datasets:
                hit = part[(part["method"] == method) & (part["dataset"] == dataset)]
                if not len(hit):
                    cells.append("")
                    continue
                acc, pap = float(hit["accuracy"].iloc[0]), hit["paper"].iloc[0]
                text = f"{acc:.2f}"
                if hit["rank"].iloc[0] == best[dataset]:  # the ties comparison_table ranked
                    text = f"**{text}**"
                cells.append(f"{text} ({pap:.2f})" if np.isfinite(pap) else f"{text} (–)")
            rank = part[part["method"] == method]["rank"].mean()
            lines.append(f"| {method} | " + " | ".join(cells) + f" | {rank:.2f} |")
        lines.append("")
    return "\n".join(lines)


def rank_figure(table: pd.DataFrame, path: Path | None = None) -> bytes:
    """Box plot of each method's ranks over datasets, one panel per shot (the paper's rank figure;
    PNG bytes, written to ``path`` when given)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shots = sorted(table["shot"].unique())
    methods = list(table.groupby("method")["rank"].mean().sort_values().index)
    fig, axes = plt.subplots(1, len(shots), figsize=(4.5 * len(shots), 0.5 * len(methods) + 2.2),
                             squeeze=False, sharey=True)
    for ax, shot in zip(axes[0], shots):
        part = table[table["shot"] == shot]
        data = [part[part["method"] == m]["rank"].to_numpy() for m in methods]
        ax.boxplot(data, orientation="horizontal", tick_labels=methods)
        ax.set_title(f"{shot}-shot")
        ax.set_xlabel("rank over datasets (1 = best)")
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle("Ranks of the methods on the same episodes")
    return _written(fig, path)


def _written(fig, path: Path | None) -> bytes:
    """The figure as PNG bytes, written to ``path`` too when given."""
    import io

    import matplotlib.pyplot as plt

    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=110, format="png")
    plt.close(fig)
    if path is not None:
        write_bytes(path, buffer.getvalue())
    return buffer.getvalue()


def write_bytes(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        Path(tmp).write_bytes(data)


MISS_MARGIN = 2.0  # a cell "misses" the paper when the ensemble is more than this many points under it


def headline_markdown(table: pd.DataFrame) -> str:
    """The README's results block from a results table (``reports/results.csv``): the ensemble per
    dataset × shot with the paper's value in brackets (misses in bold) and a summary line."""
    ens = table[table["member"] == ENSEMBLE].copy()
    shots = sorted(ens["shot"].unique())
    lines = ["| dataset | " + " | ".join(f"{s}-shot" for s in shots) + " |", "|---" * (len(shots) + 1) + "|"]
    for name, group in ens.groupby("dataset", sort=True):
        cells = []
        for shot in shots:
            row = group[group["shot"] == shot].iloc[0]
            cells.append(beside_paper(f"{row.accuracy:.2f}", row.accuracy, row.paper))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    seeds, episodes = int(ens["seeds"].iloc[0]), int(ens["episodes"].iloc[0]) // int(ens["seeds"].iloc[0])
    lines += ["", f"Ensemble accuracy (%), mean over {seeds} seed{'s' if seeds > 1 else ''} × {episodes} episodes; "
              f"the paper's value in brackets, bold where more than {MISS_MARGIN:g} points under it. "
              + agreement(ens, "accuracy", shots)]
    return "\n".join(lines) + "\n"


def beside_paper(text: str, value: float, paper: float) -> str:
    """A cell's text with the paper's value in brackets, bold where more than MISS_MARGIN points
    under it."""
    if pd.notna(paper) and value < paper - MISS_MARGIN:
        text = f"**{text}**"
    return text if pd.isna(paper) else f"{text} ({paper:.2f})"


def agreement(cells: pd.DataFrame, column: str, shots: list) -> str:
    """How a table of cells (``column`` beside ``paper``, per dataset and shot) meets the paper:
    cells within MISS_MARGIN or above, mean differences, means over the datasets (the paper's
    mean of a shot only where it has every dataset's value, else –: a mean over a subset would
    mislead, as in ``markdown``)."""
    scored = cells.dropna(subset=["paper"])
    diff = scored[column] - scored["paper"]
    within = int((diff >= -MISS_MARGIN).sum())
    means = " / ".join(f"{cells[cells['shot'] == s][column].mean():.2f}" for s in shots)
    paper_means = " / ".join(f"{part.mean():.2f}" if part.notna().all() else "–"
                             for part in (cells[cells["shot"] == s]["paper"] for s in shots))
    return (f"{within} of {len(scored)} cells within {MISS_MARGIN:g} points of the paper or above; "
            f"mean |difference| {diff.abs().mean():.2f}, mean difference {diff.mean():+.2f}; "
            f"means over the datasets {means} (paper {paper_means}).")


EPISODE_COLUMNS = ("seed", "shot", "episode", "member", "accuracy", "balanced_accuracy", "support_hash")


def _span(values) -> str:
    values = sorted(int(v) for v in set(values))
    if not values:
        return "none"
    return f"{values[0]}–{values[-1]}" if values == list(range(values[0], values[-1] + 1)) and len(values) > 2 else \
        ", ".join(map(str, values))


def checked_numbers(column: pd.Series, accuracy: bool, low: float = 0) -> tuple[pd.Series, pd.Series]:
    """A column of an episodes or scores file as numbers, and the rows that hold no such value:
    an accuracy in [0, 100], or a whole number >= ``low`` (seed, shot, episode)."""
    values = pd.to_numeric(column, errors="coerce")
    bad = values.isna() | ~np.isfinite(values) | (values < low)
    return values, bad | ((values > 100) if accuracy else (~bad & (values != values.round())))


def read_episodes(path: Path, stage: str, params, root: Path | None = None) -> pd.DataFrame:
    """An episodes file of ``stage`` (evaluate@<ds> or baseline@<method>-<ds>), checked before any
    report is written: readable, its columns, a number in [0, 100] for every accuracy, the members
    the stage writes (SeBA's ratios and ensemble; a baseline's method alone), and every
    member scored once on each of params.yaml's seeds × shots × episodes (a file cut short, or
    written by a run with other seeds, shots or episodes, is named with the stage to rerun);
    ``root``: the repository, whose path the messages leave out."""
    rerun = f"rerun {stage} (`dvc repro {stage}`)"
    source, path = path, (path.relative_to(root) if root is not None and path.is_relative_to(root) else path)
    try:
        frame = pd.read_csv(source)
    except (OSError, UnicodeDecodeError, pd.errors.EmptyDataError, pd.errors.ParserError) as exc:
        reason = str(exc).strip().splitlines()
        raise DataError(f"{path} cannot be read ({type(exc).__name__}{': ' + reason[0] if reason else ''}): "
                        f"{rerun}") from None
    missing = [c for c in EPISODE_COLUMNS if c not in frame.columns]
    if missing:
        raise DataError(f"{path} has no column {', '.join(missing)}: not an episodes file of {stage}; {rerun}")
    if frame.empty:
        raise DataError(f"{path} holds no episodes: {rerun}")
    for column in ("seed", "shot", "episode", "accuracy", "balanced_accuracy"):
        values, bad = checked_numbers(frame[column], accuracy="accuracy" in column)
        if bad.any():
            row = int(bad.to_numpy().argmax())
            raise DataError(f"{path}: {int(bad.sum())} {column} value(s) are not "
                            + ("accuracies in [0, 100]" if "accuracy" in column else "whole numbers")
                            + f" (first on line {row + 2}: {frame[column].iloc[row]!r}; a file cut short?): {rerun}")
        frame[column] = values.astype(float if "accuracy" in column else np.int64)
    keys = ["seed", "shot", "episode", "member"]
    twice = frame.duplicated(keys)
    if twice.any():
        row = frame[twice].iloc[0]
        raise DataError(f"{path}: {int(twice.sum())} episode(s) appear twice (first: {row['member']} seed "
                        f"{row['seed']}, {row['shot']}-shot, episode {row['episode']}): {rerun}")
    blank = frame["member"].isna() | (frame["member"].astype(str).str.strip() == "")
    if blank.any():
        raise DataError(f"{path}: {int(blank.sum())} row(s) name no member (first on line "
                        f"{int(blank.to_numpy().argmax()) + 2}; a file cut short?): {rerun}")
    if stage.startswith("evaluate@"):
        want = {ratio_tag(r) for r in params.ratios} | {ENSEMBLE}
        if set(frame["member"]) != want:
            raise DataError(f"{path} holds members {', '.join(sorted(set(frame['member'])))}, params.yaml's "
                            f"ratios make {', '.join(sorted(want))}: written by another run; {rerun}")
    elif stage.startswith("baseline@"):  # one member, the method (a module name: no '-' in it)
        method = stage.removeprefix("baseline@").split("-", 1)[0]
        if set(frame["member"]) != {method}:  # else its cells would average over every member
            raise DataError(f"{path} holds members {', '.join(sorted(map(str, set(frame['member']))))}, {stage} "
                            f"writes {method} alone: written by another run; {rerun}")
    seeds, shots, episodes = set(params.seeds), set(params.evaluate.shots), params.evaluate.episodes
    for member, part in frame.groupby("member", sort=False):
        problems = []
        if set(part["seed"]) != seeds:
            problems.append(f"seeds {_span(part['seed'])} (params.yaml's seeds: {_span(seeds)})")
        if set(part["shot"]) != shots:
            problems.append(f"shots {_span(part['shot'])} (evaluate.shots: {_span(shots)})")
        counts = part.groupby(["seed", "shot"]).size()
        if not problems and (len(counts) != len(seeds) * len(shots) or (counts != episodes).any()
                             or set(part["episode"]) != set(range(episodes))):
            per = f"{counts.min()}" if counts.min() == counts.max() else f"{counts.min()}–{counts.max()}"
            problems.append(f"{per} episodes per seed and shot, episodes {_span(part['episode'])} "
                            f"(evaluate.episodes: {episodes})")
        if problems:
            raise DataError(f"{path}: {member} holds {'; '.join(problems)}: written by another run, or cut "
                            f"short; {rerun}")
    return frame


def write_reports(params, root: Path) -> tuple[dict, dict]:
    """The aggregate stage's outputs under reports/ (results, comparison with the baselines,
    summary metrics, figures, the params used), from every dataset's episodes; returns the
    summary metrics and the run's description. Every input is read and checked first (a missing
    or damaged one names the stage that writes it), and the reports are made before any is
    written: a failure leaves the earlier reports as they were."""
    needed = {(None, name): f"evaluate@{name}" for name in params.datasets} | {
        (method, name): f"baseline@{method}-{name}" for method in params.baselines.methods for name in params.datasets}
    missing = [stage for (method, name), stage in needed.items() if not paths.episodes(root, name, method).is_file()]
    if missing:
        raise DataError(f"no episodes from {', '.join(missing)}: run {'it' if len(missing) == 1 else 'them'} first "
                        f"(`dvc repro` runs every stage aggregate needs)")
    read = {key: read_episodes(paths.episodes(root, key[1], key[0]), stage, params, root) for key, stage in needed.items()}
    episodes = {name: read[(None, name)] for name in params.datasets}
    for name, frame in episodes.items():
        if ENSEMBLE not in set(frame["member"]):
            raise DataError(f"{paths.episodes(root, name).relative_to(root)} has no {ENSEMBLE} rows: rerun "
                            f"evaluate@{name}")
    baselines = {(method, name): read[(method, name)] for method in params.baselines.methods for name in params.datasets}
    paper = load_paper(root / paths.PAPER_RESULTS)
    table = results_table(episodes, paper)
    run_info = {"seeds": list(params.seeds), "episodes": params.evaluate.episodes,
                "ratios": list(params.ratios), "encoder_out": params.pretrain.encoder_out,
                "test_fraction": params.split.test_fraction}
    paper_names = {method: load_method(method).paper_name for method in params.baselines.methods}
    comparison = comparison_table(episodes, baselines, pd.read_csv(root / paths.PAPER_RESULTS), paper_names)
    results_md = markdown(table, run_info)
    metrics = summary_metrics(table)
    if params.baselines.methods:
        results_md += "\n" + comparison_markdown(comparison)
        for shot, group in comparison.groupby("shot"):
            for method, rank in group.groupby("method")["rank"].mean().items():
                metrics[f"rank_{shot}shot_{method}"] = round(float(rank), 4)
    used = dump_params(read_params_file(root / "params.yaml"))
    accuracy_png, ranks_png = figure(table), rank_figure(comparison)
    # every report made: now written
    with atomic_path(paths.report(root, "results.csv")) as tmp:
        table.to_csv(tmp, index=False, float_format="%.4f")
    with atomic_path(paths.report(root, "comparison.csv")) as tmp:
        comparison.to_csv(tmp, index=False, float_format="%.4f")
    write_text(paths.report(root, "results.md"), results_md)
    write_json(paths.report(root, "summary.json"), metrics)
    write_bytes(paths.report(root, "figures") / "accuracy.png", accuracy_png)
    write_bytes(paths.report(root, "figures") / "ranks.png", ranks_png)
    write_text(paths.report(root, "params_used.yaml"), used)
    return metrics, run_info
