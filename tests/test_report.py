import json

import pandas as pd

from seba.report import figure, load_paper, markdown, results_table, summary_metrics


def fake_episodes(value: float) -> pd.DataFrame:
    rows = []
    for shot in (1, 5, 10):
        for member, offset in (("r0.1", -1.0), ("r0.5", 1.0), ("ensemble", 0.0)):
            for episode in range(3):
                rows.append({"seed": 0, "shot": shot, "episode": episode, "member": member,
                             "accuracy": value + offset + episode, "balanced_accuracy": value})
    return pd.DataFrame(rows)


def test_tables_metrics_and_figure(root, tmp_path):
    paper = load_paper(root / "data/reference/paper_results.csv", tables=("main",))
    assert len(paper) == 24
    table = results_table({"cmc": fake_episodes(40.0), "karhunen": fake_episodes(80.0)}, paper)
    ens = table[(table["member"] == "ensemble") & (table["dataset"] == "cmc") & (table["shot"] == 1)].iloc[0]
    assert ens["accuracy"] == 41.0 and ens["paper"] == 36.76
    assert ens["difference"] == 41.0 - 36.76
    info = {"seeds": [0], "episodes": 3, "ratios": [0.1, 0.5], "encoder_out": 256, "test_fraction": 1 / 6}
    md = markdown(table, info)
    assert "| cmc | 1 | 41.00 ± 1.00 | 36.76 | +4.24 | 40.00 | 40.00 | 42.00 |" in md
    metrics = summary_metrics(table)
    assert metrics["cmc_1shot_ensemble"] == 41.0 and "mean_abs_diff_vs_paper" in metrics
    json.dumps(metrics)
    figure(table, tmp_path / "fig.png")
    assert (tmp_path / "fig.png").read_bytes()[:4] == b"\x89PNG"


def test_paper_values_cover_the_challenging_tables(root):
    """An opt-in challenging table (cnae9, fashion, devnagari) is compared with the paper's
    challenging table as the eight are with its main table; cnae9 is `cnae` in the paper."""
    paper = load_paper(root / "data/reference/paper_results.csv")
    assert len(paper) == 33
    value = paper.set_index(["dataset", "shot"])["paper"]
    assert value[("fashion", 1)] == 52.74 and value[("fashion", 10)] == 72.13
    assert ("cnae9", 5) in value.index and ("cnae", 5) not in value.index
    assert value[("cmc", 1)] == 36.76
    table = results_table({"fashion": fake_episodes(50.0)}, paper)
    ens = table[(table["member"] == "ensemble") & (table["shot"] == 1)].iloc[0]
    assert ens["paper"] == 52.74 and ens["difference"] == 51.0 - 52.74
