import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from seba.core.data import (EncodedTable, check_raw_table, check_shots, encode_table, fetch_table, load_snapshot, make_split,
                            scale, schema_report, sha256_file)
from seba.core.errors import ConfigError, DataError
from seba.core.own_table import parse_numbers


def test_snapshot_matches_its_manifest(snapshot_dir):
    manifest = json.loads((snapshot_dir / "manifest.json").read_text())["openml_ids"]
    assert {"23", "37", "40670", "1590", "16", "28", "40979", "1501"} <= set(manifest)
    for entry in manifest.values():
        if entry.get("vendored", True) is False and not (snapshot_dir / entry["file"]).exists():
            continue  # a challenging table an offline user supplies (test_an_unvendored_table_...)
        assert sha256_file(snapshot_dir / entry["file"]) == entry["sha256"]
        frame = pd.read_parquet(snapshot_dir / entry["file"])
        assert len(frame) == entry["rows"]
        assert frame["class"].nunique() == entry["classes"]


def test_tampered_snapshot_is_refused(tmp_path, snapshot_dir):
    copy = tmp_path / "data" / "snapshot"
    shutil.copytree(snapshot_dir, copy)
    (copy / "diabetes.parquet").write_bytes(b"not the file")
    with pytest.raises(DataError, match="fails verification"):
        load_snapshot(37, copy)
    with pytest.raises(DataError, match="not in the offline snapshot"):
        load_snapshot(999999, copy)


def test_offline_fetch_falls_back_and_keeps_cache(tmp_path, snapshot_dir, monkeypatch):
    """OpenML fails the way it does (deleting the dataset's cache folder first): we fall back to
    the snapshot, and an earlier cache and the snapshot survive intact."""
    import openml

    root = tmp_path
    shutil.copytree(snapshot_dir, root / "data" / "snapshot")
    cached = root / "data" / "openml_cache" / "org" / "openml" / "www" / "datasets" / "37"
    cached.mkdir(parents=True)
    (cached / "dataset.pq").write_bytes(b"earlier good download")

    def failing_get_dataset(*args, **kwargs):
        shutil.rmtree(cached)  # what openml does when a download inside get_dataset fails
        raise ConnectionError("simulated: connection reset")

    monkeypatch.setattr(openml.datasets, "get_dataset", failing_get_dataset)
    frame, info = fetch_table("diabetes", 37, "auto", root)
    assert info["source"] == "snapshot" and "simulated" in info["openml_error"]
    assert frame.shape == (768, 9)
    assert (cached / "dataset.pq").read_bytes() == b"earlier good download"
    assert sha256_file(root / "data" / "snapshot" / "diabetes.parquet") == sha256_file(
        snapshot_dir / "diabetes.parquet")
    with pytest.raises(DataError, match="fetch.source: snapshot"):
        fetch_table("diabetes", 37, "openml", root)


@pytest.mark.parametrize("dataset,columns,numeric", [("cmc", 9, 2), ("income", 14, 6)])
def test_one_hot_blocks_follow_their_original_columns(snapshot_dir, dataset, columns, numeric):
    frame = pd.read_parquet(snapshot_dir / f"{dataset}.parquet")
    table = encode_table(frame)
    assert table.n_groups == columns
    features = [c for c in frame.columns if c != "class"]
    for g, column in enumerate(features):
        block = table.X[:, table.groups == g]
        names = table.encoded_names[table.groups == g]
        if isinstance(frame[column].dtype, pd.CategoricalDtype):
            assert all(n.startswith(f"{column}=") for n in names)
            assert block.shape[1] == len(frame[column].cat.categories)
            # each row has exactly one 1 in its block, or none when the value is missing
            np.testing.assert_array_equal(block.sum(1), frame[column].notna().to_numpy().astype(np.float32))
            assert not table.numeric[table.groups == g].any()
        else:
            assert list(names) == [column] and table.numeric[table.groups == g].all()
    assert int(table.numeric.sum()) == numeric
    # groups are contiguous: a block is never interleaved with another column
    assert (np.diff(table.groups) >= 0).all()


def test_missing_categorical_becomes_all_zero_block_and_numeric_nan_the_train_mean(snapshot_dir):
    frame = pd.read_parquet(snapshot_dir / "income.parquet")
    table = encode_table(frame)
    workclass = list(frame.columns).index("workclass")
    missing = frame["workclass"].isna().to_numpy()
    assert missing.sum() == 2799
    assert (table.X[missing][:, table.groups == workclass] == 0).all()
    toy = pd.DataFrame({"a": [1.0, np.nan, 3.0, 5.0], "class": pd.Categorical(["x", "y", "x", "y"])})
    t = encode_table(toy)
    scaled = scale(t, np.array([0, 1, 2]))
    assert scaled[1, 0] == 0.0  # NaN -> train mean -> 0 after standardisation


