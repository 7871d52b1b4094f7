"""benchmarks/' helpers: the GPU run's (gpu_protocol.py's params edits, protocol_cells.py's cells from
stage logs, the precision checks) and chance_gap.py's chance level and log formats."""

import gzip
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import committed_params

ROOT = Path(__file__).resolve().parents[1]


def load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_protocol_edits_dotted_keys_and_refuses_unknown_sections():
    edit = load("gpu_protocol").edit_params
    text = committed_params()
    params = yaml.safe_load(edit(text, ["seeds=4", "pretrain.precision=tf32", "baselines.methods=[knn]"]))
    assert params["seeds"] == [0, 1, 2, 3]
    assert params["pretrain"]["precision"] == "tf32" and params["baselines"]["methods"] == ["knn"]
    assert params["datasets"] == yaml.safe_load(text)["datasets"]  # the rest as it was
    assert yaml.safe_load(edit(text, ["seeds=50..53"]))["seeds"] == [50, 51, 52, 53]
    assert yaml.safe_load(edit(text, ["seeds=[7, 9]"]))["seeds"] == [7, 9]
    with pytest.raises(SystemExit, match="below the first"):
        edit(text, ["seeds=9..3"])
    with pytest.raises(SystemExit, match="no section 'pretrian'"):
        edit(text, ["pretrian.lr=0.1"])
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        edit(text, ["seeds"])


def test_gpu_protocol_turns_a_time_limits_sigterm_into_an_exit_that_puts_params_back():
    """`timeout` ends gpu_protocol.py with SIGTERM: raised as Stopped (a SystemExit) in the process,
    main's `finally` writes params.yaml back; run_stage passes it on as it is, not as a stage failure."""
    import os
    import signal
    import time

    protocol = load("gpu_protocol")
    before = signal.getsignal(signal.SIGTERM)
    try:
        protocol.restore_on_sigterm()
        with pytest.raises(protocol.Stopped, match="stopped by signal 15"):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs here at the latest
    finally:
        signal.signal(signal.SIGTERM, before)
    assert issubclass(protocol.Stopped, SystemExit)


LOG = """[pretrain cmc r=0.1] 3 seeds: ...
[evaluate cmc seed 0] 1-shot 36.00, 5-shot 42.00, 10-shot 46.00 (ensemble; 0.1s per seed, 3 seeds together)
[evaluate cmc seed 1] 1-shot 38.00, 5-shot 44.00, 10-shot 47.00 (ensemble; 0.1s per seed, 3 seeds together)
[evaluate cmc seed 2] 1-shot 37.00, 5-shot 43.00, 10-shot 45.00 (ensemble; 0.1s per seed, 3 seeds together)
[baseline knn cmc seed 0] 1-shot 35.00, 5-shot 37.00, 10-shot 39.00 (0.0s)
[baseline knn cmc seed 1] 1-shot 36.00, 5-shot 38.00, 10-shot 40.00 (0.0s)
"""


def test_protocol_cells_from_stage_lines(tmp_path):
    cells = load("protocol_cells")
    (tmp_path / "a.log").write_text(LOG)
    (tmp_path / "b.log.gz").write_bytes(gzip.compress(LOG.splitlines()[1].encode()))  # a seed seen twice, the same
    means = cells.seed_means([tmp_path / "a.log", tmp_path / "b.log.gz"])
    assert len(means) == 3 * 3 + 2 * 3
    table = cells.cells(means).set_index(["method", "dataset", "shot"])
    seba = table.loc[("seba", "cmc", 1)]
    assert seba["seeds"] == 3 and seba["mean"] == 37.0 and seba["se"] == round(1 / 3 ** 0.5, 2)
    assert seba["paper"] == 36.76 and seba["diff"] == 0.24  # data/reference/paper_results.csv
    assert table.loc[("knn", "cmc", 10)]["mean"] == 39.5 and table.loc[("knn", "cmc", 10)]["paper"] == 39.93


def test_protocol_cells_refuses_a_seed_that_differs_between_logs(tmp_path):
    cells = load("protocol_cells")
    (tmp_path / "a.log").write_text(LOG)
    (tmp_path / "b.log").write_text(LOG.splitlines()[1].replace("36.00", "36.50") + "\n")
    with pytest.raises(SystemExit, match="seba cmc seed 0 1-shot is 36.50 here"):
        cells.seed_means([tmp_path / "a.log", tmp_path / "b.log"])
    # 0.01 apart: the printed rounding of a mean whose last bits differ between devices; the first kept
    (tmp_path / "d.log").write_text(LOG.splitlines()[1].replace("36.00", "36.01") + "\n")
    means = cells.seed_means([tmp_path / "a.log", tmp_path / "d.log"]).set_index(["method", "dataset", "seed", "shot"])
    assert means.loc[("seba", "cmc", 0, 1), "accuracy"] == 36.0
    (tmp_path / "c.log").write_text("nothing\n")
    with pytest.raises(SystemExit, match="no per-seed"):
        cells.seed_means([tmp_path / "c.log"])


def test_protocol_cells_members_from_episodes(tmp_path):
    cells = load("protocol_cells")
    rows = ["seed,shot,episode,member,accuracy"]
    for seed, base in ((0, 50.0), (1, 52.0)):
        for member, offset in (("ensemble", 2.0), ("r0.1", 0.0)):
            rows += [f"{seed},1,{e},{member},{base + offset + e}" for e in (0, 1)]  # episode means base+offset+0.5
    (tmp_path / "fashion.csv").write_text("\n".join(rows) + "\n")
    table = cells.members([tmp_path / "fashion.csv"]).set_index(["dataset", "member", "shot"])
    assert table.loc[("fashion", "ensemble", 1)].tolist() == [2, 53.5, 1.0]  # seed means 52.5, 54.5
    assert table.loc[("fashion", "r0.1", 1), "mean"] == 51.5
    (tmp_path / "other.csv").write_text("seed,shot,accuracy\n0,1,50\n")
    with pytest.raises(SystemExit, match="no column member"):
        cells.members([tmp_path / "other.csv"])
    for name, text, message in (("header.csv", "seed,shot,member,accuracy\n", "no episodes"),
                                ("words.csv", "seed,shot,member,accuracy\n0,1,ensemble,high\n", "1 accuracy value"),
                                ("broken.csv", 'a,"b\n', "cannot be read as a CSV file"),
                                ("empty.csv", "", "cannot be read as a CSV file")):
        (tmp_path / name).write_text(text)
        with pytest.raises(SystemExit, match=message):
            cells.members([tmp_path / name])
    (tmp_path / "junk.log.gz").write_bytes(b"not gzip")
    with pytest.raises(SystemExit, match="junk.log.gz: cannot be read as a stage log"):
        cells.seed_means([tmp_path / "junk.log.gz"])


