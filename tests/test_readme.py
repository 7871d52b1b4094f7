"""The README's results block is the one benchmarks/readme_table.py makes from reports/results.csv."""

import importlib.util
from pathlib import Path

import pandas as pd

from seba.report import headline_markdown

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("readme_table", ROOT / "benchmarks" / "readme_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_results_block_equals_the_generated_one():
    script = _script()
    readme = (ROOT / "README.md").read_text()
    expected = script.block(ROOT / "reports" / "results.csv")
    assert expected in readme, "README.md's results block is stale: run python benchmarks/readme_table.py --write"


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