def test_scaling_uses_train_statistics_only(snapshot_dir):
    table = encode_table(pd.read_parquet(snapshot_dir / "diabetes.parquet"))
    split = make_split(table.y, 0, 1 / 6, 0.1)
    scaled = scale(table, split.train)
    np.testing.assert_allclose(scaled[split.train].mean(0), 0, atol=1e-4)
    np.testing.assert_allclose(scaled[split.train].std(0), 1, atol=1e-3)
    # changing test rows changes nothing about how any row is scaled
    poisoned = EncodedTable(**{**table.__dict__, "X": table.X.copy()})
    poisoned.X[split.test] = 1e6
    again = scale(poisoned, split.train)
    np.testing.assert_array_equal(again[split.train], scaled[split.train])
    np.testing.assert_array_equal(again[split.val], scaled[split.val])


@pytest.mark.parametrize("dataset", ["cmc", "income", "karhunen", "semeion", "dna"])
def test_scaling_a_finite_table_gives_the_nan_aware_paths_bits(snapshot_dir, dataset):
    """scale's fast path (numeric columns without a missing or infinite value) must give exactly
    what the NaN-aware general path gives: the encoders' inputs do not change."""
    from seba.core.data import _standardise_general

    table = encode_table(pd.read_parquet(snapshot_dir / f"{dataset}.parquet"))
    for seed in range(3):
        train = make_split(table.y, seed, 1 / 6, 0.1).train
        fast = scale(table, train)
        general = _standardise_general(table.X.astype(np.float32, copy=True), table, train)
        assert fast.dtype == np.float32 and np.array_equal(fast.view(np.int32), general.view(np.int32))


def test_scaling_synthetic_edge_values_matches_the_general_path():
    from seba.core.data import _standardise_general

    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 6)).astype(np.float32) * np.array([1, 1e-6, 1e6, 0, 3e15, 1], dtype=np.float32)
    X[:, 3] = 7.0  # a constant column: centred, not divided
    X[:, 5] = (X[:, 5] > 0)  # a one-hot-like 0/1 column marked categorical
    numeric = np.array([True, True, True, True, True, False])
    table = EncodedTable(X=X, y=np.zeros(400, dtype=np.int64), groups=np.arange(6), numeric=numeric,
                         columns=np.array(list("abcdef")), encoded_names=np.array(list("abcdef")), classes=np.array(["x"]))
    train = np.arange(0, 400, 2)
    for values in (X, np.where(np.arange(6) == 4, np.float32(3e38), X).astype(np.float32)):  # the last: squares overflow
        t = EncodedTable(**{**table.__dict__, "X": values})
        fast = scale(t, train)
        general = _standardise_general(values.astype(np.float32, copy=True), t, train)
        assert np.isfinite(fast).all() and np.array_equal(fast.view(np.int32), general.view(np.int32))
    assert (scale(table, train)[:, 3] == 0).all()


@pytest.mark.parametrize("dataset", ["cmc", "karhunen"])
def test_splits_are_stratified_disjoint_and_reproducible(snapshot_dir, dataset):
    table = encode_table(pd.read_parquet(snapshot_dir / f"{dataset}.parquet"))
    y, n = table.y, len(table.y)
    a = make_split(y, 3, 1 / 6, 0.1)
    b = make_split(y, 3, 1 / 6, 0.1)
    c = make_split(y, 4, 1 / 6, 0.1)
    for part in ("train", "val", "test"):
        np.testing.assert_array_equal(getattr(a, part), getattr(b, part))
    assert not np.array_equal(a.test, c.test)
    assert set(a.train).isdisjoint(a.val) and set(a.train).isdisjoint(a.test) and set(a.val).isdisjoint(a.test)
    assert len(a.train) + len(a.val) + len(a.test) == n
    assert abs(len(a.test) - n / 6) <= 1
    assert abs(len(a.val) - 0.1 * (n - len(a.test))) <= 1
    overall = np.bincount(y) / n
    for part in (a.train, a.test):
        share = np.bincount(y[part], minlength=len(overall)) / len(part)
        np.testing.assert_allclose(share, overall, atol=0.02)


@pytest.mark.parametrize("thousands, decimal, cells, expected", [
    (None, ".", ["12", "-0.5", ".5", "3.", "1e-3", "+2E5", "1,234", "12,5", "x"],
     [12, -0.5, 0.5, 3, 0.001, 2e5, None, None, None]),
    (None, ".", ["\u22125", "\u22120.5e\u22123", "\u2212inf", "5\u2212", "\u2212\u22125"], [-5, -0.0005, -np.inf, None, None]),
    (",", ".", ["1,234,567.5", "1234.5", "0,123", "12,34", "-1,000"], [1234567.5, 1234.5, None, None, -1000]),
    (",", ".", ["1,00,000", "12,34,567.5", "1,23", "-10,00,000", "01,00,000"],
     [100000, 1234567.5, None, -1000000, None]),  # the Indian grouping (lakh, crore)
    (None, ".", ["\u20135", "\uff0d0.5", "5\u2013", "\u2013"], [-5, -0.5, None, None]),  # a dash typeset as minus
    (None, ",", ["12,5", "-0,25", "1.5", "1,2,3"], [12.5, -0.25, None, None]),
    (".", ",", ["1.234,5", "1234,5", "1.234.567"], [1234.5, 1234.5, 1234567]),
    (" ", ",", ["1 234,5", "12 34", "1\u00a0234,5", "1\u202f234\u202f567", "1\u00a0234 567"],
     [1234.5, None, 1234.5, 1234567, 1234567]),  # no-break spaces as spreadsheets write them
])
def test_numbers_are_read_in_the_declared_convention_only(thousands, decimal, cells, expected):
    values = parse_numbers(pd.Series(cells, dtype="string"), thousands, decimal)
    assert values.dtype == np.float64
    for got, want in zip(values, expected):
        assert (np.isnan(got) if want is None else got == want), (cells, list(values))
    repeated = pd.Series((cells + [None]) * 400, dtype="string")  # few values: each distinct cell read once
    np.testing.assert_array_equal(parse_numbers(repeated, thousands, decimal).to_numpy(),
                                  np.tile(np.append(values.to_numpy(), np.nan), 400))