def test_protocol_cells_sums_up_members_of_a_table_run_in_parts(tmp_path, monkeypatch):
    """A table's seeds run in several calls: each call's --out keeps every seed's member means
    (member_seed_means.csv, small where the episodes are not kept), and a later call adds them."""
    cells = load("protocol_cells")
    (tmp_path / "a.log").write_text(LOG)

    def episodes(folder, seeds):
        folder.mkdir()
        rows = ["seed,shot,episode,member,accuracy"]
        for seed in seeds:
            rows += [f"{seed},1,{e},{m},{50.0 + seed + off + e}" for m, off in (("ensemble", 2.0), ("r0.1", 0.0))
                     for e in (0, 1)]
        (folder / "fashion.csv").write_text("\n".join(rows) + "\n")
        return folder / "fashion.csv"

    first, second = episodes(tmp_path / "one", (0, 1)), episodes(tmp_path / "two", (1, 2, 3))
    monkeypatch.setattr("sys.argv", ["protocol_cells.py", str(tmp_path / "a.log"), "--out", str(tmp_path / "o1"),
                                     "--episodes", str(first)])
    cells.main()
    kept = pd.read_csv(tmp_path / "o1" / "member_seed_means.csv")
    assert list(kept.columns) == ["dataset", "member", "seed", "shot", "accuracy"] and len(kept) == 2 * 2
    monkeypatch.setattr("sys.argv", ["protocol_cells.py", str(tmp_path / "a.log"), "--out", str(tmp_path / "o2"),
                                     "--episodes", str(second), "--member-means", str(tmp_path / "o1" / "member_seed_means.csv")])
    cells.main()
    table = pd.read_csv(tmp_path / "o2" / "members.csv").set_index(["dataset", "member", "shot"])
    assert table.loc[("fashion", "ensemble", 1)].tolist() == [4, 54.0, round(pd.Series([52.5, 53.5, 54.5, 55.5]).std() / 2, 2)]
    assert len(pd.read_csv(tmp_path / "o2" / "member_seed_means.csv")) == 4 * 2  # seeds 0-3, seed 1 once
    # a seed whose means differ between the parts: other params or code, refused
    other = pd.read_csv(tmp_path / "o1" / "member_seed_means.csv")
    other.loc[other["seed"] == 1, "accuracy"] += 0.5
    other.to_csv(tmp_path / "other.csv", index=False)
    with pytest.raises(SystemExit, match="fashion ensemble seed 1 1-shot differs between the inputs by 0.5000"):
        cells.combined([cells.read_member_means([tmp_path / "other.csv"]), cells.member_seed_means([second])])
    for name, text, message in (("cols.csv", "dataset,seed,shot,accuracy\nfashion,0,1,50\n", "no column member"),
                                ("words.csv", "dataset,member,seed,shot,accuracy\nfashion,ensemble,0,1,high\n",
                                 "row 2 is not a dataset, member, whole seed and shot and an accuracy"),
                                ("half.csv", "dataset,member,seed,shot,accuracy\nfashion,ensemble,0.5,1,50\n",
                                 "row 2 is not"),
                                ("nameless.csv", "dataset,member,seed,shot,accuracy\nfashion, ,0,1,50\n", "row 2 is not"),
                                ("twice.csv", "dataset,member,seed,shot,accuracy\nfashion,r0.1,0,1,50\nfashion,r0.1,0,1,50\n",
                                 "row 3 repeats a dataset, member, seed and shot"),
                                ("none.csv", "dataset,member,seed,shot,accuracy\n", "no rows")):
        (tmp_path / name).write_text(text)
        with pytest.raises(SystemExit, match=message):
            cells.read_member_means([tmp_path / name])


