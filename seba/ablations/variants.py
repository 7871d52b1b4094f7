"""The ablation table: every (ablation, variant) of the paper's tables, the switch values of the
experiment that runs it, and the params helpers that tell experiments apart by those values."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

from seba.core import paths


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
