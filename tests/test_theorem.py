"""The appendix-theorem simulation (seba/theorem.py) and its stage (stages/theorem.py)."""

import copy
import json
import math
import os
import runpy
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from conftest import committed_params
import seba.core.tracking as tracking
from seba.core.config import parse_params
from seba.core.errors import ConfigError
from seba.theorem import (TheoremConfig, batch_mismatch, batch_table, best_constant, config_dict, judge,
                          load_theorem, mismatch_direct, mismatch_exact_1d, mismatch_probability, pair_table,
                          parse_theorem, view_separations, view_size)
from seba.validate import validate

TINY = {"seed": 3, "dims": [16, 64], "ratios": [0.25, 0.5], "separations": [4, 64, 1024], "trials": 4000,
        "batch_dim": 16, "batch_size": 64, "batch_separations": [64], "masks": 3}


@pytest.mark.parametrize("n,s2", [(1, 2.0), (3, 6.0), (12, 10.0)])
def test_the_two_scalar_reduction_agrees_with_brute_force(n, s2):
    p, se = mismatch_probability(n, s2, 20_000, seed=0)
    direct = mismatch_direct(n, s2, 40_000, seed=0)
    assert abs(p - direct) < 4 * math.sqrt(direct * (1 - direct) / 40_000) + 4 * se


@pytest.mark.parametrize("s2", [1.0, 16.0, 256.0])
def test_one_coordinate_matches_the_closed_form_far_into_the_tail(s2):
    p, se = mismatch_probability(1, s2, 20_000, seed=0)
    exact = mismatch_exact_1d(s2)
    assert abs(p / exact - 1) < 0.1 and se / p < 0.05  # 256: p = 3.2e-11, still resolved


def test_dense_mismatch_falls_as_the_view_grows():
    # D = 64, delta^2 = 32: shared/docs/paper-experiments.md measures 0.402, 0.363, 0.308, 0.238, 0.156
    ps = [mismatch_probability(n, n * 32 / 64, 20_000, seed=0)[0] for n in (4, 8, 16, 32, 64)]
    assert ps == sorted(ps, reverse=True)
    assert ps == pytest.approx([0.402, 0.363, 0.308, 0.238, 0.156], abs=0.01)
    assert mismatch_probability(8, 0.0, 10, seed=0) == (0.5, 0.0)


def test_views_of_a_sparse_offset_miss_it_with_probability_one_minus_n_over_d():
    assert view_separations("dense", 64, 16, 32.0) == [(1.0, 8.0)]
    assert view_separations("sparse", 64, 16, 32.0) == [(0.25, 32.0), (0.75, 0.0)]
    assert view_separations("sparse", 8, 8, 5.0) == [(1.0, 5.0)]
    assert [view_size(64, r) for r in (0.01, 0.1, 0.3, 1.0)] == [1, 6, 19, 64]
    # D = 64, n = 16: shared/docs/paper-experiments.md gives 0.474, 0.420, 0.376, 0.375, 0.375
    expected = [sum(w * mismatch_probability(16, s2, 20_000, seed=0)[0]
                    for w, s2 in view_separations("sparse", 64, 16, d2)) for d2 in (4.0, 16.0, 64.0, 256.0, 1024.0)]
    assert expected == pytest.approx([0.474, 0.420, 0.376, 0.375, 0.375], abs=0.005)


def test_the_sparse_counterexample_violates_the_bound_for_any_constant():
    cfg = parse_theorem(TINY)
    pairs = pair_table(cfg)
    c_fit = best_constant(pairs)
    pairs = judge(pairs, c_fit)
    dense, sparse = pairs[pairs["profile"] == "dense"], pairs[pairs["profile"] == "sparse"]
    assert dense["holds"].all() and c_fit == pytest.approx(dense["c_star"].min())
    assert (sparse["p"] >= sparse["floor"] - 1e-12).all()  # a view that misses Delta: p = 1/2
    far = sparse[sparse["delta2"] == 1024]
    assert not far["holds"].any()
    # no C survives: C* <= ln(4 / (1 - n/D)) D / (n delta^2), which goes to 0 with delta^2
    limit = [math.log(4 / (1 - n / d)) * d / (n * 1024) for n, d in zip(far["n"], far["D"])]
    assert (far["c_star"].to_numpy() <= limit).all() and far["c_star"].max() < 0.01
    # the proof's explicit per-view bound, averaged over the views (no Jensen), does hold
    assert (pairs["p"] <= pairs["proof_bound"] + 3 * pairs["se"]).all()


def test_batch_mismatch_falls_with_the_ratio_when_dense_and_stays_near_the_floor_when_sparse():
    small = batch_mismatch("dense", 32, 3, 64.0, 256, 4, seed=0)[0]
    large = batch_mismatch("dense", 32, 16, 64.0, 256, 4, seed=0)[0]
    assert large < small < 0.5
    assert batch_mismatch("sparse", 32, 1, 64.0, 256, 1, seed=1)[0] > 0.35  # the one column is rarely drawn
    table = batch_table(parse_theorem(TINY))
    assert list(table["ratio"]) == [0.25, 0.5, 0.25, 0.5] and list(table["floor"]) == [0, 0, 0.375, 0.25]


def test_the_numbers_are_a_function_of_the_seed():
    cfg = parse_theorem(TINY)
    again = pair_table(cfg)
    pd.testing.assert_frame_equal(pair_table(cfg), again)
    pd.testing.assert_frame_equal(batch_table(cfg), batch_table(cfg))
    other = pair_table(parse_theorem({**TINY, "seed": 4}))
    assert not other["p"].equals(again["p"])


