"""The paper's appendix theorem (tex `app:theory`), checked by simulation.

Setting: two classes N(0, I) and N(Delta, I) in R^D, delta^2 = ||Delta||^2, a target view S of
n = max(1, floor(r * D)) coordinates drawn uniformly. Two class-mean profiles:

- dense:  every Delta_i^2 = delta^2 / D, so every view keeps delta_S^2 = n delta^2 / D;
- sparse: Delta = (delta, 0, ..., 0), so a view keeps delta^2 with probability n / D, else 0.

The paper's per-view mismatch probability is p(S) = Pr(||Z_S - X_S||^2 <= ||Y_S - X_S||^2) for X, Y
of one class and Z of the other. It depends on S only through n and delta_S^2; ``mismatch_probability``
estimates it by Monte Carlo on an exact reduction to two scalars (its docstring), ``mismatch_direct``
by simulating the n-dimensional vectors (tests compare the two, and the closed form for n = 1).
E_S[p(S)] is exact over the view's distribution of delta_S^2.

The theorem claims E_S[p(S)] <= 2 exp(-C n delta^2 / D) for a constant C > 0 it leaves
unspecified. Each point has a largest constant for which the bound holds there,
C* = ln(2 / E_S[p]) D / (n delta^2); a constant exists on a set of settings only if C* stays away
from 0 there. The batch-level check draws a batch of rows with balanced labels and counts the rows
whose nearest neighbour in a random target view has the other class.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from scipy.special import ndtr

from seba.core.config import read_params_file
from seba.core.errors import ConfigError
from seba.core.runtime import atomic_path

PROFILES = ("dense", "sparse")
SEED_MAX = 2**32 - 1
_CHUNK = 100_000  # Monte Carlo draws held in memory at once


@dataclass(frozen=True)
class TheoremConfig:
    """The `theorem` section of params.yaml (every key optional; these are the defaults)."""

    seed: int = 0  # every number below is a function of this seed
    dims: tuple[int, ...] = (16, 64, 256, 1024)  # D, the number of coordinates
    ratios: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5)  # target view n = max(1, floor(r D))
    separations: tuple[float, ...] = tuple(float(2**k) for k in range(13))  # delta^2 = 1 .. 4096
    trials: int = 200_000  # Monte Carlo draws per (n, delta_S^2) point of p_mismatch
    batch_dim: int = 64  # D of the batch-level 1-NN check
    batch_size: int = 1024  # rows per batch (half of each class), as pretrain.batch_size
    batch_separations: tuple[float, ...] = (16.0, 64.0)  # delta^2 of the batch-level check
    masks: int = 100  # batches (each with one random target view) per batch-level point

    # key -> (least, largest) allowed value
    # separations (delta^2) below 1e-6 leave a mismatch probability of 1/2 to within rounding, and
    # the log-scaled figure cannot show them
    RANGES = {"seed": (0, SEED_MAX), "dims": (1, 1_000_000), "ratios": (0.0, 1.0), "separations": (1e-6, 8000.0),
              "trials": (100, 10**8), "batch_dim": (1, 100_000), "batch_size": (4, 8192),
              "batch_separations": (1e-6, 8000.0), "masks": (1, 100_000)}
    OPEN_BELOW = ("ratios", "separations", "batch_separations")  # the least value itself is not allowed


def parse_theorem(raw: Any) -> TheoremConfig:
    """The `theorem` section checked: types, ranges, no unknown keys (errors name the full key)."""
    if raw is None:
        return TheoremConfig()
    if not isinstance(raw, dict):
        raise ConfigError("params.yaml: 'theorem' must be a mapping of keys to values")
    allowed = [f.name for f in fields(TheoremConfig)]
    for key in raw:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"params.yaml: unknown key 'theorem.{key}'{hint}; allowed here: {', '.join(allowed)}")
    types = {f.name: str(f.type) for f in fields(TheoremConfig)}
    values = {}
    for key, value in raw.items():
        full = f"theorem.{key}"
        integer = "int" in types[key]
        kind = "an integer" if integer else "a number"
        items = value if types[key].startswith("tuple") else [value]
        if types[key].startswith("tuple") and (not isinstance(value, list) or not value):
            raise ConfigError(f"params.yaml: '{full}' must be a non-empty list of {kind.split()[1]}s, got {value!r}")
        least, largest = TheoremConfig.RANGES[key]
        for item in items:
            if isinstance(item, bool) or not isinstance(item, int if integer else (int, float)) or (
                    not integer and not math.isfinite(item)):
                raise ConfigError(f"params.yaml: '{full}' must be {kind}, got {value!r}")
            if key in TheoremConfig.OPEN_BELOW:
                if not least < item <= largest:
                    raise ConfigError(f"params.yaml: '{full}' values must lie in ({least:g}, {largest:g}], got {item!r}")
            elif not least <= item <= largest:
                raise ConfigError(f"params.yaml: '{full}' must lie in [{least}, {largest}], got {item!r}")
        if types[key].startswith("tuple"):
            if len(set(items)) != len(items):
                raise ConfigError(f"params.yaml: '{full}' has duplicates: {items}")
            values[key] = tuple(items) if integer else tuple(float(v) for v in items)
        else:
            values[key] = value
    return TheoremConfig(**values)


def load_theorem(path: str | Path = "params.yaml") -> TheoremConfig:
    """The `theorem` section of a params.yaml (defaults where it has none)."""
    raw = read_params_file(path)
    return parse_theorem(raw.get("theorem") if isinstance(raw, dict) else None)


# --------------------------------------------------------------------------- the mechanism


def view_size(dim: int, ratio: float) -> int:
    """n = max(1, floor(r D)), the pipeline's target-view size (seba.objective)."""
    return min(dim, max(1, int(math.floor(ratio * dim + 1e-9))))