@pytest.mark.parametrize("cells, fast", [
    (["12", "-0.5", ".5", "3.", "1e-3", "+2E5", "007", "0.1000000000000000055511151231257827",
      "2.2250738585072011e-308", "4.9e-324", "-1e-400", "9007199254740993", "1.7976931348623157e308"], True),
    (["12", "1e400"], False), (["12", "inf"], False), (["12", "nan"], False), (["12", None], False),
    (["12", "\u22125"], False), (["12", "1,5"], False), (["12", "x"], False), (["12", "\u0661"], False),
])
def test_a_column_of_plain_numbers_is_read_in_one_cast_to_the_same_values(monkeypatch, cells, fast):
    """parse_numbers reads a column of finite plainly written numbers in one Arrow cast: the
    float64 values, bit for bit, that the cell-by-cell path gives; any other column goes that path."""
    import seba.core.own_table.numbers as numbers

    text = pd.Series(cells, dtype="string")
    taken = []
    cast = numbers._plain_floats
    monkeypatch.setattr(numbers, "_plain_floats", lambda t: taken.append(cast(t) is not None) or cast(t))
    values = parse_numbers(text)
    monkeypatch.setattr(numbers, "_plain_floats", lambda t: None)
    slow = parse_numbers(text)
    assert taken == [fast]
    assert values.to_numpy().view(np.int64).tolist() == slow.to_numpy().view(np.int64).tolist(), (list(values), list(slow))


def test_plain_numbers_read_in_one_cast_are_pythons_floats():
    """The cast rounds as Python's float() does: numbers written as repr, %.17g and %.6g write
    them, over 25 orders of magnitude."""
    rng = np.random.default_rng(0)
    numbers = (rng.normal(size=3000) * 10.0 ** rng.integers(-12, 13, 3000)).tolist()
    cells = [f"{v!r}" for v in numbers] + [f"{v:.17g}" for v in numbers] + [f"{v:.6g}" for v in numbers]
    values = parse_numbers(pd.Series(cells, dtype="string"))
    assert values.to_numpy().view(np.int64).tolist() == np.array([float(c) for c in cells]).view(np.int64).tolist()


EDGE_COLUMNS = {  # column -> (its cells, in turn over the rows; whether the whole-table pass takes it)
    "Unnamed: 0": (None, True), "ints": (["0", "17", "255", "3"], True), "decimals": (["0.25", "-1.5", "3.0", "1e-3"], True),
    "signs": (["+2E5", ".5", "3.", "-0"], True), "zeros": (["007", "0", "010", "1"], False),
    "signed_zeros": (["-05", "+0", "3", "-0.5"], False), "not_padded": (["0.5", "0", "0e1", "10"], True),
    "clash": (["07", "7", "1", "2"], False),
    "spaced": ([" 5", "6 ", "7", "8"], False), "mixed_ws": (["5", "6", "7\t", "8"], False),
    "row_id": (None, True), "gapped_id": (None, True), "beyond_float32": (["1e39", "1", "2", "3"], True),
    "groups": (["2.544", "1.083", "653", "12"], False), "a_point": (["2.544", "0.5", "653", "12"], True),
    "nan": (["nan", "1", "2", "3"], False), "inf": (["inf", "1", "2", "3"], False),
    "huge": (["1e400", "1", "2", "3"], False), "empty": (["", "1", "2", "3"], True),
    "all_empty": ([""], False), "spaces_only": (["  ", "1", "2", "3"], False), "empty_nan": (["", "nan", "1", "2"], False),
    "empty_zeros": (["", "01", "1", "2"], False), "empty_groups": (["", "2.544", "653", "12"], False),
    "empty_id": (None, True),
    "word": (["?", "1", "2", "3"], False), "NA": (["NA", "1", "2", "3"], False),
    "paren": (["(5)", "1", "2", "3"], False), "percent": (["5%", "1%", "2%", "3%"], False),
    "minus": (["\u22125", "1", "2", "3"], False), "thousands": (["1,000", "x", "y", "z"], False),
    "hex": (["0x10", "1", "2", "3"], False), "text": (["a", "b", "c", "d"], False),
    "dates": (["2024-01-01", "2024-01-02", "2024-01-04", "2024-01-03"], False),
    "constant": (["1", "1", "1", "1"], True), "arabic": (["\u0661", "1", "2", "3"], False),
    "big_ints": (["123456789012345678", "123456789012345679", "5", "6"], False),
    "big_float": (["1e17", "1", "2", "3"], True),
}