def test_params_yaml_documents_the_defaults(committed_file):
    raw = yaml.safe_load(committed_file.read_text())
    assert raw["theorem"] == config_dict(TheoremConfig())
    assert load_theorem(committed_file) == TheoremConfig()
    assert parse_theorem(None) == TheoremConfig()
    parse_params(raw)  # the pipeline's config accepts the section


@pytest.mark.parametrize("section,message", [
    ({"trials": 0}, "'theorem.trials' must lie in \\[100, 100000000\\], got 0"),
    ({"trails": 10}, "unknown key 'theorem.trails' \\(did you mean 'trials'\\?\\)"),
    ({"ratios": [0, 0.5]}, "'theorem.ratios' values must lie in \\(0, 1\\], got 0"),
    ({"ratios": [0.5, 1.5]}, "'theorem.ratios' values must lie in \\(0, 1\\], got 1.5"),
    ({"dims": [16, 16]}, "'theorem.dims' has duplicates"),
    ({"dims": 16}, "'theorem.dims' must be a non-empty list of integers"),
    ({"dims": [16.5]}, "'theorem.dims' must be an integer"),
    ({"seed": True}, "'theorem.seed' must be an integer"),
    ({"seed": -1}, "'theorem.seed' must lie in \\[0, 4294967295\\]"),
    ({"separations": [float("inf")]}, "'theorem.separations' must be a number"),
    ({"separations": [1e5]}, "'theorem.separations' values must lie in \\(1e-06, 8000\\]"),
    ({"separations": [1e-320]}, "'theorem.separations' values must lie in \\(1e-06, 8000\\], got 1e-320"),
    ({"batch_size": 2}, "'theorem.batch_size' must lie in \\[4, 8192\\]"),
    ({"masks": "many"}, "'theorem.masks' must be an integer"),
    ("fast", "'theorem' must be a mapping"),
])
def test_bad_theorem_params_name_the_key(section, message):
    with pytest.raises(ConfigError, match=message):
        parse_theorem(section)


def test_seba_validate_checks_the_theorem_section(tmp_path):
    raw = yaml.safe_load(committed_params())
    bad = copy.deepcopy(raw)
    bad["theorem"]["trials"] = 0
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(bad))
    assert validate(tmp_path) == ["params.yaml: 'theorem.trials' must lie in [100, 100000000], got 0"]


def test_the_stage_writes_its_report_from_its_params(root, tmp_path, monkeypatch):
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"theorem": TINY}))
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
           "PYTHONPATH": str(root)}
    result = subprocess.run([sys.executable, str(root / "stages" / "theorem.py")], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "reports" / "theorem"
    assert {p.name for p in out.iterdir()} == {"README.md", "theorem.csv", "bound.png", "batch.png", "summary.json"}
    table = pd.read_csv(out / "theorem.csv")
    assert len(table) == 2 * 2 * 2 * 3 + 2 * 1 * 2 and set(table["quantity"]) == {"pair", "batch"}
    report = (out / "README.md").read_text()
    assert "the claim fails (counterexample)" in report and "trials: 4000" in report
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sparse_violations"] > 0 and summary["dense_violations"] == 0
    monkeypatch.setenv("MLFLOW_TRACKING_URI", env["MLFLOW_TRACKING_URI"])  # push the stage's records to MLflow
    tracking.flush(tmp_path)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=env["MLFLOW_TRACKING_URI"])
    run = client.search_runs([client.get_experiment_by_name("seba").experiment_id])[0]
    assert run.data.params["trials"] == "4000" and run.data.metrics["sparse_violations"] == summary["sparse_violations"]



def test_the_stage_names_a_bad_key_and_writes_nothing(root, tmp_path, monkeypatch, capsys):
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"theorem": {**TINY, "masks": 0}}))
    monkeypatch.chdir(tmp_path)
    stage = runpy.run_path(str(root / "stages" / "theorem.py"))
    with pytest.raises(SystemExit) as exit_info:
        stage["run_stage"]("theorem", stage["main"])
    assert exit_info.value.code == 2
    assert "error in stage 'theorem': params.yaml: 'theorem.masks' must lie in [1, 100000], got 0" in capsys.readouterr().err
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize("grid, dense, sparse", [
    ({"dims": [16]}, "growing D: not tested on this grid (one D", "the claim fails (counterexample)"),
    ({"ratios": [1.0]}, "growing D: no constant independent of D", "no counterexample on this grid"),
])
def test_the_verdicts_say_what_the_grid_shows(grid, dense, sparse):
    """The report's headings follow the numbers: one D cannot show the growth in D, and a grid
    without a sparse point above the bound (small δ², or views of every coordinate) says so."""
    from seba.theorem import report_markdown

    cfg = parse_theorem({**TINY, **grid})
    pairs = pair_table(cfg)
    c_fit = best_constant(pairs)
    report = report_markdown(cfg, judge(pairs, c_fit), batch_table(cfg), c_fit)
    assert dense in report and sparse in report, report[:3000]
    sparse_rows = pd.DataFrame({"holds": [True, True], "floor": [0.375, 0.375]})
    from seba.theorem import _sparse_heading

    assert "the claim fails beyond this grid" in _sparse_heading(sparse_rows)  # no point above the bound, n < D


def test_a_far_tail_probability_keeps_its_standard_error():
    """p below 1e-154 squared underflows; the error is still its own size, not 0."""
    for n in (1, 2):
        p, se = mismatch_probability(n, 8000.0, 4000, 0)
        assert 0 < se < p < 1e-250
    p, se = mismatch_probability(1, 8000.0, 4000, 0)
    assert abs(p - mismatch_exact_1d(8000.0)) < 4 * se
