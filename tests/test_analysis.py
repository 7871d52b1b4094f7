"""The paper's k-NN analyses (seba/analysis.py, stage `analysis` in analyses/dvc.yaml)."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from conftest import committed_params
from seba.analysis import (_masks, check_inputs, ensemble_features, fraction_rows, knn_fraction, label_consistency,
                           nearest_neighbours, pretraining_view, report_markdown, same_class_fraction, verdicts)
from seba.core.config import AnalysisConfig, parse_params
from seba.core.data import EncodedTable
from seba.core.errors import ConfigError, DataError

SMALL = AnalysisConfig(masks=4, split_masks=2, max_k=5, batch_rows=64, consistency_k=5)


def test_nearest_neighbours_match_a_brute_force_search():
    x = torch.randn(300, 6, dtype=torch.float32, generator=torch.Generator().manual_seed(0))
    found = nearest_neighbours(x, 4, torch.Generator().manual_seed(1))
    dist = torch.cdist(x, x)
    dist.fill_diagonal_(float("inf"))
    assert torch.equal(found, dist.argsort(dim=1)[:, :4])
    cosine = nearest_neighbours(x, 3, torch.Generator().manual_seed(1), cosine=True)
    sim = torch.nn.functional.normalize(x, dim=1) @ torch.nn.functional.normalize(x, dim=1).T
    sim.fill_diagonal_(-float("inf"))
    assert torch.equal(cosine, sim.argsort(dim=1, descending=True)[:, :3])


def test_ties_go_to_random_rows_not_to_the_table_order():
    """A one-hot view puts many rows at distance 0: the neighbour among them is the first in a
    random order of the rows (as pretraining's argmin in a shuffled batch), not the first row of
    the table (tables are often sorted by class)."""
    x = torch.zeros(200, 1)
    chosen = set()
    for seed in range(20):
        first = nearest_neighbours(x, 1, torch.Generator().manual_seed(seed))[:, 0]
        assert (first != torch.arange(200)).all()  # never itself
        chosen.add(int(first[5]))
    assert len(chosen) > 10


def test_same_class_fraction_counts_the_first_k_neighbours():
    neighbours = torch.tensor([[1, 2, 3], [0, 3, 2], [3, 0, 1], [2, 1, 0]])
    y = torch.tensor([0, 0, 1, 1])
    # row 0: same, diff, diff; row 1: same, diff, diff; row 2: same, diff, diff; row 3: same, diff, diff
    assert torch.allclose(same_class_fraction(neighbours, y), torch.tensor([1.0, 0.5, 1 / 3], dtype=torch.float64))


def _table(n: int, signal: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    if signal:
        x += 10.0 * y[:, None]  # every column tells the class
    return x, y, np.arange(6)


def test_a_view_that_tells_the_class_gives_fraction_one_and_noise_the_class_share():
    x, y, groups = _table(400, signal=True)
    result = knn_fraction(x, y, groups, SMALL, "toy")
    assert result["batch"].shape == (4, 5) and result["split"].shape == (2, 5)
    assert np.array_equal(result["split_minus_batch"], result["split"] - result["batch"][:2])  # the same masks
    assert result["batch"].min() > 0.97 and result["split"].min() > 0.97
    x, y, groups = _table(400, signal=False)
    result = knn_fraction(x, y, groups, SMALL, "toy")
    assert abs(result["split"].mean() - 0.5) < 0.05


def test_the_analysis_is_deterministic_from_its_seed():
    x, y, groups = _table(200, signal=False)
    a = knn_fraction(x, y, groups, SMALL, "toy")
    assert all(np.array_equal(a[v], knn_fraction(x, y, groups, SMALL, "toy")[v]) for v in a)
    b = knn_fraction(x, y, groups, dataclasses.replace(SMALL, seed=1), "toy")
    assert not np.array_equal(a["batch"], b["batch"])


def test_label_consistency_groups_rows_by_their_input_neighbours():
    x, y, _ = _table(300, signal=False)  # input space: noise
    separated = np.eye(2, dtype=np.float32)[y] * 10  # a latent space that tells the class
    rows = pd.DataFrame(label_consistency(x, {"ensemble": separated}, y, SMALL, "toy"))
    assert set(rows["metric"]) == {"euclidean", "cosine"} and set(rows["c_in"]) == set(range(6))
    assert rows.groupby("metric")["rows"].sum().eq(300).all()
    filled = rows[rows["rows"] > 0]
    assert np.allclose(filled["mean_c_lat"], 5.0)  # every latent neighbour is of the same class


def test_the_ensemble_normalises_each_encoder():
    a = np.array([[3.0, 4.0]], dtype=np.float32)
    b = np.array([[0.0, 10.0]], dtype=np.float32)
    assert np.allclose(ensemble_features([a, b]), [[0.6, 0.8, 0.0, 1.0]])


@pytest.mark.parametrize("key, value, fragment", [
    ("ratio", 1.5, "'analysis.ratio' must lie in (0, 1)"),
    ("ratio", 1.0, "'analysis.ratio' must lie in (0, 1)"),
    ("masks", 0, "'analysis.masks' must be > 0"),
    ("seed", -1, "'analysis.seed' must lie in [0, 4294967295]"),
    ("maskz", 3, "unknown key 'analysis.maskz' (did you mean 'masks'?)"),
])
def test_analysis_params_are_checked_by_name(key, value, fragment):
    raw = yaml.safe_load(committed_params())
    raw.setdefault("analysis", {})[key] = value
    with pytest.raises(ConfigError) as error:
        parse_params(raw)
    assert fragment in str(error.value)


def test_missing_inputs_are_named_before_any_table_is_analysed(tmp_path):
    """One missing encoder of the second table stops the analysis before the first is analysed
    (it would be minutes into the work), naming the files and the command that makes them."""
    from seba.core import paths

    raw = yaml.safe_load(committed_params())
    raw.update(datasets=["diabetes", "cmc"], seeds=[0])
    raw["ratios"] = [0.2, 0.5]
    params = parse_params(raw)
    from seba.core.data import make_split, save_splits

    y = np.repeat([0, 1], 100)
    for dataset in ("diabetes", "cmc"):
        for path in (paths.processed(tmp_path, dataset), paths.splits(tmp_path, dataset),
                     *(paths.checkpoint(tmp_path, dataset, r, 0) for r in (0.2, 0.5))):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
        save_splits(paths.splits(tmp_path, dataset), [make_split(y, 0, 1 / 6, 0.1)])
    check_inputs(params, tmp_path)
    paths.checkpoint(tmp_path, "cmc", 0.5, 0).unlink()
    with pytest.raises(DataError, match=r"1 are not there \(data/models/cmc/r0.5/seed0.pt\): `dvc repro "
                                        r"analyses/dvc.yaml:analysis` makes them first"):
        check_inputs(params, tmp_path)
    paths.checkpoint(tmp_path, "cmc", 0.5, 0).write_bytes(b"")
    raw["analysis"] = {"consistency_k": 1000}  # more neighbours than test rows: named, not cut silently
    with pytest.raises(DataError, match=r"'analysis.consistency_k' \(1000\) needs more test rows than dataset "
                                        r"'diabetes' has \(\d+ in its smallest split\)"):
        check_inputs(parse_params(raw), tmp_path)


@pytest.mark.slow
def test_the_analysis_stage_runs_only_when_asked_and_writes_its_report(tiny_pipeline):
    from tiny_pipeline import run, stages_run

    work, env, _ = tiny_pipeline
    assert stages_run(run(["dvc", "repro", "--dry"], work, env).stdout) == set()  # not in `dvc repro`
    result = run(["dvc", "repro", "analyses/dvc.yaml"], work, env)
    assert stages_run(result.stdout) == {"analyses/dvc.yaml:analysis", "analyses/dvc.yaml:theorem",
                                         "analyses/dvc.yaml:track"}
    out = work / "reports" / "analysis"
    fraction = pd.read_csv(out / "knn_fraction.csv")
    assert set(fraction["dataset"]) == {"diabetes", "cmc"}
    assert set(fraction["view"]) == {"batch", "split", "split_minus_batch"}
    assert fraction.loc[fraction["view"] != "split_minus_batch", "same_class_fraction"].between(0, 1).all()
    consistency = pd.read_csv(out / "label_consistency.csv")
    assert set(consistency["space"]) == {"r0.2", "r0.5", "ensemble"}
    for png in ("knn_fraction.png", "label_consistency.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| diabetes |" in (out / "README.md").read_text()
    used = yaml.safe_load((out / "params.yaml").read_text())
    assert used["ratios"] == [0.2, 0.5] and used["analysis"]["masks"] > 0  # the settings used, defaults too
    assert set(used["target_views"]) == {"diabetes", "cmc"}
    assert stages_run(run(["dvc", "repro", "analyses/dvc.yaml"], work, env).stdout) == set()
    assert stages_run(run(["dvc", "repro", "--dry"], work, env).stdout) == set()


def test_batches_no_larger_than_k_are_refused_by_name():
    raw = yaml.safe_load(committed_params())
    raw["analysis"] = {"batch_rows": 20, "max_k": 20}
    with pytest.raises(ConfigError, match=r"'analysis.batch_rows' \(20\) must exceed 'analysis.max_k' \(20\)"):
        parse_params(raw)
    raw["analysis"] = {"batch_rows": 21, "max_k": 20}
    assert parse_params(raw).analysis.batch_rows == 21


def test_target_views_are_drawn_with_the_datasets_pretraining_settings():
    """(a) masks k = max(min_masked_columns, floor(r * G)) columns and sees the rows scaled as the
    dataset's pretraining scales them (its own `sources.<ds>.pretrain` values over the section)."""
    gen = torch.Generator().manual_seed(0)
    assert {int(m.sum()) for m in _masks(10, SMALL, gen, 1)} == {2}
    assert {int(m.sum()) for m in _masks(10, SMALL, gen, 4)} == {4}
    raw = yaml.safe_load(committed_params())
    raw["datasets"] = ["cmc", "diabetes"]
    raw["sources"]["diabetes"]["pretrain"] = {"normalise": False, "min_masked_columns": 3}
    params = parse_params(raw)
    rng = np.random.default_rng(0)
    table = EncodedTable(X=(rng.normal(size=(50, 3)) * [1, 100, 1] + 5).astype(np.float32), y=rng.integers(0, 2, 50),
                         groups=np.arange(3), numeric=np.ones(3, bool), columns=np.array(["a", "b", "c"]),
                         encoded_names=np.array(["a", "b", "c"]), classes=np.array(["0", "1"]))
    train = np.arange(40)
    x, k = pretraining_view(params, "diabetes", table, train)
    assert k == 3 and np.allclose(x, table.X[train])  # as they are
    x, k = pretraining_view(params, "cmc", table, train)
    assert k == 1 and np.allclose(x.mean(0), 0, atol=1e-5) and np.allclose(x.std(0), 1, atol=1e-3)


def _report(fraction_tables, gains):
    fraction = pd.DataFrame([row for args in fraction_tables for row in fraction_rows(*args)])
    consistency = pd.DataFrame([{"dataset": d, "space": "ensemble", "metric": m, "c_in": c, "rows": n,
                                 "mean_c_lat": c + gain}
                                for d, rows in gains.items() for m in ("euclidean", "cosine")
                                for c, (n, gain) in enumerate(rows)])
    return verdicts(fraction, consistency)


def test_the_summary_pairs_split_and_batches_and_flags_a_table_of_one_batch():
    many = {"batch": np.array([[0.5, 0.4], [0.52, 0.4], [0.48, 0.4]]), "split": np.array([[0.6, 0.5], [0.64, 0.5]])}
    many["split_minus_batch"] = many["split"] - many["batch"][:2]
    few = {k: v.copy() for k, v in many.items()}
    gains = {"big": [(0, 0.0), (3, 1.0), (5, 0.0), (4, -0.2)], "small": [(2, 0.5), (0, 0.0), (0, 0.0), (6, 0.1)]}
    table = _report([("big", many, 5000, 1024), ("small", few, 575, 1024)], gains)
    big, small = table.set_index("dataset").loc["big"], table.set_index("dataset").loc["small"]
    assert not big["one_batch"] and small["one_batch"] and small["train_rows"] == 575
    assert big["split_minus_batch_k1"] == pytest.approx(0.11) and big["split_minus_batch_k1_se"] == pytest.approx(0.01)
    text = report_markdown(table, AnalysisConfig(masks=3, split_masks=2), (0,))
    assert "| small * | 575 |" in text and "| big | 5000 |" in text and "+0.110 ± 0.010" in text
    assert "on **1 of 1** tables with more than one batch" in text
    assert "small: at most 1024 training rows, one batch" in text


def test_a_consistency_group_without_rows_is_no_gain():
    """No test row with c_in <= 3: the low gain is missing (–), not 0, and not counted."""
    fractions = {"batch": np.ones((2, 2)) * 0.5, "split": np.ones((2, 2)) * 0.5, "split_minus_batch": np.zeros((2, 2))}
    gains = {"toy": [(0, 0.0)] * 4 + [(3, 1.0)] * 6}  # c_in 0..9; rows only at c_in >= 4
    table = _report([("toy", fractions, 100, 1024)], gains)
    assert np.isnan(table.loc[0, "euclidean_gain_low"]) and table.loc[0, "euclidean_gain_high"] == pytest.approx(1.0)
    text = report_markdown(table, AnalysisConfig(masks=2, split_masks=2), (0,))
    assert "| toy | – | – | +1.00 | +1.00 |" in text and "on **0 of 0** tables with such rows" in text
