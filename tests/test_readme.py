"""The README's results block is the one benchmarks/readme_table.py makes from reports/results.csv."""

import importlib.util
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from seba.report import headline_markdown

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("readme_table", ROOT / "benchmarks" / "readme_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_results_block_equals_the_generated_one():
    """From the reports as they are, or as committed: a run of the pipeline replaces reports/ with
    its own results, which the README does not show."""
    script = _script()
    readme = (ROOT / "README.md").read_text()
    if script.current_block(readme) in readme:  # from the source the block names, else reports/results.csv
        return
    try:
        committed = script.current_block(readme, read=script.committed_csv)
    except subprocess.CalledProcessError:  # not a git checkout, or the source is not committed
        committed = None
    assert committed is not None and committed in readme, (
        "README.md's results block matches neither the reports it shows nor their committed version: after "
        "regenerating the committed reports, run python benchmarks/readme_table.py --write")


def _cells(rows):
    return pd.DataFrame(rows, columns=["method", "dataset", "shot", "seeds", "mean", "se", "paper", "diff", "diff_in_se"])


def test_protocol_block_reports_standard_errors_and_which_misses_exceed_them(tmp_path):
    script = _script()
    cells = _cells([
        ("seba", "a", 1, 100, 50.0, 0.5, 53.0, -3.0, -6.0),   # a miss, 6 SE
        ("seba", "a", 5, 100, 60.0, 1.5, 57.5, 2.5, 1.67),   # above by 2.5, within noise
        ("seba", "b", 1, 100, 70.0, 0.2, 70.5, -0.5, -2.5),
        ("seba", "b", 5, 100, 80.0, 0.2, float("nan"), float("nan"), float("nan")),
        ("knn", "a", 1, 100, 40.0, 0.1, 41.0, -1.0, -10.0)])   # not SeBA: left out
    text = script.protocol_markdown(cells, ["a", "b"])
    assert "| a | **50.00 ± 0.50** (53.00) | 60.00 ± 1.50 (57.50) |" in text
    assert "| b | 70.00 ± 0.20 (70.50) | 80.00 ± 0.20 |" in text
    assert "mean over 100 seeds" in text and "2 of 3 cells within 2 points" in text
    assert "a 1-shot -3.00 (-6.0 SE), a 5-shot +2.50 (+1.7 SE); 1 of these 2 differ by more than 3" in text
    path = tmp_path / "cells.csv"
    cells.to_csv(path, index=False)
    block = script.protocol_block(path, ["a", "b"])
    readme = f"intro\n{script.START}\nold\n{script.END}\nrest"
    written = script.replace(readme, block)
    assert f"<!-- from: {path} -->" in written and written.endswith("rest")
    with pytest.raises(SystemExit, match="no SeBA cells for c"):
        script.protocol_markdown(cells, ["a", "b", "c"])
    mixed = cells.copy()
    mixed.loc[2, "seeds"] = 10
    with pytest.raises(SystemExit, match="seed counts differ .*a: 100, b: 10/100"):
        script.protocol_markdown(mixed, ["a", "b"])


def test_headline_marks_misses_and_counts_them():
    table = pd.DataFrame({
        "dataset": ["a", "a", "b", "b"], "shot": [1, 5, 1, 5], "member": "ensemble",
        "accuracy": [50.0, 60.0, 70.0, 80.0], "paper": [53.0, 59.0, 70.5, float("nan")],
        "seeds": 2, "episodes": 200})
    text = headline_markdown(table)
    assert "| a | **50.00** (53.00) | 60.00 (59.00) |" in text
    assert "| b | 70.00 (70.50) | 80.00 |" in text
    assert "2 seeds × 100 episodes" in text
    assert "2 of 3 cells within 2 points" in text
    assert "mean |difference| 1.50" in text


def test_means_over_the_datasets_compare_the_paper_only_over_the_same_datasets():
    """A table the paper does not have (a user's own) counts in our mean over the datasets; the
    paper's mean of that shot would be over fewer datasets, so it is not printed (–), as in
    reports/results.md's "Mean over datasets"."""
    table = pd.DataFrame({
        "dataset": ["a", "a", "b", "b", "mine", "mine"], "shot": [1, 5, 1, 5, 1, 5], "member": "ensemble",
        "accuracy": [50.0, 60.0, 70.0, 80.0, 90.0, 95.0], "paper": [53.0, 59.0, 70.5, 79.0, float("nan"), 96.0],
        "seeds": 2, "episodes": 200})
    text = headline_markdown(table)
    assert "means over the datasets 70.00 / 78.33 (paper – / 78.00)." in text, text
    assert "5 of 5 cells" not in text and "4 of 5 cells within 2 points" in text

def test_readme_table_refuses_bad_inputs_and_a_partial_or_foreign_write(tmp_path):
    """A missing or foreign file is one line, a results table without every dataset of params.yaml
    is refused (unless --partial), and --write of a results table never replaces a block that a
    many-seed run generated: README.md is left as it was. The script checks the datasets of the
    workspace's params.yaml (a user's own list), and so does this test."""
    import sys

    before = (ROOT / "README.md").read_bytes()
    listed = yaml.safe_load((ROOT / "params.yaml").read_text())["datasets"]
    partial = tmp_path / "results.csv"
    results = pd.read_csv(ROOT / "reports" / "results.csv")
    kept = results[results["dataset"].isin(["cmc", "diabetes"]) & (results["dataset"] != listed[-1])]
    kept.to_csv(partial, index=False)
    missing = ", ".join(sorted(set(listed) - set(kept["dataset"])))
    gappy = tmp_path / "gappy.csv"
    results[~((results["dataset"] == "cmc") & (results["shot"] == 5) & (results["member"] == "ensemble"))].to_csv(
        gappy, index=False)

    def run(*args):
        done = subprocess.run([sys.executable, "benchmarks/readme_table.py", *map(str, args)], cwd=ROOT,
                              capture_output=True, text=True)
        return done.returncode, done.stdout + done.stderr

    for args, message in (((tmp_path / "nope.csv",), "error: no such file"),
                          (("reports/comparison.csv",), "has no column member, seeds, episodes: not a reports/results.csv table"),
                          (("--protocol", "reports/results.csv"), "not a protocol_cells.py cells.csv table"),
                          ((partial,), f"has no ensemble results for {missing} (params.yaml's datasets)"),
                          ((gappy, "--partial"), "lacks the ensemble's cmc 5-shot: one table needs every dataset"),
                          ((partial, "--partial", "--write"), "README.md's results block is generated from "
                                                              "reports/experiments/gpu_h100_stacked/cells.csv")):
        code, output = run(*args)
        assert code == 1 and message in output and "Traceback" not in output, (args, output)
    assert run(partial, "--partial")[0] == 0
    assert (ROOT / "README.md").read_bytes() == before