def view_separations(profile: str, dim: int, n: int, delta2: float) -> list[tuple[float, float]]:
    """The distribution of delta_S^2 over uniform n-subsets S: [(probability, delta_S^2), ...]."""
    if profile == "dense":
        return [(1.0, n * delta2 / dim)]
    if profile == "sparse":
        hit = n / dim  # the view holds the one informative coordinate
        return [(w, s2) for w, s2 in ((hit, delta2), (1.0 - hit, 0.0)) if w > 0]
    raise ValueError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")


def _rng(seed: int, *key: float) -> np.random.Generator:
    return np.random.default_rng([seed, *(int(round(k * 1_000_000)) for k in key)])


def mismatch_probability(n: int, s2: float, trials: int, seed: int) -> tuple[float, float]:
    """(p, standard error): Pr(||Z - X||^2 <= ||Y - X||^2) in n dimensions for a mean offset of
    squared length s2. s2 = 0 gives 1/2 exactly (Y and Z are exchangeable).

    ||Delta + a||^2 - ||b||^2 = (Delta + u) . (Delta + v) with u = a - b ~ N(0, 2I) and
    v = a + b ~ N(0, 6I) independent (a = eps_Z - eps_X, b = eps_Y - eps_X). Given v it is normal,
    so p = E_v[Phi(-Delta.w / (sqrt(2) ||w||))], w = Delta + v; with Delta on the first axis only
    v_1 and ||v_rest||^2 ~ 6 chi^2_{n-1} matter. The rare mismatches of a large offset come from
    v_1 between -s and 0 (Pr ~ exp(-s2/12) when n is small), so v_1 is drawn from a mixture of
    N(0, 6), N(-s, 6) and N(-t, 6) with t uniform in [0, s], and reweighted (each weight <= 3):
    unbiased, with a small relative error in the far tail too."""
    if s2 == 0:
        return 0.5, 0.0
    rng = _rng(seed, 1, n, s2)
    s = math.sqrt(s2)
    sd = math.sqrt(6.0)
    total = 0.0
    scale, scaled_sq = 0.0, 0.0  # the sum of squares as scaled_sq * scale**2: far-tail values squared underflow
    done = 0
    while done < trials:
        m = min(_CHUNK, trials - done)
        component = rng.integers(0, 3, m)
        shift = np.where(component == 0, 0.0, np.where(component == 1, s, s * rng.random(m)))
        v1 = rng.standard_normal(m) * sd - shift
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            density = np.exp(-v1 ** 2 / 12.0) / math.sqrt(12.0 * math.pi)  # N(0, 6) at v1
            mixture = (density + np.exp(-(v1 + s) ** 2 / 12.0) / math.sqrt(12.0 * math.pi)
                       + (ndtr((v1 + s) / sd) - ndtr(v1 / sd)) / s) / 3.0
            weight = np.nan_to_num(density / mixture)
        rest = 6.0 * rng.chisquare(n - 1, m) if n > 1 else 0.0
        norm = np.sqrt((s + v1) ** 2 + rest)
        values = weight * ndtr(-s * (s + v1) / (math.sqrt(2.0) * np.maximum(norm, 1e-300)))
        total += values.sum()
        top = float(values.max())
        if top > scale:
            scaled_sq *= (scale / top) ** 2
            scale = top
        if scale > 0:
            scaled_sq += float(((values / scale) ** 2).sum())
        done += m
    mean = total / trials
    if scale == 0:
        return float(mean), 0.0
    var = max(scaled_sq / trials - (mean / scale) ** 2, 0.0)
    return float(mean), float(scale * math.sqrt(var / trials))