def test_protocol_cells_notes_members_over_other_seeds_or_a_renamed_episodes_file(tmp_path, monkeypatch, capsys):
    """A table run in parts whose earlier parts' member means were not kept: the cells cover every
    seed, the members fewer (said); an episodes file renamed from <dataset>.csv makes a table of its
    own (said)."""
    cells = load("protocol_cells")
    (tmp_path / "a.log").write_text(LOG)  # cmc seeds 0-2
    rows = ["seed,shot,episode,member,accuracy"] + [f"{seed},1,0,ensemble,50" for seed in (1, 2)]
    (tmp_path / "cmc.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "cmc_seeds1-2.csv").write_text("\n".join(rows) + "\n")
    assert cells.seed_ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
    monkeypatch.setattr("sys.argv", ["protocol_cells.py", str(tmp_path / "a.log"),
                                     "--episodes", str(tmp_path / "cmc.csv"), str(tmp_path / "cmc_seeds1-2.csv")])
    cells.main()
    err = capsys.readouterr().err
    assert "cmc's members (members.csv) cover seeds 1-2, its cells (cells.csv) seeds 0-2" in err
    assert "members of 'cmc_seeds1-2'" in err and "no SeBA lines of it in the logs, which have cmc" in err
    monkeypatch.setattr("sys.argv", ["protocol_cells.py", str(tmp_path / "a.log")])
    cells.main()
    assert "note" not in capsys.readouterr().err


def test_protocol_cells_writes_nothing_when_an_input_is_bad(tmp_path, monkeypatch):
    cells = load("protocol_cells")
    (tmp_path / "a.log").write_text(LOG)
    out = tmp_path / "out"
    out.mkdir()
    (out / "members.csv").write_text("old\n")
    (tmp_path / "bad.csv").write_text("seed,shot,member,accuracy\n")
    monkeypatch.setattr("sys.argv", ["protocol_cells.py", str(tmp_path / "a.log"), "--out", str(out),
                                     "--episodes", str(tmp_path / "bad.csv")])
    with pytest.raises(SystemExit, match="no episodes"):
        cells.main()
    assert sorted(p.name for p in out.iterdir()) == ["members.csv"] and (out / "members.csv").read_text() == "old\n"
    monkeypatch.setattr("sys.argv", ["protocol_cells.py", str(tmp_path / "missing.log")])
    with pytest.raises(SystemExit, match="no such file: .*missing.log"):
        cells.main()


def test_stack_tail_counts_the_epochs_stopped_seeds_wait_in_a_stack():
    executed = load("stack_tail").executed_epochs
    assert executed([3, 3, 3], 0.25) == 9
    assert executed([1, 3], 0.0) == 1 + 1 + 1 + 1  # the first leaves after its epoch 1
    # a quarter of four: the seed stopped at epoch 1 leaves at once; of the three left, the one
    # stopped at 2 (a third) leaves too; then 3 and 10
    assert executed([1, 2, 3, 10], 0.25) == 4 + 3 + 2 + 7
    # a half: the seed stopped at 1 waits (1 of 4) until 2 has stopped too (2 of 4)
    assert executed([1, 2, 3, 10], 0.5) == 4 + 4 + 2 + 7


def test_precision_check_pairs_the_seeds_and_applies_the_tolerance(tmp_path, capsys, monkeypatch):
    check = load("precision_check")
    (tmp_path / "fp32.log").write_text(LOG)
    other = LOG.replace("1-shot 36.00", "1-shot 36.30").replace("1-shot 38.00", "1-shot 38.60")
    (tmp_path / "tf32.log").write_text(other)
    table = check.compare(check.seed_means([tmp_path / "fp32.log"]), check.seed_means([tmp_path / "tf32.log"]))
    row = table.set_index(["dataset", "shot"]).loc[("cmc", 1)]
    assert row["seeds"] == 3 and row["diff"] == pytest.approx(0.3) and row["se"] == pytest.approx(0.3 / 3 ** 0.5)
    for tolerance, status in (("0.3", 0), ("0.29", 1)):
        monkeypatch.setattr("sys.argv", ["precision_check.py", str(tmp_path / "fp32.log"), str(tmp_path / "tf32.log"),
                                         "--tolerance", tolerance])
        assert check.main() == status
        assert ("PASS" if status == 0 else "FAIL") in capsys.readouterr().out
    # the tolerance applies to the exact difference, not to its two-decimal print: 0.3033 fails 0.3
    (tmp_path / "tf32.log").write_text(other.replace("1-shot 38.60", "1-shot 38.61"))
    monkeypatch.setattr("sys.argv", ["precision_check.py", str(tmp_path / "fp32.log"), str(tmp_path / "tf32.log"),
                                     "--tolerance", "0.3"])
    assert check.main() == 1
    assert "FAIL: largest difference +0.30" in capsys.readouterr().out
    # a table the rule needs that a run did not reach (its time limit): no verdict, whatever the others show
    (tmp_path / "tf32.log").write_text(other)
    for expect, status, verdict in ((["cmc"], 0, "PASS"), (["cmc", "income"], 3, "INCOMPLETE")):
        monkeypatch.setattr("sys.argv", ["precision_check.py", str(tmp_path / "fp32.log"), str(tmp_path / "tf32.log"),
                                         "--expect", *expect])
        assert check.main() == status
        out = capsys.readouterr().out
        assert out.splitlines()[-1].startswith(verdict + ":")
        assert ("not compared: income" in out) == (status == 3)


def _precision_run(folder, accuracy, stops, support="aa"):
    """A gpu_protocol.py output folder: one table (cmc), two seeds, one ratio, one shot."""
    import io
    import json
    import tarfile

    folder.mkdir()
    episodes = "seed,shot,episode,member,accuracy,balanced_accuracy,probe_iterations,support_hash\n" + "".join(
        f"{seed},1,{e},{member},{accuracy[(seed, member)] + e},0,0,{support}{e}\n"
        for seed in (0, 1) for member in ("r0.1", "ensemble") for e in (0, 1))
    log = {"seeds": {str(seed): {"stop_epoch": stops[seed], "best_val_loss": 2.0 + seed} for seed in (0, 1)}}
    with tarfile.open(folder / "tables_0.tgz", "w:gz") as archive:
        for name, text in (("reports/episodes/cmc.csv", episodes), ("data/models/cmc/r0.1/log.json", json.dumps(log))):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return folder


def test_precision_seeds_compares_stops_and_accuracies_of_the_same_episodes(tmp_path):
    seeds = load("precision_seeds")
    fp32 = _precision_run(tmp_path / "fp32", {(0, "r0.1"): 50, (0, "ensemble"): 60, (1, "r0.1"): 40, (1, "ensemble"): 70},
                          {0: 10, 1: 20})
    tf32 = _precision_run(tmp_path / "tf32", {(0, "r0.1"): 49, (0, "ensemble"): 60, (1, "r0.1"): 39, (1, "ensemble"): 71},
                          {0: 10, 1: 25})
    row = seeds.compare(seeds.read_run(fp32), seeds.read_run(tf32)).iloc[0]
    assert row["dataset"] == "cmc" and row["encoders"] == 2 and row["same_stop"] == 1
    assert row["median_stop_fp32"] == 15 and row["median_stop_other"] == 17.5
    assert row["member_diff"] == -1.0 and row["ensemble_diff"] == 0.5 and row["median_val_loss_rel"] == 0
    other = _precision_run(tmp_path / "other", {k: 0 for k in [(0, "r0.1"), (0, "ensemble"), (1, "r0.1"), (1, "ensemble")]},
                           {0: 10, 1: 20}, support="bb")
    with pytest.raises(SystemExit, match="cmc: the two runs drew different episodes"):
        seeds.compare(seeds.read_run(fp32), seeds.read_run(other))


def test_gpu_protocol_orders_the_tables_cheapest_first():
    order = load("gpu_protocol").cheapest_first
    assert order(["income", "mine", "cmc", "diabetes", "yours"]) == ["diabetes", "cmc", "income", "mine", "yours"]


def test_chance_gap_reads_both_log_formats_and_weights_batches_by_rows(tmp_path):
    import json
    import math

    chance_gap = load("chance_gap")
    assert chance_gap.chance_level(64, 1024) == pytest.approx(math.log(64))
    # income's 4071 validation rows: three full batches and one of 999
    assert chance_gap.chance_level(4071, 1024) == pytest.approx((3 * 1024 * math.log(1024) + 999 * math.log(999)) / 4071)
    assert chance_gap.chance_level(4071, 1024) < math.log(1024)
    # a 1-row remainder joins the batch before it, as in pretraining: one batch of 1025 rows
    assert chance_gap.chance_level(1025, 1024) == pytest.approx(math.log(1025))
    record = tmp_path / "record.json"
    record.write_text(json.dumps({"cmc r=0.1 seed 0": {"best_val_loss": 4.8}, "dna r=0.25 seed 3": {"best_val_loss": 5.5}}))
    stage = tmp_path / "log.json"
    stage.write_text(json.dumps({"dataset": "income", "ratio": 0.3, "seeds": {"0": {"best_val_loss": 6.9},
                                                                              "1": {"best_val_loss": 6.8}}}))
    assert chance_gap.entries(record) == [("cmc", "0.1", 4.8), ("dna", "0.25", 5.5)]
    assert chance_gap.entries(stage) == [("income", "0.3", 6.9), ("income", "0.3", 6.8)]


def uci_cnae9(tmp_path, *, per_class=120):
    """A file shaped as UCI's CNAE-9.data: class first, 856 counts, 7233 non-zero cells (99.22 % zeros)."""
    import numpy as np
    rows = 9 * per_class
    values = np.zeros((rows, 856), dtype=int)
    cells = np.random.default_rng(0).choice(rows * 856, size=7233 * rows // 1080, replace=False)
    values.flat[cells] = 1 + cells % 3
    labels = np.repeat(np.arange(1, 10), per_class)
    path = tmp_path / "CNAE-9.data"
    path.write_text("\n".join(",".join(map(str, [label, *row])) for label, row in zip(labels, values)) + "\n")
    return path


def test_snapshot_cnae9_builds_the_snapshot_format_and_refuses_another_table(tmp_path):
    build = load("snapshot_cnae9").build
    frame = build(uci_cnae9(tmp_path))
    assert frame.shape == (1080, 857) and list(frame.columns[:2]) == ["V1", "V2"] and frame.columns[-1] == "class"
    assert frame["class"].cat.categories.tolist() == [str(c) for c in range(1, 10)]
    assert frame.drop(columns="class").dtypes.unique().tolist() == ["float64"]
    with pytest.raises(SystemExit, match="1071 rows"):
        build(uci_cnae9(tmp_path, per_class=119))


def test_knn_features_one_nn_and_its_three_treatments():
    import numpy as np
    import torch

    from seba.core.data import EncodedTable
    from seba.episodes import sample_episodes
    module = load("knn_features")
    y = np.repeat(np.arange(3), 4)
    rows = np.eye(3)[y] * 10 + 0.01 * np.arange(12)[:, None]
    episodes = sample_episodes(y, 3, 1, 5, seed=0)
    x = torch.as_tensor(rows, dtype=torch.float32)
    assert module.one_nn_accuracy(x, y, episodes) == 100.0  # well separated classes
    assert module.one_nn_accuracy(x, (y + 1) % 3, episodes) == 0.0  # the nearest support row has the true class, never the shifted one
    table = EncodedTable(X=(rows * [1, 100, 1]).astype(np.float32), y=y, groups=np.arange(3), numeric=np.ones(3, bool),
                         columns=np.array(["a", "b", "c"]), encoded_names=np.array(["a", "b", "c"]),
                         classes=np.array(["0", "1", "2"]))
    treated = module.treatments(table, np.arange(12))
    assert list(treated) == ["standardised, Euclidean", "raw, Euclidean", "raw, cosine"]
    np.testing.assert_allclose(treated["standardised, Euclidean"].std(0), 1.0, rtol=1e-4)
    np.testing.assert_allclose(treated["raw, Euclidean"], table.X)
    np.testing.assert_allclose(np.linalg.norm(treated["raw, cosine"], axis=1), 1.0, rtol=1e-5)


def test_sparse_views_counts_groups_and_matches_enumeration_and_draws():
    import itertools

    import numpy as np

    module = load("sparse_views")
    # four original columns; the last is a one-hot block of two encoded columns (one group)
    X = np.array([[1, 0, 0, 0, 0], [0, 0, 2, 0, 1], [0, 0, 0, 0, 0], [np.nan, 3, 0, 1, 0]], dtype=np.float32)
    nonzero = module.nonzero_groups(X, np.array([0, 1, 2, 3, 3]))
    assert nonzero.tolist() == [[True, False, False, False], [False, False, True, True],
                                [False, False, False, False], [False, True, False, True]]
    counts = nonzero.sum(axis=1)
    for k in (1, 2, 3):  # against every k-subset of the four columns
        subsets = list(itertools.combinations(range(4), k))
        enumerated = np.mean([[not nonzero[row, list(s)].any() for s in subsets] for row in range(4)])
        assert module.empty_share_exact(counts, 4, k) == pytest.approx(enumerated)
        drawn, spread = module.empty_share_drawn(nonzero, k, draws=4000)
        assert abs(drawn - enumerated) < 5 * spread + 1e-9
    assert module.empty_share_exact(counts, 4, 4) == pytest.approx(0.25)  # the empty row only


def test_knn_features_standardised_equals_the_knn_baseline_with_ties():
    """Rows repeated under different labels put support rows at equal distances: the benchmark's
    standardised 1-NN must pick among them as the `knn` baseline does (its figures are the
    baseline's)."""
    import numpy as np
    import torch

    from seba.baselines.base import score_seed
    from seba.baselines.knn import KNN, KnnConfig
    from seba.core.data import EncodedTable, Split
    from seba.episodes import sample_episodes
    module = load("knn_features")
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 30)
    X = rng.integers(0, 2, size=(len(y), 3)).astype(np.float32)  # 8 distinct rows: many exact ties
    table = EncodedTable(X=X, y=y, groups=np.arange(3), numeric=np.ones(3, bool), columns=np.array(["a", "b", "c"]),
                         encoded_names=np.array(["a", "b", "c"]), classes=np.array(["0", "1", "2", "3"]))
    order = rng.permutation(len(y))
    split = Split(seed=3, train=order[:40], val=order[40:50], test=np.sort(order[50:]))
    cfg = type("E", (), {"shots": [1], "episodes": 20})()
    frame, _, _ = score_seed(KNN, KnnConfig(k=1), table, split, seed=3, evaluate_cfg=cfg, dataset="ties",
                             device=torch.device("cpu"))
    features = module.treatments(table, split.train)["standardised, Euclidean"]
    y_test = y[split.test]
    episodes = sample_episodes(y_test, 4, 1, 20, 3, "ties")
    ours = module.one_nn_accuracy(torch.as_tensor(features[split.test]), y_test, episodes)
    assert ours == pytest.approx(frame["accuracy"].mean(), abs=1e-4)  # the baseline sums in float32


def test_gpu_protocol_stage_deadline_then_resume_runs_each_pretrain_stage_once(tmp_path, monkeypatch):
    """A table cut by --stage-deadline is finished by a second run with --resume: the pretrain
    stages the first run finished are not run again (their seconds counted), the others are, and
    a change of params (other than `datasets`) makes every stage run again."""
    import json
    import types

    protocol = load("gpu_protocol")
    (tmp_path / "params.yaml").write_text(committed_params())
    monkeypatch.setattr(protocol, "ROOT", tmp_path)
    monkeypatch.setattr(protocol, "DONE", tmp_path / ".dvc" / "tmp" / "gpu-protocol")
    clock = {"now": 0.0}
    monkeypatch.setattr(protocol, "time", types.SimpleNamespace(perf_counter=lambda: clock["now"]))
    calls = []

    def fake_stage(script, *args):
        calls.append((script, *args))
        clock["now"] += 10.0
        if script == "pretrain":
            dataset, ratio = args[1], float(args[3])
            folder = tmp_path / "data" / "models" / dataset / f"r{ratio}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "log.json").write_text("{}")
        return 10.0

    monkeypatch.setattr(protocol, "run_stage", fake_stage)
    monkeypatch.setattr(protocol, "device_description", lambda: {})
    monkeypatch.setattr(protocol, "pack", lambda *a: None)

    def run(*extra):
        calls.clear()
        clock["now"] = 0.0
        monkeypatch.setattr("sys.argv", ["gpu_protocol.py", "--set", "seeds=2", "--datasets", "cmc", "--out",
                                         str(tmp_path / "out"), *extra])
        protocol.main()
        return [c for c in calls if c[0] == "pretrain"], json.loads((tmp_path / "out" / "timings.json").read_text())

    # validate, fetch, preprocess, split: 40 s; r = 0.1 and 0.2 start before 55 s, r = 0.3 after
    pretrained, timings = run("--stage-deadline", "55")
    assert [c[4] for c in pretrained] == ["0.1", "0.2"] and "cmc" not in timings["datasets"]
    pretrained, timings = run("--resume")
    assert [c[4] for c in pretrained] == ["0.3", "0.4", "0.5"]
    assert timings["datasets"]["cmc"]["pretrain"] == 50.0
    assert sum(bool(s.get("resumed")) for s in timings["stages"]) == 2
    assert ("evaluate", "--dataset", "cmc") in calls
    # another table listed too (`datasets` is not part of the key): cmc's stages all kept
    pretrained, _ = run("--resume", "--datasets", "cmc", "diabetes")
    assert {c[2] for c in pretrained} == {"diabetes"} and len(pretrained) == 5
    # other params: every stage runs again
    pretrained, _ = run("--resume", "--set", "seeds=2", "pretrain.lr=0.01")
    assert len(pretrained) == 5
    assert (tmp_path / "params.yaml").read_text() == committed_params()


def test_a_benchmark_given_a_missing_or_malformed_file_says_so_in_one_line(tmp_path):
    """benchmarks/entry.py: a user's bad input ends a script with one `error:` line and status 2;
    any other exception keeps its traceback."""
    import subprocess
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from entry import run_main

    (tmp_path / "bad.json").write_text("not json")
    (tmp_path / "bad.csv").write_bytes(b'a,b\n"1,2\n')
    (tmp_path / "list.json").write_text("[]")
    (tmp_path / "wrong.csv").write_text("x,y\n1,2\n")
    for script, args, message in (
            ("chance_gap.py", [tmp_path / "nope.json"], "no such file: "),
            ("chance_gap.py", [tmp_path / "bad.json"], "bad.json is not a readable JSON file"),
            ("chance_gap.py", [tmp_path / "list.json"], "list.json is neither a pretrain stage's log.json nor"),
            ("compare_results.py", [tmp_path / "wrong.csv", tmp_path / "wrong.csv"],
             "wrong.csv has no column member, dataset"),
            ("stack_tail.py", ["--from-csv", tmp_path / "wrong.csv"], "wrong.csv has no column dataset, ratio"),
            ("executor.py", ["--seeds", "0"], "argument --seeds: '0': must be at least 1"),
            ("executor.py", ["--ratio", "1.5"], "a ratio lies strictly between 0 and 1"),
            ("stacking.py", ["--stacks", "1,0"], "argument --stacks: '0': must be at least 1"),
            ("stacking.py", ["--compare", "stacks"], "--compare stacks needs --baseline-rev REV or --baseline-code"),
            ("epoch_draws.py", ["--datasets", "nosuch"], "params.yaml's sources have no OpenML dataset nosuch"),
            ("neighbour_search.py", ["--datasets", "nosuch"], "params.yaml's sources have no OpenML dataset nosuch"),
            ("local_read.py", ["--rows", "5", "--columns", "2", "--baseline-rev", "no-such-rev"],
             "git archive no-such-rev failed"),
            ("local_read.py", ["--snapshot", "nosuch"], "--snapshot nosuch: no data/snapshot/nosuch.parquet"),
            ("local_read.py", ["--columns", "2", "--text", "3"], "--text is 3; from 0 up to --columns (2)"),
            ("encoder_speed.py", ["--repeats", "0"], "argument --repeats: '0': must be at least 1"),
            ("variants.py", ["--dataset", "diabetes", "--variant", "nope"], "each part is key=value"),
            ("variants.py", ["--dataset", "diabetes", "--variant", "lrr=1"], "'lrr' is neither a split nor a pretrain key"),
            ("compare_results.py", [tmp_path / "nope.csv", tmp_path / "nope2.csv"], "no such file: "),
            ("stack_tail.py", ["--from-csv", tmp_path / "nope.csv"], "no such file: "),
            ("baseline_variant.py", ["knn", "diabetes", "kk=1"], "unknown key 'baselines.knn.kk' (did you mean 'k'?)"),
            ("variants.py", ["--dataset", "nosuch"], "params.yaml's sources have no OpenML dataset nosuch")):
        done = subprocess.run([sys.executable, f"benchmarks/{script}", *map(str, args)], cwd=ROOT,
                              capture_output=True, text=True)
        output = done.stdout + done.stderr
        assert done.returncode in (1, 2) and message in output and "Traceback" not in output, (script, output)
    assert run_main(lambda: 7) == 7
    with pytest.raises(RuntimeError):  # a bug is not a user's error
        run_main(lambda: (_ for _ in ()).throw(RuntimeError("bug")))


@pytest.mark.parametrize("env, args, message", [
    ({"ONLY": "default", "DATASETS": "cmc"}, ["OUT", "ten"], "SECONDS must be a whole number of seconds above 0, got 'ten'"),
    ({"ONLY": "default", "DATASETS": "cmc"}, ["OUT", "0"], "SECONDS must be a whole number of seconds above 0"),
    ({"DATASETS": "cmc"}, ["OUT", "60"], "ONLY: the variants to run"),
    ({"ONLY": "default"}, ["OUT", "60"], "DATASETS: the tables to run them on"),
    ({"ONLY": "default", "DATASETS": "cmc", "BUNDLE": "/nowhere/repo.bundle"}, ["OUT", "60"],
     "no git bundle at /nowhere/repo.bundle"),
])
def test_ablation_round_refuses_what_it_lacks_before_it_starts(tmp_path, env, args, message):
    """benchmarks/ablation_round.sh (a round of ablations on a GPU machine, one command): a bad
    argument is one line naming it, and nothing is made."""
    import os
    import subprocess

    run = subprocess.run(["bash", str(ROOT / "benchmarks" / "ablation_round.sh"), *args], cwd=tmp_path,
                         env={k: v for k, v in os.environ.items() if k not in ("ONLY", "DATASETS", "BUNDLE")} | env,
                         capture_output=True, text=True)
    assert run.returncode == 2 and message in run.stderr
    assert not (ROOT / "OUT").exists() and not (tmp_path / "OUT").exists()


def test_compare_results_pairs_seed_means_over_the_seeds_both_runs_have(tmp_path, capsys, monkeypatch):
    """compare_results.py on two seed_spread.py tables: the standard error of a difference from the
    per-seed differences (paired), over the seeds both runs have, the means over those seeds too."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    compare = load("compare_results")
    (tmp_path / "a.csv").write_text("dataset,shot,seed_0,seed_1,seed_2,mean,se,paper,diff\n"
                                    "cmc,1,50.0,52.0,54.0,52.0,1.15,51.0,+1.00\n"
                                    "cmc,5,60.0,61.0,62.0,61.0,0.58,60.0,+1.00\n")
    (tmp_path / "b.csv").write_text("dataset,shot,seed_0,seed_1,seed_2,mean,se,paper,diff\n"
                                    "cmc,1,51.0,52.5,55.0,52.83,1.17,51.0,+1.83\n"
                                    "cmc,5,60.5,61.5,,61.0,0.5,60.0,+1.00\n")  # seed 2 missing here
    a, a_seeds = compare.read_run(tmp_path / "a.csv", "A")
    b, b_seeds = compare.read_run(tmp_path / "b.csv", "B")
    assert a_seeds and b_seeds
    table = compare.paired(a, b, "A", "B").set_index("shot")
    one = pd.Series([1.0, 0.5, 1.0])
    assert table.loc[1, "seeds"] == 3 and table.loc[1, "diff"] == pytest.approx(one.mean())
    assert table.loc[1, "se"] == pytest.approx(one.std(ddof=1) / 3 ** 0.5)  # not the episodes', not unpaired
    assert table.loc[5, "seeds"] == 2 and table.loc[5, "A"] == 60.5 and table.loc[5, "B"] == 61.0
    assert table.loc[5, "diff"] == pytest.approx(0.5) and table.loc[5, "se"] == pytest.approx(0.0)
    monkeypatch.setattr("sys.argv", ["compare_results.py", str(tmp_path / "a.csv"), str(tmp_path / "b.csv")])
    compare.main()
    out = capsys.readouterr().out
    assert "| cmc | 1 | 3 | 52.00 | 52.83 | +0.83 * | 0.33 |" in out and "2–3 seeds per cell" in out
    assert "within 2 SE (paired over seeds): 0 of 2" in out
    (tmp_path / "one.csv").write_text("dataset,shot,seed_0,paper\ncmc,1,50.0,51.0\n")  # one seed: no SE, no flag
    monkeypatch.setattr("sys.argv", ["compare_results.py", str(tmp_path / "one.csv"), str(tmp_path / "a.csv")])
    compare.main()
    assert "| cmc | 1 | 1 | 50.00 | 50.00 | +0.00 | nan |" in capsys.readouterr().out
    monkeypatch.setattr("sys.argv", ["compare_results.py", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"),
                                     "--names", "256", "out 1024"])  # names that are not identifiers
    compare.main()
    assert "| cmc | 1 | 3 | 52.00 | 52.83 | +0.83 * | 0.33 |" in capsys.readouterr().out
    for names in (["capped", "paper"], ["seed", "B"], ["A", "A_std"], ["A", "A"]):  # a column's name, or twice one
        monkeypatch.setattr("sys.argv", ["compare_results.py", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"),
                                         "--names", *names])
        with pytest.raises(SystemExit, match=r"--names must be two different names other than the table's "
                                             r"columns \(dataset, shot, seed, seeds, paper, diff, se"):
            compare.main()



def test_paired_episodes_pairs_over_seeds_or_over_one_seeds_episodes(tmp_path, capsys, monkeypatch):
    """paired_episodes.py: the difference B - A per table and shot of the ensemble, its standard
    error over the seeds' mean differences (two seeds or more) or over the episodes (one seed);
    runs that scored other episodes are refused naming the table."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    paired = load("paired_episodes")

    def write(folder, seeds, shift, support="h"):
        rows = [{"member": member, "seed": seed, "shot": 5, "episode": e, "support_hash": f"{support}{seed}{e}",
                 "accuracy": 50.0 + e + (shift[seed][e] if member == "ensemble" else 9.0)}
                for member in ("ensemble", "r0.2") for seed in seeds for e in range(3)]
        (tmp_path / folder).mkdir(exist_ok=True)
        pd.DataFrame(rows).to_csv(tmp_path / folder / "cmc.csv", index=False)

    zero = {0: [0, 0, 0], 1: [0, 0, 0]}
    write("a", [0, 1], zero)
    write("b", [0, 1], {0: [1.0, 2.0, 3.0], 1: [0.0, 0.0, 3.0]})  # seed means +2, +1
    table = paired.compare(paired.read_dir(tmp_path / "a"), paired.read_dir(tmp_path / "b")).iloc[0]
    assert table["seeds"] == 2 and table["diff"] == pytest.approx(1.5) and table["se_over"] == "seeds"
    assert table["se"] == pytest.approx(pd.Series([2.0, 1.0]).std(ddof=1) / 2 ** 0.5)
    write("a1", [0], zero)
    write("b1", [0], {0: [1.0, 2.0, 3.0]})
    one = paired.compare(paired.read_dir(tmp_path / "a1"), paired.read_dir(tmp_path / "b1")).iloc[0]
    assert one["se_over"] == "episodes" and one["se"] == pytest.approx(pd.Series([1.0, 2.0, 3.0]).std(ddof=1) / 3 ** 0.5)
    monkeypatch.setattr("sys.argv", ["paired_episodes.py", str(tmp_path / "a1"), str(tmp_path / "b1"),
                                     "--names", "train_accuracy", "none"])
    assert paired.main() == 0
    assert "mean over 1 tables, 5-shot: train_accuracy 51.00, none 53.00, difference +2.00" in capsys.readouterr().out
    for names in (["capped", "paper"], ["episodes", "B"]):  # a column of this table or of the pairing
        monkeypatch.setattr("sys.argv", ["paired_episodes.py", str(tmp_path / "a1"), str(tmp_path / "b1"),
                                         "--names", *names])
        with pytest.raises(SystemExit, match=f"other than the table's columns .*got '{names[0]}' '{names[1]}'"):
            paired.main()
    capsys.readouterr()
    both = paired.compare(paired.read_dir(tmp_path / "a1"), paired.read_dir(tmp_path / "b"), "one", "two").iloc[0]
    assert both["seeds"] == 1 and both["diff"] == pytest.approx(2.0) and both["se_over"] == "episodes"  # seed 0's
    assert "cmc: two's seed 1 not in the other run, left out" in capsys.readouterr().err
    write("c", [2], {2: [0, 0, 0]})
    with pytest.raises(SystemExit, match="cmc: the two runs share no seed"):
        paired.compare(paired.read_dir(tmp_path / "a"), paired.read_dir(tmp_path / "c"))
    write("other", [0], {0: [1.0, 2.0, 3.0]}, support="x")
    with pytest.raises(SystemExit, match="cmc: the two runs did not score the same episodes"):
        paired.compare(paired.read_dir(tmp_path / "a1"), paired.read_dir(tmp_path / "other"))


def test_stack_tail_times_the_tail_from_when_half_the_seeds_had_stopped(tmp_path, capsys, monkeypatch):
    """Of an even number of seeds, half have stopped when the lower middle one stops (of 4: the 2nd)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    tail = load("stack_tail")
    (tmp_path / "seeds.csv").write_text("dataset,ratio,seed,stop_epoch,seconds,cuda_graphs\n" + "".join(
        f"cmc,0.1,{seed},{stop},{seconds},False\n" for seed, stop, seconds in ((0, 1, 1.0), (1, 2, 2.0), (2, 3, 3.0),
                                                                             (3, 10, 10.0))))
    monkeypatch.setattr("sys.argv", ["stack_tail.py", "--from-csv", str(tmp_path / "seeds.csv")])
    tail.main()
    out = capsys.readouterr().out
    assert "median seed stopped at 2.0 s (epoch 2, the last at 10)" in out  # not seed 2's 3.0 s
    assert "1000.0 ms per epoch before, 1000.0 after" in out and "80 % of it after" in out


def test_pretrain_log_keys_records_as_the_committed_ones_and_their_readers_do(tmp_path, capsys, monkeypatch):
    """pretrain_log.py's keys are "<dataset> r=<ratio> seed <seed>", as in
    reports/experiments/default_3seeds/pretrain_log.json, which encoder_speed.py filters by "<dataset> r="."""
    import json

    log_module = load("pretrain_log")
    edit = load("gpu_protocol").edit_params
    (tmp_path / "params.yaml").write_text(edit(committed_params(),
                                               ["datasets=[cmc]", "ratios=[0.1, 0.25]"]))
    entry = {"best_epoch": 3, "stop_epoch": 9, "steps": 18, "capped": 0, "seconds": 1.5, "best_val_loss": 4.7,
             "masked_columns": 1, "val_loss": [4.81234567, 4.7]}
    for tag in ("r0.1", "r0.25"):
        folder = tmp_path / "data" / "models" / "cmc" / tag
        folder.mkdir(parents=True)
        (folder / "log.json").write_text(json.dumps({"precision": "fp32", "seeds": {"1": entry, "0": entry}}))
    monkeypatch.setattr(log_module, "ROOT", tmp_path)
    monkeypatch.setattr("sys.argv", ["pretrain_log.py", str(tmp_path / "out.json")])
    log_module.main()
    record = json.loads((tmp_path / "out.json").read_text())
    assert list(record) == ["cmc r=0.1 seed 0", "cmc r=0.1 seed 1", "cmc r=0.25 seed 0", "cmc r=0.25 seed 1"]
    assert record["cmc r=0.1 seed 0"]["val_loss"] == [4.81235, 4.7] and record["cmc r=0.1 seed 0"]["precision"] == "fp32"
    committed = json.loads((ROOT / "reports/experiments/default_3seeds/pretrain_log.json").read_text())
    assert all(key.split()[1].startswith("r=") for key in committed)


def test_noop_params_counts_the_keys_dvc_looks_up_and_the_sections_key_by_key():
    """benchmarks/noop_params.py: the keys are those DVC resolves from dvc.yaml (a pretrain stage lists
    seeds, its source and the pretrain section whole); key by key, a section is one lookup per key."""
    noop = load("noop_params")
    config = {"seeds": [0], "pretrain": {"fill": "zero", "lr": 0.001}, "evaluate": {"shots": [1]}}
    assert noop.key_by_key(["seeds", "sources.cmc", "pretrain"], config) == ["seeds", "sources.cmc", "pretrain.fill",
                                                                            "pretrain.lr"]
    assert noop.key_by_key(["seeds", "evaluate.shots"], config) == ["seeds", "evaluate.shots"]
    stages = dict(noop.listed_keys(ROOT))
    pretrain = [name for name in stages if name.startswith("pretrain@")]
    assert pretrain and all(stages[name][-1] == "pretrain" and "ratios" not in stages[name] for name in pretrain)
    assert stages["validate"] == [] and stages["aggregate"] == []  # they track the whole file
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "noop_params.py"), "--repeats", "1"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    listed, single = map(int, re.search(r"(\d+) keys as listed, (\d+) key by key", out.stdout).groups())
    assert listed == sum(len(keys) for keys in stages.values()) < single
    assert "best: parses" in out.stdout


def test_atomic_write_times_the_writes_with_and_without_the_flushes(tmp_path):
    """benchmarks/atomic_write.py writes through seba.core.runtime.atomic_path, flushed and not, in a
    temporary folder of --dir that it removes."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "atomic_write.py"), "--files", "2", "--repeats", "1",
                          "--dir", str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if "per file" in line]
    assert len(rows) == 3 and all(re.search(r"flushed +[\d.]+ ms, not flushed +[\d.]+ ms per file \([\d.]+x\)", r)
                                  for r in rows)
    assert list(tmp_path.iterdir()) == []


