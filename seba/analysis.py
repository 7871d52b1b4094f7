"""The paper's two k-NN analyses (tex `sec:analysis`), on the pipeline's tables and encoders.

(a) **Same-class fraction among the k nearest target-view neighbours.** For each of ``masks``
random separations at ratio r (type-aware, as in pretraining: a one-hot block is masked whole),
each training row's k nearest other rows in the target view x[:, m] (Euclidean, the positive's
rule); per k, the mean over rows of (same-class rows among the k) / k; mean and standard error
over masks. Computed on batches of ``batch_rows`` shuffled training rows (what pretraining sees)
and on the whole train split, and their difference paired over the masks both use (a table of at
most ``batch_rows`` training rows is one batch: the two then differ only in tie-breaking). The
target views are the dataset's pretraining ones: its ``min_masked_columns`` and ``normalise``. The
paper's claim: k = 1 gives the highest fraction on most tables.

(b) **10-NN label consistency, input space against latent space.** On the test rows: c_in, the
same-class rows among a row's 10 nearest neighbours in the (scaled) input space; c_lat, the same
among its 10 nearest in an encoder's output; the mean c_lat per c_in group (0 .. 10). For each
ratio encoder (mean over the seeds' encoders) and for the ensemble (the ratio encoders' outputs,
each L2-normalised, concatenated), with Euclidean and cosine distances. The paper's claim: the
latent space gains most where c_in is low and keeps high c_in.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd
import torch

from seba.core import paths
from seba.core.config import AnalysisConfig, Params, dump_params
from seba.core.data import EncodedTable, load_split, scale
from seba.core.errors import DataError
from seba.objective import expand_mask, masked_group_count, sample_group_mask
from seba.pretrain import encode, load_checkpoint, normalised_input
from seba.core.runtime import atomic_path, derive_seed, log, write_text

_CHUNK = 1024  # query rows per distance block


def _neighbour_block(points: torch.Tensor, queries: torch.Tensor, query_rows: torch.Tensor, k: int,
                     cosine: bool) -> torch.Tensor:
    """Indices [Q, k] of each query's k nearest rows of ``points``, nearest first (query i is row
    ``query_rows[i]`` of ``points`` and never its own neighbour)."""
    if cosine:
        dist = -(torch.nn.functional.normalize(queries, dim=1) @ torch.nn.functional.normalize(points, dim=1).T)
    else:
        dist = torch.cdist(queries, points, compute_mode="donot_use_mm_for_euclid_dist")
    dist[torch.arange(len(queries)), query_rows] = math.inf
    return torch.topk(dist, k, dim=1, largest=False, sorted=True).indices


def nearest_neighbours(x: torch.Tensor, k: int, generator: torch.Generator, cosine: bool = False) -> torch.Tensor:
    """[N, k] indices of each row's k nearest other rows of ``x`` (Euclidean, or cosine).

    Rows are searched in a random order, so ties (frequent in one-hot views: many rows at
    distance 0) go to random rows, as in pretraining's shuffled batches, never by table order."""
    order = torch.randperm(len(x), generator=generator)
    shuffled = x[order]
    rows = torch.arange(len(x))
    found = torch.cat([_neighbour_block(shuffled, shuffled[i:i + _CHUNK], rows[i:i + _CHUNK], k, cosine)
                       for i in range(0, len(x), _CHUNK)])
    result = torch.empty_like(found)
    result[order] = order[found]
    return result