def mismatch_exact_1d(s2: float) -> float:
    """p for n = 1 in closed form: (s + u)(s + v) <= 0, u ~ N(0, 2), v ~ N(0, 6) independent."""
    s = math.sqrt(s2)
    pu, pv = float(ndtr(-s / math.sqrt(2.0))), float(ndtr(-s / math.sqrt(6.0)))
    return pu * (1 - pv) + (1 - pu) * pv


def mismatch_direct(n: int, s2: float, trials: int, seed: int) -> float:
    """The same probability by brute force: X, Y ~ N(0, I_n), Z ~ N(Delta, I_n), Delta spread evenly."""
    rng = _rng(seed, 3, n, s2)
    delta = np.full(n, math.sqrt(s2 / n))
    x, y, z = rng.standard_normal((3, trials, n))
    return float(np.mean(((z + delta - x) ** 2).sum(1) <= ((y - x) ** 2).sum(1)))


def lemma_bound(n: int, s2: float) -> float:
    """The explicit per-view bound the proof derives before choosing C:
    min(1, exp(-s2 / 64) + 2 exp(-s2^2 / (256 n)))."""
    return min(1.0, math.exp(-s2 / 64) + 2 * math.exp(-s2 ** 2 / (256 * n)))


def batch_mismatch(profile: str, dim: int, n: int, delta2: float, batch_size: int, masks: int,
                   seed: int) -> tuple[float, float]:
    """(mean, standard error over masks) of the share of rows whose nearest neighbour (not
    itself) in a random n-coordinate view has the other class; a fresh batch for every mask."""
    rng = _rng(seed, 2, PROFILES.index(profile), dim, n, delta2)
    labels = np.repeat([0, 1], [batch_size - batch_size // 2, batch_size // 2])
    mean = np.zeros(dim)
    if profile == "dense":
        mean[:] = math.sqrt(delta2 / dim)
    else:
        mean[0] = math.sqrt(delta2)
    rates = np.empty(masks)
    for t in range(masks):
        x = rng.standard_normal((batch_size, dim)) + labels[:, None] * mean
        view = x[:, rng.choice(dim, n, replace=False)]
        dist = (view ** 2).sum(1)[None, :] - 2 * view @ view.T  # squared distance less the row's own norm
        np.fill_diagonal(dist, np.inf)
        rates[t] = np.mean(labels[dist.argmin(1)] != labels)
    se = rates.std(ddof=1) / math.sqrt(masks) if masks > 1 else float("nan")
    return float(rates.mean()), float(se)


# --------------------------------------------------------------------------- the check


def pair_table(cfg: TheoremConfig) -> pd.DataFrame:
    """One row per profile x D x ratio x delta^2: E_S[p(S)], its standard error, the sparse floor
    (1 - n/D)/2, the proof's explicit bound averaged over views, and C*."""
    cache: dict[tuple[int, float], tuple[float, float]] = {}
    rows = []
    for profile in PROFILES:
        for dim in cfg.dims:
            for ratio in cfg.ratios:
                n = view_size(dim, ratio)
                for delta2 in cfg.separations:
                    p = se2 = proof = 0.0
                    for weight, s2 in view_separations(profile, dim, n, delta2):
                        if (n, s2) not in cache:
                            cache[n, s2] = mismatch_probability(n, s2, cfg.trials, cfg.seed)
                        p += weight * cache[n, s2][0]
                        se2 += (weight * cache[n, s2][1]) ** 2
                        proof += weight * lemma_bound(n, s2)
                    mean_sep = n * delta2 / dim
                    rows.append({"profile": profile, "D": dim, "ratio": ratio, "n": n, "delta2": delta2,
                                 "mean_view_delta2": mean_sep, "p": p, "se": math.sqrt(se2),
                                 "floor": (1 - n / dim) / 2 if profile == "sparse" else 0.0,
                                 "proof_bound": proof, "c_star": math.log(2 / p) / mean_sep,
                                 "c_star_se": math.sqrt(se2) / p / mean_sep})
    return pd.DataFrame(rows)


def batch_table(cfg: TheoremConfig) -> pd.DataFrame:
    rows = []
    for profile in PROFILES:
        for delta2 in cfg.batch_separations:
            for ratio in cfg.ratios:
                n = view_size(cfg.batch_dim, ratio)
                rate, se = batch_mismatch(profile, cfg.batch_dim, n, delta2, cfg.batch_size, cfg.masks, cfg.seed)
                rows.append({"profile": profile, "D": cfg.batch_dim, "ratio": ratio, "n": n, "delta2": delta2,
                             "rate": rate, "se": se,
                             "floor": (1 - n / cfg.batch_dim) / 2 if profile == "sparse" else 0.0})
    return pd.DataFrame(rows)


def best_constant(pairs: pd.DataFrame) -> float:
    """The largest C for which 2 exp(-C n delta^2 / D) bounds every dense point of the grid."""
    return float(pairs.loc[pairs["profile"] == "dense", "c_star"].min())


def judge(pairs: pd.DataFrame, c_fit: float) -> pd.DataFrame:
    """The pair table with the bound at ``c_fit`` and whether each point lies under it."""
    out = pairs.copy()
    out["bound"] = np.minimum(1.0, 2 * np.exp(-c_fit * out["mean_view_delta2"]))
    out["holds"] = out["p"] <= out["bound"] * (1 + 1e-9)  # the point that sets c_fit lies on the bound
    return out


def numbers(pairs: pd.DataFrame, batches: pd.DataFrame) -> pd.DataFrame:
    """theorem.csv: the judged pair rows (quantity `pair`: p is E_S[p(S)]) and the batch rows
    (quantity `batch`: rate is the 1-NN mismatch share)."""
    return pd.concat([pairs.assign(quantity="pair"), batches.assign(quantity="batch")], ignore_index=True)[
        ["quantity", *[c for c in pairs.columns], "rate"]]


def summary(pairs: pd.DataFrame, batches: pd.DataFrame, c_fit: float) -> dict[str, float]:
    """The headline numbers (MLflow metrics and the report)."""
    dense, sparse = pairs[pairs["profile"] == "dense"], pairs[pairs["profile"] == "sparse"]
    out = {"c_fit_dense": c_fit, "sparse_points": int(len(sparse)),
           "sparse_violations": int((~sparse["holds"]).sum()), "dense_violations": int((~dense["holds"]).sum()),
           "c_star_sparse_min": float(sparse["c_star"].min()),
           "proof_bound_violations": int((pairs["p"] > pairs["proof_bound"] + 3 * pairs["se"]).sum())}
    for dim, group in dense.groupby("D"):
        out[f"c_fit_dense_D{dim}"] = float(group["c_star"].min())
    for (profile, delta2), group in batches.groupby(["profile", "delta2"]):
        for ratio, rate in zip(group["ratio"], group["rate"]):
            out[f"batch_{profile}_d{delta2:g}_r{ratio:g}"] = float(rate)
    return out


# --------------------------------------------------------------------------- figures and report


def figures(cfg: TheoremConfig, pairs: pd.DataFrame, batches: pd.DataFrame, c_fit: float,
            folder: Path) -> list[Path]:
    """bound.png (E_S[p] against the bound, both profiles; C* against delta^2) and batch.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    colours = dict(zip(sorted(pairs["D"].unique()), plt.get_cmap("viridis")(np.linspace(0, 0.85, pairs["D"].nunique()))))
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    x = np.geomspace(pairs["mean_view_delta2"].min(), pairs["mean_view_delta2"].max(), 200)
    for ax, profile in zip(axes[:2], PROFILES):
        part = pairs[pairs["profile"] == profile]
        for dim, group in part.groupby("D"):
            ax.scatter(group["mean_view_delta2"], group["p"], s=12, color=colours[dim], label=f"D = {dim}")
        ax.plot(x, np.minimum(1, 2 * np.exp(-c_fit * x)), "k-", lw=1.2, label=f"2 exp(-C n δ²/D), C = {c_fit:.4f}")
        if profile == "sparse":
            for ratio, group in part.groupby("ratio"):
                ax.axhline(group["floor"].iloc[0], color="grey", ls=":", lw=0.8)
            ax.text(x[-1], 0.56, "dotted: (1 - n/D)/2 of each ratio", fontsize=8, color="grey", ha="right")
        ax.set(xscale="log", yscale="log", ylim=(max(part["p"].min() * 0.5, 1e-20), 1.5),
               xlabel="n δ² / D  (mean separation kept by a view)", ylabel="E_S[p_mismatch(S)]",
               title=f"{profile} Δ: per-view mismatch vs the claimed bound")
        ax.grid(alpha=0.3, which="both", lw=0.4)
        ax.legend(fontsize=7, loc="lower left")
    ax = axes[2]
    for (profile, dim), group in pairs.groupby(["profile", "D"]):
        best = group.groupby("delta2")["c_star"].min()
        ax.plot(best.index, best.values, "-" if profile == "dense" else "--", marker="o", ms=3, color=colours[dim],
                label=f"{profile}, D = {dim}")
    ax.axhline(c_fit, color="k", lw=0.8, label=f"C = {c_fit:.4f} (the bound line)")
    ax.set(xscale="log", yscale="log", xlabel="δ²", ylabel="C* (largest C that bounds the point; min over ratios)",
           title="the constant the bound needs: no C > 0 fits all")
    ax.grid(alpha=0.3, which="both", lw=0.4)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    written.append(_save(fig, folder / "bound.png"))
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for (profile, delta2), group in batches.groupby(["profile", "delta2"]):
        ax.errorbar(group["ratio"], group["rate"], yerr=group["se"], marker="o", capsize=2,
                    ls="-" if profile == "dense" else "--", label=f"{profile}, δ² = {delta2:g}")
    sparse = batches[batches["profile"] == "sparse"].drop_duplicates("ratio")
    ax.plot(sparse["ratio"], sparse["floor"], "k:", lw=1, label="(1 - n/D)/2 (sparse, view misses Δ)")
    ax.set(xlabel="ratio r (target view n = max(1, floor(r D)))", ylabel="share of rows whose 1-NN has the other class",
           title=f"batch-level 1-NN mismatch, D = {batches['D'].iloc[0]}, batch of {cfg.batch_size}", ylim=(0, 0.55))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    written.append(_save(fig, folder / "batch.png"))
    return written


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png", metadata={"Software": None})  # bytes free of the version
    plt.close(fig)
    return path


def _num(value: float) -> str:
    return f"{value:.3g}" if value >= 1e-3 else f"{value:.2e}"


def _sparse_heading(sparse: pd.DataFrame) -> str:
    """The sparse verdict as this grid shows it: points above the bound, or why there are none."""
    if (~sparse["holds"]).any():
        return "**Sparse Δ: the claim fails (counterexample).**"
    if (sparse["floor"] > 0).any():
        return ("**Sparse Δ: the claim fails beyond this grid.** No point of this grid lies above the bound; "
                "larger δ² (`theorem.separations`) show it.")
    return ("**Sparse Δ: no counterexample on this grid.** Every view keeps every coordinate here (n = D, "
            "`theorem.ratios` 1), so no view misses the informative one; with n < D:")


def report_markdown(cfg: TheoremConfig, pairs: pd.DataFrame, batches: pd.DataFrame, c_fit: float) -> str:
    """reports/theorem/README.md: where the claim holds, where it fails, the counterexample with
    numbers, the batch-level rates and the params used (``pairs`` as ``judge`` returns it)."""
    dense, sparse = pairs[pairs["profile"] == "dense"], pairs[pairs["profile"] == "sparse"]
    arg = dense.loc[dense["c_star"].idxmin()]
    per_dim = dense.groupby("D")["c_star"].min()
    at = {dim: dense.loc[group.idxmin()] for dim, group in dense.groupby("D")["c_star"]}
    slope = (math.log(per_dim.iloc[-1] / per_dim.iloc[-2]) / math.log(per_dim.index[-1] / per_dim.index[-2])
             if len(per_dim) > 1 else float("nan"))
    top = max(cfg.separations)
    dim0 = cfg.batch_dim if cfg.batch_dim in cfg.dims else cfg.dims[len(cfg.dims) // 2]
    ratio0 = cfg.ratios[len(cfg.ratios) // 2]
    n0 = view_size(dim0, ratio0)
    lines = [
        "# The appendix theorem, checked numerically",
        "",
        "Written by `dvc repro analyses/dvc.yaml:theorem` (`stages/theorem.py`, `seba/theorem.py`); the numbers are in "
        "[theorem.csv](theorem.csv), the params at the end. Method and reading: `docs/theorem.md`.",
        "",
        "Two classes N(0, I) and N(Δ, I) in R^D, δ² = ‖Δ‖², a uniformly drawn target view S of n = max(1, ⌊rD⌋) "
        "coordinates. **Dense** Δ: every Δ_i² = δ²/D (every view keeps nδ²/D). **Sparse** Δ = (δ, 0, …, 0) (a view "
        "keeps δ² with probability n/D, else nothing). p(S) is the paper's per-view mismatch probability "
        "Pr(‖Z_S − X_S‖² ≤ ‖Y_S − X_S‖²); E_S[p(S)] is exact over the views, each p by Monte Carlo "
        f"({cfg.trials} draws per point). The theorem claims E_S[p(S)] ≤ 2 exp(−C nδ²/D) for some C > 0 it does not "
        "give. C* = ln(2 / E_S[p]) · D / (nδ²) is the largest C for which the bound holds at a point; a constant "
        "exists on a set of settings only if C* stays away from 0 on it.",
        "",
        "## Verdict",
        "",
        f"- **Dense Δ, fixed D: the claim holds.** E_S[p] falls exponentially in nδ²/D, and for each D a constant "
        f"bounds every point: as δ² grows C* tends to 1/12 (for a fixed view size, p ~ exp(−δ_S²/12)), and it is "
        f"larger for small δ². On this grid C = {c_fit:.4f} bounds every dense point (the smallest C*, at "
        f"D = {arg.D}, r = {arg.ratio:g}, δ² = {arg.delta2:g}, where E_S[p] = {_num(arg.p)}); the figure's bound "
        "line uses it.",
        ("- **Dense Δ, growing D: no constant independent of D.** The best constant per D is " if len(per_dim) > 1
         else "- **Dense Δ, growing D: not tested on this grid (one D; `theorem.dims` needs two or more).** "
              "The best constant at its D is ")
        + ", ".join(f"{c:.4f} (D = {d}, at r = {at[d].ratio:g}, δ² = {at[d].delta2:g})" for d, c in per_dim.items())
        + (f"; between the two largest D it falls like D^{slope:.2f}" if len(per_dim) > 1 else "")
        + ". The worst points have δ_S² of the order of √n, where the noise term ‖U‖² − ‖V‖² (spread √(12n)) "
        "swamps the separation: with δ_S² = c√n, p tends to Φ(−c/√12) > 0 while nδ²/D grows, so C* falls like "
        "n^(−1/2). The lemma's “global constant” does not exist; the proof's own bound decays like "
        "exp(−δ_S⁴/(256 n)) there, not exp(−C δ_S²).",
        "- " + _sparse_heading(sparse) + " A view that misses the informative coordinate "
        "(probability 1 − n/D) gives p = 1/2 exactly, so E_S[p] ≥ (1 − n/D)/2 whatever δ², while the bound goes to 0. "
        f"C* ≤ ln(4/(1 − n/D)) · D/(nδ²) → 0: at δ² = {top:g} the smallest sparse C* is "
        f"{sparse['c_star'].min():.2e}, and {int((~sparse['holds']).sum())} of {len(sparse)} sparse points lie above "
        f"the bound at C = {c_fit:.4f}. No C > 0 survives a larger δ².",
        "- **Where the proof breaks.** Its last step applies Jensen the wrong way: e^(−x) is convex, so "
        "E_S[e^(−C δ_S²)] ≥ e^(−C E_S[δ_S²]) (sparse: (1 − n/D) + (n/D) e^(−Cδ²) against e^(−C nδ²/D)). The lemma's "
        "explicit bound min(1, e^(−δ_S²/64) + 2 e^(−δ_S⁴/(256 n))), averaged over views instead, lies above E_S[p] at "
        f"{int((pairs['p'] <= pairs['proof_bound'] + 3 * pairs['se']).sum())} of {len(pairs)} points (within 3 "
        "standard errors): that averaged form holds on this grid, the theorem's does not. (The proof also "
        "treats U = ε_Z − ε_X and V = ε_Y − ε_X as independent; they share ε_X. The simulation uses the true joint law.)",
        "",
        f"## Counterexample: sparse Δ, D = {dim0}, r = {ratio0:g} (n = {n0})",
        "",
        f"| δ² | E_S[p] | ± s.e. | floor (1 − n/D)/2 | bound 2exp(−C nδ²/D), C = {c_fit:.4f} | C* | holds |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = sparse[(sparse["D"] == dim0) & (sparse["ratio"] == ratio0)]
    for row in rows.itertuples():
        lines.append(f"| {row.delta2:g} | {row.p:.4f} | {row.se:.4f} | {row.floor:.4f} | {_num(row.bound)} | "
                     f"{_num(row.c_star)} | {'yes' if row.holds else '**no**'} |")
    lines += ["", f"Sparse points above the bound, per D and ratio (of {len(cfg.separations)} separations each):", "",
              "| D | " + " | ".join(f"r = {r:g}" for r in cfg.ratios) + " |",
              "|---|" + "---|" * len(cfg.ratios)]
    for dim, group in sparse.groupby("D"):
        fails = group.groupby("ratio")["holds"].apply(lambda h: int((~h).sum()))
        lines.append(f"| {dim} | " + " | ".join(str(fails[r]) for r in cfg.ratios) + " |")
    lines += ["", f"## Dense Δ, D = {dim0}: E_S[p] (it falls with n and δ²)", "",
              "| δ² | " + " | ".join(f"r = {r:g} (n = {view_size(dim0, r)})" for r in cfg.ratios) + " |",
              "|---|" + "---|" * len(cfg.ratios)]
    table = dense[dense["D"] == dim0].pivot(index="delta2", columns="ratio", values="p")
    for delta2, row in table.iterrows():
        lines.append(f"| {delta2:g} | " + " | ".join(_num(row[r]) for r in cfg.ratios) + " |")
    lines += ["", "## Batch level: share of rows whose target-view 1-NN has the other class", "",
              f"D = {cfg.batch_dim}, batches of {cfg.batch_size} rows (half of each class), {cfg.masks} batches per "
              "cell, each with a fresh random view; mean ± standard error over the batches.", "",
              "| Δ | " + " | ".join(f"r = {r:g} (n = {view_size(cfg.batch_dim, r)})" for r in cfg.ratios) + " |",
              "|---|" + "---|" * len(cfg.ratios)]
    for (profile, delta2), group in batches.groupby(["profile", "delta2"], sort=False):
        cells = [f"{rate:.3f} ± {se:.3f}" for rate, se in zip(group["rate"], group["se"])]
        lines.append(f"| {profile} δ² = {delta2:g} | " + " | ".join(cells) + " |")
    floors = batches[batches["profile"] == "sparse"].drop_duplicates("ratio")["floor"]
    lines += ["| sparse floor (1 − n/D)/2 | " + " | ".join(f"{f:.3f}" for f in floors) + " |", "",
              "Dense: the 1-NN mismatch falls steadily with the ratio, faster for larger δ². Sparse: it stays at or "
              "above the floor (1 − n/D)/2 whatever δ², since a view that misses the informative coordinate pairs "
              "rows at random.", "",
              "## Figures", "",
              "- [bound.png](bound.png): E_S[p] against nδ²/D with the bound at the constant above (dense, sparse; "
              "dense values below 1e-20 are in the CSV only), and the constant C* each δ² needs (smallest over the "
              "ratios).",
              "- [batch.png](batch.png): the batch-level 1-NN mismatch rate against the ratio.", "",
              "## Params used (`theorem` in params.yaml)", "", "```yaml",
              yaml.safe_dump({"theorem": config_dict(cfg)}, sort_keys=False).rstrip(), "```", ""]
    return "\n".join(lines)


def config_dict(cfg: TheoremConfig) -> dict[str, Any]:
    """The config as plain YAML-able values (lists for tuples)."""
    return {f.name: list(getattr(cfg, f.name)) if isinstance(getattr(cfg, f.name), tuple) else getattr(cfg, f.name)
            for f in fields(cfg)}