def test_precision_parts_keeps_the_named_layers_in_fp32_and_restores_the_model():
    import dataclasses

    import numpy as np
    import torch

    from seba import model
    from seba.core.config import PretrainConfig
    from seba.pretrain import SeedData, pretrain_stack

    parts = load("precision_parts")
    X = np.random.default_rng(0).normal(size=(200, 6)).astype(np.float32)
    members = [SeedData(X[:160], X[160:], seed=s) for s in (0, 1)]
    cfg = dataclasses.replace(PretrainConfig(), encoder_hidden=32, encoder_out=16, projector_hidden=32,
                              projector_out=16, batch_size=64, max_epochs=3, patience=3, progress_seconds=1e9)
    classes = (model.StackedLinear.forward, model.StackedEncoder.__init__, model.StackedProjector.__init__)

    def train(precision, chosen):
        with parts.fp32_parts(frozenset(chosen)):
            results = pretrain_stack(members, np.arange(6), 0.3, dataclasses.replace(cfg, precision=precision),
                                     torch.device("cpu"))
        return [r.encoder_state for r in results]

    def same(a, b):
        return all(torch.equal(x[k], y[k]) for x, y in zip(a, b) for k in x)

    fp32, every, bf16, one = (train("fp32", ()), train("bf16", parts.PARTS), train("bf16", ()),
                              train("bf16", ("input",)))
    assert (model.StackedLinear.forward, model.StackedEncoder.__init__, model.StackedProjector.__init__) == classes
    assert same(fp32, every)  # every layer kept in fp32 is fp32, bit for bit
    assert not same(fp32, bf16) and not same(one, bf16) and not same(one, fp32)
    assert parts.parse_mode("bf16:input+output") == ("bf16", frozenset({"input", "output"}))
    for bad, message in (("bf16:inputs", "unknown part"), ("fp32:input", "bf16:PART"), ("tf32", "bf16:PART")):
        with pytest.raises(SystemExit, match=message):
            parts.parse_mode(bad)