def test_a_csvs_plain_number_columns_read_in_one_pass_match_the_column_rules(tmp_path, monkeypatch, capsys):
    """load_local_table reads a CSV's columns of plain finite numbers in one pass over the table
    (``_plain_number_columns``) and the others column by column: the frame (bit for bit), every
    column's record, the schema and the log lines equal those of reading each column by the rules,
    on columns at every edge of the pass (whitespace, missing-value words, digit groups, ids,
    magnitudes beyond float32, units, signs)."""
    import seba.core.own_table as own_table
    from seba.core.config import SourceConfig

    rows = 300
    cells = {}
    for name, (pattern, _) in EDGE_COLUMNS.items():
        if name in ("row_id", "Unnamed: 0"):
            cells[name] = [str(i) for i in range(1, rows + 1)]
        elif name == "gapped_id":
            cells[name] = [str(3 * i + 1000) for i in range(rows)]
        elif name == "empty_id":  # an id with a missing cell is no id
            cells[name] = ["" if i == 7 else str(i + 1) for i in range(rows)]
        else:
            cells[name] = [pattern[i % len(pattern)] for i in range(rows)]
    cells["label"] = [("p", "q")[(i // 7) % 2] for i in range(rows)]  # no column of the edges gives it
    header = ["" if name == "Unnamed: 0" else name for name in cells]
    lines = [",".join(header)] + [",".join(f'"{cells[n][i]}"' if "," in cells[n][i] else cells[n][i] for n in cells)
                                  for i in range(rows)]
    (tmp_path / "data" / "local").mkdir(parents=True)
    (tmp_path / "data" / "local" / "edges.csv").write_text("\n".join(lines) + "\n")
    source = SourceConfig(path="data/local/edges.csv", target="label")

    taken = []
    batch = own_table._plain_number_columns
    monkeypatch.setattr(own_table, "_plain_number_columns", lambda f, n: taken.append(batch(f, n)) or taken[-1])
    fast, fast_info = own_table.load_local_table("edges", source, tmp_path)
    fast_log = capsys.readouterr().err
    assert sorted(taken[0]) == sorted(n for n, (_, plain) in EDGE_COLUMNS.items() if plain)
    monkeypatch.setattr(own_table, "_plain_number_columns", lambda f, n: {})
    slow, slow_info = own_table.load_local_table("edges", source, tmp_path)
    slow_log = capsys.readouterr().err
    pd.testing.assert_frame_equal(fast, slow)
    for column in fast.columns[fast.dtypes == "float64"]:
        assert fast[column].to_numpy().view(np.int64).tolist() == slow[column].to_numpy().view(np.int64).tolist()
    assert fast_info == slow_info and fast.attrs == slow.attrs and fast_log == slow_log
    records = {r["column"]: r for r in fast_info["columns"]}
    assert records["row_id"]["reason"] == "row id" and records["Unnamed: 0"]["reason"] == "row index"
    assert "out_of_range" in records["beyond_float32"]
    assert records["groups"]["warnings"] and records["spaced"]["kind"] == "numeric"
    assert records["zeros"]["leading_zeros"] == 150 and records["zeros"]["notices"] and not records["zeros"]["warnings"]
    assert records["signed_zeros"]["leading_zeros"] == 75 and "leading_zeros" not in records["not_padded"]
    assert "'07' and '7'" in records["clash"]["warnings"][0]
    assert (records["empty"]["kind"], records["empty"]["missing"]) == ("numeric", 75)
    assert records["all_empty"]["reason"] == "all missing" and records["empty_id"]["kind"] == "numeric"
    assert records["big_ints"]["merged_integers"] == 2 and "123456789012345678 and 123456789012345679" in \
        records["big_ints"]["warnings"][0]
    assert records["big_float"]["kind"] == "numeric" and not records["big_float"]["warnings"]


def test_a_table_needs_two_feature_columns():
    """SeBA masks at least one column and encodes the others: one feature column is refused by
    name, whatever the source (here a benchmark-format table)."""
    labels = pd.Categorical(["a", "b", "c"] * 5)
    with pytest.raises(DataError, match=r"dataset 't': one feature column; .*at least two feature columns"):
        check_raw_table("t", pd.DataFrame({"x": range(15), "class": labels}))
    check_raw_table("t", pd.DataFrame({"x": range(15), "z": range(15), "class": labels}))


def test_a_shot_needs_a_query_row_left_in_every_class():
    y = np.array([0] * 11 + [1] * 10)
    check_shots(y, ["a", "b"], [1, 5, 9], "t", 0)
    with pytest.raises(ConfigError, match=r"class 'b' of dataset 't' has only 10 test rows \(seed 0\), and an episode "
                                        r"needs 10 for its support and at least one more to query"):
        check_shots(y, ["a", "b"], [1, 10], "t", 0)
    with pytest.raises(ConfigError, match=r"needs 1 for its support and at least one more to query; the class has 3 rows "
                                        r"in the table, and at split.test_fraction 0.2 2 test rows take about 10; "
                                        r"raise split.test_fraction or merge or drop the class"):
        check_shots(np.array([0] * 9), ["a", "rare"], [1], "t", 0, np.array([0] * 40 + [1] * 3), 0.2)
    with pytest.raises(ConfigError, match=r"lower evaluate.shots \(at most 9 here\) or raise split.test_fraction$"):
        check_shots(y, ["a", "b"], [1, 10], "t", 0)


def test_infinite_words_are_infinite():
    values = parse_numbers(pd.Series(["inf", "-Infinity", "+INF", "infinite"], dtype="string"))
    assert list(values[:3]) == [np.inf, -np.inf, np.inf] and np.isnan(values[3])


@pytest.mark.parametrize("order, cells, expected", [
    ("dmy", ["31/01/2020", "1/2/2020", "29.02.2024 13:05", "01-03-69", "01-03-68"],
     ["2020-01-31", "2020-02-01", "2024-02-29 13:05", "1969-03-01", "2068-03-01"]),
    ("mdy", ["01/31/2020", "1/2/2020", "02.29.2024 13:05", "03-01-69", "03-01-68"],
     ["2020-01-31", "2020-01-02", "2024-02-29 13:05", "1969-03-01", "2068-03-01"]),
])
def test_dates_in_a_given_order_with_two_digit_years_as_percent_y(order, cells, expected):
    from seba.core.own_table.notations import _Cells, _ordered_dates
    written = pd.Series(cells * 5 + ["30/02/2020" if order == "dmy" else "02/30/2020"], dtype="string")
    dates = _ordered_dates(_Cells.of(written), order)
    assert list(dates[:5]) == [pd.Timestamp(e) for e in expected]
    assert pd.isna(dates.iloc[-1])  # a day that does not exist is missing, not moved to March
    assert _ordered_dates(_Cells.of(pd.Series(["2020-01-31", "x"] * 5, dtype="string")), order) is None  # not such a column
    assert _ordered_dates(_Cells.of(pd.Series(["1/2/2020", "1/2-2020"] * 5, dtype="string")), order) is None  # separators mixed


def test_clock_times_are_hours():
    from seba.core.own_table.notations import _Cells, _clock_times
    cells = ["12:30", "7:05:30", "7:05 PM", "12:00 AM", "12:15 pm", "7:05 p.m.", "125:30", "13:00 PM", "10:75", None]
    hours = _clock_times(_Cells.of(pd.Series(cells * 3, dtype="string")))
    assert list(hours[:7]) == pytest.approx([12.5, 7 + 5.5 / 60, 19 + 5 / 60, 0, 12.25, 19 + 5 / 60, 125.5])
    assert hours[7:10].isna().all()  # 13 PM, 75 minutes: not times; a missing cell stays missing
    assert _clock_times(_Cells.of(pd.Series(["12:30", "noon"], dtype="string"))) is None  # not 95 % times
    assert _clock_times(_Cells.of(pd.Series(["3:1", "2:0"] * 5, dtype="string"))) is None  # a score, not a time


def test_numbers_in_parentheses_are_negatives_only_beside_numbers_without():
    from seba.core.own_table.notations import _parenthesised_negatives
    text = pd.Series(["(1,234.50)", "12", "($5)", "(12%)", "( 7 )", "(n/a)", "(-3)", None], dtype="string")
    assert list(_parenthesised_negatives(text).fillna("<NA>")) == [
        "-1,234.50", "12", "-$5", "-12%", "-7", "(n/a)", "(-3)", "<NA>"]  # a word or a signed number: not accounting
    assert _parenthesised_negatives(pd.Series(["(1)", "(2)", None], dtype="string")) is None  # enumeration
    assert _parenthesised_negatives(pd.Series(["1", "2"], dtype="string")) is None


def test_bounds_trailing_minuses_and_fractions_are_written_as_plain_numbers():
    from seba.core.own_table.notations import _other_notations
    text = pd.Series(["<0,5", "12", "3-", "1/2", None, "5 1/4", ">= 7", "-1 1/2", "1/2"], dtype="string")
    rewritten, masks = _other_notations(text, ",")  # a fraction's value in the column's decimal mark
    assert list(rewritten.fillna("<NA>")) == ["0,5", "12", "-3", "0,5", "<NA>", "5,25", "7", "-1,5", "0,5"]
    assert {k: list(np.flatnonzero(m)) for k, m in masks.items()} == {
        "bounds": [0, 6], "trailing minus": [2], "fractions": [3, 5, 7, 8]}
    for alone in (["<5", ">5", None], ["5-", "7-"], ["12", "7"]):  # bounds or minuses only: categories; none
        assert _other_notations(pd.Series(alone * 3, dtype="string"), ".") == (None, {})
    assert _other_notations(pd.Series(["1/2", "15/3", "7"], dtype="string"), ".") == (None, {})  # a date, a pair
    rewritten, masks = _other_notations(pd.Series(["1st", "2ND", "3 rd", "4th", "5", None], dtype="string"), ".")
    assert list(rewritten.fillna("<NA>")) == ["1", "2", "3", "4", "5", "<NA>"]  # ordinals: their number
    assert {k: list(np.flatnonzero(m)) for k, m in masks.items()} == {"ordinals": [0, 1, 2, 3]}
    rewritten, masks = _other_notations(pd.Series(["-3/4", "+1/2", "2", "-1/8"], dtype="string"), ".")
    assert list(rewritten) == ["-0.75", "0.5", "2", "-0.125"] and list(masks) == ["fractions"]  # signed ones too
    rewritten, masks = _other_notations(pd.Series(["3,2 x 10^6", "1.5\u00d710\u207b\u00b3", "10^6", "7"], dtype="string"), ",")
    assert list(rewritten) == ["3,2e6", "1.5e-3", "1e6", "7"] and list(masks) == ["powers of ten"]  # mantissa as written


def test_encoding_turns_unusable_numbers_into_missing_and_the_report_says_so():
    frame = pd.DataFrame({"a": [1.0, np.inf, 3.0, 1e300], "b": pd.Categorical([None] * 4, categories=[]),
                          "class": pd.Categorical(["x", "y", "x", "y"])})
    notes = {}
    table = encode_table(frame, notes)
    assert np.isnan(table.X[[1, 3], 0]).all() and list(table.columns) == ["a"]
    assert notes == {"a": {"non_finite": 2}, "b": {"dropped": "no value in any row"}}
    report = schema_report("toy", frame, table, notes)
    assert [(c["column"], c["kind"]) for c in report["columns"]] == [("a", "numeric"), ("b", "dropped")]
    assert report["columns"][0]["missing"] == 2
    assert report["columns"][0]["converted_to_missing"] == {"infinite or beyond float32": 2}
    assert report["summary"]["columns_with_warnings"] == 1 and report["summary"]["dropped"] == 1


def test_an_unvendored_table_says_how_to_supply_it_and_a_supplied_copy_is_verified(tmp_path, snapshot_dir):
    """Fashion-MNIST is in the manifest but not in the repository (35 MB): without it the error
    says where to put a verified copy; a file put there is checked against the manifest's sha256."""
    copy = tmp_path / "data" / "snapshot"
    shutil.copytree(snapshot_dir, copy, ignore=shutil.ignore_patterns("fashion.parquet"))
    with pytest.raises(DataError) as error:
        load_snapshot(40996, copy)
    text = str(error.value)
    assert "Fashion-MNIST" in text and str(copy / "fashion.parquet") in text and "30a2456e" in text
    assert "data/local/fashion.parquet" in text  # or as one's own table
    (copy / "fashion.parquet").write_bytes(b"a truncated download")
    with pytest.raises(DataError, match="fails verification"):
        load_snapshot(40996, copy)


SHARED_FASHION = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "fashion.parquet"


@pytest.mark.skipif(not SHARED_FASHION.exists(), reason="no verified Fashion-MNIST copy on this machine")
def test_a_supplied_fashion_copy_is_verified_and_read(tmp_path, snapshot_dir):
    copy = tmp_path / "data" / "snapshot"
    shutil.copytree(snapshot_dir, copy, ignore=shutil.ignore_patterns("fashion.parquet"))
    shutil.copy(SHARED_FASHION, copy / "fashion.parquet")
    frame, info = load_snapshot(40996, copy)
    assert frame.shape == (70000, 785) and frame["class"].nunique() == 10 and info["source"] == "snapshot"


def test_normalise_false_keeps_raw_numbers_and_imputes_the_train_mean(snapshot_dir):
    toy = pd.DataFrame({"a": [1.0, np.nan, 3.0, 50.0, np.inf], "b": pd.Categorical(["x", "y", "x", "y", "x"]),
                        "class": pd.Categorical(["p", "q", "p", "q", "p"])})
    t = encode_table(toy.drop(columns="class").assign(**{"class": toy["class"]}))
    train = np.array([0, 1, 2])
    raw = scale(t, train, normalise=False)
    a = list(np.nonzero(t.numeric)[0])[0]
    np.testing.assert_allclose(raw[[0, 2, 3], a], [1.0, 3.0, 50.0])  # unscaled, test rows too
    assert raw[1, a] == 2.0 and raw[4, a] == 2.0  # missing and infinite: the finite train values' mean
    one_hot = ~t.numeric
    np.testing.assert_array_equal(raw[:, one_hot], scale(t, train)[:, one_hot])  # one-hot blocks as they are
    # the default standardises, with the same missing values at the train mean (0)
    assert scale(t, train)[1, a] == 0.0
    # a real table: the raw values are the table's own, with its missing numbers filled
    table = encode_table(pd.read_parquet(snapshot_dir / "diabetes.parquet"))
    split = make_split(table.y, 0, 1 / 6, 0.1)
    raw = scale(table, split.train, normalise=False)
    np.testing.assert_array_equal(raw, table.X.astype(np.float32))
    assert np.isfinite(raw).all()


def test_a_missing_encoded_table_names_the_stage_that_writes_it(tmp_path):
    with pytest.raises(DataError, match=r"nope.npz does not exist: the preprocess stage writes it \(`dvc repro preprocess@nope`"):
        EncodedTable.load(tmp_path / "processed" / "nope.npz")


def test_a_test_fraction_that_leaves_one_train_row_of_a_class_is_a_named_error():
    """A class of 3 rows at split.test_fraction 0.5 keeps 1 row outside the test part, which the
    stratified validation split cannot divide: a ConfigError naming the key, the class and the
    dataset (not sklearn's ValueError), as seba-validate and the split stage report it."""
    y = np.array([0] * 100 + [1] * 3)
    with pytest.raises(ConfigError, match=r"'split.test_fraction' = 0.5 leaves class 'rare' of dataset 't' 1 of its "
                                          r"3 rows outside the test part \(seed 0\)"):
        make_split(y, 0, 0.5, 0.1, "t", ["common", "rare"])
    make_split(y, 0, 1 / 6, 0.1, "t", ["common", "rare"])  # the default leaves it 2 or more


def test_a_table_openml_alone_has_names_the_dataset_and_why_openml_failed(tmp_path, snapshot_dir, monkeypatch):
    """Offline, a table that is not in the snapshot (Devnagari) stops fetch with an error that names
    the dataset and the reason OpenML failed, not only an OpenML id."""
    import openml

    shutil.copytree(snapshot_dir, tmp_path / "data" / "snapshot")

    def unreachable(*args, **kwargs):
        raise ConnectionError("simulated: name resolution failed")

    monkeypatch.setattr(openml.datasets, "get_dataset", unreachable)
    with pytest.raises(DataError, match=r"^dataset 'devnagari': OpenML could not be reached \(ConnectionError: "
                                        r"simulated: name resolution failed\), and OpenML id 40923 is not in the "
                                        r"offline snapshot"):
        fetch_table("devnagari", 40923, "auto", tmp_path)
    with pytest.raises(DataError, match=r"^dataset 'devnagari': OpenML id 40923 is not in the offline snapshot"):
        fetch_table("devnagari", 40923, "snapshot", tmp_path)


def test_an_openml_feature_called_class_is_kept_beside_the_label(tmp_path, monkeypatch):
    """An OpenML table whose target is another column but which has a feature named 'class' (the
    pipeline's label column): the feature is renamed, as a local table's is, not overwritten by
    the label."""
    import openml

    features = pd.DataFrame({"class": np.arange(6.0) + 5, "x": np.arange(6.0), "y": pd.Categorical(list("ababab"))})

    class Fake:
        name, version, default_target_attribute = "fake", 1, "kind"

        def get_data(self, target, dataset_format):
            assert target == "kind"
            return features, pd.Series(list("pqpqpq"), name="kind"), [False, False, True], list(features.columns)

    monkeypatch.setattr(openml.datasets, "get_dataset", lambda *a, **k: Fake())
    frame, info = fetch_table("fake", 1, "openml", tmp_path)
    assert list(frame.columns) == ["class_feature", "x", "y", "class"]
    assert frame["class_feature"].tolist() == [5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    assert frame["class"].tolist() == list("pqpqpq") and info["features"] == 3


def test_a_numeric_column_without_a_train_value_is_the_train_mean_everywhere():
    """A numeric column whose training rows are all missing (or infinite) has no statistics: its
    values in the other rows are not passed on unscaled (5000 into an encoder that never saw the
    column) but are 0, as a missing value is."""
    frame = pd.DataFrame({"a": [np.nan] * 4 + [5000.0, 7000.0], "w": [np.inf] * 4 + [3.0, 4.0],
                          "b": np.arange(6.0), "class": pd.Categorical(list("pqpqpq"))})
    table = encode_table(frame)
    X = scale(table, np.arange(4))
    assert np.isfinite(X).all() and (X[:, :2] == 0).all()
    np.testing.assert_allclose(X[:4, 2].mean(), 0, atol=1e-6)  # a column with train values: standardised


def test_openml_rows_without_a_target_are_dropped_by_fetch_and_counted(tmp_path, monkeypatch):
    """Rows of an OpenML table whose label is missing cannot be scored: fetch drops them with a
    count (its record, the schema report), as for a local table, not encode_table silently."""
    import openml

    features = pd.DataFrame({"x": np.arange(8.0), "z": np.arange(8.0) ** 2})

    class Fake:
        name, version, default_target_attribute = "fake", 1, "kind"

        def get_data(self, target, dataset_format):
            return features, pd.Series(["p", "q", None, "p", "q", "p", "q", None]), [False, False], ["x", "z"]

    monkeypatch.setattr(openml.datasets, "get_dataset", lambda *a, **k: Fake())
    frame, info = fetch_table("fake", 1, "openml", tmp_path)
    assert info["rows"] == 6 and info["dropped_rows"] == 2 and frame["x"].tolist() == [0, 1, 3, 4, 5, 6]
    frame.to_parquet(tmp_path / "raw.parquet")
    raw = pd.read_parquet(tmp_path / "raw.parquet")
    table = encode_table(raw)
    assert schema_report("fake", raw, table, {})["summary"]["rows_without_target"] == 2


def test_zero_padded_cells_read_from_an_arrow_arrays_bytes_match_the_rules_pattern():
    """``_zero_padded_cells`` (the whole-table pass) finds, from an Arrow array's bytes, the cells
    that the column rules' ``_ZERO_PADDED`` matches, in string and large_string arrays and in
    slices of them (an offset into the buffers)."""
    import re

    import pyarrow as pa

    from seba.core.own_table.numbers import _ZERO_PADDED, _zero_padded_cells

    rng = np.random.default_rng(3)
    pieces = ["", "+", "-"], ["0", "00", "1", "10", "07", "0007"], ["", ".", ".5", "5", "e3", "E-2"]
    cells = ["".join(rng.choice(p) for p in pieces) for _ in range(2000)] + ["0", "-0", "+05", "5", "00"]
    expected = np.array([re.match(_ZERO_PADDED, c) is not None for c in cells])
    assert 100 < expected.sum() < len(cells) - 100
    for kind in (pa.string(), pa.large_string()):
        array = pa.array(cells, type=kind)
        assert (_zero_padded_cells(array) == expected).all()
        assert (_zero_padded_cells(array.slice(7, 500)) == expected[7:507]).all()


def test_values_float32_would_make_one_are_stored_less_an_offset_or_reported():
    """The encoded table is float32: a column of values too close for their magnitude (serial
    numbers around 1e8, millisecond timestamps, 0.5 + k·1e-10) would lose its distinct values.
    Such a column is stored less the midpoint of its range, so that standardised it keeps every
    value apart, and the schema report gives the shift (``stored_less``); where no shift keeps
    them apart, a warning names two values made one. Columns float32 holds (integers, ordinary
    decimals) are stored as before, bit for bit, with no note."""
    from seba.core.data import scale

    rng = np.random.default_rng(0)
    n = 200
    frame = pd.DataFrame({"serial": 100_000_000 + rng.integers(0, 12, n),
                          "ms": 1.7e12 + rng.integers(0, 10**6, n) * 1.0,
                          "close": 0.5 + rng.integers(0, 5, n) * 1e-10,
                          "mixed": np.r_[rng.integers(0, 3, n - 2) * 1e-12, 1e8, 1e8 + 1],
                          "decimals": rng.normal(size=n).round(3), "ints": rng.integers(0, 256, n),
                          "class": pd.Categorical(rng.choice(["a", "b"], n))})
    notes = {}
    table = encode_table(frame, notes)
    assert set(notes) == {"serial", "ms", "close", "mixed"}
    for column in ("decimals", "ints"):
        j = list(table.columns).index(column)
        assert table.X[:, j].tobytes() == frame[column].to_numpy(np.float64).astype(np.float32).tobytes()
    X = scale(table, np.arange(150))
    for j, column in enumerate(table.columns):
        assert len(np.unique(X[:, j])) == (frame[column].nunique() if column != "mixed" else 4), column
        assert len(np.unique(frame[column].astype(np.float32))) < frame[column].nunique() or column in ("decimals", "ints")
    entries = {c["column"]: c for c in schema_report("t", frame, table, notes)["columns"]}
    assert entries["serial"]["stored_less"] == 100_000_005.5 and "warnings" not in entries["serial"]
    assert "stored_less" not in entries["mixed"] and "stored_less" not in entries["decimals"]
    assert entries["mixed"]["warnings"] == ["column 'mixed': 5 distinct values are 4 in float32, the encoded table's "
                                            "precision (values too close for their magnitude: 100000000.0 and "
                                            "100000001.0 are one value)"]


def test_the_benchmark_tables_are_stored_as_their_plain_float32():
    """No numeric column of the offline snapshot's tables is one that float32 would merge, so their
    encoded tables are their values' plain float32 (no shift, no precision note)."""
    from seba.core.data import LABEL, read_manifest, supplied_copy_missing

    snapshot = Path(__file__).resolve().parents[1] / "data" / "snapshot"
    for openml_id, entry in read_manifest(snapshot).items():
        if supplied_copy_missing(entry, snapshot):  # Fashion-MNIST: a copy the user supplies
            continue
        frame = pd.read_parquet(snapshot / entry["file"])
        assert LABEL in frame.columns, entry["file"]
        notes = {}
        table = encode_table(frame, notes)
        assert not any("float32" in note for note in notes.values()), (entry["file"], notes)
        assert table.X.shape[0] == frame[LABEL].notna().sum()
