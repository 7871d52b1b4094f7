"""The kNN baseline's 1-NN on three treatments of a table's features, on SeBA's episodes: the
pipeline's (Euclidean on standardised features), Euclidean on the raw encoded features, and
cosine on the raw features. For telling whether a gap to the paper's kNN row can come from the
features it was given (the paper does not say).

Usage (repository root, after the pipeline's `split` stage for the dataset):
    python benchmarks/knn_features.py DATASET [--seeds 0 1 ...]

Reads `data/processed/<dataset>.npz` and `data/splits/<dataset>.npz`, samples each seed's episodes
as the `evaluate` and `baseline` stages do (`evaluate.shots`, `evaluate.episodes` of params.yaml)
and prints, per treatment and shot, the mean over seeds of each seed's mean query accuracy (%)
with its standard error. The first treatment's figures equal the `knn` baseline's at `k: 1`.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from seba.core import paths  # noqa: E402
from seba.core.config import load_params  # noqa: E402
from seba.core.data import EncodedTable, load_split, scale  # noqa: E402
from seba.baselines.knn import KNN, KnnConfig  # noqa: E402
from seba.episodes import sample_episodes  # noqa: E402
from seba.evaluate import episode_scores  # noqa: E402


def treatments(table: EncodedTable, train: np.ndarray) -> dict[str, np.ndarray]:
    raw = scale(table, train, normalise=False)
    norms = np.maximum(np.linalg.norm(raw, axis=1, keepdims=True), 1e-12)
    return {"standardised, Euclidean": scale(table, train), "raw, Euclidean": raw, "raw, cosine": raw / norms}


def one_nn_accuracy(x: torch.Tensor, y: np.ndarray, episodes) -> float:
    """Mean query accuracy (%) over the episodes of the `knn` baseline's own scoring at k = 1
    (seba.baselines.knn: its distances, its choice among equally near support rows), so the
    standardised treatment gives the baseline's figures by construction (rows of unit norm make
    Euclidean = cosine)."""
    method = KNN(KnnConfig(k=1), seed=0, device=torch.device("cpu"))
    n_classes = int(max(y.max(), episodes.support_labels.max())) + 1
    predicted = method.scores(x, episodes.support, episodes.support_labels, n_classes, shot=1).argmax(-1)
    accuracy, _ = episode_scores(predicted[None], torch.as_tensor(y), torch.as_tensor(episodes.query), n_classes)
    return 100.0 * float(accuracy.mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset")
    parser.add_argument("--seeds", type=int, nargs="+", help="default: params.yaml's seeds")
    args = parser.parse_args()
    params = load_params(ROOT / "params.yaml")
    table = EncodedTable.load(paths.processed(ROOT, args.dataset))
    seeds = args.seeds or params.seeds
    means: dict[tuple[str, int], list[float]] = {}
    for seed in seeds:
        split = load_split(paths.splits(ROOT, args.dataset), seed)
        y = table.y[split.test]
        for name, features in treatments(table, split.train).items():
            x = torch.as_tensor(features[split.test], dtype=torch.float32)
            for shot in params.evaluate.shots:
                episodes = sample_episodes(y, len(table.classes), shot, params.evaluate.episodes, seed, args.dataset)
                means.setdefault((name, shot), []).append(one_nn_accuracy(x, y, episodes))
    print(f"{args.dataset}, 1-NN, {len(seeds)} seed(s) × {params.evaluate.episodes} episodes: mean ± standard error")
    for (name, shot), values in means.items():
        se = np.std(values, ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan")
        print(f"  {name:24s} {shot:2d}-shot  {np.mean(values):6.2f} ± {se:.2f}")


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