def same_class_fraction(neighbours: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """[k]: for k' = 1 .. k, the mean over rows of the same-class share of the first k' neighbours."""
    same = (y[neighbours] == y[:, None]).double()
    return (same.cumsum(1) / torch.arange(1, neighbours.shape[1] + 1, dtype=torch.float64)).mean(0)


def _masks(n_groups: int, cfg: AnalysisConfig, generator: torch.Generator,
           min_masked: int) -> Iterator[torch.Tensor]:
    k = masked_group_count(n_groups, cfg.ratio, min_masked)
    for _ in range(max(cfg.masks, cfg.split_masks)):
        yield sample_group_mask(n_groups, k, generator)


def knn_fraction(x: np.ndarray, y: np.ndarray, groups: np.ndarray, cfg: AnalysisConfig,
                 dataset: str, min_masked: int = 1) -> dict[str, np.ndarray]:
    """Analysis (a) on the training rows ``x`` (scaled as pretraining scales them), target views of
    k = max(``min_masked``, floor(ratio * G)) columns: {"batch": [masks, max_k], "split":
    [split_masks, max_k], "split_minus_batch": [min(masks, split_masks), max_k]}, the last the two
    on the same masks."""
    generator = torch.Generator().manual_seed(derive_seed(cfg.seed, dataset, "knn_fraction"))
    X = torch.as_tensor(x, dtype=torch.float32)
    Y = torch.as_tensor(y)
    groups_t = torch.as_tensor(groups)
    n_groups = int(groups.max()) + 1
    k = min(cfg.max_k, len(x) - 1)
    out = {"batch": [], "split": []}
    for n, group_mask in enumerate(_masks(n_groups, cfg, generator, min_masked)):
        view = X[:, expand_mask(group_mask, groups_t)]
        if n < cfg.split_masks:  # the first split_masks masks also on the whole split
            out["split"].append(same_class_fraction(nearest_neighbours(view, k, generator), Y))
        if n < cfg.masks:  # shuffled batches, as pretraining draws them
            order = torch.randperm(len(x), generator=generator)
            batches = [order[i:i + cfg.batch_rows] for i in range(0, len(x), cfg.batch_rows)]
            batches = [b for b in batches if len(b) > k] or [order]  # a last batch too small for k is left out
            weights = torch.tensor([len(b) for b in batches], dtype=torch.float64)
            per_batch = torch.stack([same_class_fraction(nearest_neighbours(view[b], k, generator), Y[b])
                                     for b in batches])
            out["batch"].append((per_batch * weights[:, None]).sum(0) / weights.sum())  # mean over rows
    result = {name: torch.stack(values).numpy() for name, values in out.items()}
    paired = min(cfg.masks, cfg.split_masks)  # the first masks are used by both
    result["split_minus_batch"] = result["split"][:paired] - result["batch"][:paired]
    return result


def label_consistency(x: np.ndarray, latents: dict[str, np.ndarray], y: np.ndarray, cfg: AnalysisConfig,
                      dataset: str) -> list[dict]:
    """Analysis (b): one row per (space, metric, c_in) with the rows in the group and their
    mean c_lat. ``latents`` maps a space's name to its [N, F] features."""
    generator = torch.Generator().manual_seed(derive_seed(cfg.seed, dataset, "label_consistency"))
    Y = torch.as_tensor(y)
    k = min(cfg.consistency_k, len(y) - 1)

    def same_counts(features: np.ndarray, cosine: bool) -> np.ndarray:
        nn = nearest_neighbours(torch.as_tensor(features, dtype=torch.float32), k, generator, cosine)
        return (Y[nn] == Y[:, None]).sum(1).numpy()

    c_in = same_counts(x, cosine=False)
    rows = []
    for space, features in latents.items():
        for metric in ("euclidean", "cosine"):
            c_lat = same_counts(features, cosine=metric == "cosine")
            for c in range(k + 1):
                group = c_in == c
                rows.append({"space": space, "metric": metric, "c_in": c, "rows": int(group.sum()),
                             "mean_c_lat": float(c_lat[group].mean()) if group.any() else float("nan")})
    return rows


def ensemble_features(per_ratio: list[np.ndarray]) -> np.ndarray:
    """The ratio encoders' outputs, each row L2-normalised, side by side (Euclidean distance on
    them orders neighbours as the summed cosine similarity does)."""
    normalised = [f / np.maximum(np.linalg.norm(f, axis=1, keepdims=True), 1e-12) for f in per_ratio]
    return np.concatenate(normalised, axis=1)


# ---------------------------------------------------------------------- the stage's work and report
def fraction_rows(dataset: str, fractions: dict[str, np.ndarray], train_rows: int, batch_rows: int) -> list[dict]:
    """Per view and k: the mean over masks and its standard error; ``one_batch``: the training rows
    fit one batch, so the batch view is the whole split's."""
    rows = []
    for view, values in fractions.items():
        for k in range(values.shape[1]):
            column = values[:, k]
            se = float(column.std(ddof=1) / math.sqrt(len(column))) if len(column) > 1 else float("nan")
            rows.append({"dataset": dataset, "view": view, "k": k + 1, "masks": len(column),
                         "same_class_fraction": float(column.mean()), "se": se, "train_rows": train_rows,
                         "one_batch": train_rows <= batch_rows})
    return rows


DIFFERENCE = "split_minus_batch"  # the view of the paired difference, not a fraction


def verdicts(fraction: pd.DataFrame, consistency: pd.DataFrame, k_low: int = 3) -> pd.DataFrame:
    """Per table: where the same-class fraction peaks, the whole split's k = 1 fraction less the
    batches' (paired over masks, with its standard error), and the ensemble's mean gain c_lat - c_in
    for rows with few (c_in <= k_low) and many (c_in >= consistency_k - 1) same-class input
    neighbours (NaN where no row has such a c_in)."""
    out = []
    top = int(consistency["c_in"].max())
    for dataset, group in fraction.groupby("dataset", sort=False):
        row = {"dataset": dataset, "train_rows": int(group["train_rows"].iloc[0]),
               "one_batch": bool(group["one_batch"].iloc[0])}
        for view, g in group.groupby("view"):
            if view == DIFFERENCE:
                first = g[g["k"] == 1].iloc[0]
                row["split_minus_batch_k1"] = float(first["same_class_fraction"])
                row["split_minus_batch_k1_se"] = float(first["se"])
                continue
            best = g.loc[g["same_class_fraction"].idxmax()]
            first = g.loc[g["k"] == 1, "same_class_fraction"].item()
            row[f"{view}_best_k"] = int(best["k"])
            row[f"{view}_k1"] = first
            row[f"{view}_k1_minus_best"] = first - float(best["same_class_fraction"])
        ens = consistency[(consistency["dataset"] == dataset) & (consistency["space"] == "ensemble")]
        for metric, g in ens.groupby("metric"):
            g = g[g["rows"] > 0]
            for name, part in (("low", g[g["c_in"] <= k_low]), ("high", g[g["c_in"] >= top - 1])):
                rows = part["rows"].sum()
                gain = ((part["mean_c_lat"] - part["c_in"]) * part["rows"]).sum() / rows if rows else math.nan
                row[f"{metric}_gain_{name}"] = float(gain)
        out.append(row)
    return pd.DataFrame(out)


def check_inputs(params: Params, root: Path) -> None:
    """A DataError naming every input the analyses would read and is not there (the processed
    tables, the splits, each seed's and ratio's encoder), before any table is analysed."""
    missing = []
    for dataset in params.datasets:
        missing += [p for p in (paths.processed(root, dataset), paths.splits(root, dataset)) if not p.exists()]
        encoders = [paths.checkpoint(root, dataset, ratio, seed)
                    for seed in params.seeds for ratio in params.ratios]
        missing += [p for p in encoders if not p.exists()]
    if missing:
        shown = ", ".join(str(p.relative_to(root)) for p in missing[:6])
        raise DataError(f"the analyses read the pipeline's tables, splits and trained encoders, and "
                        f"{len(missing)} are not there ({shown}{', ...' if len(missing) > 6 else ''}): "
                        f"`dvc repro analyses/dvc.yaml:analysis` makes them first (the pipeline up to pretrain)")
    cfg = params.analysis
    for dataset in params.datasets:  # the k of each analysis needs more rows than k (it was cut silently)
        splits = [load_split(paths.splits(root, dataset), seed) for seed in params.seeds]
        train, test = len(splits[0].train), min(len(s.test) for s in splits)
        for key, k, rows, part in (("max_k", cfg.max_k, train, "training"), ("consistency_k", cfg.consistency_k, test,
                                                                            "test")):
            if k >= rows:
                raise DataError(f"'analysis.{key}' ({k}) needs more {part} rows than dataset '{dataset}' has "
                                f"({rows}{' in its smallest split' if part == 'test' else ''}): lower it below {rows}")


def pretraining_view(params: Params, dataset: str, table: EncodedTable, train: np.ndarray) -> tuple[np.ndarray, int]:
    """The training rows as the dataset's pretraining sees them (scaled or not: its
    ``pretrain.normalise``) and its ``pretrain.min_masked_columns``, so that analysis (a) draws the
    target views pretraining draws."""
    pretrain = params.pretrain_for(dataset)
    return scale(table, train, pretrain.normalise)[train], pretrain.min_masked_columns


def analyse_dataset(params: Params, dataset: str, root: Path) -> tuple[list[dict], list[dict]]:
    """Both analyses on one table: (a) on the first seed's training rows, (b) on every seed's test
    rows with that seed's encoders (groups pooled over seeds)."""
    cfg = params.analysis
    table = EncodedTable.load(paths.processed(root, dataset))
    splits = paths.splits(root, dataset)
    split = load_split(splits, params.seeds[0])
    x_train, min_masked = pretraining_view(params, dataset, table, split.train)
    fractions = fraction_rows(dataset, knn_fraction(x_train, table.y[split.train], table.groups, cfg, dataset,
                                                    min_masked), len(split.train), cfg.batch_rows)
    pooled: dict[tuple, list[float]] = {}
    for seed in params.seeds:
        split = load_split(splits, seed)
        x_test, y_test = scale(table, split.train)[split.test], table.y[split.test]
        per_ratio = {}
        for ratio in params.ratios:
            checkpoint = load_checkpoint(root, dataset, ratio, seed)
            # the encoder's own input (pretrain.normalise); the input-space neighbours stay standardised
            x_in = x_test if normalised_input(checkpoint) else scale(table, split.train, False)[split.test]
            per_ratio[paths.ratio_tag(ratio)] = encode(checkpoint["encoder"], checkpoint["model_config"], x_in,
                                                 torch.device("cpu")).numpy()
        latents = {**per_ratio, "ensemble": ensemble_features(list(per_ratio.values()))}
        for row in label_consistency(x_test, latents, y_test, cfg, f"{dataset}-{seed}"):
            total = pooled.setdefault((row["space"], row["metric"], row["c_in"]), [0, 0.0])
            if row["rows"]:
                total[0] += row["rows"]
                total[1] += row["rows"] * row["mean_c_lat"]
    consistency = [{"dataset": dataset, "space": space, "metric": metric, "c_in": c_in, "rows": n,
                    "mean_c_lat": total / n if n else float("nan")}
                   for (space, metric, c_in), (n, total) in pooled.items()]
    best = max((r for r in fractions if r["view"] == "batch"), key=lambda r: r["same_class_fraction"])
    log(f"[analysis {dataset}] same-class fraction on batches: k=1 {fractions[0]['same_class_fraction']:.3f}, "
        f"highest at k={best['k']}; label consistency on {len(params.seeds)} seed(s)")
    return fractions, consistency


def _grid(n: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.0 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return plt, fig, axes.flat


def _save(plt, fig, path: Path) -> None:
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)


def figures(fraction: pd.DataFrame, consistency: pd.DataFrame, out: Path, consistency_k: int) -> None:
    datasets = list(dict.fromkeys(fraction["dataset"]))
    plt, fig, axes = _grid(len(datasets))
    for ax, dataset in zip(axes, datasets):
        for view, g in fraction[(fraction["dataset"] == dataset) & (fraction["view"] != DIFFERENCE)].groupby("view"):
            ax.errorbar(g["k"], g["same_class_fraction"], yerr=g["se"], label=f"{view}", capsize=2)
        ax.set_title(dataset)
        ax.set_xlabel("k nearest target-view neighbours")
        ax.set_ylabel("same-class fraction")
        ax.legend(fontsize=8)
    _save(plt, fig, out / "knn_fraction.png")
    plt, fig, axes = _grid(len(datasets))
    for ax, dataset in zip(axes, datasets):
        g = consistency[(consistency["dataset"] == dataset) & (consistency["space"] == "ensemble")
                        & (consistency["rows"] > 0)]
        for metric, m in g.groupby("metric"):
            ax.plot(m["c_in"], m["mean_c_lat"], marker="o", label=f"SeBA ensemble ({metric})")
        top = int(consistency["c_in"].max())
        ax.plot([0, top], [0, top], "k--", linewidth=0.8, label="input space")
        ax.set_title(dataset)
        ax.set_xlabel(f"same-class among {consistency_k}-NN, input")
        ax.set_ylabel("mean same-class, latent")
        ax.legend(fontsize=7)
    _save(plt, fig, out / "label_consistency.png")


def _signed(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:+.2f}"


def report_markdown(table: pd.DataFrame, cfg: AnalysisConfig, seeds: tuple[int, ...]) -> str:
    n = len(table)
    k1_best = int((table["batch_best_k"] == 1).sum())
    near = int((table["batch_k1_minus_best"] > -0.01).sum())
    diff, se = table["split_minus_batch_k1"], table["split_minus_batch_k1_se"]
    several = table[~table["one_batch"]]
    higher = int((several["split_minus_batch_k1"] > 2 * several["split_minus_batch_k1_se"]).sum())
    lower = int((several["split_minus_batch_k1"] < -2 * several["split_minus_batch_k1_se"]).sum())
    one_batch = ", ".join(table.loc[table["one_batch"], "dataset"])
    paired = min(cfg.masks, cfg.split_masks)
    lows = {m: table[f"{m}_gain_low"].dropna() for m in ("euclidean", "cosine")}
    highs = table["euclidean_gain_high"].dropna()
    lines = [
        "# The paper's k-NN analyses",
        "",
        f"Generated by `dvc repro analyses/dvc.yaml:analysis` (stage `analysis`; params in `params.yaml`, "
        f"section `analysis`, copied to `params.yaml` beside this file). Target views at ratio {cfg.ratio}, "
        f"{cfg.masks} masks on batches of {cfg.batch_rows} training rows, {cfg.split_masks} on the whole train "
        f"split (seed {seeds[0]}); label consistency with k = {cfg.consistency_k} on the test rows of "
        f"seed(s) {', '.join(map(str, seeds))}.",
        "",
        "## (a) Same-class fraction among the k nearest target-view neighbours (`knn_fraction.csv`, .png)",
        "",
        f"The paper: k = 1 gives the highest fraction on most tables, nearly flat on the rest. Here, on "
        f"batches, k = 1 is highest on **{k1_best} of {n}** tables and within 0.01 of the highest on "
        f"**{near} of {n}**.",
        "",
        f"Split − batch: the whole split's k = 1 fraction less the batches', on the {paired} masks both use "
        f"(± the standard error of the paired differences). Higher on the whole split by more than two standard "
        f"errors on **{higher} of {len(several)}** tables with more than one batch, lower on {lower}."
        + (f" {one_batch}: at most {cfg.batch_rows} training rows, one batch, so batch and split are the same "
           f"pool and differ only in how ties are broken (marked *)." if one_batch else ""),
        "",
        "| dataset | training rows | batch: k = 1 | batch: best k | split: k = 1 | split: best k | split − batch, k = 1 |",
        "|---|---|---|---|---|---|---|",
    ]
    for r, d, s in zip(table.itertuples(), diff, se):
        lines.append(f"| {r.dataset}{' *' if r.one_batch else ''} | {r.train_rows} | {r.batch_k1:.3f} | "
                     f"{r.batch_best_k} | {r.split_k1:.3f} | {r.split_best_k} | {d:+.3f} ± {s:.3f} |")
    lines += [
        "",
        f"## (b) {cfg.consistency_k}-NN label consistency, input against latent (`label_consistency.csv`, .png)",
        "",
        "The paper: the latent space gains most for rows with few same-class input neighbours and keeps "
        "those with many. Gain = mean (c_lat - c_in) of the ensemble's rows, for c_in <= 3 (low) and for "
        f"c_in >= {cfg.consistency_k - 1} (high); – where no test row has such a c_in. Euclidean: a gain at "
        f"low c_in on **{int((lows['euclidean'] > 0).sum())} of {len(lows['euclidean'])}** tables with such rows; "
        f"high c_in kept (gain > -0.5) on **{int((highs > -0.5).sum())} of {len(highs)}**.",
        "",
        "| dataset | low: euclidean | low: cosine | high: euclidean | high: cosine |",
        "|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        lines.append(f"| {r.dataset} | {_signed(r.euclidean_gain_low)} | {_signed(r.cosine_gain_low)} | "
                     f"{_signed(r.euclidean_gain_high)} | {_signed(r.cosine_gain_high)} |")
    return "\n".join(lines) + "\n"


def write_report(fractions: list[dict], consistency: list[dict], params: Params, raw_params: dict,
                 out: Path) -> pd.DataFrame:
    fraction, consistency = pd.DataFrame(fractions), pd.DataFrame(consistency)
    table = verdicts(fraction, consistency)
    for name, frame in (("knn_fraction.csv", fraction), ("label_consistency.csv", consistency),
                        ("summary.csv", table)):
        with atomic_path(out / name) as tmp:
            frame.to_csv(tmp, index=False, float_format="%.5f")
    figures(fraction, consistency, out, params.analysis.consistency_k)
    used = {key: raw_params[key] for key in ("seeds", "datasets") if key in raw_params}
    used["analysis"] = dataclasses.asdict(params.analysis)  # the settings used, defaults included
    used["ratios"] = list(params.ratios)
    used["target_views"] = {d: {"pretrain.min_masked_columns": params.pretrain_for(d).min_masked_columns,
                                "pretrain.normalise": params.pretrain_for(d).normalise} for d in params.datasets}
    write_text(out / "params.yaml", dump_params(used))
    write_text(out / "README.md", report_markdown(table, params.analysis, params.seeds))
    return table