def test_own_table_rules_reads_every_case_by_its_rule_and_as_text(capsys):
    """Every case's cells are read as numbers by the rules (none missing) and as text with x1 named
    categorical; the short run prints a row per case."""
    bench = load("own_table_rules")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "data" / "local").mkdir(parents=True)
        for case, fmt, options, *columns in bench.CASES:
            frame = bench.signal_table(60)
            for column in (columns[0] if columns else ("x1",)):
                frame[column] = [fmt(v) for v in frame[column]]
            ruled = bench.read(root, frame, options)
            assert ruled["x1"].dtype == "float64" and ruled["x1"].notna().all(), case
            values = bench.signal_table(60)["x1"]
            if case.startswith("bounds"):  # censored: the bound stands for the values below it
                values = values.clip(lower=-1.5)
            assert ruled["x1"].corr(values) > 0.999, case  # the values, up to scale and origin
            text = bench.read(root, frame, bench.as_text(options))
            assert isinstance(text["x1"].dtype, pd.CategoricalDtype), case
    assert bench.main(["--episodes", "2", "--epochs", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("clean table: ") and len(lines) == len(bench.CASES) + 3


def test_neighbour_search_rounds_as_tf32_and_counts_wrong_positives_on_diabetes():
    """neighbour_search.py: TF32's rounding (10 mantissa bits), torch.cdist's product form, and a
    short run in which TF32 picks more wrong positives than float32 on diabetes, and float64 none."""
    import torch

    bench = load("neighbour_search")
    x = torch.tensor([1.5, 3.0, 1 + 2 ** -10, 1 + 2 ** -12, 1 + 3 * 2 ** -12, -(1 + 3 * 2 ** -12)])
    assert bench.tf32(x).tolist() == [1.5, 3.0, 1 + 2 ** -10, 1.0, 1 + 2 ** -10, -(1 + 2 ** -10)]
    target = torch.randn(200, 7, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(bench.product_distances(target), torch.cdist(target, target), atol=1e-4)
    assert (bench.product_distances(target, bench.tf32) - torch.cdist(target, target)).abs().max() > 1e-3
    done = subprocess.run([sys.executable, "benchmarks/neighbour_search.py", "--datasets", "diabetes",
                           "--batches", "2"], cwd=ROOT, capture_output=True, text=True, check=True)
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("diabetes")]
    assert [r[1] for r in rows] == ["0.1", "0.2", "0.3", "0.4", "0.5", "all"]
    wrong_fp32, wrong_tf32, wrong_fp64 = map(float, rows[-1][2:5])
    assert wrong_tf32 > 2 * wrong_fp32 > 0 and wrong_fp64 == 0, rows[-1]


def test_local_read_reads_the_table_with_both_trees_and_compares_them():
    done = subprocess.run([sys.executable, "benchmarks/local_read.py", "--rows", "40", "--columns", "3", "--repeats", "1",
                           "--decimals", "2", "--text", "1"], cwd=ROOT, capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("40 rows x 4 columns (160 cells, 2 decimals, the first 1 columns words)")
    assert [line.split()[0] for line in lines[1:]] == ["baseline", "this"], lines
    assert all("records equal the baseline's" in line for line in lines[1:]), lines
