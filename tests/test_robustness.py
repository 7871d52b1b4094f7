"""Bad inputs: every one ends in a clear message that names the problem, a non-zero exit and no
traceback, before any long work, and outputs computed earlier stay byte-identical.

The stages are run in-process (``runpy``) in a small temporary repository holding diabetes (and
a user table), with earlier outputs in place.
"""

from __future__ import annotations

import datetime
import gzip
import hashlib
import io
import json
import re
import runpy
import shutil
import socket
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from conftest import committed_params
from seba.core.config import PretrainConfig
from seba.core.data import EncodedTable, encode_table, load_snapshot, make_split, save_splits, scale
from seba.core.errors import ConfigError, DataError, TrainingDiverged
from seba.pretrain import pretrain_encoder
from seba.validate import main as validate_main

ROOT = Path(__file__).resolve().parents[1]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_own(repo: Path, name: str, frame: pd.DataFrame, **source) -> tuple[pd.DataFrame, dict[str, dict]]:
    """``frame`` written as repo/data/local/<name>.csv and read as fetch reads it (target 'label',
    ``source`` the other options): the table and each column's record by name."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    frame.to_csv(repo / "data" / "local" / f"{name}.csv", index=False)
    read, info = load_local_table(name, SourceConfig(path=f"data/local/{name}.csv", target="label", **source), repo)
    return read, {r["column"]: r for r in info["columns"]}


@pytest.fixture()
def repo(tmp_path, monkeypatch):
    """A temporary repo: dvc.yaml, params.yaml (diabetes only), the diabetes snapshot, diabetes's
    fetched / processed / split outputs, an earlier metrics file and a user table."""
    shutil.copy(ROOT / "dvc.yaml", tmp_path / "dvc.yaml")
    params = yaml.safe_load(committed_params())
    params["datasets"] = ["diabetes"]
    params["sources"] = {"diabetes": {"openml_id": 37}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    snap = tmp_path / "data" / "snapshot"
    snap.mkdir(parents=True)
    for name in ("manifest.json", "diabetes.parquet"):
        shutil.copy(ROOT / "data" / "snapshot" / name, snap / name)
    frame, _ = load_snapshot(37, ROOT / "data" / "snapshot")
    (tmp_path / "data" / "raw").mkdir()
    frame.to_parquet(tmp_path / "data" / "raw" / "diabetes.parquet")
    table = encode_table(frame)
    (tmp_path / "data" / "processed").mkdir()
    table.save(tmp_path / "data" / "processed" / "diabetes.npz")
    (tmp_path / "data" / "splits").mkdir()
    save_splits(tmp_path / "data" / "splits" / "diabetes.npz", [make_split(table.y, 0, 1 / 6, 0.1)])
    (tmp_path / "reports" / "metrics").mkdir(parents=True)
    (tmp_path / "reports" / "metrics" / "diabetes.json").write_text('{"1shot_ensemble": 61.0}')
    local = tmp_path / "data" / "local"
    local.mkdir()
    rng = np.random.default_rng(0)
    n = 120
    pd.DataFrame({
        "age": rng.normal(40, 10, n).round(1),
        "city": rng.choice(["north", "south", "east"], n),
        "label": rng.choice(["yes", "no"], n),
    }).to_csv(local / "good.csv", index=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    return tmp_path


def prior_outputs(repo: Path) -> dict[str, str]:
    return {str(p.relative_to(repo)): _digest(p)
            for p in sorted((repo / "data").rglob("*")) if p.is_file() and "local" not in p.parts} | {
        "reports/metrics/diabetes.json": _digest(repo / "reports" / "metrics" / "diabetes.json")}


def edit_params(repo: Path, edit) -> None:
    params = yaml.safe_load((repo / "params.yaml").read_text())
    edit(params)
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def run_stage_script(stage: str, args: list[str], monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", [f"stages/{stage}.py", *args])
    code = 0
    try:
        runpy.run_path(str(ROOT / "stages" / f"{stage}.py"), run_name="__main__")
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.err + captured.out


def set_key(dotted: str, value):
    def edit(params):
        node = params
        *parents, last = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return edit


def delete_key(dotted: str):
    def edit(params):
        node = params
        *parents, last = dotted.split(".")
        for key in parents:
            node = node[key]
        del node[last]
    return edit


def rename_key(dotted: str, new: str):
    def edit(params):
        node = params
        *parents, last = dotted.split(".")
        for key in parents:
            node = node[key]
        node[new] = node.pop(last)
    return edit


def add_dataset(name: str, source):
    def edit(params):
        params["datasets"].append(name)
        params["sources"][name] = source
    return edit


# (case id, params edit, fragments the message must contain)
PARAMS_CASES = [
    ("unknown key, near miss", rename_key("pretrain.patience", "patiense"),
     ["pretrain.patiense", "did you mean 'patience'"]),
    ("unknown top-level section", rename_key("evaluate", "evaluat"), ["'evaluat'", "did you mean 'evaluate'"]),
    ("wrong type", set_key("pretrain.lr", "fast"), ["'pretrain.lr' must be a number", "'fast'"]),
    ("bool for an int", set_key("pretrain.batch_size", True), ["'pretrain.batch_size' must be an integer"]),
    ("ratio above 1", set_key("ratios", [0.1, 1.5]), ["'ratios'", "(0, 1)", "1.5"]),
    ("ratio zero", set_key("ratios", [0.0, 0.2]), ["'ratios'", "(0, 1)"]),
    ("empty ratios", set_key("ratios", []), ["'ratios' must be a non-empty list"]),
    ("empty seeds", set_key("seeds", []), ["'seeds' must be a non-empty list"]),
    ("empty datasets", set_key("datasets", []), ["'datasets' must be a non-empty list"]),
    ("duplicate ratios", set_key("ratios", [0.1, 0.2, 0.1]), ["'ratios' has duplicates"]),
    ("zero epochs", set_key("pretrain.max_epochs", 0), ["'pretrain.max_epochs' must be > 0"]),
    ("negative batch size", set_key("pretrain.batch_size", -5), ["'pretrain.batch_size' must be at least 2"]),
    ("the ratios missing (dvc.yaml builds the pretrain stages from them)", delete_key("ratios"),
     ["'ratios' is missing; dvc.yaml builds its stages from it (one pretrain stage per ratio"]),
    ("the baselines section emptied", set_key("baselines", None),
     ["'baselines.methods' is missing; dvc.yaml builds its stages from it (one baseline stage per method; [] runs none)"]),
    ("a dataset name misspelt", set_key("datasets", ["diabetess"]),
     ["dataset 'diabetess' is listed in 'datasets' but has no entry in 'sources' (did you mean 'diabetes'?)"]),
    ("zero episodes", set_key("evaluate.episodes", 0), ["'evaluate.episodes' must be > 0"]),
    ("zero patience", set_key("pretrain.patience", 0), ["'pretrain.patience' must be > 0"]),
    ("negative seed", set_key("seeds", [-1]), ["'seeds' must be >= 0"]),
    ("unknown imputation", set_key("pretrain.fill", "mean"), ["'pretrain.fill'", "allowed: zero, marginal"]),
    ("unknown device", set_key("pretrain.device", "tpu"), ["'pretrain.device'", "allowed: auto, cpu, cuda"]),
    ("unknown precision", set_key("pretrain.precision", "fp16"), ["'pretrain.precision'", "fp32, bf16, tf32, tf32_fp32_search, auto"]),
    ("min_delta out of range", set_key("pretrain.min_delta", 2), ["'pretrain.min_delta'", "[0, 1)"]),
    ("negative step cap", set_key("pretrain.max_steps", -5), ["'pretrain.max_steps'", "integer >= 0"]),
    ("fractional workers", set_key("pretrain.workers", 1.5), ["'pretrain.workers'", "must be an integer"]),
    ("negative workers", set_key("pretrain.workers", -1), ["'pretrain.workers'", "integer >= 0"]),
    ("shot larger than a class", set_key("evaluate.shots", [1, 5, 200]),
     ["'evaluate.shots'", "200-shot", "class 'tested_positive'", "dataset 'diabetes'", "test rows"]),
    ("test fraction leaves test empty", set_key("split.test_fraction", 0.001),
     ["'split.test_fraction' = 0.001", "dataset 'diabetes'", "test part of 1 of 768"]),
    ("validation fraction leaves it empty", set_key("split.val_fraction", 0.0001),
     ["'split.val_fraction' = 0.0001", "validation part"]),
    ("dataset without a source", set_key("datasets", ["diabetes", "nosuch"]),
     ["dataset 'nosuch'", "no entry in 'sources'"]),
    ("source with id and path", set_key("sources.diabetes", {"openml_id": 37, "path": "data/local/x.csv"}),
     ["'sources.diabetes'", "exactly one of"]),
    ("local path outside data/local", add_dataset("mine", {"path": "/etc/passwd.csv", "target": "y"}),
     ["'sources.mine.path'", "under data/local/"]),
    ("local table without target", add_dataset("mine", {"path": "data/local/good.csv"}),
     ["'sources.mine.target' is missing"]),
    ("local table of unknown format", add_dataset("mine", {"path": "data/local/good.xls", "target": "label"}),
     ["'sources.mine.path' must end in .csv or .tsv (compressed or not: .gz, .bz2, .xz, .zip after it), "
      ".parquet, .xlsx or .arff, got 'data/local/good.xls' (an Excel 97-2003 workbook: save it as .xlsx (Excel "
      "Workbook) or CSV)"]),
    ("unknown baseline method", set_key("baselines.methods", ["knn", "knnn"]),
     ["'baselines.methods' has unknown method 'knnn'", "allowed: catboost, d2r2, knn, logreg, meanteacher"]),
    ("unknown baseline hyper-parameter", set_key("baselines.knn", {"neighbours": 3}),
     ["unknown key 'baselines.knn.neighbours'"]),
    ("baseline fraction out of range", set_key("baselines.vime.p_m", 1.5), ["'baselines.vime.p_m' must lie in (0, 1]"]),
    ("baseline size not positive", set_key("baselines.catboost.depth", 0), ["'baselines.catboost.depth' must be > 0"]),
    ("baseline choice unknown", set_key("baselines.stunt.head", "euclid"),
     ["'baselines.stunt.head' is 'euclid'", "allowed: protonet, seba"]),
    ("non-integer OpenML id", set_key("sources.diabetes", {"openml_id": "37a"}),
     ["'sources.diabetes.openml_id' must be an integer"]),
    ("unknown thousands separator", add_dataset("mine", {"path": "data/local/good.csv", "target": "label",
                                                         "thousands": ";"}),
     ["'sources.mine.thousands' is ';'", "allowed: ',', '.', ' ', \"'\" or null"]),
    ("unknown decimal mark", add_dataset("mine", {"path": "data/local/good.csv", "target": "label", "decimal": "·"}),
     ["'sources.mine.decimal' is '·'", "allowed: '.', ','"]),
    ("unknown delimiter", add_dataset("mine", {"path": "data/local/good.csv", "target": "label", "delimiter": ":"}),
     ["'sources.mine.delimiter' is ':'", "allowed: ',', ';', '\\t', '|' (a tab written \"\\t\" in double quotes)"]),
    ("unknown date order", add_dataset("mine", {"path": "data/local/good.csv", "target": "label", "date_order": "ymd"}),
     ["'sources.mine.date_order' is 'ymd'", "allowed: 'dmy' (31/01/2020), 'mdy' (01/31/2020) or null"]),
    ("unknown encoding", add_dataset("mine", {"path": "data/local/good.csv", "target": "label", "encoding": "klingon"}),
     ["'sources.mine.encoding' is 'klingon': not a text encoding Python knows (e.g. 'utf-8', 'cp1252', 'latin-1')"]),
    ("encoding for a parquet file", add_dataset("mine", {"path": "data/local/good.parquet", "target": "label",
                                                         "encoding": "cp1252"}),
     ["'sources.mine.encoding' applies only to a CSV or ARFF file, not 'data/local/good.parquet'"]),
    ("sheet for a CSV file", add_dataset("mine", {"path": "data/local/good.csv", "target": "label", "sheet": "data"}),
     ["'sources.mine.sheet' applies only to an Excel file (.xlsx), not 'data/local/good.csv'"]),
    ("negative sheet position", add_dataset("mine", {"path": "data/local/good.xlsx", "target": "label", "sheet": -1}),
     ["'sources.mine.sheet' is -1: a sheet's position counts from 0 (or give its name)"]),
    ("delimiter for a parquet file", add_dataset("mine", {"path": "data/local/good.parquet", "target": "label",
                                                          "delimiter": ";"}),
     ["'sources.mine.delimiter' applies only to a CSV file, not 'data/local/good.parquet'"]),
    ("thousands separator equal to the decimal mark", add_dataset(
        "mine", {"path": "data/local/good.csv", "target": "label", "thousands": ",", "decimal": ","}),
     ["'sources.mine.thousands' and 'sources.mine.decimal' are both ','"]),
    ("a column declared numeric and categorical", add_dataset(
        "mine", {"path": "data/local/good.csv", "target": "label", "numeric": ["age"], "categorical": ["age"]}),
     ["'sources.mine.numeric' and 'sources.mine.categorical' both list ['age']"]),
    ("numeric is not a list", add_dataset("mine", {"path": "data/local/good.csv", "target": "label", "numeric": "age"}),
     ["'sources.mine.numeric' must be a list of column names"]),
    ("a column name written as a number", add_dataset("mine", {"path": "data/local/good.csv", "target": "label",
                                                               "categorical": [2020]}),
     ["'sources.mine.categorical' must be a list of column names, got [2020] (quote a name that is a number: '2020')"]),
    ("missing values not a list", add_dataset("mine", {"path": "data/local/good.csv", "target": "label",
                                                       "missing_values": -999}),
     ["'sources.mine.missing_values' must be a list of the values that mark a missing cell (numbers or texts, e.g. "
      "[-999, 'unknown']), or a mapping from columns to such lists ({glucose: [0]}), got -999"]),
    ("missing values holding a boolean", add_dataset("mine", {"path": "data/local/good.csv", "target": "label",
                                                              "missing_values": [-999, True]}),
     ["'sources.mine.missing_values' must be a list of the values that mark a missing cell"]),
    ("missing values on an OpenML table", set_key("sources.diabetes", {"openml_id": 37, "missing_values": [0]}),
     ["'sources.diabetes.missing_values' applies only to local tables"]),
    ("near miss of a source option", add_dataset("mine", {"path": "data/local/good.csv", "target": "label",
                                                          "thousand": ","}),
     ["unknown key 'sources.mine.thousand' (did you mean 'thousands'?)"]),
    ("source option on an OpenML table", set_key("sources.diabetes", {"openml_id": 37, "decimal": ","}),
     ["'sources.diabetes.decimal' applies only to local tables"]),
    ("dataset's own pretrain value unknown", set_key("sources.diabetes", {"openml_id": 37, "pretrain": {"precision": "fp16"}}),
     ["'sources.diabetes.pretrain.precision' is 'fp16'", "allowed: fp32, bf16, tf32, tf32_fp32_search, auto"]),
]


@pytest.mark.parametrize("case, edit, fragments", PARAMS_CASES, ids=[c[0] for c in PARAMS_CASES])
def test_bad_params_fail_fast_with_the_key_and_touch_nothing(repo, monkeypatch, capsys, case, edit, fragments):
    before = prior_outputs(repo)
    edit_params(repo, edit)
    # the one-shot validation command ...
    code = validate_main(["--root", str(repo)])
    message = capsys.readouterr().err
    assert code == 2
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    # ... and the stage itself, before any work: same message, exit 2, no traceback. A method's
    # own section is the method's to check (its module holds its params class): its baseline stage
    # refuses it; the other stages do not read it, and `dvc repro` runs seba-validate before them.
    method = next((m.group(1) for f in fragments for m in [re.search(r"'baselines\.(\w+)\.", f)] if m), None)
    stage, args = ("baseline", ["--method", method, "--dataset", "diabetes"]) if method else ("split", [])
    code, output = run_stage_script(stage, args or ["--dataset", "diabetes"], monkeypatch, capsys)
    assert code == 2
    assert "Traceback" not in output
    for fragment in fragments:
        assert fragment in output, (fragment, output)
    assert prior_outputs(repo) == before


def test_invalid_yaml_is_reported_without_traceback(repo, monkeypatch, capsys):
    before = prior_outputs(repo)
    (repo / "params.yaml").write_text("seeds: [0\ndatasets: diabetes\n")
    code, output = run_stage_script("split", ["--dataset", "diabetes"], monkeypatch, capsys)
    assert code == 2 and "is not valid YAML" in output and "Traceback" not in output
    assert prior_outputs(repo) == before


def closed_port() -> int:
    """A local TCP port where nothing listens (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_ray_address_where_nothing_answers_stops_validation_at_once(repo, capsys):
    """`ray.init` retries such an address for minutes on end (a stage hung there after DVC had
    removed its outputs): validation probes it and names it."""
    before = prior_outputs(repo)
    port = closed_port()
    edit_params(repo, set_key("executor", {"kind": "ray", "address": f"127.0.0.1:{port}"}))
    assert validate_main(["--root", str(repo)]) == 2
    message = capsys.readouterr().err
    assert (f"executor.kind ray: nothing accepts connections at '127.0.0.1:{port}' (executor.address: "
            f"Connection refused within 5 s); start the cluster or correct the address") in message
    assert prior_outputs(repo) == before


def test_a_table_the_user_supplies_is_left_to_fetch_unless_the_snapshot_is_the_source(repo, capsys, monkeypatch):
    """Fashion-MNIST is not in the repository: with OpenML as a source (auto, openml) and OpenML
    reachable, the fetch stage downloads it, so validation does not stop for the missing copy;
    with OpenML unreachable, or fetch.source snapshot, it does, saying where the verified copy goes."""
    import seba.validate

    edit_params(repo, add_dataset("fashion", {"openml_id": 40996}))
    monkeypatch.setattr(seba.validate, "openml_unreachable", lambda: None)
    assert validate_main(["--root", str(repo)]) == 0
    assert "fashion: not fetched yet and not in the snapshot; row-level checks skipped" in capsys.readouterr().out
    monkeypatch.setattr(seba.validate, "openml_unreachable", lambda: "www.openml.org: no answer")
    assert validate_main(["--root", str(repo)]) == 2
    message = capsys.readouterr().err
    assert ("dataset 'fashion': its fetch needs OpenML, which accepts no connection (www.openml.org: no answer "
            "within 5 s): Fashion-MNIST (challenging table) (OpenML 40996) is not in the repository (35 MB)") in message
    edit_params(repo, set_key("fetch.source", "snapshot"))
    assert validate_main(["--root", str(repo)]) == 2
    message = capsys.readouterr().err
    assert "is not in the repository (35 MB)" in message and "data/snapshot/fashion.parquet" in message


def test_what_a_stage_says_of_a_table_it_reads_is_tagged_with_that_stage(repo, no_mlflow, capsys, monkeypatch):
    """validate reads a local table to check it, as fetch does after it: the notices and warnings
    of each read carry the stage that read it, so a `dvc repro` log does not show fetch running
    inside validate."""
    frame = pd.concat([pd.read_csv(repo / "data" / "local" / "good.csv")] * 4, ignore_index=True)  # rows for 10 shots
    frame["age"] = frame["age"].astype(object)
    frame.loc[:2, "age"] = "NA"
    frame.to_csv(repo / "data" / "local" / "marked.csv", index=False)
    edit_params(repo, add_dataset("mine", {"path": "data/local/marked.csv", "target": "label"}))
    monkeypatch.chdir(repo)
    assert validate_main(["--root", str(repo)]) == 0
    said = capsys.readouterr().err
    assert "[validate mine] column 'age': 3 cell(s) marked missing ('NA' x3)" in said and "[fetch" not in said, said
    code, said = run_stage_script("fetch", ["--dataset", "mine"], monkeypatch, capsys)
    assert code == 0 and "[fetch mine] column 'age': 3 cell(s) marked missing ('NA' x3)" in said, said


def test_an_openml_id_not_in_the_snapshot_needs_openml_or_its_cache(repo, capsys, monkeypatch):
    """A mistyped id offline would pass validation and fail in fetch after DVC removed the fetched
    table; a table in the openml client's cache needs no connection."""
    import seba.validate

    before = prior_outputs(repo)
    monkeypatch.setattr(seba.validate, "openml_unreachable", lambda: "www.openml.org: Name or service not known")
    edit_params(repo, set_key("sources.diabetes.openml_id", 99999))
    assert validate_main(["--root", str(repo)]) == 2
    assert ("dataset 'diabetes': its fetch needs OpenML, which accepts no connection (www.openml.org: Name or "
            "service not known within 5 s): OpenML id 99999 is not in the offline snapshot (a table only OpenML gives; "
            "if the id is mistyped, check 'sources.diabetes.openml_id')") in capsys.readouterr().err
    (repo / "data" / "openml_cache" / "org" / "openml" / "www" / "datasets" / "99999").mkdir(parents=True)
    assert validate_main(["--root", str(repo)]) == 0
    assert prior_outputs(repo) == {**before, **{k: v for k, v in prior_outputs(repo).items() if "openml_cache" in k}}


def test_a_damaged_snapshot_is_refused_though_the_table_was_fetched(repo, capsys):
    """DVC reruns every fetch when the snapshot folder changes: a damaged file must stop
    validation even where data/raw already holds the table (fetch would fail after DVC removed it)."""
    (repo / "data" / "raw" / "diabetes.json").write_text(json.dumps({"openml_id": 37}))
    assert validate_main(["--root", str(repo)]) == 0
    assert "(data/raw/diabetes.parquet): splits and shots OK" in capsys.readouterr().out
    snapshot = repo / "data" / "snapshot" / "diabetes.parquet"
    snapshot.write_bytes(snapshot.read_bytes()[:4000])
    before = prior_outputs(repo)
    assert validate_main(["--root", str(repo)]) == 2
    message = capsys.readouterr().err
    assert "diabetes.parquet fails verification" in message
    assert "(`git checkout -- data/snapshot/diabetes.parquet` restores the committed copy)" in message
    assert prior_outputs(repo) == before


def test_a_fetched_table_that_cannot_be_read_is_left_to_fetch(repo, capsys):
    """A damaged data/raw table stopped every `dvc repro` in validation, `dvc repro fetch@<name>`
    (the advice) included: fetch writes it again, and the rows come from the snapshot meanwhile."""
    (repo / "data" / "raw" / "diabetes.json").write_text(json.dumps({"openml_id": 37}))
    raw = repo / "data" / "raw" / "diabetes.parquet"
    raw.write_bytes(raw.read_bytes()[:3000])
    assert validate_main(["--root", str(repo)]) == 0
    assert ("diabetes: 768 rows, 2 classes (offline snapshot; data/raw/diabetes.parquet cannot be read, and "
            "fetch@diabetes writes it again (DVC reruns a stage whose output changed))") in capsys.readouterr().out


def test_a_listed_methods_package_and_checkpoint_are_checked_by_validation(repo, monkeypatch, capsys):
    """TabPFN's package and checkpoint were found missing only by its own stage, after pretraining."""
    import seba.baselines.tabpfn as tabpfn

    monkeypatch.delenv(tabpfn.CACHE_VARIABLE, raising=False)
    edit_params(repo, set_key("baselines.methods", ["knn", "tabpfn"]))
    monkeypatch.setattr(tabpfn.importlib.util, "find_spec", lambda name: None)
    assert validate_main(["--root", str(repo)]) == 2
    assert "baseline 'tabpfn' needs the tabpfn package" in capsys.readouterr().err
    monkeypatch.setattr(tabpfn.importlib.util, "find_spec", lambda name: object())  # installed, no checkpoint
    assert validate_main(["--root", str(repo)]) == 2
    assert "baseline 'tabpfn' has no checkpoint: 'baselines.tabpfn.model_path' is null" in capsys.readouterr().err


def test_valid_params_pass_validation(repo, capsys):
    assert validate_main(["--root", str(repo)]) == 0
    assert "diabetes: 768 rows, 2 classes" in capsys.readouterr().out


# ----------------------------------------------------------------------------- your own table


def write_local(repo: Path, name: str, content: bytes | pd.DataFrame) -> None:
    path = repo / "data" / "local" / name
    if isinstance(content, pd.DataFrame):
        content.to_csv(path, index=False)
    else:
        path.write_bytes(content)


# a small comma-separated table of two features and a label
_SMALL_CSV = ("a,b,label\n" + "".join(f"{i % 7},{i % 5},{'xy'[i % 2]}\n" for i in range(30))).encode()

LOCAL_CASES = [
    ("missing file", None, {"path": "data/local/absent.csv", "target": "label"},
     ["dataset 'mine' (data/local/absent.csv): file not found"]),
    ("a file name in another case", None, {"path": "data/local/Good.csv", "target": "label"},
     ["dataset 'mine' (data/local/Good.csv): file not found (did you mean 'data/local/good.csv'?)"]),
    ("missing target column", None, {"path": "data/local/good.csv", "target": "Label "},
     ["target column 'Label' not found (did you mean 'label'?)", "columns: age, city, label"]),
    ("single-class target", pd.DataFrame({"a": range(30), "label": ["x"] * 30}),
     {"path": "data/local/bad.csv", "target": "label"}, ["target column 'label' has 1 distinct value"]),
    ("non-UTF-8 csv", "a,label\n1,caf\xe9\n2,b\n".encode("latin-1"),
     {"path": "data/local/bad.csv", "target": "label"},
     ["not UTF-8 text (invalid continuation byte 0xe9 at byte 13, line 2)",
      "save the file as UTF-8, or set encoding in 'sources.mine' to the one it is written in (it reads as "
      "Windows-1252, as Excel writes CSV on Western European Windows, where 0xe9 is 'é': set encoding: cp1252)"]),
    ("a UTF-16 csv", "a\tb\tlabel\n".join([""] + [f"{i % 7}\t{i % 5}\t{'xy'[i % 2]}\n" for i in range(30)]).encode("utf-16"),
     {"path": "data/local/bad.csv", "target": "label", "delimiter": "\t"},
     ["not UTF-8 text (invalid start byte 0xff at byte 0, line 1)",
      "(it starts with a UTF-16 byte-order mark, as Excel's 'Unicode Text' writes: set encoding: utf-16)"]),
    ("a Windows-1252 csv read as UTF-16", "a,label\n1,\u20ac\n2,\u2026\n".encode("cp1252"),
     {"path": "data/local/bad.csv", "target": "label", "encoding": "utf-16"},
     ["not utf-16 text (", "set encoding in 'sources.mine' to the one it is written in (it reads as Windows-1252"]),
    ("malformed csv", b"a,b,label\n1,2,x\n3,4,5,6,y\n7,8,z\n",
     {"path": "data/local/bad.csv", "target": "label"}, ["cannot be read as csv", "Expected 3 fields"]),
    ("empty csv", b"", {"path": "data/local/bad.csv", "target": "label"}, ["cannot be read as csv"]),
    ("class with too few rows",
     pd.DataFrame({"a": [i % 7 for i in range(40)], "b": [i % 5 for i in range(40)],
                   "label": ["x"] * 20 + ["y"] * 18 + ["z"] * 2}),
     {"path": "data/local/bad.csv", "target": "label"}, ["class 'z' has 2 row(s)", "at least 3 per class"]),
    ("classes with too few rows",
     pd.DataFrame({"a": [i % 7 for i in range(40)], "b": [i % 5 for i in range(40)],
                   "label": ["x"] * 20 + ["y"] * 17 + ["z"] * 2 + ["w"]}),
     {"path": "data/local/bad.csv", "target": "label"},
     ["class 'w' has 1 row(s) (2 of the 4 classes have fewer than 3); a stratified"]),
    ("a target of ids",
     pd.DataFrame({"a": [i % 7 for i in range(40)], "b": [i % 5 for i in range(40)],
                   "label": [f"P{i:03d}" for i in range(40)]}),
     {"path": "data/local/bad.csv", "target": "label"},
     ["target column 'label' has a different value in every one of its 40 rows (e.g. 'P000', 'P001'), as an id "
      "or a name has, not classes: set 'sources.mine.target' to the label column"]),
    ("class too small for the shot",
     pd.DataFrame({"a": [i % 7 for i in range(60)], "b": [i % 5 for i in range(60)],
                   "label": ["x"] * 30 + ["y"] * 24 + ["z"] * 6}),
     {"path": "data/local/bad.csv", "target": "label"}, ["10-shot", "class 'z' of dataset 'mine'"]),
    ("categorical override names no column", None,
     {"path": "data/local/good.csv", "target": "label", "categorical": ["town"]}, ["'categorical'", "town"]),
    ("numeric override names no column", None,
     {"path": "data/local/good.csv", "target": "label", "numeric": ["height"]},
     ["'numeric' names column(s) not in the file: ['height']"]),
    ("only the target", pd.DataFrame({"label": ["x", "y"] * 10}), {"path": "data/local/bad.csv", "target": "label"},
     ["no feature columns"]),
    ("one feature column", pd.DataFrame({"a": [i % 7 for i in range(30)], "label": ["x", "y", "z"] * 10}),
     {"path": "data/local/bad.csv", "target": "label"},
     ["one feature column ('a') besides the target 'label'", "at least two feature columns"]),
    ("rows with a field more than the header, holding values",
     ("a,b,label\n" + "".join(f"{i},{i % 3},{'xy'[i % 2]},{i % 5}\n" for i in range(30))).encode(),
     {"path": "data/local/bad.csv", "target": "label"},
     ["the data rows have one field more than the header (3 names), and the last one holds values (data rows 1, 2",
      "give every column a name in the first line"]),
    ("a class written two ways",
     pd.DataFrame({"a": [i % 7 for i in range(30)], "b": [i % 5 for i in range(30)], "label": ["1", "1.0", "2"] * 10}),
     {"path": "data/local/bad.csv", "target": "label"},
     ["target column 'label' writes a class in several ways ('1' x10 / '1.0' x10)", "write each class one way"]),
    ("a continuous target",
     pd.DataFrame({"a": [i % 7 for i in range(60)], "b": [i % 5 for i in range(60)],
                   "label": np.random.default_rng(0).normal(size=60).round(4)}),
     {"path": "data/local/bad.csv", "target": "label"},
     ["target column 'label' holds 60 distinct numbers in 60 rows", "a continuous target?"]),
    ("a semicolon-separated file", ("a;b;label\n" + "".join(f"{i % 7};{i % 5};{'xy'[i % 2]}\n" for i in range(30))).encode(),
     {"path": "data/local/bad.csv", "target": "label"},
     ["target column 'label' not found", "(the file separates its fields with ';', not ',': set delimiter: ';' in "
      "'sources.mine')"]),
    ("a semicolon-separated file with decimal commas",
     ("a;b;label\n" + "".join(f"{i % 7},5;{i % 5},25;{'xy'[i % 2]}\n" for i in range(30))).encode(),
     {"path": "data/local/bad.csv", "target": "label", "decimal": ","},
     ["the data rows have 2 fields more than the header (1 names)",
      "(the file separates its fields with ';', not ',': set delimiter: ';' in 'sources.mine')"]),
    ("a tab-separated file named .csv",  # the setting as YAML reads a tab: in double quotes
     _SMALL_CSV.replace(b",", b"\t"),
     {"path": "data/local/bad.csv", "target": "label"},
     ["target column 'label' not found", "(the file separates its fields with '\\t', not ',': set delimiter: \"\\t\" "
      "in 'sources.mine')"]),
    ("a comma-separated file read with tabs",
     _SMALL_CSV,
     {"path": "data/local/bad.csv", "target": "label", "delimiter": "\t"},
     ["target column 'label' not found", "(the file separates its fields with ',', not '\\t': set delimiter: ','"]),
    ("a header without rows", b"a,b,label\n", {"path": "data/local/bad.csv", "target": "label"}, ["no data rows"]),
    ("a comment line above the header",
     b"# exported from the laboratory's database on 2024-05-01\n" + _SMALL_CSV,
     {"path": "data/local/bad.csv", "target": "label"},
     ["the data rows have 2 fields more than the header (1 names): the column names, with 'label', are on line 2 "
      "of the file, below a title or notes: set header_row: 2 in 'sources.mine' (or delete the line above them)"]),
    ("a title and a blank line above the header",
     b"Measurements 2024\n\n" + _SMALL_CSV, {"path": "data/local/bad.csv", "target": "label"},
     ["the column names, with 'label', are on line 3 of the file, below a title or notes: set header_row: 3 in "
      "'sources.mine' (or delete the 2 lines above them)"]),
    ("a title row of the header's width above it",
     b"Measurements,2024,\n" + _SMALL_CSV, {"path": "data/local/bad.csv", "target": "label"},
     ["target column 'label' not found (the column names, with 'label', are on line 2 of the file, below a "
      "title or notes: set header_row: 2 in 'sources.mine' (or delete the line above them)); columns: "
      "Measurements, 2024, Unnamed: 2"]),
    ("files joined with their columns in other orders",
     _SMALL_CSV + b"b,a,label\n" + _SMALL_CSV.split(b"\n", 1)[1], {"path": "data/local/bad.csv", "target": "label"},
     ["holds the column names in another order (b, a, label)", "write every part in the header's order"]),
    ("thousands commas read as decimal commas?",
     pd.DataFrame({"a": ["2,544", "653", "1,083", "17", "3,120"] * 6, "b": [i % 5 for i in range(30)],
                   "label": ["x", "y", "z"] * 10}),
     {"path": "data/local/bad.csv", "target": "label"},
     ["column 'a' holds numbers written like '2,544'", "set thousands: ',' or decimal: ','",
      "(every ',' in it is followed by three digits: a thousands separator, most likely"]),
]


def assert_named_and_untouched(repo: Path, source: dict, fragments: list[str], monkeypatch, capsys,
                               fetch_fails: bool = True) -> None:
    """Dataset 'mine' from ``source``: `seba-validate` and (when ``fetch_fails``) the fetch stage
    both stop with every fragment in the message, exit 2, no traceback, nothing written."""
    before = prior_outputs(repo)
    edit_params(repo, add_dataset("mine", source))
    code = validate_main(["--root", str(repo)])
    message = capsys.readouterr().err
    assert code == 2
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    if fetch_fails:
        code, output = run_stage_script("fetch", ["--dataset", "mine"], monkeypatch, capsys)
        assert code == 2 and "Traceback" not in output
        for fragment in fragments:
            assert fragment in output, (fragment, output)
        assert not (repo / "data" / "raw" / "mine.parquet").exists()
    assert prior_outputs(repo) == before


def zipped(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


# (case id, file name, its bytes, fragments of the error)
COMPRESSED_CASES = [
    ("a zip archive of two files", "bad.csv.zip", zipped({"a.csv": _SMALL_CSV, "b.csv": _SMALL_CSV}),
     ["dataset 'mine' (data/local/bad.csv.zip): the archive holds 2 files (a.csv, b.csv); a .csv.zip holds one CSV"]),
    ("a file named .gz that is not gzip", "bad.csv.gz", _SMALL_CSV,
     ["dataset 'mine' (data/local/bad.csv.gz): cannot be read as csv: Not a gzipped file"]),
    ("a gzip file cut short", "bad.csv.gz", gzip.compress(_SMALL_CSV)[:40],
     ["cannot be read as csv: Compressed file ended before the end-of-stream marker was reached"]),
    ("a zip archive that is not one", "bad.csv.zip", _SMALL_CSV, ["cannot be read as csv: File is not a zip file"]),
]


def workbook(repo: Path, name: str = "bad.xlsx") -> None:
    """A workbook of two sheets: 'notes' (one cell) and 'data' (a small table)."""
    with pd.ExcelWriter(repo / "data" / "local" / name) as writer:
        pd.DataFrame({"note": ["see data"]}).to_excel(writer, sheet_name="notes", index=False)
        pd.DataFrame({"a": [i % 7 for i in range(30)], "b": [i % 5 for i in range(30)],
                      "label": ["x", "y"] * 15}).to_excel(writer, sheet_name="data", index=False)


# (case id, the source's options, fragments of the error)
EXCEL_CASES = [
    ("a sheet the workbook lacks", {"sheet": "Data "},
     ["dataset 'mine' (data/local/bad.xlsx): no sheet 'Data ' in the workbook (did you mean 'data'?); its sheets: "
      "'notes', 'data'"]),
    ("a sheet position past the last", {"sheet": 2},
     ["'sources.mine.sheet' is 2, but the workbook has 2 sheet(s) ('notes', 'data'), counted from 0"]),
    ("the first sheet, which is not the table", {}, ["target column 'label' not found", "columns: note"]),
]


@pytest.mark.parametrize("case, options, fragments", EXCEL_CASES, ids=[c[0] for c in EXCEL_CASES])
def test_an_excel_sheet_that_cannot_be_read_is_a_named_error(repo, monkeypatch, capsys, case, options, fragments):
    workbook(repo)
    assert_named_and_untouched(repo, {"path": "data/local/bad.xlsx", "target": "label", **options}, fragments,
                               monkeypatch, capsys)


def test_a_file_named_xlsx_that_is_no_workbook_is_a_named_error(repo, monkeypatch, capsys):
    write_local(repo, "bad.xlsx", _SMALL_CSV)  # a CSV named .xlsx
    assert_named_and_untouched(repo, {"path": "data/local/bad.xlsx", "target": "label"},
                               ["dataset 'mine' (data/local/bad.xlsx): cannot be read as an Excel workbook: "],
                               monkeypatch, capsys)


def test_an_empty_excel_sheet_is_a_named_error(repo, monkeypatch, capsys):
    pd.DataFrame().to_excel(repo / "data" / "local" / "bad.xlsx", index=False)
    assert_named_and_untouched(repo, {"path": "data/local/bad.xlsx", "target": "label"},
                               ["dataset 'mine' (data/local/bad.xlsx): the sheet read is empty (set "
                                "'sources.mine.sheet' to read another)"], monkeypatch, capsys)


def test_a_workbook_whose_first_sheet_is_notes_names_the_sheet_with_the_target(repo):
    """A workbook whose first sheet is notes and whose table is on another: the error for the
    target not found names the sheet that has it (and the rows above it there), with the setting
    to write; with that set, the table is read."""
    import openpyxl

    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    book = openpyxl.Workbook()
    book.active.title = "README"
    book.active.append(["This workbook holds the survey."])
    data = book.create_sheet("survey")
    data.append(["Survey 2020"])
    data.append(["x", "y", "label"])
    for i in range(30):
        data.append([i % 5, i % 7, "ab"[i % 2]])
    book.save(repo / "data" / "local" / "notes.xlsx")
    with pytest.raises(DataError, match=r"target column 'label' not found \(the sheet 'survey' has it, on row 2: "
                                        r"set sheet: 'survey' and header_row: 2 in 'sources.notes'\)"):
        load_local_table("notes", SourceConfig(path="data/local/notes.xlsx", target="label"), repo)
    data.delete_rows(1)
    book.save(repo / "data" / "local" / "notes.xlsx")
    read, _ = load_local_table("notes", SourceConfig(path="data/local/notes.xlsx", target="label", sheet="survey"),
                               repo)
    assert read.shape == (30, 3)


def test_an_excel_sheet_with_a_title_above_its_column_names_says_where_they_are(repo, monkeypatch, capsys):
    rows = [["Measurements 2024", None, None], [None, None, None], ["a", "b", "label"]]
    rows += [[i % 7, i % 5, "xy"[i % 2]] for i in range(30)]
    pd.DataFrame(rows).to_excel(repo / "data" / "local" / "bad.xlsx", index=False, header=False)
    assert_named_and_untouched(repo, {"path": "data/local/bad.xlsx", "target": "label"},
                               ["target column 'label' not found (the column names, with 'label', are on row 3 of "
                                "the sheet, below a title or notes: set header_row: 3 in 'sources.mine' (or delete "
                                "the 2 rows above them))"],
                               monkeypatch, capsys)


def test_header_row_reads_a_csv_or_sheet_whose_column_names_are_below_a_title(repo, capsys):
    """A CSV or sheet whose column names sit below a title or notes was an error saying to delete
    the lines above them, which edits the file as downloaded. ``header_row`` (counted from 1, as
    the error counts) reads the names from that line or row and leaves the ones above out, with a
    notice; in a sheet, merged ranges and formulas below it are placed by their rows as before. The
    error names the setting; a value below 1, or the key for a parquet file, is a named error."""
    import openpyxl
    from seba.core.config import SourceConfig, load_params
    from seba.core.own_table import load_local_table

    (repo / "data" / "local" / "titled.csv").write_bytes(b"Measurements 2024\n# units: cm\n" + _SMALL_CSV)
    read, _ = load_local_table("titled", SourceConfig(path="data/local/titled.csv", target="label", header_row=3),
                               repo)
    assert list(read.columns) == ["a", "b", "class"] and len(read) == 30
    assert ("the column names read from line 3 ('sources.titled.header_row'), the 2 line(s) above it left out"
            in capsys.readouterr().err)
    book = openpyxl.Workbook()
    sheet = book.active
    sheet["A1"] = "Survey 2020"
    sheet.merge_cells("A1:C1")
    sheet.append([])
    sheet.append(["a", "group", "label"])
    for i in range(30):
        sheet.append([i / 7, None if i == 1 else f"g{i % 3}", "xy"[i % 2]])
    sheet.merge_cells("B4:B5")  # the first two data rows: one group
    book.save(repo / "data" / "local" / "titled.xlsx")
    read, _ = load_local_table("titled", SourceConfig(path="data/local/titled.xlsx", target="label", header_row=3),
                               repo)
    assert list(read.columns) == ["a", "group", "class"] and len(read) == 30
    assert list(read["group"].astype(str)[:3]) == ["g0", "g0", "g2"]
    assert "1 merged range(s) of cells (B4:B5)" in capsys.readouterr().err
    for bad, message in ((0, r"'sources.mine.header_row' must be >= 1"),
                         (2, r"'sources.mine.header_row' applies only to a CSV or Excel file")):
        edit_params(repo, lambda p: p["sources"].update(
            mine={"path": "data/local/titled.csv" if bad == 0 else "data/local/x.parquet", "target": "label",
                  "header_row": bad}))
        with pytest.raises(ConfigError, match=message):
            load_params(repo / "params.yaml")


def test_an_excel_sheet_with_a_name_twice_is_a_named_error(repo, monkeypatch, capsys):
    frame = pd.DataFrame([[i % 7, i % 5, "xy"[i % 2]] for i in range(30)], columns=["a", "a", "label"])
    frame.to_excel(repo / "data" / "local" / "bad.xlsx", index=False)
    assert_named_and_untouched(repo, {"path": "data/local/bad.xlsx", "target": "label"},
                               ["duplicate column names: 'a' (columns 1, 2)"], monkeypatch, capsys)


@pytest.mark.parametrize("content, source, fragments", [
    (b"@RELATION x\n@ATTRIBUTE a FOO\n@ATTRIBUTE label {x,y}\n@DATA\n1,x\n", {},
     ["dataset 'mine' (data/local/bad.arff): cannot be read as ARFF: Bad @ATTRIBUTE type, at line 2."]),
    (b"@RELATION x\n@ATTRIBUTE a NUMERIC\n@ATTRIBUTE label {x,y}\n@DATA\n1,x,3\n", {},
     ["cannot be read as ARFF: "]),
    (b"@RELATION x\n@ATTRIBUTE a STRING\n@ATTRIBUTE label {x,y}\n@DATA\ncaf\xe9,x\n", {},
     ["not UTF-8 text (invalid continuation byte 0xe9 at byte 64, line 5)", "set encoding: cp1252"]),
], ids=["an unknown attribute type", "a row longer than the attributes", "not UTF-8"])
def test_an_arff_file_that_cannot_be_read_is_a_named_error(repo, monkeypatch, capsys, content, source, fragments):
    write_local(repo, "bad.arff", content)
    assert_named_and_untouched(repo, {"path": "data/local/bad.arff", "target": "label", **source}, fragments,
                               monkeypatch, capsys)


def test_an_arff_file_in_another_encoding_is_read_with_the_option(tmp_path):
    from seba.core.config import parse_params, read_params_file
    from seba.core.own_table import load_local_table

    (tmp_path / "data" / "local").mkdir(parents=True)
    rows = "".join(f"{i % 7},{'Café Thé'.split()[i % 2]},{'xy'[i % 2]}\n" for i in range(30))
    (tmp_path / "data" / "local" / "t.arff").write_bytes(
        ("@RELATION x\n@ATTRIBUTE a NUMERIC\n@ATTRIBUTE b {Café,Thé}\n@ATTRIBUTE label {x,y}\n@DATA\n" + rows)
        .encode("cp1252"))
    raw = read_params_file(ROOT / "params.yaml")
    raw["sources"]["t"] = {"path": "data/local/t.arff", "target": "label", "encoding": "cp1252"}
    frame, _ = load_local_table("t", parse_params(raw).sources["t"], tmp_path)
    assert list(frame["b"].cat.categories) == ["Café", "Thé"] and frame["a"].dtype == "float64"


def test_an_excel_sheet_keeps_text_cells_as_written(repo, capsys):
    """A sheet's cells reach the rules as the workbook holds them: a zip code written as text
    ('00027') keeps its leading zeros (pandas' default read it as the number 27 before any rule
    saw it: no notice, and the `categorical` setting kept '27'); text cells marked missing ('n/a',
    'NA') are counted as in a CSV (pandas dropped them without a count), the target's too. Number,
    date and boolean cells keep their own types, empty cells are missing."""
    from openpyxl import Workbook

    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    order = np.random.default_rng(3).permutation(40)
    book = Workbook()
    sheet = book.active
    sheet.append(["zip", "size", "when", "flag", "label"])
    for i, v in enumerate(order):
        sheet.append([f"{int(v):05d}", "n/a" if i % 9 == 0 else float(v) * 1.5,
                      pd.Timestamp("2024-01-01") + pd.Timedelta(days=int(v)), None if i == 3 else bool(v % 2),
                      "NA" if i % 10 == 0 else "xy"[i % 2]])
    book.save(repo / "data" / "local" / "codes.xlsx")

    frame, info = load_local_table("codes", SourceConfig(path="data/local/codes.xlsx", target="label",
                                                         categorical=["zip"]), repo)
    err = capsys.readouterr().err
    assert set(frame["zip"].cat.categories) == {f"{int(v):05d}" for i, v in enumerate(order) if i % 10}
    assert "column 'size': 4 cell(s) marked missing ('n/a' x4)" in err
    assert "dropped 4 rows without a target (data rows " in err
    assert "4 of them for a missing-value mark ('NA' x4)" in err
    records = {r["column"]: r for r in info["columns"]}
    assert records["size"]["kind"] == "numeric" and records["size"]["converted"] == {"n/a": 4}
    assert records["when"]["read_as"] == "datetimes" and records["flag"]["read_as"] == "text"  # bools beside a gap
    assert frame["flag"].isna().sum() == 1 and set(frame["flag"].cat.categories) == {"False", "True"}

    frame, info = load_local_table("codes", SourceConfig(path="data/local/codes.xlsx", target="label"), repo)
    err = capsys.readouterr().err
    padded = sum(1 for i, v in enumerate(order) if i % 10 and v < 10000)
    assert f"column 'zip': {padded} number(s) written with leading zeros" in err
    assert {r["column"]: r for r in info["columns"]}["zip"]["leading_zeros"] == padded


def test_an_excel_column_of_formulas_without_stored_values_is_a_named_error(repo, monkeypatch, capsys):
    """A workbook written by a program (openpyxl here) stores its formulas without their values,
    which only a spreadsheet application computes: such a column reads as empty cells and was
    dropped as all missing with a notice. It is an error naming the column, a formula and the fix;
    the same workbook with the values stored (as a spreadsheet application saves it) reads them,
    and an empty column without formulas is still dropped."""
    import re
    import zipfile

    from openpyxl import Workbook

    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    book = Workbook()
    sheet = book.active
    sheet.append(["a", "b", "double", "blank", "label"])
    for i in range(30):
        sheet.append([i * 7 % 30, i % 5, f"=A{i + 2}*2", None, "xy"[i % 2]])
    path = repo / "data" / "local" / "formulas.xlsx"
    book.save(path)
    assert_named_and_untouched(repo, {"path": "data/local/formulas.xlsx", "target": "label"},
                               ["column(s) 'double' (=A2*2 in row 2) hold formulas whose values the workbook does not "
                                "store", "open and save it in Excel or LibreOffice"], monkeypatch, capsys)

    with zipfile.ZipFile(path) as archive:  # the values stored, as a spreadsheet application saves them
        parts = {name: archive.read(name) for name in archive.namelist()}
    sheet_xml = parts["xl/worksheets/sheet1.xml"].decode()
    parts["xl/worksheets/sheet1.xml"] = re.sub(r"<f>A(\d+)\*2</f><v ?/>",
                                               lambda m: f"<f>A{m[1]}*2</f><v>{(int(m[1]) - 2) * 7 % 30 * 2}</v>",
                                               sheet_xml).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    frame, info = load_local_table("formulas", SourceConfig(path="data/local/formulas.xlsx", target="label"), repo)
    assert frame["double"].tolist() == (frame["a"] * 2).tolist()
    assert {r["column"]: r for r in info["columns"]}["blank"]["reason"] == "all missing"
    assert "dropped all-missing column 'blank'" in capsys.readouterr().err


def test_merged_cells_of_an_excel_sheet_hold_their_value_in_every_cell(repo, capsys):
    """A sheet's merged range (a group name over five rows, a value over two columns, the class
    over two rows) shows its value in each of its cells; openpyxl reads it in the first cell and
    the others empty, so four rows of five lost their group and a row its class without a word.
    Each cell of a merged data range now holds the value, with a notice naming the ranges and the
    cells filled per column; a range in the header row is left as it is."""
    from openpyxl import Workbook

    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    book = Workbook()
    sheet = book.active
    sheet.append(["group", "x", "y", "note", "label"])
    for i in range(40):
        sheet.append([f"G{i // 5}" if i % 5 == 0 else None, i * 0.37 % 3, i * 7 % 9, "n" if i % 3 else "m",
                      "ab"[i % 2]])
    for g in range(8):
        sheet.merge_cells(start_row=2 + 5 * g, start_column=1, end_row=6 + 5 * g, end_column=1)
    sheet["C4"] = None
    sheet.merge_cells("B4:C4")  # a value over two columns: y of data row 3 becomes x's value
    sheet["E11"] = None
    sheet.merge_cells("E10:E11")  # the class over two rows
    sheet.merge_cells("D1:D1")  # a range of one cell, in the header row
    book.save(repo / "data" / "local" / "merged.xlsx")

    frame, info = load_local_table("merged", SourceConfig(path="data/local/merged.xlsx", target="label"), repo)
    err = capsys.readouterr().err
    assert ("10 merged range(s) of cells (A2:A6, B4:C4, A7:A11, E10:E11, A12:A16, ...) read as their first cell's "
            "value in each cell, as the sheet shows them (cells so filled: 'group' 32, 'y' 1, 'label' 1)") in err
    assert frame["group"].tolist() == [f"G{i // 5}" for i in range(40)]
    assert frame["y"][2] == frame["x"][2] and frame["y"].dtype == "float64"
    assert len(frame) == 40 and frame["class"][9] == frame["class"][8] == "a" and info["dropped_rows"] == 0


def test_spreadsheet_formula_errors_are_missing_cells_counted_per_column(repo, capsys):
    """A cell whose formula failed shows '#DIV/0!', '#VALUE!', '#REF!' (LibreOffice: 'Err:502').
    In a CSV a spreadsheet saved, such cells made a column of numbers categorical (under 95 %
    numbers) with every value a level; in a workbook pandas reads them as empty cells, without a
    count. Both now read them as missing cells with a notice per column naming the errors (the
    schema counts them), and a target cell that is one as a row dropped with a warning; a sheet's
    errors are found in its XML, read in chunks, across the chunks' edges."""
    from openpyxl import Workbook

    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    rng = np.random.default_rng(0)
    x = rng.normal(0, 100, 200).round(2)
    cells = [("#DIV/0!" if i % 12 == 0 else "#VALUE!" if i % 25 == 0 else "Err:502" if i == 7 else f"{v:.2f}")
             for i, v in enumerate(x)]
    frame = pd.DataFrame({"ratio": cells, "y": rng.normal(size=200), "label": ["ab"[i % 2] for i in range(200)]})
    frame.loc[3, "label"] = "#REF!"
    read, cols = _read_own(repo, "errs", frame)
    err = capsys.readouterr().err
    assert cols["ratio"]["kind"] == "numeric" and read["ratio"].isna().sum() == 17 + 7 + 1
    assert "column 'ratio': 25 cell(s) hold a spreadsheet formula's error ('#DIV/0!' x17, '#VALUE!' x7, " \
           "'Err:502' x1), read as missing" in err
    assert "WARNING target column 'label': 1 cell(s) hold a spreadsheet formula's error ('#REF!' x1)" in err
    assert len(read) == 199

    book = Workbook()
    sheet = book.active
    sheet.append(["ratio", "code", "note", "label"])
    n = 14000  # about 1.5 MB of sheet XML: its 1 MiB chunks cut rows
    for i in range(n):
        sheet.append(["#DIV/0!" if i % 97 == 5 else i * 0.5, "#N/A" if i % 1000 == 1 else i % 7,
                      "x" if i % 3 else "y", "#NAME?" if i == 10 else "ab"[i % 2]])
    sheet["C3"] = 'see t="e" <v>#REF!</v>'  # a text that reads like an error cell's XML (written as it is there)
    book.save(repo / "data" / "local" / "errs.xlsx")
    read, info = load_local_table("errs", SourceConfig(path="data/local/errs.xlsx", target="label"), repo)
    err = capsys.readouterr().err
    cols = {r["column"]: r for r in info["columns"]}
    divided = sum(1 for i in range(n) if i % 97 == 5)
    assert cols["ratio"]["converted"] == {"#DIV/0!": divided} and cols["code"]["converted"] == {"#N/A": 14}
    assert f"column 'ratio': {divided} cell(s) hold a spreadsheet formula's error ('#DIV/0!' x{divided})" in err
    assert "target column 'label': 1 cell(s) hold a spreadsheet formula's error ('#NAME?' x1)" in err
    assert len(read) == n - 1 and int(read["ratio"].isna().sum()) == divided and cols["ratio"]["kind"] == "numeric"
    assert cols["note"]["converted"] == {} and 'see t="e" <v>#REF!</v>' in set(read["note"].astype(str))


def test_formulas_a_workbook_stores_without_their_values_are_warned_per_column(repo, capsys):
    """Rows a program appended with formulas (openpyxl stores no value for them, '<v />') read as
    empty cells: a column whose every cell is so was an error, one with some such cells lost them
    without a word. Those cells are now counted in a warning naming the first one; a formula the
    workbook stores with its value, and a computed empty text ('<v></v>'), are values."""
    import zipfile

    from openpyxl import Workbook

    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    book = Workbook()
    sheet = book.active
    sheet.append(["a", "total", "label"])
    for i in range(60):
        sheet.append([i * 1.5, f"=A{i + 2}*3" if i >= 50 else i * 4.5, "#NAME?" if i == 3 else "ab"[i % 2]])
    path = repo / "data" / "local" / "calc.xlsx"
    book.save(path)
    with zipfile.ZipFile(path) as archive:
        parts = {name: archive.read(name) for name in archive.namelist()}
    xml = parts["xl/worksheets/sheet1.xml"]
    assert xml.count(b"<v />") == 10  # how openpyxl writes a formula's cell
    for row in (52, 53):  # two formulas stored with their values, as a spreadsheet application saves them
        xml = xml.replace(b"<f>A%d*3</f><v />" % row, b"<f>A%d*3</f><v>%g</v>" % (row, (row - 2) * 4.5))
    parts["xl/worksheets/sheet1.xml"] = xml.replace(b"<f>A61*3</f><v />", b"<f>A61*3</f><v></v>")
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in parts.items():
            archive.writestr(name, data)

    frame, info = load_local_table("calc", SourceConfig(path="data/local/calc.xlsx", target="label"), repo)
    err = capsys.readouterr().err
    total = {r["column"]: r for r in info["columns"]}["total"]
    assert ("WARNING column 'total': 7 cell(s) hold a formula whose value the workbook does not store (the first: "
            "B54), read as missing") in err
    assert total["converted"] == {"formula without a stored value": 7} and total["missing"] == 8
    assert frame["total"].iloc[49:51].tolist() == [225.0, 229.5]  # data rows 51, 52 (row 3 dropped)
    assert "WARNING target column 'label': 1 cell(s) hold a spreadsheet formula's error ('#NAME?' x1)" in err


def test_an_excel_file_without_openpyxl_is_a_named_error(repo, monkeypatch, capsys):
    workbook(repo)
    monkeypatch.setitem(sys.modules, "openpyxl", None)  # not installed: `import openpyxl` raises ImportError
    assert_named_and_untouched(repo, {"path": "data/local/bad.xlsx", "target": "label", "sheet": "data"},
                               ["reading an Excel file needs the openpyxl package: pip install -e \".[excel]\" (or "
                                "pip install openpyxl), or save the sheet as CSV"], monkeypatch, capsys)


@pytest.mark.parametrize("case, name, content, fragments", COMPRESSED_CASES, ids=[c[0] for c in COMPRESSED_CASES])
def test_a_compressed_csv_that_cannot_be_read_is_a_named_error(repo, monkeypatch, capsys, case, name, content,
                                                               fragments):
    write_local(repo, name, content)
    assert_named_and_untouched(repo, {"path": f"data/local/{name}", "target": "label"}, fragments, monkeypatch, capsys)


@pytest.mark.parametrize("case, content, source, fragments", LOCAL_CASES, ids=[c[0] for c in LOCAL_CASES])
def test_bad_local_tables_are_named_and_touch_nothing(repo, monkeypatch, capsys, case, content, source, fragments):
    if content is not None:
        write_local(repo, "bad.csv", content)
    # fetch does not know about shots; split does
    assert_named_and_untouched(repo, source, fragments, monkeypatch, capsys,
                               fetch_fails=case != "class too small for the shot")


def test_a_local_table_missing_from_a_queued_experiments_copy_says_to_stage_it(tmp_path):
    """A queued or temporary DVC experiment runs in a copy of the repository under .dvc/tmp/exps
    that holds only the files git or DVC tracks: a table left untracked in data/local/ was 'file not
    found' there, with no word of why. The error says to stage it; in the workspace it does not."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    source = SourceConfig(path="data/local/mine.csv", target="label")
    copy = tmp_path / "repo" / ".dvc" / "tmp" / "exps" / "tmpab12cd"
    for root in (copy, tmp_path / "workspace"):
        (root / "data" / "local").mkdir(parents=True)
        with pytest.raises(DataError) as raised:
            load_local_table("mine", source, root)
        expected = "dataset 'mine' (data/local/mine.csv): file not found"
        if root == copy:
            expected += (": a queued or temporary experiment runs in a copy of the repository that holds only the "
                         "files git or DVC tracks; in the workspace, `git add data/local/mine.csv` (staged is "
                         "enough), then queue the experiment again")
        assert str(raised.value) == expected


def test_an_awkward_local_table_is_read_and_encoded(repo, monkeypatch, capsys):
    rng = np.random.default_rng(1)
    n = 90
    frame = pd.DataFrame({
        "height": rng.normal(170, 10, n),
        "code": rng.integers(0, 3, n),  # integer codes, declared categorical below
        "colour": rng.choice(["red", "green", None], n),
        "constant": 1.0,
        "empty": np.nan,
        "id_like": [f"id{i}" for i in range(n)],  # high cardinality
        "class": rng.normal(size=n),  # a feature that happens to be called like the label column
        "target": rng.choice(["a", "b", "c"], n),
    })
    frame.loc[::7, "height"] = np.nan
    frame.loc[5, "target"] = None
    write_local(repo, "awkward.csv", frame)
    edit_params(repo, add_dataset("mine", {"path": "data/local/awkward.csv", "target": "target",
                                           "categorical": ["code"], "max_categories": 10}))
    code, output = run_stage_script("fetch", ["--dataset", "mine"], monkeypatch, capsys)
    assert code == 0, output
    assert "dropped 1 row without a target (data row " in output
    assert "dropped all-missing column 'empty'" in output
    assert "column 'id_like' has 89 levels > max_categories 10" in output
    raw = pd.read_parquet(repo / "data" / "raw" / "mine.parquet")
    assert len(raw) == n - 1 and "empty" not in raw.columns and "class_feature" in raw.columns
    assert raw["id_like"].nunique() == 10 and "other" in set(raw["id_like"])
    table = encode_table(raw)
    assert list(table.columns) == ["height", "code", "colour", "constant", "id_like", "class_feature"]
    assert sorted(set(table.groups)) == list(range(6))  # dense groups, one per kept column
    assert table.numeric.sum() == 3  # height, constant, class_feature
    assert table.X[:, table.groups == 1].shape[1] == 3  # the integer codes became a one-hot block
    colour = table.X[:, table.groups == 2]
    assert colour.shape[1] == 2 and (colour.sum(1) == 0).any()  # missing colour: all-zero block
    split = make_split(table.y, 0, 1 / 6, 0.1)
    X = scale(table, split.train)
    assert np.isfinite(X).all()
    assert np.allclose(X[:, table.groups == 3], 0.0)  # constant: centred, not divided


# ----------------------------------------------------------------------------- your own table's quirks
#
# A diabetes-sized table whose label is `x1 > 0`: with the quirk in x1, a silent loss of x1 gives
# chance-level accuracy (50 %); a quirk that is recovered leaves the accuracy of the table without it.


@pytest.fixture()
def no_mlflow(monkeypatch):
    """Stages without their MLflow records (tracking is tested apart)."""
    from seba.core.tracking import Tracker

    monkeypatch.setattr(Tracker, "_start", lambda self: None)


def signal_table(n: int = 768) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(n, 4)).round(3), columns=["x1", "x2", "x3", "x4"])
    frame["label"] = np.where(frame["x1"] > 0, "pos", "neg")
    return frame


def few_shot_accuracy(repo: Path, name: str, monkeypatch, capsys) -> tuple[float, str]:
    """fetch, preprocess and split (the stage scripts), then a tiny SeBA encoder (3 epochs) and
    20 cosine-prototype episodes per shot: the mean ensemble accuracy over shots, and the stages' log."""
    from seba.core.config import EvaluateConfig
    from seba.core.data import load_split
    from seba.evaluate import evaluate_members, summarise
    from seba.pretrain import encode

    log = ""
    for stage in ("fetch", "preprocess", "split"):
        code, output = run_stage_script(stage, ["--dataset", name], monkeypatch, capsys)
        log += output
        assert code == 0, log
    table = EncodedTable.load(repo / "data" / "processed" / f"{name}.npz")
    split = load_split(repo / "data" / "splits" / f"{name}.npz", 0)
    X = scale(table, split.train)
    assert np.isfinite(X).all()
    cfg = PretrainConfig(encoder_hidden=64, encoder_out=32, projector_hidden=64, projector_out=32,
                         max_epochs=3, patience=3, progress_seconds=1e9)
    result = pretrain_encoder(X[split.train], X[split.val], table.groups, 0.2, 0, cfg, torch.device("cpu"))
    features = encode(result.encoder_state, {"in_features": X.shape[1], "encoder_hidden": 64, "encoder_out": 32,
                                             "encoder_out_relu": True}, X[split.test], torch.device("cpu"))
    episodes = evaluate_members(features[None], ["r0.2"], table.y[split.test], len(table.classes), 0,
                                EvaluateConfig(episodes=20, prototype_shots=(1, 5, 10)), name)
    summary = summarise(episodes)
    return float(summary[summary["member"] == "ensemble"]["accuracy"].mean()), log


_CLEAN_ACCURACY: list[float] = []


def clean_accuracy(repo: Path, monkeypatch, capsys) -> float:
    """The accuracy of the table without any quirk (computed once)."""
    if not _CLEAN_ACCURACY:
        signal_table().to_csv(repo / "data" / "local" / "clean.csv", index=False)
        edit_params(repo, add_dataset("clean", {"path": "data/local/clean.csv", "target": "label"}))
        accuracy, log = few_shot_accuracy(repo, "clean", monkeypatch, capsys)
        assert "0 column(s) lost information" in log
        _CLEAN_ACCURACY.append(accuracy)
    return _CLEAN_ACCURACY[0]


def x1_cells(cells: dict):
    """The signal table as a CSV with some x1 cells written as given (row -> text)."""
    def make(repo: Path) -> dict:
        frame = signal_table()
        frame["x1"] = frame["x1"].astype(object)
        for row, text in cells.items():
            frame.loc[row, "x1"] = text
        frame.to_csv(repo / "data" / "local" / "mine.csv", index=False)
        return {"path": "data/local/mine.csv", "target": "label"}
    return make


def written(fmt, columns=("x1",), **source):
    """The signal table as a CSV with the numbers of ``columns`` written with ``fmt`` (values unchanged)."""
    def make(repo: Path) -> dict:
        frame = signal_table()
        for column in columns:
            frame[column] = [fmt(v) for v in frame[column]]
        frame.to_csv(repo / "data" / "local" / "mine.csv", index=False, sep=source.get("delimiter", ","),
                     encoding=source.get("encoding", "utf-8"))
        return {"path": "data/local/mine.csv", "target": "label", **source}
    return make


def with_index(repo: Path) -> dict:
    signal_table().sample(frac=1.0, random_state=0).sort_index().to_csv(repo / "data" / "local" / "mine.csv")
    return {"path": "data/local/mine.csv", "target": "label"}


def with_row_id(step: int = 1):
    """An id column 1001, 1001 + step, ... (with step > 1: also a feature the table is sorted by)."""
    def make(repo: Path) -> dict:
        frame = signal_table()
        frame.insert(0, "id", np.arange(1001, 1001 + step * len(frame), step))
        frame.to_csv(repo / "data" / "local" / "mine.csv", index=False)
        return {"path": "data/local/mine.csv", "target": "label"}
    return make


def compressed(ending: str):
    """The signal table as a CSV (a TSV: tab-separated) compressed as its name's ending says
    (pandas infers it)."""
    def make(repo: Path) -> dict:
        signal_table().to_csv(repo / "data" / "local" / f"mine{ending}", index=False,
                              sep="\t" if ending.startswith(".tsv") else ",")
        return {"path": f"data/local/mine{ending}", "target": "label"}
    return make


def macos_zip(repo: Path) -> dict:
    """The signal table in a zip archive with the resource-fork entry that macOS's Compress adds."""
    data = zipped({"mine.csv": signal_table().to_csv(index=False).encode(), "__MACOSX/._mine.csv": b"\x00\x05\x16\x07"})
    (repo / "data" / "local" / "mine.csv.zip").write_bytes(data)
    return {"path": "data/local/mine.csv.zip", "target": "label"}


def excel_sheet(repo: Path) -> dict:
    """The signal table on the second sheet of a workbook, x4 written as dates and x3 holding a
    word in one cell (a column of mixed cells)."""
    frame = signal_table()
    frame["x4"] = pd.Timestamp("2024-03-01") + pd.to_timedelta((frame["x4"] * 100).round(), unit="D")
    frame["x3"] = frame["x3"].astype(object)
    frame.loc[7, "x3"] = "oops"
    with pd.ExcelWriter(repo / "data" / "local" / "mine.xlsx") as writer:
        pd.DataFrame({"note": ["the table is on the next sheet"]}).to_excel(writer, sheet_name="notes", index=False)
        frame.to_excel(writer, sheet_name="table", index=False)
    return {"path": "data/local/mine.xlsx", "target": "label", "sheet": "table"}


def arff_table(repo: Path) -> dict:
    """The signal table as a sparse-free ARFF file: x1..x3 NUMERIC, x4 a DATE attribute, a
    missing x2 ('?'), the label nominal."""
    frame = signal_table()
    days = (pd.Timestamp("2024-03-01") + pd.to_timedelta((frame["x4"] * 100).round(), unit="D")).dt.strftime("%Y-%m-%d")
    lines = ["% the signal table", "@RELATION signal", "@ATTRIBUTE x1 NUMERIC", "@ATTRIBUTE x2 REAL",
             "@ATTRIBUTE x3 NUMERIC", '@attribute x4 date "yyyy-MM-dd"',
             "@ATTRIBUTE label {neg, pos}", "@DATA"]
    for i, row in frame.iterrows():
        x2 = "?" if i == 5 else row["x2"]
        lines.append(f"{row['x1']},{x2},{row['x3']},{days[i]},{row['label']}")
    (repo / "data" / "local" / "mine.arff").write_text("\n".join(lines) + "\n")
    return {"path": "data/local/mine.arff", "target": "label"}


def trailing_comma(repo: Path) -> dict:
    text = signal_table().to_csv(index=False).splitlines()
    (repo / "data" / "local" / "mine.csv").write_text("\n".join([text[0]] + [line + "," for line in text[1:]]) + "\n")
    return {"path": "data/local/mine.csv", "target": "label"}


def dated(fmt: str, column: str = "x1", **source):
    """The signal table as a CSV with ``column`` written as dates in ``fmt``, (column x 100) days after a day."""
    def make(repo: Path) -> dict:
        frame = signal_table()
        days = pd.to_timedelta((frame[column] * 100).round(), unit="D")
        frame[column] = (pd.Timestamp("2024-03-01") + days).dt.strftime(fmt)
        frame.to_csv(repo / "data" / "local" / "mine.csv", index=False)
        return {"path": "data/local/mine.csv", "target": "label", **source}
    return make


def early_days(repo: Path) -> dict:
    """The signal table with x4 written as dates whose day and month are both at most 12."""
    frame = signal_table()
    frame["x4"] = [f"{1 + i % 12:02d}/{1 + i // 12 % 12:02d}/2024" for i in range(len(frame))]
    frame.to_csv(repo / "data" / "local" / "mine.csv", index=False)
    return {"path": "data/local/mine.csv", "target": "label"}


def indexed_parquet(repo: Path) -> dict:
    signal_table().set_index("x2").to_parquet(repo / "data" / "local" / "mine.parquet")
    return {"path": "data/local/mine.parquet", "target": "label"}


def parquet_times(repo: Path) -> dict:
    """x1 as timestamps (x1 days after a day), x2 as durations (x2 hours), x3 as timestamps with a time zone."""
    frame = signal_table()
    frame["x1"] = pd.Timestamp("2024-03-01") + pd.to_timedelta(frame["x1"], unit="D")
    frame["x2"] = pd.to_timedelta(frame["x2"], unit="h")
    frame["x3"] = pd.Timestamp("2024-03-01", tz="Europe/Paris") + pd.to_timedelta(frame["x3"], unit="D")
    frame.to_parquet(repo / "data" / "local" / "mine.parquet")
    return {"path": "data/local/mine.parquet", "target": "label"}


def class_columns(repo: Path) -> dict:
    frame = signal_table()
    rng = np.random.default_rng(3)
    frame["class"], frame["class_feature"] = rng.normal(size=len(frame)), rng.normal(size=len(frame))
    frame.to_csv(repo / "data" / "local" / "mine.csv", index=False)
    return {"path": "data/local/mine.csv", "target": "label"}


def parquet_with_inf(repo: Path) -> dict:
    frame = signal_table()
    frame.loc[[7, 300], "x1"] = [np.inf, -np.inf]
    frame.to_parquet(repo / "data" / "local" / "mine.parquet")
    return {"path": "data/local/mine.parquet", "target": "label"}


def symlink_inside(repo: Path) -> dict:
    (repo / "data" / "tables").mkdir()
    signal_table().to_csv(repo / "data" / "tables" / "real.csv", index=False)
    (repo / "data" / "local" / "mine.csv").symlink_to(Path("..") / "tables" / "real.csv")
    return {"path": "data/local/mine.csv", "target": "label"}


# (case id, writes the table and returns its source, fragments of the log, (column, schema entry subset))
RECOVERABLE_CASES = [
    ("one inf cell", x1_cells({5: "inf"}),
     ["WARNING column 'x1': 1 infinite value(s) read as missing (row 5)", "1 column(s) lost information"],
     ("x1", {"kind": "numeric", "missing": 1, "converted_to_missing": {"infinite": 1}})),
    ("-inf and Infinity cells", x1_cells({5: "-inf", 9: "Infinity"}),
     ["column 'x1': 2 infinite value(s) read as missing (rows 5, 9)"],
     ("x1", {"kind": "numeric", "missing": 2})),
    ("two ? cells", x1_cells({3: "?", 9: "?"}), ["column 'x1': 2 cell(s) marked missing ('?' x2)"],
     ("x1", {"kind": "numeric", "missing": 2, "converted_to_missing": {"?": 2}})),
    ("n/a and - cells", x1_cells({3: "n/a", 9: "-"}),
     ["column 'x1': 1 cell(s) marked missing ('n/a' x1)",
      "WARNING column 'x1' is numeric (99.9% of its cells are numbers): 1 non-numeric cell(s) read as missing "
      "('-' x1)"],
     ("x1", {"kind": "numeric", "missing": 2, "converted_to_missing": {"n/a": 1, "-": 1}})),
    ("a few stray words", x1_cells({3: "oops", 4: "oops", 9: "see notes"}),
     ["3 non-numeric cell(s) read as missing ('oops' x2, 'see notes' x1)"],
     ("x1", {"kind": "numeric", "missing": 3})),
    ("a value beyond float32", x1_cells({5: "1e300"}),
     ["column 'x1': 1 value(s) beyond the float32 range (largest magnitude 1e+300 > 3.4e+38) read as missing (row 5)"],
     ("x1", {"kind": "numeric", "missing": 1, "converted_to_missing": {"out of range": 1}})),
    ("thousands separators, read with the option", written(lambda v: f"{v * 1000:,.1f}", thousands=","),
     ["4 numeric, 0 categorical, 0 dropped", "0 column(s) lost information"],
     ("x1", {"kind": "numeric", "missing": 0})),
    ("decimal commas, read with the option",
     written(lambda v: f"{v:.3f}".replace(".", ","), ("x1", "x2", "x3", "x4"), decimal=","),
     ["4 numeric, 0 categorical, 0 dropped"], ("x1", {"kind": "numeric", "missing": 0})),
    ("semicolons and decimal commas, read with the options",
     written(lambda v: f"{v:.3f}".replace(".", ","), ("x1", "x2", "x3", "x4"), delimiter=";", decimal=","),
     ["4 numeric, 0 categorical, 0 dropped", "0 column(s) lost information"], ("x1", {"kind": "numeric", "missing": 0})),
    ("a Windows-1252 file with euros, semicolons and decimal commas, read with the options",
     written(lambda v: f"{v:.3f} €".replace(".", ","), ("x1", "x2", "x3", "x4"), delimiter=";", decimal=",", encoding="cp1252"),
     ["column 'x1': numbers written with '€' (e.g. '", "4 numeric, 0 categorical, 0 dropped"],
     ("x1", {"kind": "numeric", "missing": 0, "unit": "€"})),
    ("tab-separated, read with the option", written(lambda v: f"{v:.3f}", delimiter="\t"),
     ["4 numeric, 0 categorical, 0 dropped", "0 column(s) lost information"], ("x1", {"kind": "numeric", "missing": 0})),
    ("a gzip-compressed CSV", compressed(".csv.gz"), ["768 rows x 4 features from local", "0 column(s) lost information"],
     ("x1", {"kind": "numeric", "missing": 0})),
    ("an xz-compressed CSV", compressed(".csv.xz"), ["768 rows x 4 features from local"],
     ("x1", {"kind": "numeric", "missing": 0})),
    ("a TSV file, tabs without the option", compressed(".tsv"), ["768 rows x 4 features from local"],
     ("x1", {"kind": "numeric", "missing": 0})),
    ("a gzip-compressed TSV file", compressed(".tsv.gz"), ["768 rows x 4 features from local"],
     ("x1", {"kind": "numeric", "missing": 0})),
    ("a zip archive made on macOS", macos_zip, ["768 rows x 4 features from local"],
     ("x1", {"kind": "numeric", "missing": 0})),
    ("a sheet of an Excel workbook", excel_sheet,
     ["768 rows x 4 features from local", "column 'x4': datetimes read as numbers",
      "column 'x3' is numeric (99.9% of its cells are numbers): 1 non-numeric cell(s) read as missing ('oops' x1)"],
     ("x1", {"kind": "numeric", "read_as": "numbers", "missing": 0})),
    ("an ARFF file with a DATE attribute", arff_table,
     ["768 rows x 4 features from local", "column 'x4': dates read as numbers, days since the column's earliest"],
     ("x2", {"kind": "numeric", "read_as": "numbers", "missing": 1})),
    ("a pandas index written with the table", with_index,
     ["column 'Unnamed: 0' dropped: a row index written into the file", "'sources.mine.numeric'",
      "1 dropped ('Unnamed: 0' (row index))"], ("Unnamed: 0", {"kind": "dropped", "reason": "row index"})),
    ("a strictly increasing integer id", with_row_id(),
     ["column 'id' dropped: a row id (integers increasing by 1 from row to row, 1001 to 1768)"],
     ("id", {"kind": "dropped", "reason": "row id"})),
    ("an id with gaps, or a feature the table is sorted by", with_row_id(step=3),
     ["WARNING column 'id' dropped: a row id (integers increasing strictly from row to row, with gaps, 1001 to "
      "3302), or a feature the table is sorted by; list it in 'sources.mine.numeric'", "1 column(s) lost information"],
     ("id", {"kind": "dropped", "reason": "row id"})),
    ("a delimiter ending every row", trailing_comma,
     ["every data row ends in a delimiter after its last field; read without it", "0 column(s) lost information"],
     ("label", None)),
    ("thousands separated by no-break spaces, read with the option",
     written(lambda v: f"{v * 1000:,.1f}".replace(",", "\u202f").replace(".", ","), ("x1", "x2", "x3", "x4"),
             decimal=",", thousands=" "),
     ["4 numeric, 0 categorical, 0 dropped", "0 column(s) lost information"], ("x1", {"kind": "numeric", "missing": 0})),
    ("points that may be thousands separators", written(lambda v: f"{int(abs(v) * 3000):,}".replace(",", "."), ("x4",)),
     ["WARNING column 'x4': every '.' in it is followed by three digits, as a thousands separator would be (e.g. '",
      "set thousands: '.' and decimal: ',' in 'sources.mine'"], ("x4", {"kind": "numeric", "missing": 0})),
    ("percentages", written(lambda v: f"{v * 10:.2f}%"),
     ["column 'x1': numbers written with '%' (e.g. '", "read as the numbers without it", "0 column(s) lost information"],
     ("x1", {"kind": "numeric", "missing": 0, "unit": "%"})),
    ("a currency sign and thousands separators, read with the option",
     written(lambda v: f"-${abs(v) * 1000:,.2f}" if v < 0 else f"${v * 1000:,.2f}", thousands=","),
     ["column 'x1': numbers written with '$' (e.g. '", "0 column(s) lost information"],
     ("x1", {"kind": "numeric", "missing": 0, "unit": "$"})),
    ("accounting negatives in parentheses, with a currency sign",
     written(lambda v: f"(${abs(v) * 1000:,.2f})" if v < 0 else f"${v * 1000:,.2f}", thousands=","),
     ["number(s) written in parentheses, as accounting writes negatives (e.g. '($", "0 column(s) lost information"],
     ("x1", {"kind": "numeric", "missing": 0, "unit": "$", "negatives": "parentheses"})),
    ("a currency sign after the numbers", written(lambda v: f"{v:.3f} €", ("x1", "x2")),
     ["column 'x2': numbers written with '€' (e.g. '", "4 numeric, 0 categorical"],
     ("x2", {"kind": "numeric", "missing": 0, "unit": "€"})),
    ("ISO dates", dated("%Y-%m-%d"),
     ["column 'x1': dates read as numbers, days since the column's earliest, 2023-", "0 column(s) lost information"],
     ("x1", {"kind": "numeric", "read_as": "text", "missing": 0})),
    ("ISO timestamps with a zone", dated("%Y-%m-%dT%H:%M:%SZ"),
     ["column 'x1': dates read as numbers, days since the column's earliest, 2023-", " UTC (e.g. '"],
     ("x1", {"kind": "numeric", "missing": 0})),
    ("dates day first, read with date_order", dated("%d/%m/%Y", date_order="dmy"),
     ["column 'x1': dates (day first, date_order: dmy) read as numbers, days since the column's earliest, 2023-",
      "0 column(s) lost information"],
     ("x1", {"kind": "numeric", "read_as": "text", "missing": 0})),
    ("dates month first with two-digit years, read with date_order", dated("%m/%d/%y", date_order="mdy"),
     ["column 'x1': dates (month first, date_order: mdy) read as numbers", "0 column(s) lost information"],
     ("x1", {"kind": "numeric", "missing": 0})),
    ("dates with dots and a time, read with date_order", dated("%d.%m.%Y %H:%M", date_order="dmy"),
     ["column 'x1': dates (day first, date_order: dmy) read as numbers", "0 column(s) lost information"],
     ("x1", {"kind": "numeric", "missing": 0})),
    ("times of day", written(lambda v: f"{round((v + 5) * 3600) // 3600}:{round((v + 5) * 3600) % 3600 // 60:02d}:"
                                       f"{round((v + 5) * 3600) % 60:02d}"),
     ["column 'x1': times read as numbers, hours (e.g. '", "0 column(s) lost information"],
     ("x1", {"kind": "numeric", "missing": 0, "time_as": "hours"})),
    ("timestamps and durations in a parquet file", parquet_times,
     ["column 'x1': datetimes read as numbers, days since the column's earliest, 2024-02-2",
      "column 'x2': durations read as numbers, seconds (e.g. '", "UTC (e.g. '", "0 column(s) lost information"],
     ("x1", {"kind": "numeric", "read_as": "datetimes", "missing": 0})),
    ("a parquet file with inf and -inf", parquet_with_inf, ["2 infinite value(s) read as missing (rows 7, 300)"],
     ("x1", {"kind": "numeric", "read_as": "numbers", "missing": 2})),
    ("a symlink that stays inside the repository", symlink_inside, ["768 rows x 4 features from local"],
     ("x1", {"kind": "numeric", "missing": 0})),
]


@pytest.mark.parametrize("case, make, fragments, schema", RECOVERABLE_CASES, ids=[c[0] for c in RECOVERABLE_CASES])
def test_a_recoverable_quirk_is_reported_and_keeps_the_accuracy(repo, no_mlflow, monkeypatch, capsys, case, make,
                                                                fragments, schema):
    clean = clean_accuracy(repo, monkeypatch, capsys)
    assert clean > 65  # the table carries its signal (chance: 50)
    edit_params(repo, add_dataset("mine", make(repo)))
    accuracy, log = few_shot_accuracy(repo, "mine", monkeypatch, capsys)
    for fragment in fragments:
        assert fragment in log, (fragment, log)
    assert "Traceback" not in log
    report = json.loads((repo / "data" / "processed" / "mine.schema.json").read_text())
    column, expected = schema
    if expected is None:  # the target: every feature column is in the report
        assert report["target"] == column and [c["column"] for c in report["columns"]] == ["x1", "x2", "x3", "x4"]
    else:
        entry = next(c for c in report["columns"] if c["column"] == column)
        assert {k: entry.get(k) for k in expected} == expected, entry
    assert report["summary_line"] in log
    assert abs(accuracy - clean) <= 2.0, (accuracy, clean)


# Quirks read as the file means them that change the table's columns (their order, more of them,
# levels for numbers), so its accuracy is another table's: (case id, writes the table and returns
# its source, fragments of the log, (column, schema entry subset))
RESHAPING_CASES = [
    ("a parquet file with a column as its index", indexed_parquet,
     ["index column(s) 'x2' read as column(s)", "4 numeric, 0 categorical, 0 dropped"],
     ("x2", {"kind": "numeric", "missing": 0})),
    ("feature columns called 'class' and 'class_feature'", class_columns,
     ["feature column 'class' renamed to 'class_feature_2'", "6 numeric"],
     ("class_feature_2", {"kind": "numeric", "missing": 0})),
    ("dates written day and month", dated("%d/%m/%Y", "x4"),
     ["column 'x4' holds dates written day and month (e.g. '",
      "read as categorical text: they are day first: set date_order: dmy in 'sources.mine' to read them as numbers",
      "WARNING column 'x4' has "],
     ("x4", {"kind": "categorical", "read_as": "text"})),
    ("dates day first read month first", dated("%d/%m/%Y", "x4", date_order="mdy"),
     ["they are day first, not as date_order: mdy reads them: set date_order: dmy in 'sources.mine'"],
     ("x4", {"kind": "categorical", "read_as": "text"})),
    ("dates whose order no cell tells", early_days,
     ["column 'x4' holds dates written day and month (e.g. '01/01/2024')",
      "no cell tells the order (no day above 12): set date_order: dmy (31/01/2020) or mdy (01/31/2020) in "
      "'sources.mine'"],
     ("x4", {"kind": "categorical", "read_as": "text"})),
    ("numbers with a unit that is not read", written(lambda v: f"{v:.3f} kg", ("x4",)),
     ["column 'x4' holds numbers followed by 'kg' (e.g. '", "if 'kg' is a unit, list 'x4' in 'sources.mine.numeric' to read them as the numbers without it"],
     ("x4", {"kind": "categorical"})),
    ("levels spelled two ways", written(lambda v: "Yes" if v > 0.5 else "yes" if v > 0 else "no", ("x4",)),
     ["column 'x4': levels that are the same word in other cases ('Yes' x", "stay different levels"],
     ("x4", {"kind": "categorical", "levels": ["Yes", "no", "yes"]})),
]


@pytest.mark.parametrize("case, make, fragments, schema", RESHAPING_CASES, ids=[c[0] for c in RESHAPING_CASES])
def test_a_quirk_that_reshapes_the_table_is_reported(repo, monkeypatch, capsys, case, make, fragments, schema):
    edit_params(repo, add_dataset("mine", make(repo)))
    log = ""
    for stage in ("fetch", "preprocess"):
        code, output = run_stage_script(stage, ["--dataset", "mine"], monkeypatch, capsys)
        log += output
        assert code == 0, log
    for fragment in fragments:
        assert fragment in log, (fragment, log)
    report = json.loads((repo / "data" / "processed" / "mine.schema.json").read_text())
    column, expected = schema
    entry = next(c for c in report["columns"] if c["column"] == column)
    assert {k: entry.get(k) for k in expected} == expected, entry


def test_dates_that_date_order_misreads_get_the_order_they_show_not_numeric(repo, monkeypatch, capsys):
    """Month-first dates, three in four of them with a day up to 12, read with date_order: dmy: the
    cells that read (wrongly) as day-first are over half, but the advice is the order the cells
    show, not listing the column in `numeric` (which would keep the wrong dates)."""
    frame = signal_table()
    frame["x4"] = [f"{1 + i % 12:02d}/{1 + i % 12 if i % 4 else 13 + i % 16:02d}/2024" for i in range(len(frame))]
    frame.to_csv(repo / "data" / "local" / "mine.csv", index=False)
    edit_params(repo, add_dataset("mine", {"path": "data/local/mine.csv", "target": "label", "date_order": "dmy"}))
    code, output = run_stage_script("fetch", ["--dataset", "mine"], monkeypatch, capsys)
    assert code == 0, output
    assert "they are month first, not as date_order: dmy reads them: set date_order: mdy" in output, output
    assert "column 'x4' is read as categorical: only" not in output, output


def nested_parquet(kind: str):
    def make(repo: Path) -> dict:
        import pyarrow as pa
        import pyarrow.parquet as pq

        frame = signal_table()
        cell = {"list": [[1, 2]] * len(frame), "struct": [{"a": 1, "b": 2.0}] * len(frame)}[kind]
        table = pa.Table.from_pandas(frame, preserve_index=False).append_column("extra", pa.array(cell))
        pq.write_table(table, repo / "data" / "local" / "mine.parquet")
        return {"path": "data/local/mine.parquet", "target": "label"}
    return make


def duplicate_parquet(repo: Path) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    frame = signal_table()
    columns = [pa.array(frame[c]) for c in ("x1", "x2", "x3", "label")]
    pq.write_table(pa.Table.from_arrays(columns, names=["x1", "x2", "x1", "label"]),
                   repo / "data" / "local" / "mine.parquet")
    return {"path": "data/local/mine.parquet", "target": "label"}


def duplicate_csv(repo: Path) -> dict:
    text = signal_table().to_csv(index=False).replace("x1,x2,x3,x4,label", "x1,x2,x2 ,x4,label", 1)
    (repo / "data" / "local" / "mine.csv").write_text(text)
    return {"path": "data/local/mine.csv", "target": "label"}


def outside(repo: Path) -> Path:
    folder = repo.parent / f"{repo.name}-outside"
    folder.mkdir()
    signal_table().to_csv(folder / "mine.csv", index=False)
    return folder


def symlinked_file(repo: Path) -> dict:
    (repo / "data" / "local" / "mine.csv").symlink_to(outside(repo) / "mine.csv")
    return {"path": "data/local/mine.csv", "target": "label"}


def symlinked_folder(repo: Path) -> dict:
    (repo / "data" / "local" / "shared").symlink_to(outside(repo), target_is_directory=True)
    return {"path": "data/local/shared/mine.csv", "target": "label"}


def symlinked_local(repo: Path) -> dict:
    folder = outside(repo)
    for name in (repo / "data" / "local").iterdir():
        shutil.move(name, folder / name.name)
    (repo / "data" / "local").rmdir()
    (repo / "data" / "local").symlink_to(folder, target_is_directory=True)
    return {"path": "data/local/mine.csv", "target": "label"}


def binary_parquet(repo: Path) -> dict:
    frame = signal_table()
    frame["blob"] = [b"\xff\xfe\x00a" if i == 7 else b"ok" for i in range(len(frame))]  # not UTF-8 in row 7
    frame.to_parquet(repo / "data" / "local" / "mine.parquet")
    return {"path": "data/local/mine.parquet", "target": "label"}


UNRECOVERABLE_CASES = [
    ("binary cells that are not UTF-8 in a parquet file", binary_parquet,
     ["dataset 'mine' (data/local/mine.parquet): column 'blob' holds binary values that are not UTF-8 text "
      "(row 7: b'\\xff\\xfe\\x00a'); store it as text, or drop the column"]),
    ("thousands separators without the option", written(lambda v: f"{v * 1000:,.1f}"),
     ["column 'x1' holds numbers written like '-2,325.0'", "set thousands: ',' in 'sources.mine' to read them",
      "list 'x1' in 'sources.mine.categorical'"]),
    ("a currency sign and thousands separators without the option", written(lambda v: f"${v * 1000:,.1f}"),
     ["column 'x1' holds numbers written like '-2,325.0' (with '$', which is read)",
      "set thousands: ',' in 'sources.mine' to read them"]),
    ("thousands separators without the option in a column named in numeric",  # were all missing, dropped
     written(lambda v: f"{v * 1000:,.1f}", numeric=["x1"]),
     ["column 'x1' holds numbers written like '-2,325.0'", "set thousands: ',' in 'sources.mine' to read them",
      "(named in 'sources.mine.numeric', the column would have them missing)"]),
    ("decimal commas with a word unit in a column named in numeric",
     written(lambda v: f"{v:.3f} kg".replace(".", ","), numeric=["x1"]),
     ["column 'x1' holds numbers written like '", "(with 'kg', which is read)",
      "set decimal: ',' in 'sources.mine' to read them"]),
    ("decimal commas without the option", written(lambda v: f"{v:.3f}".replace(".", ","), ("x1", "x2", "x3", "x4")),
     ["column 'x1' holds numbers written like '", "set decimal: ',' in 'sources.mine' to read them"]),
    ("duplicate column names in a csv", duplicate_csv,
     ["dataset 'mine' (data/local/mine.csv): duplicate column names: 'x2' (columns 2, 3)"]),
    ("duplicate column names in a parquet file", duplicate_parquet,
     ["dataset 'mine' (data/local/mine.parquet): duplicate column names: 'x1' (columns 1, 3)"]),
    ("a list column in a parquet file", nested_parquet("list"),
     ["column(s) 'extra' (list<element: int64>) hold a list, struct or map in each cell", "one value per cell"]),
    ("a struct column in a parquet file", nested_parquet("struct"),
     ["column(s) 'extra' (struct<a: int64, b: double>) hold a list, struct or map"]),
    ("a symlink to a file outside the repository", symlinked_file,
     ["'sources.mine.path' goes through the symlink data/local/mine.csv -> ", "which leaves the repository"]),
    ("a symlinked folder on the path", symlinked_folder,
     ["'sources.mine.path' goes through the symlink data/local/shared -> ", "which leaves the repository"]),
    ("data/local itself a symlink", symlinked_local,
     ["'sources.mine.path' goes through the symlink data/local -> ", "which leaves the repository"]),
]


@pytest.mark.parametrize("case, make, fragments", UNRECOVERABLE_CASES, ids=[c[0] for c in UNRECOVERABLE_CASES])
def test_an_unrecoverable_quirk_is_a_named_error(repo, monkeypatch, capsys, case, make, fragments):
    assert_named_and_untouched(repo, make(repo), fragments, monkeypatch, capsys)


def test_a_mostly_numeric_text_column_is_categorical_with_a_warning_naming_the_override(repo, no_mlflow, monkeypatch,
                                                                                         capsys):
    frame = signal_table()
    frame["x1"] = frame["x1"].astype(object)
    frame.loc[::5, "x1"] = "low"  # 20 % words: categorical as inferred, numeric when the user says so
    frame.to_csv(repo / "data" / "local" / "mine.csv", index=False)
    edit_params(repo, add_dataset("mine", {"path": "data/local/mine.csv", "target": "label"}))
    code, output = run_stage_script("fetch", ["--dataset", "mine"], monkeypatch, capsys)
    assert code == 0, output
    assert ("WARNING column 'x1' is read as categorical: only 79.9% of its cells are numbers "
            "(other values: 'low' x154)") in output
    assert "list it in 'sources.mine.numeric'" in output
    assert "column 'x1' has 563 levels > max_categories 50" in output
    edit_params(repo, add_dataset("again", {"path": "data/local/mine.csv", "target": "label", "numeric": ["x1"]}))
    code, output = run_stage_script("fetch", ["--dataset", "again"], monkeypatch, capsys)
    assert code == 0, output
    assert "154 non-numeric cell(s) read as missing ('low' x154)" in output
    raw = pd.read_parquet(repo / "data" / "raw" / "again.parquet")
    assert raw["x1"].dtype == np.float64 and int(raw["x1"].isna().sum()) == 154


def test_a_declared_type_keeps_an_id_and_reads_codes_as_levels(repo, no_mlflow, monkeypatch, capsys):
    frame = signal_table()
    frame.insert(0, "year", np.arange(1200, 1200 + len(frame)))  # increasing, but a real feature here
    frame.to_csv(repo / "data" / "local" / "mine.csv", index=False)
    edit_params(repo, add_dataset("mine", {"path": "data/local/mine.csv", "target": "label", "numeric": ["year"],
                                           "categorical": ["x4"]}))
    code, output = run_stage_script("fetch", ["--dataset", "mine"], monkeypatch, capsys)
    assert code == 0 and "dropped" not in output, output
    raw = pd.read_parquet(repo / "data" / "raw" / "mine.parquet")
    assert list(raw.columns) == ["year", "x1", "x2", "x3", "x4", "class"]
    assert raw["year"].dtype == np.float64 and isinstance(raw["x4"].dtype, pd.CategoricalDtype)
    assert "column 'x4' has" in output and "max_categories 50" in output  # the forced levels are folded, loudly


def test_the_schema_report_is_written_logged_and_in_mlflow(repo, monkeypatch, capsys):
    from mlflow.tracking import MlflowClient

    from seba.core.tracking import flush

    frame = signal_table(120)
    frame["city"] = np.random.default_rng(2).choice(["north", "south", "?"], len(frame))
    frame.loc[0, "x2"] = np.inf
    frame.to_csv(repo / "data" / "local" / "mine.csv")  # with its index
    edit_params(repo, add_dataset("mine", {"path": "data/local/mine.csv", "target": "label"}))
    for stage in ("fetch", "preprocess"):
        code, output = run_stage_script(stage, ["--dataset", "mine"], monkeypatch, capsys)
        assert code == 0, output
    report = json.loads((repo / "data" / "processed" / "mine.schema.json").read_text())
    by_name = {c["column"]: c for c in report["columns"]}
    assert list(by_name) == ["Unnamed: 0", "x1", "x2", "x3", "x4", "city"]
    assert by_name["city"]["kind"] == "categorical" and by_name["city"]["levels"] == ["north", "south"]
    assert by_name["city"]["missing"] == by_name["city"]["converted_to_missing"]["?"] > 0
    assert by_name["x2"]["converted_to_missing"] == {"infinite": 1}
    assert report["summary"]["numeric"] == 4 and report["summary"]["dropped"] == 1
    assert report["warnings"] == ["column 'x2': 1 infinite value(s) read as missing (row 0)"]
    assert f"[preprocess mine] {report['summary_line']} (data/processed/mine.schema.json)" in output
    assert "[preprocess mine] WARNING column 'x2': 1 infinite value(s) read as missing (row 0)" in output
    flush(repo)  # what the `track` stage does
    client = MlflowClient(tracking_uri=f"sqlite:///{repo / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("seba").experiment_id],
                              filter_string="tags.stage = 'preprocess'")
    assert len(runs) == 1
    assert [a.path for a in client.list_artifacts(runs[0].info.run_id)] == ["mine.schema.json"]
    assert runs[0].data.metrics["schema_columns_with_warnings"] == 1
    # a benchmark table's report: every column as the source declares it, nothing converted
    code, output = run_stage_script("preprocess", ["--dataset", "diabetes"], monkeypatch, capsys)
    assert code == 0, output
    assert "8 numeric, 0 categorical, 0 dropped; 0 missing cells (0 converted to missing); 0 column(s)" in output


def test_scaling_never_produces_a_non_finite_value():
    rng = np.random.default_rng(0)
    n = 200
    X = np.stack([rng.normal(size=n), rng.normal(size=n) * 1e30, np.full(n, 7.0), rng.normal(size=n),
                  rng.normal(size=n) * 1e38], axis=1).astype(np.float32)
    X[3, 0], X[4, 0], X[5, 3] = np.inf, -np.inf, np.nan
    table = EncodedTable(X=X, y=np.arange(n) % 2, groups=np.arange(5), numeric=np.ones(5, dtype=bool),
                         columns=np.array(list("abcde")), encoded_names=np.array(list("abcde")),
                         classes=np.array(["0", "1"]))
    train = np.arange(150)
    scaled = scale(table, train)
    assert np.isfinite(scaled).all()
    assert (scaled[[3, 4], 0] == 0).all()  # infinite: missing, the train mean
    assert np.allclose(scaled[:, 2], 0.0)  # constant: centred, not divided
    for j in (0, 1, 4):  # standardised on the finite train values, whatever their magnitude
        values = scaled[train, j][np.isfinite(X[train, j])]
        assert abs(values.mean()) < 1e-3 and abs(values.std() - 1) < 1e-3, (j, values.mean(), values.std())
    expected = (X[:, 3] - np.nanmean(X[train, 3])) / np.nanstd(X[train, 3])
    np.testing.assert_allclose(scaled[:, 3], np.nan_to_num(expected, nan=0.0), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- run-time faults


def test_non_finite_loss_names_dataset_ratio_seed_and_epoch():
    X = np.random.default_rng(0).normal(size=(80, 6)).astype(np.float32)
    X[3, 2] = np.inf
    cfg = PretrainConfig(encoder_hidden=16, encoder_out=8, projector_hidden=16, projector_out=8,
                         batch_size=32, max_epochs=3, patience=2, progress_seconds=1e9)
    with pytest.raises(TrainingDiverged, match=r"\[pretrain diabetes r=0.3 seed 4 \(1/1\)\]: loss is not finite "
                                               r"at epoch 1"):
        pretrain_encoder(X[:60], X[60:], np.arange(6), 0.3, 4, cfg, torch.device("cpu"),
                         label="[pretrain diabetes r=0.3 seed 4 (1/1)]")


def test_a_stage_killed_mid_write_leaves_the_earlier_output(repo):
    """atomic_path writes to a temporary name and renames: an exception (or a kill) before the
    rename leaves the earlier file as it was and no temporary behind."""
    from seba.core.runtime import atomic_path

    target = repo / "reports" / "metrics" / "diabetes.json"
    before = _digest(target)
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(target) as tmp:
            tmp.write_text('{"half": ')
            raise KeyboardInterrupt
    assert _digest(target) == before
    assert sorted(p.name for p in target.parent.iterdir()) == ["diabetes.json"]


# ----------------------------------------------------------------------------- determinism


def test_same_seed_gives_bit_identical_splits_episodes_and_accuracies():
    from seba.core.config import EvaluateConfig
    from seba.evaluate import evaluate_members
    from seba.pretrain import encode

    frame, _ = load_snapshot(37, ROOT / "data" / "snapshot")
    table = encode_table(frame)
    cfg = PretrainConfig(encoder_hidden=64, encoder_out=32, projector_hidden=64, projector_out=32,
                         max_epochs=3, patience=2, progress_seconds=1e9)
    eval_cfg = EvaluateConfig(episodes=5)

    def run(seed):
        split = make_split(table.y, seed, 1 / 6, 0.1)
        X = scale(table, split.train)
        feats = []
        for ratio in (0.2, 0.5):
            result = pretrain_encoder(X[split.train], X[split.val], table.groups, ratio, seed, cfg, torch.device("cpu"))
            feats.append(encode(result.encoder_state, {"in_features": X.shape[1], "encoder_hidden": 64,
                                                       "encoder_out": 32, "encoder_out_relu": True},
                                X[split.test], torch.device("cpu")))
        episodes = evaluate_members(torch.stack(feats), ["r0.2", "r0.5"], table.y[split.test],
                                    len(table.classes), seed, eval_cfg, "diabetes")
        return split, episodes

    split_a, episodes_a = run(3)
    split_b, episodes_b = run(3)
    split_c, _ = run(4)
    for part in ("train", "val", "test"):
        assert np.array_equal(getattr(split_a, part), getattr(split_b, part))
    pd.testing.assert_frame_equal(episodes_a, episodes_b, check_exact=True)
    assert not np.array_equal(split_a.test, split_c.test)


def test_a_46_class_table_runs_its_episodes(repo, no_mlflow, monkeypatch, capsys):
    """Devnagari-Script (a challenging table) has 46 classes: a synthetic 46-class table goes
    through fetch, preprocess, split (every shot served) and 1/5/10-shot episodes, well above chance."""
    rng = np.random.default_rng(3)
    classes = np.repeat(np.arange(46), 80)
    centres = rng.normal(scale=3.0, size=(46, 6))
    frame = pd.DataFrame(centres[classes] + rng.normal(size=(len(classes), 6)), columns=[f"x{i}" for i in range(6)])
    frame["label"] = [f"c{c:02d}" for c in classes]
    frame.to_csv(repo / "data" / "local" / "many.csv", index=False)
    edit_params(repo, add_dataset("many", {"path": "data/local/many.csv", "target": "label"}))
    accuracy, log = few_shot_accuracy(repo, "many", monkeypatch, capsys)
    assert len(EncodedTable.load(repo / "data" / "processed" / "many.npz").classes) == 46
    assert accuracy > 3 * 100 / 46, (accuracy, log)  # percent: three times chance


def three_seed_stage(repo: Path, workers: int, threads: int) -> tuple[list[str], Path, list[Path]]:
    """diabetes r=0.2 with seeds 0-2 as stacks of one, small and short: the stage's arguments, its
    folder of kept seeds and its three checkpoints."""
    table = EncodedTable.load(repo / "data" / "processed" / "diabetes.npz")
    save_splits(repo / "data" / "splits" / "diabetes.npz", [make_split(table.y, s, 1 / 6, 0.1) for s in range(3)])
    small = {"encoder_hidden": 32, "encoder_out": 16, "projector_hidden": 32, "projector_out": 16, "max_epochs": 4,
             "patience": 4, "workers": workers, "threads": threads, "stack_size": 1, "progress_seconds": 1e9}
    edit_params(repo, lambda p: (p.update(seeds=[0, 1, 2]), p["pretrain"].update(small)))
    kept = repo / ".dvc" / "tmp" / "seba-resume" / "diabetes-0.2"
    checkpoints = [repo / "data" / "models" / "diabetes" / "r0.2" / f"seed{s}.pt" for s in range(3)]
    return ["--dataset", "diabetes", "--ratio", "0.2"], kept, checkpoints


def test_an_interrupted_pretrain_stage_keeps_the_seeds_it_finished(repo, no_mlflow, monkeypatch, capsys):
    """A pretrain stage stopped during its second stack (Ctrl-C) keeps its first seed; the rerun
    trains only the other two and writes the checkpoints of an uninterrupted run, bit for bit; the
    kept seed is removed when the stage ends; another setting does not reuse a kept seed."""
    import seba.pretrain as pretrain

    args, kept, checkpoints = three_seed_stage(repo, workers=1, threads=1)
    real, stacks = pretrain.pretrain_stack, []

    def counted(stop_at=None):
        def stack(**job):
            stacks.append([m.seed for m in job["members"]])
            if len(stacks) == stop_at:
                raise KeyboardInterrupt
            return real(**job)
        return stack

    import seba.pretrain_stage as stage

    keep, kept_seeds = stage.keep_for_resume, []
    monkeypatch.setattr(stage, "keep_for_resume", lambda run, i, result: (kept_seeds.append(i), keep(run, i, result)))
    monkeypatch.setattr(pretrain, "pretrain_stack", counted())
    assert run_stage_script("pretrain", args, monkeypatch, capsys)[0] == 0
    reference = [p.read_bytes() for p in checkpoints]
    assert stacks == [[0], [1], [2]] and not kept.exists()
    assert kept_seeds == [0, 1]  # the last stack's seed: nothing is left to train when it arrives

    stacks.clear()
    monkeypatch.setattr(pretrain, "pretrain_stack", counted(stop_at=2))
    code, output = run_stage_script("pretrain", args, monkeypatch, capsys)
    assert code == 130, output
    assert [p.name.split("-")[0] for p in kept.iterdir()] == ["seed0"]

    stacks.clear()
    monkeypatch.setattr(pretrain, "pretrain_stack", counted())
    code, output = run_stage_script("pretrain", args, monkeypatch, capsys)
    assert code == 0, output
    assert stacks == [[1], [2]]  # seed 0 was kept
    assert "1 of 3 seeds kept from an interrupted run" in output and "seed 0 (1/3)] kept: best val" in output
    assert [p.read_bytes() for p in checkpoints] == reference
    assert not kept.exists()

    stacks.clear()
    monkeypatch.setattr(pretrain, "pretrain_stack", counted(stop_at=2))
    assert run_stage_script("pretrain", args, monkeypatch, capsys)[0] == 130
    edit_params(repo, lambda p: p["pretrain"].update(lr=2e-3))  # the kept seed trained with another lr
    stacks.clear()
    monkeypatch.setattr(pretrain, "pretrain_stack", counted())
    code, output = run_stage_script("pretrain", args, monkeypatch, capsys)
    assert code == 0 and stacks == [[0], [1], [2]] and "kept from an interrupted run" not in output, output



def test_stacks_that_finished_before_an_interrupted_one_are_kept(repo, no_mlflow, monkeypatch, capsys):
    """With two worker processes, seeds 1 and 2 finished while seed 0's stack still trained; a
    Ctrl-C then kept nothing of them (seeds are kept in order, and seed 0 never arrived). They are
    kept now: the rerun trains only seed 0 and writes the checkpoints of an uninterrupted run."""
    import concurrent.futures

    import seba.pretrain as pretrain

    args, kept, checkpoints = three_seed_stage(repo, workers=2, threads=2)
    code, output = run_stage_script("pretrain", args, monkeypatch, capsys)
    assert code == 0 and "2 at a time (1 torch thread each)" in output, output
    reference = [p.read_bytes() for p in checkpoints]

    class InterruptedPool:
        """Seed 0's stack is interrupted (Ctrl-C while the stage waits for it); the others have
        finished (trained here, with the worker's thread count)."""
        _processes: dict = {}

        def __init__(self, max_workers, mp_context):
            pass

        def submit(self, fn, threads, stack):
            future = concurrent.futures.Future()
            if stack["members"][0].seed == 0:
                future.set_exception(KeyboardInterrupt())
            else:
                future.set_result(pretrain._train_here(threads, stack))
            return future

        def shutdown(self, wait=True, cancel_futures=False):
            pass

    real = pretrain.ProcessPoolExecutor
    monkeypatch.setattr(pretrain, "ProcessPoolExecutor", InterruptedPool)
    code, output = run_stage_script("pretrain", args, monkeypatch, capsys)
    assert code == 130, output
    assert sorted(p.name.split("-")[0] for p in kept.iterdir()) == ["seed1", "seed2"]

    monkeypatch.setattr(pretrain, "ProcessPoolExecutor", real)
    code, output = run_stage_script("pretrain", args, monkeypatch, capsys)
    assert code == 0 and "2 of 3 seeds kept from an interrupted run" in output, output
    assert [p.read_bytes() for p in checkpoints] == reference
    assert not kept.exists()


def test_a_mask_size_floor_above_the_tables_columns_is_named_where_it_is_capped(repo, no_mlflow, monkeypatch, capsys):
    """pretrain.min_masked_columns larger than a table allows (the feature view keeps a column) is
    capped; the stage says so instead of training with another mask size silently."""
    table = EncodedTable.load(repo / "data" / "processed" / "diabetes.npz")
    save_splits(repo / "data" / "splits" / "diabetes.npz", [make_split(table.y, 0, 1 / 6, 0.1)])
    small = {"encoder_hidden": 16, "encoder_out": 8, "projector_hidden": 16, "projector_out": 8,
             "max_epochs": 1, "workers": 1, "threads": 1, "progress_seconds": 1e9}
    edit_params(repo, lambda p: (p.update(seeds=[0]), p["pretrain"].update(small)))
    args = ["--dataset", "diabetes", "--ratio", "0.2"]
    code, output = run_stage_script("pretrain", args, monkeypatch, capsys)
    assert code == 0 and "min_masked_columns" not in output, output
    edit_params(repo, lambda p: p["pretrain"].update(min_masked_columns=20))
    code, output = run_stage_script("pretrain", args, monkeypatch, capsys)
    assert code == 0, output
    assert "WARNING pretrain.min_masked_columns is 20, but diabetes has 8 columns" in output
    assert "each mask takes 7" in output
    edit_params(repo, lambda p: (p["pretrain"].update(min_masked_columns=1),
                                 p["sources"]["diabetes"].update(pretrain={"min_masked_columns": 9})))
    code, output = run_stage_script("pretrain", args, monkeypatch, capsys)
    assert code == 0 and "WARNING sources.diabetes.pretrain.min_masked_columns is 9, but diabetes has 8" in output


def test_a_queued_experiment_keeps_seeds_where_the_workspace_does(tmp_path):
    """A queued experiment runs in a copy (`.dvc/tmp/exps/tmp*`) whose `.dvc/config.local` names
    the workspace's cache: its kept seeds go to the workspace's `.dvc/tmp`, where the copy of a
    rerun finds them; a repository with its own cache keeps them in its own."""
    from seba.pretrain_stage import resume_dir

    workspace = tmp_path / "repo"
    copy = workspace / ".dvc" / "tmp" / "exps" / "tmpabc"
    (copy / ".dvc").mkdir(parents=True)
    (copy / ".dvc" / "config.local").write_text(f"[cache]\ndir = {workspace / '.dvc' / 'cache'}\n")
    assert resume_dir(copy, "cmc", 0.2) == workspace / ".dvc" / "tmp" / "seba-resume" / "cmc-0.2"
    assert resume_dir(workspace, "cmc", "random") == workspace / ".dvc" / "tmp" / "seba-resume" / "cmc-random"
    (copy / ".dvc" / "config.local").write_text("[cache]\ndir = /somewhere/else\n")  # a cache of the user's
    assert resume_dir(copy, "cmc", 0.2) == copy / ".dvc" / "tmp" / "seba-resume" / "cmc-0.2"


def test_an_earlier_output_that_cannot_be_read_is_trained_again(tmp_path, capsys):
    """Seeds are reused from the stage's earlier output only when dvc.lock, DVC's cache and the
    files all read (tests/test_pipeline.py runs the reuse with DVC itself): without dvc.lock, with
    its cache object gone (`dvc gc`) or with a damaged checkpoint, the seeds train, and a damaged
    checkpoint is named."""
    from seba.pretrain_stage import earlier_output, load_earlier

    seeds = [SimpleNamespace(seed=s, label=f"[pretrain cmc r=0.2 seed {s}]") for s in (0, 1)]
    assert earlier_output(tmp_path, "cmc", 0.2) == {} and load_earlier(tmp_path, "cmc", 0.2, seeds, ["k0", "k1"], {}) == {}
    objects = tmp_path / ".dvc" / "cache" / "files" / "md5"

    def cached(name: str, data: bytes) -> dict:
        md5 = hashlib.md5(data).hexdigest() + (".dir" if name.endswith(".dir") else "")
        (objects / md5[:2]).mkdir(parents=True, exist_ok=True)
        (objects / md5[:2] / md5[2:]).write_bytes(data)
        return {"md5": md5, "relpath": name}

    log_entry = {"key": "k0", "train_loss": [1.0], "val_loss": [1.0], "best_epoch": 1, "stop_epoch": 1,
                 "best_val_loss": 1.0, "seconds": 0.1, "masked_columns": 1, "precision": "fp32", "steps": 1,
                 "capped": 0, "cuda_graphs": False, "stack_size": 1}
    listing = [cached("log.json", json.dumps({"seeds": {"0": log_entry}}).encode()),
               cached("seed0.pt", b"not a checkpoint")]
    directory = cached("x.dir", json.dumps(listing).encode())
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {"pretrain@cmc-0.2": {
        "outs": [{"path": "data/models/cmc/r0.2", "md5": directory["md5"]}]}}}))
    assert set(earlier_output(tmp_path, "cmc", 0.2)) == {"log.json", "seed0.pt"}
    assert load_earlier(tmp_path, "cmc", 0.2, seeds, ["k0", "k1"], {}) == {}  # the damaged checkpoint
    assert "[pretrain cmc r=0.2 seed 0] its earlier encoder" in capsys.readouterr().err
    assert load_earlier(tmp_path, "cmc", 0.2, seeds[:1], ["k0"], {}) == {}  # the same seeds: not even read
    assert "its earlier encoder" not in capsys.readouterr().err
    for path in objects.rglob("*"):
        if path.is_file() and path.name == directory["md5"][2:]:
            path.unlink()  # `dvc gc` took the listing
    assert earlier_output(tmp_path, "cmc", 0.2) == {}


@pytest.mark.parametrize("stage, args", [("fetch", []), ("preprocess", []), ("split", []), ("pretrain", ["--ratio", "0.2"]),
                                         ("evaluate", []), ("baseline", ["--method", "knn"])])
def test_a_stage_run_by_hand_for_an_unknown_dataset_names_the_known_ones(repo, no_mlflow, monkeypatch, capsys, stage, args):
    before = sorted(p.relative_to(repo) for p in repo.rglob("*"))
    code, output = run_stage_script(stage, ["--dataset", "nope", *args], monkeypatch, capsys)
    assert code == 2 and f"error in stage '{stage}': dataset 'nope' has no entry in params.yaml 'sources' (it has: diabetes)" in output, output
    assert sorted(p.relative_to(repo) for p in repo.rglob("*")) == before  # nothing written


def test_preprocess_without_the_fetched_table_names_the_fetch_stage(repo, no_mlflow, monkeypatch, capsys):
    (repo / "data" / "raw" / "diabetes.parquet").unlink()
    code, output = run_stage_script("preprocess", ["--dataset", "diabetes"], monkeypatch, capsys)
    assert code == 2 and "diabetes.parquet does not exist: the fetch stage writes it (`dvc repro fetch@diabetes`" in output, output


def test_a_pretrain_stage_holds_the_rows_of_the_stack_in_training_only(repo, no_mlflow, monkeypatch):
    """prepare() keeps each seed as its split, not its scaled rows (100 Fashion-MNIST seeds' rows
    are about 18 GB): preparing 10 seeds of a 3.2 MB table allocates less than three seeds' rows
    would take; each stack scales its own seeds when it starts, and a seed's validation rows are
    dropped once it is recorded."""
    import tracemalloc

    import seba.pretrain as pretrain
    from seba.core.config import load_params
    from seba.pretrain_stage import prepare, train
    from seba.core.tracking import Tracker

    rng = np.random.default_rng(0)
    n, d = 20000, 40
    table = EncodedTable(X=rng.normal(size=(n, d)).astype(np.float32), y=np.arange(n) % 2, groups=np.arange(d),
                         numeric=np.ones(d, bool), columns=np.array([f"c{j}" for j in range(d)]),
                         encoded_names=np.array([f"c{j}" for j in range(d)]), classes=np.array(["a", "b"]))
    table.save(repo / "data" / "processed" / "diabetes.npz")
    save_splits(repo / "data" / "splits" / "diabetes.npz", [make_split(table.y, s, 1 / 6, 0.1) for s in range(10)])
    small = {"encoder_hidden": 16, "encoder_out": 8, "projector_hidden": 16, "projector_out": 8, "max_epochs": 1,
             "workers": 1, "threads": 1, "stack_size": 4, "progress_seconds": 1e9}
    edit_params(repo, lambda p: (p.update(seeds=list(range(10))), p["pretrain"].update(small)))
    params = load_params(repo / "params.yaml")
    tracemalloc.start()
    run = prepare(params, "diabetes", 0.2, repo)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    seed_rows = (run.seeds[0].n_train + run.seeds[0].n_val) * d * 4
    assert all(s.x_train is None and s.source is not None for s in run.seeds)
    assert peak < 3 * seed_rows, (peak, seed_rows)  # scaled eagerly, the ten seeds' rows alone took 10 x
    scaled = []
    real_rows = pretrain.ScaledSplit.rows
    monkeypatch.setattr(pretrain.ScaledSplit, "rows", lambda self: (scaled.append(len(scaled)), real_rows(self))[1])
    with Tracker("pretrain", "test", params=run.tracked, root=repo) as tracker:
        train(run, tracker)
    assert len(scaled) == 10 and [len(job["members"]) for job in run.jobs] == [4, 4, 2]
    assert all(s.source.kept_val is None for s in run.seeds)


@pytest.mark.parametrize("stage, args, message", [
    ("pretrain", ["--ratio", "0.25"], "error in stage 'pretrain': --ratio 0.25 is not in ratios [0.1, 0.2, 0.3, 0.4, 0.5]: dvc.yaml "
                                      "has a pretrain stage for those only"),
    ("baseline", ["--method", "scarf"], "method 'scarf' is not in 'baselines.methods' ['knn', 'logreg']: dvc.yaml has "
                                        "no baseline stage for it; add it there")])
def test_a_stage_run_by_hand_for_a_ratio_or_method_params_do_not_list_is_refused(repo, no_mlflow, monkeypatch, capsys,
                                                                                  stage, args, message):
    before = sorted(p.relative_to(repo) for p in repo.rglob("*"))
    code, output = run_stage_script(stage, ["--dataset", "diabetes", *args], monkeypatch, capsys)
    assert code == 2 and message in output and "Traceback" not in output, output
    assert sorted(p.relative_to(repo) for p in repo.rglob("*")) == before  # nothing written


def test_validate_notes_a_pretraining_too_large_for_this_machine_where_the_table_is_at_hand(repo, monkeypatch):
    """With data/processed/<dataset>.npz from an earlier run, seba-validate applies the pretrain
    stage's own memory rule to one seed and notes a setting too large for this machine (a note:
    DVC may not rerun the stage); Ray tasks plan with their nodes' memory, so not for them."""
    from seba.core.config import load_params
    from seba.validate import main, memory_notes

    params = lambda: load_params(repo / "params.yaml")
    assert memory_notes(params(), repo) == []
    edit_params(repo, lambda p: p["pretrain"].update(encoder_hidden=3_000_000))
    found = memory_notes(params(), repo)
    assert len(found) == 1 and found[0].startswith("dataset 'diabetes' (pretrain, 8 encoded columns): one seed needs "
                                                   "about ") and found[0].endswith("if they rerun here"), found
    assert main(["--root", str(repo)]) == 0  # valid: a note, not a refusal
    edit_params(repo, lambda p: p.update(executor={"kind": "ray"}))
    assert memory_notes(params(), repo) == []
    edit_params(repo, lambda p: p.update(executor={"kind": "local"}))
    (repo / "data" / "processed" / "diabetes.npz").unlink()  # a fresh clone: nothing to read yet
    assert memory_notes(params(), repo) == []

def test_aggregate_without_episodes_names_the_stages_that_write_them(repo, no_mlflow, monkeypatch, capsys):
    before = prior_outputs(repo)
    code, output = run_stage_script("aggregate", [], monkeypatch, capsys)
    assert code == 2 and "Traceback" not in output, output
    assert ("no episodes from evaluate@diabetes, baseline@knn-diabetes, baseline@logreg-diabetes: run them first"
            in output), output
    assert prior_outputs(repo) == before and not (repo / "reports" / "results.csv").exists()


def synthetic_episodes(params: dict, member_names: list[str], offset: float = 0.0) -> pd.DataFrame:
    """An episodes file as the evaluate (members r0.x and ensemble) or a baseline stage writes it."""
    rows = []
    for seed in params["seeds"]:
        for shot in params["evaluate"]["shots"]:
            for episode in range(params["evaluate"]["episodes"]):
                for k, member in enumerate(member_names):
                    accuracy = 40 + shot + (episode % 7) + k + offset
                    rows.append({"seed": seed, "shot": shot, "episode": episode, "member": member,
                                 "accuracy": accuracy, "balanced_accuracy": accuracy - 1,
                                 "support_hash": f"{seed}-{shot}-{episode}"})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("damage, message", [
    ("fewer episodes", "error in stage 'aggregate': reports/episodes/knn/diabetes.csv: knn holds 99 episodes per seed and shot, episodes "
                       "0–98 (evaluate.episodes: 100): written by another run, or cut short; rerun baseline@knn-diabetes"),
    ("cut short", "rerun evaluate@diabetes (`dvc repro evaluate@diabetes`)"),
    ("not a number", "reports/episodes/logreg/diabetes.csv: 1 accuracy value(s) are not accuracies in [0, 100] "
                     "(first on line 2: 'high'"),
    ("another seed", "reports/episodes/diabetes.csv: r0.1 holds seeds 0, 7 (params.yaml's seeds: 0): written by "
                     "another run, or cut short; rerun evaluate@diabetes"),
    ("empty", "reports/episodes/diabetes.csv cannot be read (EmptyDataError"),
    ("two members", "reports/episodes/knn/diabetes.csv holds members knn, logreg, baseline@knn-diabetes writes knn "
                    "alone: written by another run; rerun baseline@knn-diabetes"),
])
def test_aggregate_checks_every_episodes_file_before_it_rewrites_any_report(repo, no_mlflow, monkeypatch, capsys,
                                                                            damage, message):
    """A baseline run with other episodes, an episodes file cut short or damaged: aggregate names
    the file and the stage to rerun, and the reports of the earlier aggregate stay as they were
    (none half rewritten), rather than ranking methods on different episodes."""
    params = yaml.safe_load((repo / "params.yaml").read_text())
    (repo / "data" / "reference").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "data" / "reference" / "paper_results.csv", repo / "data" / "reference")
    episodes = repo / "reports" / "episodes"
    (episodes / "knn").mkdir(parents=True)
    (episodes / "logreg").mkdir()
    ratios = [f"r{r}" for r in params["ratios"]]
    synthetic_episodes(params, ratios + ["ensemble"]).to_csv(episodes / "diabetes.csv", index=False)
    synthetic_episodes(params, ["knn"], -3).to_csv(episodes / "knn" / "diabetes.csv", index=False)
    synthetic_episodes(params, ["logreg"], -1).to_csv(episodes / "logreg" / "diabetes.csv", index=False)
    code, output = run_stage_script("aggregate", [], monkeypatch, capsys)
    assert code in (0, None), output
    reports = {p: p.read_bytes() for p in sorted((repo / "reports").rglob("*")) if p.is_file()}
    assert {"results.md", "comparison.csv", "summary.json", "accuracy.png"} <= {p.name for p in reports}
    if damage == "fewer episodes":
        frame = pd.read_csv(episodes / "knn" / "diabetes.csv")
        frame[frame["episode"] < 99].to_csv(episodes / "knn" / "diabetes.csv", index=False)
    elif damage == "cut short":
        text = (episodes / "diabetes.csv").read_text()
        (episodes / "diabetes.csv").write_text(text[: len(text) // 2 + 3])
    elif damage == "not a number":
        frame = pd.read_csv(episodes / "logreg" / "diabetes.csv")
        frame["accuracy"] = frame["accuracy"].astype(object)
        frame.loc[0, "accuracy"] = "high"
        frame.to_csv(episodes / "logreg" / "diabetes.csv", index=False)
    elif damage == "another seed":
        frame = pd.read_csv(episodes / "diabetes.csv")
        frame.loc[frame["shot"] == 1, "seed"] = 7
        frame.to_csv(episodes / "diabetes.csv", index=False)
    elif damage == "two members":  # each episode twice: knn's cell would be the mean of both methods
        pd.concat([pd.read_csv(episodes / name / "diabetes.csv") for name in ("knn", "logreg")]).to_csv(
            episodes / "knn" / "diabetes.csv", index=False)
    else:
        (episodes / "diabetes.csv").write_text("")
    code, output = run_stage_script("aggregate", [], monkeypatch, capsys)
    assert code == 2 and message in output and "Traceback" not in output, output
    assert {p: p.read_bytes() for p in sorted((repo / "reports").rglob("*")) if p.is_file() and "episodes" not in p.parts
            } == {p: b for p, b in reports.items() if "episodes" not in p.parts}


@pytest.mark.parametrize("damage, stage, args, message", [
    ("checkpoint cut short", "evaluate", ["--dataset", "diabetes"],
     "data/models/diabetes/r0.1/seed0.pt cannot be read (RuntimeError"),
    ("checkpoint empty", "evaluate", ["--dataset", "diabetes"], "data/models/diabetes/r0.1/seed0.pt cannot be read (EOFError"),
    ("checkpoint foreign", "evaluate", ["--dataset", "diabetes"],
     "seed0.pt is not a checkpoint of the pretrain stage (no encoder or model_config): rerun pretrain@diabetes-0.1"),
    ("checkpoint missing", "evaluate", ["--dataset", "diabetes"],
     "seed0.pt does not exist: the pretrain@diabetes-0.1 stage writes it (`dvc repro pretrain@diabetes-0.1`)"),
    ("stage unfinished", "evaluate", ["--dataset", "diabetes"],
     "data/models/diabetes/r0.3/log.json does not exist: pretrain@diabetes-0.3 has not finished"),
    ("seed untrained", "evaluate", ["--dataset", "diabetes"],
     "pretrain@diabetes-0.3 trained seeds 1, not 0 of params.yaml's seeds"),
    ("splits cut short", "pretrain", ["--dataset", "diabetes", "--ratio", "0.1"],
     "data/splits/diabetes.npz cannot be read (BadZipFile"),
    ("processed cut short", "split", ["--dataset", "diabetes"], "data/processed/diabetes.npz cannot be read ("),
    ("raw cut short", "preprocess", ["--dataset", "diabetes"], "data/raw/diabetes.parquet cannot be read ("),
])
def test_a_damaged_file_of_an_earlier_stage_names_the_stage_to_rerun(repo, no_mlflow, monkeypatch, capsys, damage,
                                                                     stage, args, message):
    """A stage run by hand on a file an earlier stage wrote, cut short or damaged since: one line
    naming the file and the stage that writes it, not the reader's traceback."""
    import torch

    models = repo / "data" / "models" / "diabetes"
    for ratio in yaml.safe_load((repo / "params.yaml").read_text())["ratios"]:
        (models / f"r{ratio}").mkdir(parents=True)
        torch.save({"encoder": {}, "model_config": {}}, models / f"r{ratio}" / "seed0.pt")
        (models / f"r{ratio}" / "log.json").write_text('{"seeds": {"0": {}}}')
    checkpoint = models / "r0.1" / "seed0.pt"
    cut = lambda path: path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])  # noqa: E731
    if damage == "checkpoint cut short":
        cut(checkpoint)
    elif damage == "checkpoint empty":
        checkpoint.write_bytes(b"")
    elif damage == "checkpoint foreign":
        torch.save({"weights": 1}, checkpoint)
    elif damage == "checkpoint missing":
        checkpoint.unlink()
    elif damage == "stage unfinished":
        (models / "r0.3" / "log.json").unlink()
    elif damage == "seed untrained":
        (models / "r0.3" / "log.json").write_text('{"seeds": {"1": {}}}')
    else:
        cut(repo / "data" / {"splits": "splits/diabetes.npz", "processed": "processed/diabetes.npz",
                             "raw": "raw/diabetes.parquet"}[damage.split()[0]])
    code, output = run_stage_script(stage, args, monkeypatch, capsys)
    unfinished = damage in ("stage unfinished", "seed untrained")
    rerun = {"evaluate": f"pretrain@diabetes-{'0.3' if unfinished else '0.1'}", "pretrain": "split@diabetes",
             "split": "preprocess@diabetes", "preprocess": "fetch@diabetes"}[stage]
    assert code == 2 and message in output and "Traceback" not in output, output
    assert f"`dvc repro {rerun}`" in output, output


def test_column_names_in_params_match_the_header_as_it_is_read(repo):
    """The header's names are read stripped ('label ' is label): params naming them as the file
    writes them, surrounding spaces and all, find them; a blank target is refused by name."""
    from seba.core.config import load_params
    from seba.core.own_table import load_local_table
    from seba.validate import main

    rng = np.random.default_rng(0)
    rows = ["x1,zip ,label "] + [f"{rng.normal():.3f},{rng.choice(['a', 'b'])},{rng.choice(['p', 'q'])}"
                                  for _ in range(200)]
    (repo / "data" / "local" / "spaced.csv").write_text("\n".join(rows) + "\n")
    edit_params(repo, add_dataset("spaced", {"path": "data/local/spaced.csv", "target": "label ",
                                             "categorical": ["zip "]}))
    source = load_params(repo / "params.yaml").sources["spaced"]
    assert (source.target, source.categorical) == ("label", ("zip",))
    frame, _ = load_local_table("spaced", source, repo)
    assert "zip" in frame.columns and len(frame) == 200
    assert main(["--root", str(repo)]) == 0
    edit_params(repo, lambda p: p["sources"]["spaced"].update(target=" "))
    with pytest.raises(ConfigError, match="'sources.spaced.target' is ' ': name the label column"):
        load_params(repo / "params.yaml")


def test_column_names_written_in_decomposed_unicode_match_params_in_composed_form(repo):
    """A header that macOS wrote with decomposed characters ('Größe' as o + a combining
    diaeresis) is read in the composed form params.yaml is typed in, and so are the names in
    params: the target and a `numeric` column are found (the error listed a column that looked
    like the target). Two header names that differ only so are one name twice: refused."""
    import unicodedata

    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    size, target = (unicodedata.normalize("NFD", n) for n in ("Größe", "Klasse_ä"))
    body = "".join(f"{i * 7 % 40},{i % 3},{'xy'[i % 2]}\n" for i in range(40))
    (repo / "data" / "local" / "decomposed.csv").write_text(f"a,{size},{target}\n" + body)
    source = SourceConfig(path="data/local/decomposed.csv", target="Klasse_ä", numeric=["Größe"])
    frame, info = load_local_table("decomposed", source, repo)
    assert list(frame.columns) == ["a", "Größe", "class"] and info["target"] == "Klasse_ä"
    assert SourceConfig(path="data/local/decomposed.csv", target=target).target == "Klasse_ä"

    (repo / "data" / "local" / "decomposed.csv").write_text(f"Größe,{size},label\n" + body)
    with pytest.raises(DataError, match="duplicate column names: 'Größe' \\(columns 1, 2\\)"):
        load_local_table("decomposed", SourceConfig(path="data/local/decomposed.csv", target="label"), repo)


def test_invisible_characters_at_the_edges_of_cells_and_names_are_stripped_with_a_notice(repo, capsys):
    """A zero-width space, word joiner or byte-order mark at a cell's start or end (text copied
    from a web page; files joined with their byte-order marks) is stripped as a space is, with a
    notice counting the cells: 'red' and 'red' + U+200B were two levels, '12' + U+200B a word in
    a numeric column, and a joined file's header line, its byte-order mark in its first cell, a
    data row with a class 'label'. A name with one at an edge finds the target."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    zw, wj, bom = "\u200b", "\u2060", "\ufeff"
    part = (f"{bom}a,colour,size,label{zw}\n"
            + "".join(f"{i * 7 % 40},{['red', 'red' + zw, wj + ' blue'][i % 3]},{i % 9}{zw if i % 4 == 0 else ''},"
                      f"{'xy'[i % 2]}{zw if i % 5 == 0 else ''}\n" for i in range(40)))
    (repo / "data" / "local" / "joined.csv").write_bytes((part + part).encode("utf-8"))
    frame, info = load_local_table("joined", SourceConfig(path="data/local/joined.csv", target="label"), repo)
    err = capsys.readouterr().err
    assert "data row 41 repeats the header line (files joined with their headers); dropped" in err
    assert len(frame) == 80 and set(frame["class"].cat.categories) == {"x", "y"}
    assert set(frame["colour"].cat.categories) == {"red", "blue"} and frame["size"].dtype == "float64"
    for what, cells in (("column 'colour'", 52), ("column 'size'", 20), ("target column 'label'", 16)):
        assert f"{what}: {cells} cell(s) with an invisible character at their start or end" in err
    records = {r["column"]: r for r in info["columns"]}
    assert records["size"]["kind"] == "numeric" and not records["size"]["warnings"]


def test_a_parquet_column_with_a_blank_name_is_named_as_a_csv_would_name_it(repo):
    from seba.core.own_table.files import _read_local

    frame = pd.DataFrame({"x": [1.0, 2.0], " ": [3.0, 4.0], "label": ["a", "b"]})
    frame.to_parquet(repo / "data" / "local" / "blank.parquet")
    read = _read_local(repo / "data" / "local" / "blank.parquet", "dataset 'blank'")
    assert list(read.columns) == ["x", "Unnamed: 1", "label"]


def test_a_unit_is_taken_off_numbers_only_where_one_unit_makes_the_column_numeric(repo):
    """Mixed units stay text; a unit in a few cells of a numeric column is not taken off (those
    cells are non-numbers, with their warning); a column named in `numeric` loses its unit; cells
    shaped like ISO dates that are none stay text, without a date notice."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    rng = np.random.default_rng(0)
    values = rng.normal(size=200).round(2)
    frame = pd.DataFrame({
        "mixed": [f"{v}%" if i % 2 else f"${v}" for i, v in enumerate(values)],
        "stray": [f"{v}%" if i < 3 else str(v) for i, v in enumerate(values)],
        "coded": [f"{v}%" if i % 4 else "none" for i, v in enumerate(values)],
        "not_dates": ["2020-13-45"] * 200,  # shaped like ISO dates, none a real one
        "x": values, "label": rng.choice(["p", "q"], size=200)})
    frame.to_csv(repo / "data" / "local" / "units.csv", index=False)
    source = SourceConfig(path="data/local/units.csv", target="label", numeric=["coded"])
    read, info = load_local_table("units", source, repo)
    records = {r["column"]: r for r in info["columns"]}
    assert records["mixed"]["kind"] == "categorical" and "unit" not in records["mixed"]
    assert records["stray"]["kind"] == "numeric" and "unit" not in records["stray"]
    assert read["stray"].isna().sum() == 3 and "3 non-numeric cell(s) read as missing" in records["stray"]["warnings"][0]
    assert records["coded"]["unit"] == "%" and read["coded"].isna().sum() == 50
    assert records["not_dates"]["kind"] == "categorical" and "time_as" not in records["not_dates"]
    assert not any("read as numbers" in n for n in records["not_dates"]["notices"])
    np.testing.assert_array_equal(read["coded"].dropna().to_numpy(), values[np.arange(200) % 4 != 0])


def test_missing_value_codes_are_named_and_missing_values_marks_them(repo, capsys):
    """A numeric column whose smallest or largest value is a code files write for a missing value
    (-999 below values of 0 or more, 9999 above the rest, 99 above ages) was read as numbers, the
    code stretching the scale, without a word: a notice now names the code and
    ``missing_values``. Listed there (numbers by value, texts as written), the cells are missing
    in CSV text, parquet numbers and parquet categories alike, counted in the schema report's
    ``converted_to_missing`` with a notice, and the target keeps its classes; the other cells
    and columns read as before. -1 in a column with other negatives, and a code in a few cells
    only, get no notice."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    n = 60
    frame = pd.DataFrame({
        "score": [-999 if i % 10 == 0 else i % 6 for i in range(n)],
        "income": [9999 if i % 12 == 0 else 100 + i for i in range(n)],
        "age": [99 if i % 15 == 0 else 20 + i % 50 for i in range(n)],
        "delta": [-1 if i % 8 == 0 else i % 6 - 3 for i in range(n)],
        "rare": [9999 if i == 0 else i for i in range(n)],
        "colour": ["unknown" if i % 6 == 0 else "rgb"[i % 3] for i in range(n)],
        "label": ["ab"[i % 2] for i in range(n)]})
    local = repo / "data" / "local"
    frame.to_csv(local / "codes.csv", index=False)
    read, info = load_local_table("codes", SourceConfig(path="data/local/codes.csv", target="label"), repo)
    records = {r["column"]: r for r in info["columns"]}
    assert records["score"]["notices"] == [
        "column 'score': 6 cell(s) are -999, below every other value (0 to 5), as a code for a missing value is: if "
        "it is one, list it in 'sources.codes.missing_values' (read as a number, it stretches the column's scale)"]
    assert records["income"]["notices"][0].startswith("column 'income': 5 cell(s) are 9999, above every other value")
    assert records["age"]["notices"][0].startswith("column 'age': 4 cell(s) are 99, above every other value (20 to 69)")
    assert not records["delta"]["notices"] and not records["rare"]["notices"]
    assert read["score"].min() == -999
    capsys.readouterr()

    frame.assign(colour=frame["colour"].astype("category")).to_parquet(local / "codes.parquet")
    for path in ("data/local/codes.csv", "data/local/codes.parquet"):
        source = SourceConfig(path=path, target="label", missing_values=[-999, 9999, 99, "unknown"])
        marked, info = load_local_table("codes", source, repo)
        records = {r["column"]: r for r in info["columns"]}
        for column, code, cells in (("score", "-999", 6), ("income", "9999", 5), ("age", "99", 4),
                                    ("colour", "unknown", 10)):
            assert records[column]["converted"] == {code: cells}, (path, column, records[column])
            assert records[column]["notices"][0] == (f"column '{column}': {cells} cell(s) marked missing by "
                                                     f"'sources.codes.missing_values' ('{code}' x{cells})"), path
            assert int(marked[column].isna().sum()) == cells, (path, column)
            assert records[column]["missing"] == cells
        assert marked["score"].max() == 5 and sorted(marked["colour"].cat.categories) == ["b", "g", "r"], path
        np.testing.assert_array_equal(marked["delta"].to_numpy(), read["delta"].to_numpy())
        assert list(marked["class"]) == list(read["class"])

    dashed = frame.assign(score=["-" if i % 10 == 0 else str(i % 6) for i in range(n)])  # '-' for none, as reports write
    dashed.to_csv(local / "dashes.csv", index=False)
    _, info = load_local_table("dashes", SourceConfig(path="data/local/dashes.csv", target="label"), repo)
    assert next(r for r in info["columns"] if r["column"] == "score")["warnings"] == [
        "column 'score' is read as categorical: only 90.0% of its cells are numbers (other values: '-' x6); list it "
        "in 'sources.dashes.numeric' to read it as numbers (the rest become missing), or, if '-' marks a missing "
        "value, list it in 'sources.dashes.missing_values'"]
    read, info = load_local_table("dashes", SourceConfig(path="data/local/dashes.csv", target="label",
                                                         missing_values=["-"]), repo)
    score = next(r for r in info["columns"] if r["column"] == "score")
    assert score["kind"] == "numeric" and not score["warnings"] and int(read["score"].isna().sum()) == 6


def test_rows_that_repeat_another_row_are_counted_in_a_notice(repo):
    """Rows that repeat another row exactly (features and class), which the split may put in the
    support and the query of one episode, and rows whose features another row of another class
    has, are counted in one notice; a table without either gets none. The rows are kept."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    rows = [f"{i * 0.37:.2f},{i % 7},{'pq'[i % 2]},{'ab'[i // 3 % 2]}" for i in range(40)]
    local = repo / "data" / "local"
    (local / "unique.csv").write_text("x,y,c,label\n" + "\n".join(rows) + "\n")
    _, info = load_local_table("unique", SourceConfig(path="data/local/unique.csv", target="label"), repo)
    assert not any("row(s)" in n for n in info["notes"])
    clash = rows[5].rsplit(",", 1)[0] + ("," + ("a" if rows[5].endswith("b") else "b"))
    (local / "copies.csv").write_text("x,y,c,label\n" + "\n".join(rows + rows[:4] + [rows[0], clash]) + "\n")
    read, info = load_local_table("copies", SourceConfig(path="data/local/copies.csv", target="label"), repo)
    assert len(read) == 46
    assert ("5 row(s) repeat an earlier row exactly (features and class): the split keeps no copies together, so a "
            "row and its copy can be support and query of one episode (the benchmark tables have such rows too); "
            "2 row(s) share their features with a row of another class") in info["notes"]
    from seba.core.data import encode_table, schema_report

    summary = schema_report("copies", read, encode_table(read), {})["summary"]
    assert (summary["repeated_rows"], summary["rows_sharing_features"]) == (5, 2)
    assert "columns_giving_the_class" not in summary


def test_rows_the_same_only_once_rare_levels_fold_are_no_copies_in_the_file(repo):
    """Rows that differ only in levels folded into 'other' (max_categories) were counted as rows
    that "repeat an earlier row exactly", although the file holds no copies; they are counted apart,
    naming the folded column, and the file's own copies are still counted as exact."""
    from seba.core.config import SourceConfig
    from seba.core.data import encode_table, schema_report
    from seba.core.own_table import load_local_table

    # 'code': 60 distinct codes, folded to 4 levels + other; 'x' repeats, so rows with two folded
    # codes and one x and class are the same row once folded
    rows = [f"K{i},{i % 3},{'ab'[i % 2]}" for i in range(60)]
    local = repo / "data" / "local"
    (local / "codes.csv").write_text("code,x,label\n" + "\n".join(rows) + "\n")
    source = SourceConfig(path="data/local/codes.csv", target="label", max_categories=5)
    read, info = load_local_table("codes", source, repo)
    assert not any("exactly" in n for n in info["notes"]), info["notes"]
    once = [n for n in info["notes"] if "once the rare levels" in n]
    assert len(once) == 1 and once[0].startswith(
        "50 row(s) repeat an earlier row (features and class) once the rare levels of 'code' are folded (not in the "
        "file); "), once
    summary = schema_report("codes", read, encode_table(read), {})["summary"]
    assert summary["repeated_once_folded"] == 50 and "repeated_rows" not in summary
    (local / "codes.csv").write_text("code,x,label\n" + "\n".join(rows + rows[:2]) + "\n")  # two copies in the file
    read, info = load_local_table("codes", source, repo)
    assert any(n.startswith("2 row(s) repeat an earlier row exactly") for n in info["notes"]), info["notes"]
    summary = schema_report("codes", read, encode_table(read), {})["summary"]
    assert (summary["repeated_rows"], summary["repeated_once_folded"]) == (2, 50)


def test_a_column_that_gives_the_class_of_every_row_warns(repo):
    """A feature that is the target written again (its text, or its classes as numbers) makes the
    few-shot accuracy measure it; it was read as any column. It now warns, naming it; a column
    with one row of another class, one with missing cells in more than 5 % of its rows, and an id
    (a value per row) do not."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    rng = np.random.default_rng(3)
    n = 120
    label = rng.choice(["low", "mid", "high"], size=n)
    frame = pd.DataFrame({
        "x": rng.normal(size=n).round(3), "y": rng.integers(0, 5, size=n),
        "copy": [f"{v.upper()} risk" for v in label],
        "coded": pd.Series(label).map({"low": 0, "mid": 1, "high": 2}),
        "almost": [("A", "B", "C")[("low", "mid", "high").index(v)] if i else "A" if v != "low" else "B"
                   for i, v in enumerate(label)],
        "gappy": [None if i % 10 == 0 else v for i, v in enumerate(label)],
        "label": label})
    frame.to_csv(repo / "data" / "local" / "leak.csv", index=False)
    _, info = load_local_table("leak", SourceConfig(path="data/local/leak.csv", target="label"), repo)
    assert [n for n in info["notes"] if "class of every row" in n] == [
        "WARNING columns 'copy', 'coded' give the class of every row (each of their values occurs with one class "
        "only): if they are the target written again or derived from it, remove them from the file, or the few-shot "
        "accuracy measures them, not the method"]
    assert not any(r["warnings"] for r in info["columns"])  # no column lost information


def test_numbers_in_two_units_or_on_two_scales_warn(repo, capsys):
    """A column of numbers written with two currencies ('$1.50', '€0.50') was read as categorical
    text, its numbers levels, without a word; a percent column with fractions among its cells
    ('20%' beside '0.2') was read on two scales with only the notice that '%' was taken off. Both
    now warn (a loss of information), naming the units or an example of each scale. A column of
    one currency, and a percent column whose other cells are zeros ('0'), do not warn."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    n = 40
    frame = pd.DataFrame({
        "price": [f"{'$' if i % 2 else '€'}{i % 7}.50" for i in range(n)],
        "share": [f"{i % 7 * 10}%" if i % 2 else f"{i % 7 / 10:g}" for i in range(n)],
        "dollars": [f"${i % 7}.50" for i in range(n)],
        "rate": [f"{i % 7 * 10}%" if i % 2 else "0" for i in range(n)],
        "label": ["ab"[i % 2] for i in range(n)]})
    frame.to_csv(repo / "data" / "local" / "scales.csv", index=False)
    read, info = load_local_table("scales", SourceConfig(path="data/local/scales.csv", target="label"), repo)
    err = capsys.readouterr().err
    records = {r["column"]: r for r in info["columns"]}
    assert records["price"]["kind"] == "categorical"
    assert ("WARNING column 'price' holds numbers written with several units ('$' x20, '€' x20; e.g. '$1.50', "
            "'€0.50'), read as categorical text (its numbers are levels)") in err
    assert records["share"]["kind"] == "numeric" and records["share"]["unit"] == "%"
    assert ("WARNING column 'share': 20 number(s) written with '%' (e.g. '10%', read as 10) and 17 without (e.g. "
            "'0.2', read as 0.2): if those are fractions (0.2 for 20%), the column holds two scales") in err
    assert not records["dollars"]["warnings"] and records["dollars"]["unit"] == "$"
    assert not records["rate"]["warnings"] and records["rate"]["unit"] == "%"


def test_dates_written_with_month_names_are_days(repo):
    """Dates written with an English month name ('05-Jan-2020', 'January 05, 2020', '05 Jan 20')
    were categorical text, their order lost, without a word; they are days since the column's
    earliest now, with a notice, and a day that does not exist is missing. Words that are month
    names in other text ('may june') stay text."""
    import datetime

    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    days = [datetime.date(2020, 1, 1) + datetime.timedelta(days=7 * i) for i in range(40)]
    frame = pd.DataFrame({"x": [i % 5 for i in range(40)],
                          "short": [d.strftime("%d-%b-%Y") for d in days],
                          "long": [d.strftime("%B %d, %Y") for d in days],
                          "two_digit": [d.strftime("%d %b %y") for d in days],
                          "words": [("may be", "june bug")[i % 2] for i in range(40)],
                          "label": ["ab"[i // 3 % 2] for i in range(40)]})
    frame.loc[5, "short"] = "31-Feb-2020"
    frame.to_csv(repo / "data" / "local" / "months.csv", index=False)
    read, info = load_local_table("months", SourceConfig(path="data/local/months.csv", target="label"), repo)
    records = {r["column"]: r for r in info["columns"]}
    expected = [7.0 * i for i in range(40)]
    for column in ("short", "long", "two_digit"):
        assert records[column]["kind"] == "numeric" and "time_as" in records[column], column
        assert records[column]["notices"][0].startswith(f"column '{column}': dates (with month names) read as "
                                                        f"numbers, days since the column's earliest"), column
    assert read["long"].tolist() == expected and read["two_digit"].tolist() == expected
    assert np.isnan(read["short"][5]) and read["short"].drop(index=5).tolist() == expected[:5] + expected[6:]
    assert records["words"]["kind"] == "categorical"


def test_dates_and_times_are_kept_where_an_id_would_be_dropped(repo):
    """A table sorted by its date, one row per day (0, 1, 2, ... days: a row id's integers), keeps
    the date as a feature, with a notice, as it keeps a pandas index of dates written with the
    table and a duration column counting whole seconds; an integer id beside them is still dropped."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    rng = np.random.default_rng(0)
    days = pd.date_range("2024-01-01", periods=200, freq="D")
    frame = pd.DataFrame({"day": days.strftime("%Y-%m-%d"), "id": np.arange(1, 201),
                          "x": rng.normal(size=200).round(3), "label": rng.choice(["p", "q"], size=200)},
                         index=days.strftime("%Y-%m-%d"))
    frame.to_csv(repo / "data" / "local" / "daily.csv")  # the index, header-less, as 'Unnamed: 0'
    read, info = load_local_table("daily", SourceConfig(path="data/local/daily.csv", target="label"), repo)
    records = {r["column"]: r for r in info["columns"]}
    for column in ("day", "Unnamed: 0"):
        assert records[column]["kind"] == "numeric", records[column]
        np.testing.assert_array_equal(read[column].to_numpy(), np.arange(200.0))
    assert "column 'day' kept: its values increase strictly from row to row, as a row id's do, but it holds times " \
           "(days since the column's earliest, 2024-01-01 00:00:00), not an id" in records["day"]["notices"]
    assert "column 'Unnamed: 0' kept: it has no header name" in " ".join(records["Unnamed: 0"]["notices"])
    assert (records["id"]["kind"], records["id"]["reason"]) == ("dropped", "row id")

    pd.DataFrame({"waited": pd.to_timedelta(np.arange(200), unit="s"), "x": frame["x"].to_numpy(),
                  "label": frame["label"].to_numpy()}).to_parquet(repo / "data" / "local" / "waits.parquet")
    read, info = load_local_table("waits", SourceConfig(path="data/local/waits.parquet", target="label"), repo)
    waited = next(r for r in info["columns"] if r["column"] == "waited")
    assert waited["kind"] == "numeric" and waited["time_as"] == "seconds" and read["waited"].iloc[-1] == 199.0


def test_numbers_written_with_leading_zeros_are_reported_and_one_spelled_two_ways_warns(repo):
    """Zip codes written with their leading zeros ('01470') are read as numbers with a notice naming
    the `categorical` setting, their count in the schema report; a code column where '007' and '7'
    both occur (one number, two codes) gets a warning naming both, as a loss of information; listed
    in `categorical`, the codes stay text, apart, without either message. Times ('05:30') and a
    column of decimals ('0.25') are not taken for codes."""
    from seba.core.config import SourceConfig
    from seba.core.data import encode_table, schema_report
    from seba.core.own_table import load_local_table

    rng = np.random.default_rng(1)
    zips = [f"{v:05d}" for v in rng.integers(0, 99999, 200)]
    codes = [("007", "7", "012", "12", "30")[i % 5] for i in range(200)]
    frame = pd.DataFrame({"zip": zips, "code": codes, "clock": [f"{h:02d}:30" for h in rng.integers(0, 24, 200)],
                          "share": rng.uniform(0, 1, 200).round(2), "label": rng.choice(["p", "q"], 200)})
    path = repo / "data" / "local" / "codes.csv"
    frame.to_csv(path, index=False)
    padded = sum(z.startswith("0") for z in zips)
    assert padded > 5

    read, info = load_local_table("codes", SourceConfig(path="data/local/codes.csv", target="label"), repo)
    records = {r["column"]: r for r in info["columns"]}
    assert records["zip"]["kind"] == "numeric" and records["zip"]["leading_zeros"] == padded
    assert not records["zip"]["warnings"]
    assert any("written with leading zeros" in n and "'sources.codes.categorical'" in n
               for n in records["zip"]["notices"])
    np.testing.assert_array_equal(read["zip"].to_numpy(), [float(z) for z in zips])
    warning, = records["code"]["warnings"]
    assert "'007' and '7'; '012' and '12'; 2 number(s) written in several ways" in warning
    assert "list it in 'sources.codes.categorical' to keep them apart" in warning
    assert "leading_zeros" not in records["clock"] and "leading_zeros" not in records["share"]
    report = schema_report("codes", read, encode_table(read), {})
    entries = {c["column"]: c for c in report["columns"]}
    assert entries["zip"]["leading_zeros"] == padded and "warnings" not in entries["zip"]
    assert entries["code"]["warnings"] == [warning] and report["summary"]["columns_with_warnings"] == 1

    kept = SourceConfig(path="data/local/codes.csv", target="label", categorical=["zip", "code"])
    read, info = load_local_table("codes", kept, repo)
    records = {r["column"]: r for r in info["columns"]}
    assert set(read["code"].cat.categories) == {"007", "7", "012", "12", "30"}
    assert records["zip"]["kind"] == "categorical" and any(z.startswith("0") for z in read["zip"].cat.categories)
    assert not any("leading zeros" in m for c in ("zip", "code") for m in records[c]["notices"] + records[c]["warnings"])


def test_csv_rows_short_of_fields_warn_and_repeated_header_lines_are_dropped(repo, capsys):
    """A CSV's data rows with fewer fields than its header are read with their last cells empty, as
    pandas reads them, with a warning naming the rows and their field counts (a value left out
    inside such a row shifts the rest); the header line repeated inside the file (files joined
    with their headers) is dropped with a notice instead of becoming a data row (a class named
    'label', the names read as cells). Explicitly empty trailing fields ('1,,') are not short."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    body = "".join(f"{i % 7},{i % 5}.5,{'xy'[i % 2]}\n" for i in range(30))
    path = repo / "data" / "local" / "joined.csv"
    path.write_text("a,b,label\n" + body + "3,,\n" + "a, b ,label\n" + body + "4,y\n\n   \n" + "5\n")
    read, info = load_local_table("joined", SourceConfig(path="data/local/joined.csv", target="label"), repo)
    err = capsys.readouterr().err
    assert ("data rows 63, 64 have fewer fields than the header's 3 (2, 1); their last columns are read as empty: "
            "if a value was left out inside such a row") in err
    assert "data row 32 repeats the header line (files joined with their headers); dropped" in err
    assert len(read) == 60 and set(read["class"].cat.categories) == {"x", "y"}  # "4,y" has no target
    assert info["dropped_rows"] == 3 and read["a"].notna().all() and info["columns"][0]["kind"] == "numeric"

    trailing = "".join(line + ",\n" for line in body.splitlines())  # every row ends in a delimiter
    path.write_text("a,b,label\n" + trailing + "3,x\n")
    read, _ = load_local_table("joined", SourceConfig(path="data/local/joined.csv", target="label"), repo)
    err = capsys.readouterr().err
    assert "read without it" in err and "data row 31 has fewer fields than the header's 3 (2); its last" in err
    assert len(read) == 30

    path.write_text("a,b,label\n" + body + "3,,\n")  # the last column's empty cell, no short row
    load_local_table("joined", SourceConfig(path="data/local/joined.csv", target="label"), repo)
    err = capsys.readouterr().err
    assert "fewer fields" not in err and "repeat" not in err


def test_integers_beyond_float64s_precision_that_become_one_value_warn(repo, capsys):
    """Integers of 17 digits and more (codes, account numbers) that float64 cannot keep apart
    (123456789012345678 and ...679 are one value) were read as numbers without a word, four codes
    becoming one constant column; now a warning names two of them and the setting that keeps them
    apart, and the schema report counts them (``merged_integers``), from a CSV's text and from a
    parquet int64 column. Listed in ``categorical``, they stay four levels; integers beyond 2**53
    that float64 keeps apart, and numbers written with an exponent, are not warned about."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    codes = [123456789012345678 + i % 4 for i in range(40)]
    frame = pd.DataFrame({"x": [i % 6 for i in range(40)], "code": codes, "label": ["ab"[i % 2] for i in range(40)]})
    local = repo / "data" / "local"
    frame.to_csv(local / "codes.csv", index=False)
    frame.to_parquet(local / "codes.parquet")
    for path in ("data/local/codes.csv", "data/local/codes.parquet"):
        read, info = load_local_table("codes", SourceConfig(path=path, target="label"), repo)
        err = capsys.readouterr().err
        assert ("WARNING column 'code': 4 distinct integers beyond 2**53 become 1 value(s) read as numbers (float64 "
                "cannot keep them apart: 123456789012345678 and 123456789012345679): if 'code' holds codes or ids, "
                "list it in 'sources.codes.categorical'") in err, path
        assert info["columns"][1]["merged_integers"] == 4 and read["code"].nunique() == 1
        kept, info = load_local_table("codes", SourceConfig(path=path, target="label", categorical=["code"]), repo)
        assert sorted(kept["code"].cat.categories) == [str(c) for c in sorted(set(codes))], path
        assert "2**53" not in capsys.readouterr().err and "merged_integers" not in info["columns"][1]
    frame.assign(code=[2 ** 60 + 1024 * (i % 4) for i in range(40)]).to_csv(local / "apart.csv", index=False)
    read, info = load_local_table("apart", SourceConfig(path="data/local/apart.csv", target="label"), repo)
    assert read["code"].nunique() == 4 and "2**53" not in capsys.readouterr().err


def test_an_excel_sep_line_above_the_column_names_is_read_as_the_delimiter_it_names(repo, capsys):
    """A CSV whose first line is Excel's 'sep=;' (the separator it is written with) is read as the
    same table without that line, with a notice; before, the line became the column names (an
    error saying the names were below a title, or the wrong delimiter hint). A 'sep=' line naming
    another separator than the source's delimiter is an error naming the setting; one naming a
    separator the reader does not take says so. A column whose name starts 'sep=' is a column."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    body = "".join(f"{i % 7};{i % 5}.5;{'xy'[i % 2]}\n" for i in range(30))
    local = repo / "data" / "local"
    (local / "plain.csv").write_text("a;b;label\n" + body)
    plain, plain_info = load_local_table("plain", SourceConfig(path="data/local/plain.csv", target="label",
                                                               delimiter=";"), repo)
    capsys.readouterr()
    for name, data in [("excel.csv", ("\ufeffsep=;\r\na;b;label\r\n" + body.replace("\n", "\r\n")).encode()),
                       ("upper.csv.gz", gzip.compress(("SEP=;\na;b;label\n" + body).encode()))]:
        (local / name).write_bytes(data)
        read, info = load_local_table("excel", SourceConfig(path=f"data/local/{name}", target="label",
                                                            delimiter=";"), repo)
        err = capsys.readouterr().err
        assert "the first line, 'sep=;', names the field separator (as Excel writes it)" in err, name
        pd.testing.assert_frame_equal(read, plain)
        assert info["columns"] == plain_info["columns"] and info["dropped_rows"] == 0
    (local / "tabs.tsv").write_text("sep=\t\na\tb\tlabel\n" + body.replace(";", "\t"))
    read, _ = load_local_table("tabs", SourceConfig(path="data/local/tabs.tsv", target="label"), repo)
    pd.testing.assert_frame_equal(read, plain)
    assert "'sep=\\t', names the field separator" in capsys.readouterr().err

    (local / "semi.csv").write_text("sep=;\na;b;label\n" + body)
    with pytest.raises(DataError, match=r"the first line, 'sep=;', says \(as Excel reads it\) that the fields are "
                                        r"separated by ';', not ',': set delimiter: ';' in 'sources.semi'"):
        load_local_table("semi", SourceConfig(path="data/local/semi.csv", target="label"), repo)
    (local / "tab.csv").write_text("sep=\t\na\tb\tlabel\n" + body.replace(";", "\t"))
    with pytest.raises(DataError, match=r"'sep=\\t'.* not ',': set delimiter: \"\\t\" in 'sources.tab'"):
        load_local_table("tab", SourceConfig(path="data/local/tab.csv", target="label"), repo)
    (local / "colon.csv").write_text("sep=:\na:b:label\n" + body.replace(";", ":"))
    with pytest.raises(DataError, match=r"separated by ':', which is not a delimiter this reader takes"):
        load_local_table("colon", SourceConfig(path="data/local/colon.csv", target="label"), repo)
    (local / "named.csv").write_text("sep=x;b;label\n" + body)
    read, _ = load_local_table("named", SourceConfig(path="data/local/named.csv", target="label",
                                                     delimiter=";"), repo)
    assert list(read.columns) == ["sep=x", "b", "class"] and "field separator" not in capsys.readouterr().err


def test_a_group_header_above_the_column_names_gives_its_columns_their_names(repo, capsys):
    """A header of groups ('Measurements' over two columns, merged in a sheet, blank beside it in
    a CSV) above a row of the columns' names: the second row was dropped as a second header and
    its names with it, the columns called 'Measurements' and 'Unnamed: 2'. They are now
    'Measurements height' and 'Measurements weight' (a notice gives each renaming), a blank
    header cell alone takes the name below it, and names in the header with units below them
    keep their names."""
    import openpyxl

    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    body = [[i % 5, 150 + i % 9, 50 + i % 7, "ab"[i % 2]] for i in range(40)]
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["site", "Measurements", None, "label"])
    sheet.merge_cells("B1:C1")
    sheet.append([None, "height", "weight", None])
    for row in body:
        sheet.append(row)
    book.save(repo / "data" / "local" / "groups.xlsx")
    lines = "".join(",".join(map(str, row)) + "\n" for row in body)
    (repo / "data" / "local" / "groups.csv").write_text("site,Measurements,,label\n,height,weight,\n" + lines)
    for path in ("data/local/groups.xlsx", "data/local/groups.csv"):
        read, info = load_local_table("groups", SourceConfig(path=path, target="label",
                                                             numeric=["Measurements weight"]), repo)
        assert list(read.columns) == ["site", "Measurements height", "Measurements weight", "class"], path
        assert "column names completed from it: 'Measurements' -> 'Measurements height', 'Unnamed: 2' -> " \
               "'Measurements weight'" in info["notes"][0], path
        assert read["Measurements weight"].tolist() == [float(r[2]) for r in body]
    (repo / "data" / "local" / "blank.csv").write_text("site,,weight,label\n,height,kg,\n" + lines)
    read, _ = load_local_table("blank", SourceConfig(path="data/local/blank.csv", target="label"), repo)
    assert list(read.columns) == ["site", "height", "weight", "class"]
    capsys.readouterr()


def test_a_second_header_line_of_units_or_long_names_is_dropped_with_a_notice(repo, capsys):
    """A CSV or sheet whose first data rows are a second header (units, longer names) gets them
    dropped with one notice naming them, and is read as the same table without those lines (the
    same columns, types and values): before, each numeric column got a warning for a missing cell
    and the target a class of one row ('Label'), which stopped the split. A first row of words in
    the numeric columns whose class other rows have, or one holding a number, stays a data row."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    rng = np.random.default_rng(5)
    order = rng.permutation(40)
    body = "".join(f"{20 + v},{150 + v * 0.7:.1f},{50 + v * 3 % 40},{'AB'[int(v % 3 == 0)]},{'xy'[i % 2]}\n"
                   for i, v in enumerate(order))
    header = "age,height,weight,city,label\n"
    path = repo / "data" / "local" / "units.csv"

    def read(text: str, name: str = "units.csv"):
        (repo / "data" / "local" / name).write_text(text)
        frame, info = load_local_table("units", SourceConfig(path=f"data/local/{name}", target="label"), repo)
        return frame, info, capsys.readouterr().err

    plain, plain_info, _ = read(header + body, "plain.csv")
    for lines, fragment in [
        ("Age (years),Height (cm),Weight (kg),City,Label\n",
         "data row 1 is a second header line, dropped: 'Age (years)', 'Height (cm)', 'Weight (kg)' above columns "
         "of numbers, no number, the target 'Label', which no other row has"),
        ("years,cm,kg,,\n", "data row 1 is a second header line, dropped: 'years', 'cm', 'kg' above columns of "
                             "numbers, no number, no target"),
        ("Age,Height,Weight,City,Label\nyears,cm,,,\n",
         "data rows 1-2 are more header lines, dropped: row 1: 'Age', 'Height', 'Weight' above columns of numbers, "
         "no number, the target 'Label', which no other row has; row 2: 'years', 'cm' above"),
    ]:
        frame, info, err = read(header + lines + body)
        assert fragment in err and "WARNING" not in err
        pd.testing.assert_frame_equal(frame, plain)
        assert info["columns"] == plain_info["columns"] and info["dropped_rows"] == 0

    rows = [["Age (years)", "Height (cm)", "Weight (kg)", "City", "Label"]] + [
        [20 + int(v), 150 + v * 0.7, 50 + int(v) * 3 % 40, "AB"[int(v % 3 == 0)], "xy"[i % 2]] for i, v in enumerate(order)]
    pd.DataFrame(rows, columns=header.strip().split(",")).to_excel(repo / "data" / "local" / "units.xlsx",
                                                                   index=False)
    frame, info = load_local_table("units", SourceConfig(path="data/local/units.xlsx", target="label"), repo)
    err = capsys.readouterr().err
    assert "data row 1 is a second header line, dropped: 'Age (years)'" in err and "WARNING" not in err
    assert frame["weight"].dtype == "float64" and frame["age"].tolist() == plain["age"].tolist()
    assert [r["kind"] for r in info["columns"]] == [r["kind"] for r in plain_info["columns"]]

    for first in ("unknown,unknown,unknown,A,x\n",  # a class other rows have: a data row
                  "Age,Height,2019,City,Label\n"):  # a number: a data row
        frame, _, err = read(header + first + body)
        assert "header line" not in err and len(frame) == 41 and "WARNING column 'age' is numeric" in err


def test_levels_folded_beside_a_level_named_other_do_not_join_it(repo, capsys):
    """A categorical with more than max_categories levels keeps the most frequent ones and folds
    the rest into 'other'; when a kept level is itself 'other' (a real answer), the folded rows
    get a level of their own ('other (2)', named in the warning and the record) instead of
    joining its rows without a word. A column without such a level folds into 'other'."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    cells = ["other"] * 30 + [f"k{i // 2}" for i in range(170)]
    lines = "".join(f"{i * 0.37 % 5:.2f},{c},{c if c != 'other' else 'zz'},{'xy'[i % 2]}\n" for i, c in enumerate(cells))
    (repo / "data" / "local" / "folded.csv").write_text("a,city,town,label\n" + lines)
    frame, info = load_local_table("folded", SourceConfig(path="data/local/folded.csv", target="label",
                                                          max_categories=5), repo)
    err = capsys.readouterr().err
    assert ("column 'city' has 86 levels > max_categories 5: kept the 4 most frequent, the rest -> 'other (2)' "
            "(164 rows) (the column has a level 'other' of its own)") in err
    assert frame["city"].value_counts()["other"] == 30 and frame["city"].value_counts()["other (2)"] == 164
    records = {r["column"]: r for r in info["columns"]}
    assert records["city"]["folded"] == {"levels": 82, "rows": 164, "into": "other (2)"}
    assert "the rest -> 'other' (164 rows)\n" in err and "into" not in records["town"]["folded"]


def test_a_parquet_categorical_of_numbers_stays_categorical(repo):
    """pandas writes a categorical of integer codes to parquet as plain integers (its metadata says
    'categorical'); read back, such a column is categorical again, its levels the codes, while an
    integer column beside it stays numeric."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    rng = np.random.default_rng(2)
    codes = rng.integers(0, 4, 90)
    pd.DataFrame({"region": pd.Categorical(codes), "count": codes * 3, "x": rng.normal(size=90),
                  "label": rng.choice(["p", "q"], 90)}).to_parquet(repo / "data" / "local" / "coded.parquet")
    read, info = load_local_table("coded", SourceConfig(path="data/local/coded.parquet", target="label"), repo)
    records = {r["column"]: r for r in info["columns"]}
    assert (records["region"]["read_as"], records["region"]["kind"]) == ("categories", "categorical")
    assert list(read["region"].cat.categories) == ["0", "1", "2", "3"]
    assert read["region"].astype(int).tolist() == codes.tolist()
    assert records["count"]["kind"] == "numeric"


def test_rows_without_any_feature_value_are_dropped_and_counted(repo):
    """A row with a class and every feature cell empty or a missing mark (a spacer row, a row whose
    only value was in a dropped column) was kept: imputed, it is the mean of every feature, chance
    as a query and a pull towards the mean as support. It is dropped now, with a note naming the
    rows, and counted in the fetch record and the schema report; a row with one feature value stays."""
    from seba.core.config import SourceConfig
    from seba.core.data import schema_report
    from seba.core.own_table import load_local_table

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 60)).round(3)
    lines = ["a,b,note,label"] + [
        f",,,{'pq'[i % 2]}" if i % 10 == 3 else f"?,{b[i]},,{'pq'[i % 2]}" if i == 5 else f"{a[i]},{b[i]},,{'pq'[i % 2]}"
        for i in range(60)]
    (repo / "data" / "local" / "spacers.csv").write_text("\n".join(lines) + "\n")
    read, info = load_local_table("spacers", SourceConfig(path="data/local/spacers.csv", target="label"), repo)
    assert len(read) == 54 and info["dropped_rows"] == 6 and read["b"].notna().all()
    assert "dropped 6 rows without any feature value (every feature cell empty or missing: rows 3, 13, 23, 33, 43, " \
           "..., counted from 0 over the file's data rows)" in info["notes"]
    assert np.isnan(read["a"][4]) and read["b"][4] == b[5]  # row 5 (one value) kept
    table = encode_table(read)
    assert schema_report("spacers", read, table, {})["summary"]["rows_without_features"] == 6


def test_a_target_class_spelled_like_a_missing_value_mark_warns_when_its_rows_are_dropped(repo, capsys):
    """Rows whose target is a missing-value mark are dropped as rows without a target; where three
    or more are ('None' x10: as many as a class needs), the note is a warning naming the mark and
    the fix (write the class another way), not a bare count. An empty target cell alone stays a
    notice. Both name the rows (a total below the table has no class)."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    rows = "".join(f"{i % 7},{i % 5}.5,{('mild', 'severe', 'None')[i % 3]}\n" for i in range(30))
    (repo / "data" / "local" / "marks.csv").write_text("a,b,label\n" + rows + "1,2,\n")
    read, info = load_local_table("marks", SourceConfig(path="data/local/marks.csv", target="label"), repo)
    assert info["notes"] == ["WARNING dropped 11 rows without a target (data rows 3, 6, 9, 12, 15, ...), 10 of them "
                             "for a missing-value mark "
                             "('None' x10), which may be a class ('None', 'NA' for North America): to keep such "
                             "rows, write that class another way in the file"]
    assert "WARNING dropped 11 rows" in capsys.readouterr().err and len(read) == 20

    rows = "".join(f"{i % 7},{i % 5}.5,{('mild', 'severe')[i % 2]}\n" for i in range(30))
    (repo / "data" / "local" / "marks.csv").write_text("a,b,label\n" + rows + "1,2,\n3,4,?\n")
    _, info = load_local_table("marks", SourceConfig(path="data/local/marks.csv", target="label"), repo)
    assert info["notes"] == ["dropped 2 rows without a target (data rows 31, 32)"]


def test_a_header_less_column_of_measurements_is_kept_where_an_index_would_be_dropped(repo):
    """A column without a header name and a distinct value in every row is dropped as a written row
    index when its values could be one (integers, in any order, or text); one of numbers with
    fractions is a feature, kept with a notice."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    rng = np.random.default_rng(4)
    order = rng.permutation(30)
    rows = "".join(f"{v:.6f},{order[i]},{i % 7},{i % 5}.5,{'xy'[i % 2]}\n" for i, v in enumerate(rng.normal(size=30)))
    (repo / "data" / "local" / "nameless.csv").write_text(",,a,b,label\n" + rows)
    read, info = load_local_table("nameless", SourceConfig(path="data/local/nameless.csv", target="label"), repo)
    records = {r["column"]: r for r in info["columns"]}
    assert records["Unnamed: 0"]["kind"] == "numeric" and "Unnamed: 0" in read.columns
    assert any("kept: it has no header name" in n and "fractions" in n for n in records["Unnamed: 0"]["notices"])
    assert (records["Unnamed: 1"]["kind"], records["Unnamed: 1"]["reason"]) == ("dropped", "row index")


def test_a_no_break_space_between_words_is_a_space_and_other_spacing_is_reported(repo, capsys):
    """'New York' written with a no-break space (as word processors and web pages join words) and
    with ' ' were two levels of a feature, and 'high risk' two classes of the target, without a
    word; a header name with one did not match the name typed in params.yaml. They are now read
    with ' ' (a notice counting the cells), and a numeric column whose digit groups a no-break
    space separates gets no such notice. Levels that differ in their runs of spaces ('New  York')
    stay different levels with a notice (the target: a warning), as levels in other cases do."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    nb = "\u00a0"
    rows = "".join(f"{i % 7},{('New York', f'New{nb}York', 'Boston')[i % 3]},{i % 4 + 1}{nb}{i % 10}00,"
                   f"{('high risk', f'high{nb}risk', 'low')[i % 3]}\n" for i in range(1, 31))
    (repo / "data" / "local" / "spaces.csv").write_text(f"a,home{nb}city,amount,label\n" + rows, encoding="utf-8")
    source = SourceConfig(path="data/local/spaces.csv", target="label", categorical=["home city"], thousands=" ")
    read, info = load_local_table("spaces", source, repo)
    assert list(read.columns) == ["a", "home city", "amount", "class"]
    assert list(read["home city"].cat.categories) == ["Boston", "New York"]
    assert list(read["class"].cat.categories) == ["high risk", "low"] and read["amount"].iloc[0] == 2100
    records = {r["column"]: r for r in info["columns"]}
    assert records["home city"]["notices"] == [
        "column 'home city': 10 cell(s) with a no-break or other Unicode space (which looks like ' ') read with ' ' "
        "in its place, so that words written with either are one value"]
    assert not records["amount"]["notices"] and records["amount"]["kind"] == "numeric"
    assert any(n.startswith("target column 'label': 10 cell(s) with a no-break") for n in info["notes"])
    capsys.readouterr()

    rows = "".join(f"{i % 7},{('New York', 'New  York', 'Boston')[i % 3]},{('high risk', 'high  risk', 'low')[i % 3]}\n"
                   for i in range(30))
    (repo / "data" / "local" / "runs.csv").write_text("a,city,label\n" + rows)
    read, info = load_local_table("runs", SourceConfig(path="data/local/runs.csv", target="label"), repo)
    assert read["city"].nunique() == 3 and read["class"].nunique() == 3
    records = {r["column"]: r for r in info["columns"]}
    assert "column 'city': levels that are the same words with other spacing ('New  York' x10 / 'New York' x10) " \
           "stay different levels: list 'spacing' in 'sources.runs.merge_spellings' to read them as one" in \
        records["city"]["notices"]
    assert "WARNING target column 'label': classes that differ only in spacing ('high  risk' x10 / 'high risk' x10) " \
           "are different classes: list 'spacing' in 'sources.runs.merge_spellings' to read them as one" in info["notes"]


def test_numbers_written_in_the_digits_of_other_scripts_are_numbers(repo, capsys):
    """A column of numbers written in Arabic-Indic ('١٢٫٥', with the Arabic decimal separator),
    Persian ('۱۲') or full-width digits ('１２．５', as CJK input writes them) was read as
    categorical text, its numbers levels, without a word; such cells are numbers now, with a
    notice counting them. Text with such digits in words stays text as written, and a target
    writing a class both ways ('1', '١') is the named error for one class written two ways."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    to = {"arabic": str.maketrans("0123456789.", "٠١٢٣٤٥٦٧٨٩٫"), "persian": str.maketrans("0123456789", "۰۱۲۳۴۵۶۷۸۹"),
          "wide": str.maketrans("0123456789.-", "０１２３４５６７８９．－")}
    numbers = [f"{(i * 7) % 23 - 5}.{i % 10}" for i in range(40)]
    frame = pd.DataFrame({name: [n.translate(table) for n in numbers] for name, table in to.items()})
    frame["room"] = [f"غرفة {str(i % 3).translate(to['arabic'])}" for i in range(40)]
    frame["label"] = ["ab"[i % 2] for i in range(40)]
    frame.to_csv(repo / "data" / "local" / "scripts.csv", index=False, encoding="utf-8")
    read, info = load_local_table("scripts", SourceConfig(path="data/local/scripts.csv", target="label"), repo)
    expected = np.array([float(n) for n in numbers])
    records = {r["column"]: r for r in info["columns"]}
    for name in ("arabic", "wide"):
        assert records[name]["kind"] == "numeric", records[name]
        np.testing.assert_array_equal(read[name].to_numpy(), expected)
        assert records[name]["notices"][0].startswith(f"column '{name}': 40 number(s) written in the digits of "
                                                      f"another script than ASCII's (e.g. '")
    np.testing.assert_array_equal(read["persian"].to_numpy(), expected)  # '.' between Persian digits
    assert records["room"]["kind"] == "categorical" and read["room"].iloc[1] == frame["room"].iloc[1]

    frame.assign(label=[("1", "١", "2")[i % 3] for i in range(40)]).to_csv(repo / "data" / "local" / "classes.csv",
                                                                           index=False, encoding="utf-8")
    with pytest.raises(DataError, match=r"target column 'label' writes a class in several ways"):
        load_local_table("classes", SourceConfig(path="data/local/classes.csv", target="label"), repo)


def test_bounds_trailing_minuses_and_fractions_are_numbers(repo):
    """Three other ways of writing numbers made a column categorical text, its numbers levels:
    bounds ('<0.5', '≤ 0.4', '>100', as lab values beyond a detection limit are written) with a
    warning that offered only to make them missing, a minus after the number ('21-', as some
    accounting exports write negatives) the same, and fractions ('3/4', '9 1/2') without a word.
    Each is read as its number now (a bound as the bound itself), with a notice counting the cells
    and a count or mark in the schema record; a column of bounds only ('<=50K', '>50K') stays
    categories, and pairs ('120/80') or yearless dates ('22/7') stay text with a hint."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    plain = [f"{1 + (i * 7) % 23 / 4:.2f}" for i in range(40)]
    frame = pd.DataFrame({
        "lab": plain[:36] + ["<0.5", "<0.5", "\u2264 0.4", ">100"],
        "ledger": [f"{i}-" if i % 2 else f"{i}" for i in range(40)],
        "size": ["1/2", "3/4", "7", "9 1/2", "-2 1/4", "10-3/8", "5/5", "12", None, "1/8"] * 4,
        "income": ["<=50K", ">50K"] * 20,
        "pressure": [f"{100 + i}/{60 + i % 30}" for i in range(40)],
        "day": [f"{1 + i % 28}/{1 + i % 12}" for i in range(40)],
        "label": ["ab"[i % 2] for i in range(40)]})
    read, records = _read_own(repo, "written", frame)
    np.testing.assert_array_equal(read["lab"].to_numpy(), [float(v) for v in plain[:36]] + [0.5, 0.5, 0.4, 100])
    assert records["lab"]["bounds"] == 4 and not records["lab"]["warnings"]
    assert records["lab"]["notices"] == ["column 'lab': 4 number(s) written as bounds ('<0.5' x2, '\u2264 0.4' x1, "
                                         "'>100' x1), read as the bound itself (e.g. '<0.5' is 0.5), as a value beyond "
                                         "a detection limit is often given: list 'lab' in 'sources.written.categorical' "
                                         "to keep them as text"]
    np.testing.assert_array_equal(read["ledger"].to_numpy(), [-i if i % 2 else i for i in range(40)])
    assert records["ledger"]["negatives"] == "trailing minus"
    assert records["ledger"]["notices"][0].startswith("column 'ledger': 20 number(s) written with the minus after")
    sizes = [0.5, 0.75, 7, 9.5, -2.25, 10.375, 1, 12, np.nan, 0.125] * 4
    np.testing.assert_array_equal(read["size"].to_numpy(), sizes)
    assert records["size"]["fractions"] == 28 and not records["size"]["warnings"]
    assert records["size"]["notices"][-1] == "column 'size': 28 number(s) written as fractions (e.g. '1/2'), read as their value (0.5)"
    assert records["income"]["kind"] == "categorical" and records["income"]["levels"] == 2
    for name, example in (("pressure", "100/60"), ("day", "1/1")):
        assert records[name]["kind"] == "categorical", records[name]
        assert records[name]["notices"] == [
            f"column '{name}' holds two numbers per cell, written with '/' (e.g. '{example}'), read as categorical "
            f"text: if they are a day and a month, write them as dates with the year; if two measurements (a blood "
            f"pressure), as two columns in the file"]
    # as text when the source says so: the cells as written
    kept, info = load_local_table("written", SourceConfig(path="data/local/written.csv", target="label",
                                                          categorical=["lab"]), repo)
    assert kept["lab"].iloc[-1] == ">100" and "bounds" not in info["columns"][0]


def test_a_few_cells_in_another_notation_among_plain_numbers_are_numbers_too(repo):
    """A bound, a minus after the number, a fraction or an ordinal in a few cells of a column of
    plain numbers (under 5 %, the numeric share) was a missing value with a warning, while the
    same cells in a larger share were numbers: now they are numbers however few, with the notice;
    a unit in a few cells stays a missing value (it may be another scale)."""
    plain = [f"{1 + (i * 7) % 23 / 4:.2f}" for i in range(100)]
    frame = pd.DataFrame({
        "lab": ["<0.5"] + plain[1:],
        "ledger": ["21-", "3.50-"] + plain[2:],
        "size": ["9 1/2"] + plain[1:],
        "rank": ["3rd"] + plain[1:],
        "share": ["12%"] + plain[1:],
        "label": ["ab"[i % 2] for i in range(100)]})
    read, records = _read_own(repo, "few", frame)
    rest = [float(v) for v in plain]
    for name, first in (("lab", [0.5]), ("ledger", [-21, -3.5]), ("size", [9.5]), ("rank", [3])):
        np.testing.assert_array_equal(read[name].to_numpy(), first + rest[len(first):])
        assert not records[name]["warnings"] and len(records[name]["notices"]) == 1, records[name]
    assert records["lab"]["bounds"] == 1 and records["ledger"]["negatives"] == "trailing minus"
    assert records["size"]["fractions"] == 1 and records["rank"]["ordinals"] == 1
    assert np.isnan(read["share"].iloc[0]) and "unit" not in records["share"]
    assert "1 non-numeric cell(s) read as missing ('12%' x1)" in records["share"]["warnings"][0]


def test_powers_of_ten_are_numbers_and_uncertainties_and_magnitudes_get_a_hint(repo):
    """Numbers written with a power of ten ('3.2 x 10^6', '1.5×10⁻³', as lab counts are) were
    categorical levels without a word: they are their value now, with a notice and their count,
    in the source's decimal mark ('1,5 x 10^3' under decimal ','). A number with its uncertainty
    ('0.3 ± 0.2') and numbers with magnitude suffixes ('1.2k' beside '2.5M' and '800') stay text,
    each with a notice saying what to write instead (for magnitudes: to list the column in
    'numeric', which reads them as their values)."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    frame = pd.DataFrame({
        "count": ["3.2 x 10^6", "1.5\u00d710\u207b\u00b3", "2*10**4", "10^6", "-4.1 X 10^-2", "7", None, "8e2"] * 5,
        "mass": [f"{i / 10:.1f} \u00b1 0.2" for i in range(40)],
        "followers": ["1.2k", "3k", "450", "2.5M", "800"] * 8,
        "label": ["ab"[i % 2] for i in range(40)]})
    read, records = _read_own(repo, "lab", frame)
    np.testing.assert_allclose(read["count"].to_numpy(), [3.2e6, 1.5e-3, 2e4, 1e6, -4.1e-2, 7, np.nan, 800] * 5)
    assert records["count"]["powers_of_ten"] == 25 and not records["count"]["warnings"]
    assert records["count"]["notices"] == [
        "column 'count': 25 number(s) written with a power of ten (e.g. '3.2 x 10^6'), read as their value (3.2e+06)"]
    assert records["mass"]["kind"] == "categorical" and records["mass"]["notices"] == [
        "column 'mass' holds a number and its uncertainty per cell (e.g. '0.0 \u00b1 0.2'), read as categorical text: "
        "write the value and its uncertainty as two columns in the file"]
    assert records["followers"]["kind"] == "categorical" and records["followers"]["notices"] == [
        "column 'followers' holds numbers written with magnitude suffixes (e.g. '1.2k'), read as categorical text: "
        "if they are magnitudes (k thousands, M millions, B billions), list 'followers' in 'sources.lab.numeric' to "
        "read them as their values ('1.2k' as 1200)"]
    read, records = _read_own(repo, "lab", frame, numeric=["followers"])
    np.testing.assert_array_equal(read["followers"].to_numpy(), [1200, 3000, 450, 2.5e6, 800] * 8)
    assert records["followers"]["magnitudes"] == 24 and records["followers"]["notices"] == [
        "column 'followers': 24 number(s) written with a suffix for thousands, millions or billions (e.g. '1.2k'), "
        "read as their value (1200)"]
    pd.DataFrame({"count": ["1,5 x 10^3", "2,25", "3"] * 10, "x": [f"{i},5" for i in range(30)],
                  "label": ["ab"[i % 2] for i in range(30)]}).to_csv(repo / "data" / "local" / "comma.csv",
                                                                       index=False, sep=";")
    read, _ = load_local_table("comma", SourceConfig(path="data/local/comma.csv", target="label", delimiter=";",
                                                     decimal=","), repo)
    np.testing.assert_array_equal(read["count"].to_numpy(), [1500, 2.25, 3] * 10)


def test_months_quarters_durations_with_units_and_approximate_numbers_are_numbers(repo):
    """Months ('2020-01', '03/2021'), quarters ('2020-Q1', 'Q3 2021'), durations written with their
    units ('1h 30m', '45m', '2 hours') and approximate numbers ('~5', 'ca. 1850') were categorical
    levels without a word, their order lost: they are numbers now, each with a notice (a month or
    quarter as days since the column's earliest first day, a duration as seconds). One unit in every
    cell ('45 min') is not a duration but a number with a unit, which the notice names, and so is
    a unit before the number ('USD 83')."""
    frame = pd.DataFrame({
        "month": ["2020-01", "2020-02", "03/2021", "12-2019", None] * 8,
        "quarter": ["2020-Q1", "2020 Q2", "Q3 2021", "Q4-2019"] * 10,
        "wait": ["1h 30m", "2h", "45m", "1d 2h", "90s", "2 hours 5 minutes", "3 hrs, 10 mins", None] * 5,
        "lap": ["1M 5S", "45S", "2M"] * 13 + ["1M"],  # upper case
        "minutes": [f"{5 * i} min" for i in range(40)],
        "year": ["~5", "\u2248 5.5", "ca. 1850", "approx. 12", "~1/2", "7", "circa 1900", "8"] * 5,
        "price": [f"USD {10 * i}" for i in range(40)],
        "label": ["ab"[i % 2] for i in range(40)]})
    read, records = _read_own(repo, "spans", frame)
    np.testing.assert_array_equal(read["month"].to_numpy(), [31, 62, 456, 0, np.nan] * 8)  # days since 2019-12-01
    assert records["month"]["notices"] == [
        "column 'month': months (each its first day) read as numbers, days since the column's earliest, 2019-12-01 "
        "00:00:00 (e.g. '2020-01' is 31)"]
    np.testing.assert_array_equal(read["quarter"].to_numpy(), [92, 183, 639, 0] * 10)  # since 2019-10-01
    assert records["quarter"]["notices"][0].startswith("column 'quarter': quarters (each its first day) read as")
    np.testing.assert_array_equal(read["wait"].to_numpy(), [5400, 7200, 2700, 93600, 90, 7500, 11400, np.nan] * 5)
    assert records["wait"]["time_as"] == "seconds" and records["wait"]["notices"] == [
        "column 'wait': durations written with their units read as numbers, seconds (e.g. '1h 30m' is 5400)"]
    np.testing.assert_array_equal(read["lap"].to_numpy(), [65, 45, 120] * 13 + [60])
    assert records["minutes"]["kind"] == "categorical" and "followed by 'min'" in records["minutes"]["notices"][0]
    np.testing.assert_array_equal(read["year"].to_numpy(), [5, 5.5, 1850, 12, 0.5, 7, 1900, 8] * 5)
    assert records["year"]["approximate"] == 30 and records["year"]["notices"][0] == (
        "column 'year': 30 number(s) written as approximate (e.g. '~5'), read as the number (5)")
    assert records["price"]["kind"] == "categorical" and records["price"]["notices"] == [
        "column 'price' holds numbers preceded by 'USD' (e.g. 'USD 0'), read as categorical text: if 'USD' is a "
        "unit, list 'price' in 'sources.spans.numeric' to read them as the numbers without it"]


def test_every_count_of_a_columns_notation_reaches_the_schema_report(repo):
    """The schema report carries what each column's record counts: the unit, the negatives, the
    bounds, fractions, ordinals, powers of ten and approximate numbers (ordinals, powers of ten and
    approximate numbers were counted in the fetch record only)."""
    from seba.core.config import SourceConfig
    from seba.core.data import schema_report
    from seba.core.own_table import load_local_table

    plain = [f"{1 + (i * 7) % 23 / 4:.2f}" for i in range(40)]
    frame = pd.DataFrame({
        "lab": ["<0.5"] + plain[1:], "ledger": ["21-"] + plain[1:], "size": ["9 1/2"] + plain[1:],
        "rank": ["3rd"] + plain[1:], "count": ["3 x 10^6"] + plain[1:], "year": ["~5"] + plain[1:],
        "price": [f"${v}" for v in plain], "label": ["ab"[i % 2] for i in range(40)]})
    frame.to_csv(repo / "data" / "local" / "counted.csv", index=False)
    read, _ = load_local_table("counted", SourceConfig(path="data/local/counted.csv", target="label"), repo)
    entries = {e["column"]: e for e in schema_report("counted", read, encode_table(read), {})["columns"]}
    expected = {"lab": ("bounds", 1), "ledger": ("negatives", "trailing minus"), "size": ("fractions", 1),
                "rank": ("ordinals", 1), "count": ("powers_of_ten", 1), "year": ("approximate", 1),
                "price": ("unit", "$")}
    assert {name: (field, entries[name].get(field)) for name, (field, _) in expected.items()} == expected


def test_numbers_marked_as_text_for_a_spreadsheet_are_numbers_counted_per_column(repo):
    """A number marked as text for a spreadsheet, with a leading apostrophe (a CSV-injection
    escape writes "'-5.25" for a negative number; a cell typed as text, "'812") or as Excel's text
    formula ('="01234"', as exports that keep leading zeros write codes), made a column of numbers
    categorical text: its levels folded into 'other' with no word of why. Such cells are the number
    now, counted with a notice (the text formula as the text it gives, in any column), so that the
    leading-zero rule sees '01234'; a column named in 'categorical' keeps the apostrophes as
    written, and a marked cell that is not a number stays text."""
    from seba.core.data import schema_report

    rows = 120
    change = [f"{(i * 37) % 200 / 4 - 25:.2f}" for i in range(rows)]
    frame = pd.DataFrame({
        "change": [f"'{v}" if v.startswith("-") else v for v in change],
        "typed": [f"'{v}" for v in change],
        "zip": [f'="{(i * 7919) % 100000:05d}"' for i in range(rows)],
        "kept": [f"'{v}" for v in change],
        "word": ["'abc", "'=1+2", "'x"] * (rows // 3),
        "label": ["ab"[i % 2] for i in range(rows)]})
    read, records = _read_own(repo, "marked", frame, categorical=["kept"])
    expected = np.array([float(v) for v in change])
    np.testing.assert_array_equal(read["change"].to_numpy(), expected)
    np.testing.assert_array_equal(read["typed"].to_numpy(), expected)
    negatives = sum(v.startswith("-") for v in change)
    assert records["change"]["kind"] == "numeric" and records["change"]["text_marked"] == negatives
    first = next(v for v in change if v.startswith("-"))
    assert records["change"]["notices"] == [
        f"column 'change': {negatives} number(s) written as text for a spreadsheet (with a leading ') "
        f"(e.g. ''{first}'), read as the number ({float(first):g}): list 'change' in "
        f"'sources.marked.categorical' to keep them as text (codes)"] and not records["change"]["warnings"]
    assert records["typed"]["text_marked"] == rows
    np.testing.assert_array_equal(read["zip"].to_numpy(), [float((i * 7919) % 100000) for i in range(rows)])
    zeros = sum(f"{(i * 7919) % 100000:05d}".startswith("0") for i in range(rows))
    assert records["zip"]["leading_zeros"] == zeros > 0 and records["zip"]["notices"][0] == (
        f"column 'zip': {rows} cell(s) written as Excel's text formula (=\"...\", as exports that keep leading zeros "
        f"write cells) read as the text it gives")
    assert records["kept"]["kind"] == "categorical" and set(read["kept"].astype(str)) <= set(frame["kept"]) | {
        "other"} and "text_marked" not in records["kept"]
    assert records["word"]["kind"] == "categorical" and set(read["word"].astype(str)) == {"'abc", "'=1+2", "'x"}
    entries = {e["column"]: e for e in schema_report("marked", read, encode_table(read), {})["columns"]}
    assert entries["change"]["text_marked"] == negatives and entries["typed"]["text_marked"] == rows


def test_a_class_or_level_written_with_and_without_a_spreadsheets_text_mark_is_named(repo, capsys):
    """A class written both with a spreadsheet's text mark and without ("'1" beside '1', '="A"' beside
    'A') became two classes without a word. Excel's text formula ('="A"') is read as the text it
    gives, in the target and the features alike, with a notice: one class, one level. A number
    with a leading apostrophe beside the same number without is refused as '1' beside '1.0' is (a
    class written in several ways); words so marked get a warning, as classes that differ only in
    case do, and a categorical feature's levels a notice."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    rows = 60
    frame = pd.DataFrame({"x": [i / 7 for i in range(rows)], "y": [(i * 3) % 11 for i in range(rows)],
                          "grade": ['="A"', "A", "B"] * (rows // 3), "mark": ["'A", "A", "B"] * (rows // 3),
                          "label": ["'1", "1", "2"] * (rows // 3)})
    frame.to_csv(repo / "data" / "local" / "marks.csv", index=False)
    with pytest.raises(DataError, match=r"target column 'label' writes a class in several ways \(''1' x20 / '1' "
                                        r"x20\), which would make them different classes"):
        load_local_table("marks", SourceConfig(path="data/local/marks.csv", target="label"), repo)
    capsys.readouterr()
    read, records = _read_own(repo, "marks", frame.assign(label=['="a"', "a", "'b"] * (rows // 3)))
    assert sorted(read["class"].unique()) == ["'b", "a"]
    assert list(read["grade"].cat.categories) == ["A", "B"] and records["grade"]["notices"] == [
        "column 'grade': 20 cell(s) written as Excel's text formula (=\"...\", as exports that keep leading zeros "
        "write cells) read as the text it gives"]
    log = capsys.readouterr().err
    assert ("target column 'label': 20 cell(s) written as Excel's text formula (=\"...\", as exports that keep "
            "leading zeros write cells) read as the text it gives") in log
    read, records = _read_own(repo, "marks", frame.assign(label=["'a", "a", "b"] * (rows // 3)))
    assert sorted(read["class"].unique()) == ["'a", "a", "b"]
    assert ("WARNING target column 'label': classes that differ only in a spreadsheet's text mark (a leading ') "
            "(''a' x20 / 'a' x20) are different classes: list 'mark' in 'sources.marks.merge_spellings' to read them "
            "as one") in capsys.readouterr().err
    assert records["mark"]["notices"] == [
        "column 'mark': levels that are the same words, marked as text for a spreadsheet or not (''A' x20 / 'A' x20) "
        "stay different levels: list 'mark' in 'sources.marks.merge_spellings' to read them as one"]


def test_numbers_with_a_footnote_mark_are_numbers_counted_per_column(repo):
    """Statistical tables flag provisional or estimated values and significance with a mark after
    the number ('87.2*', '0.03**', '7†'): a tenth of a column's cells so marked made it categorical
    text (only 90 % numbers), its levels folded. They are the number now, counted with a notice,
    and the other notations read the rest ('<0.5*' is a bound); a mark alone stays a non-number.
    So are Eurostat's flags, letters after a space ('12.5 p' provisional, '9.8 e' estimated), beside
    plain numbers; its ':' (not available) stays a non-numeric cell, warned."""
    rows = 100
    plain = [f"{1 + (i * 37) % 97 / 4:.2f}" for i in range(rows)]
    frame = pd.DataFrame({
        "rate": [f"{v}*" if i % 10 == 0 else v for i, v in enumerate(plain)],
        "p": [f"{v} {'*' * (1 + i % 3)}" if i % 2 else v for i, v in enumerate(plain)],
        "lab": [("<0.5*" if i == 5 else f"{v}\u2020") if i % 10 == 5 else ("*" if i == 1 else v)
                for i, v in enumerate(plain)],
        "label": ["ab"[i % 2] for i in range(rows)]})
    read, records = _read_own(repo, "flagged", frame)
    np.testing.assert_array_equal(read["rate"].to_numpy(), [float(v) for v in plain])
    assert records["rate"]["footnoted"] == 10 and records["rate"]["notices"] == [
        f"column 'rate': 10 number(s) written with a footnote mark ('*', '\u2020', ...) (e.g. '{plain[0]}*'), read "
        f"as the number without it ({float(plain[0]):g})"] and not records["rate"]["warnings"]
    np.testing.assert_array_equal(read["p"].to_numpy(), [float(v) for v in plain])
    assert records["p"]["footnoted"] == rows // 2
    assert read["lab"].iloc[5] == 0.5 and records["lab"]["bounds"] == 1 and records["lab"]["footnoted"] == 10
    assert np.isnan(read["lab"].iloc[1]) and records["lab"]["converted"] == {"*": 1}
    np.testing.assert_array_equal(read["lab"].iloc[15:16].to_numpy(), [float(plain[15])])

    eurostat = pd.DataFrame({"y2020": [f"{v} {'pebu'[i % 4] if i % 4 else 'bep'}" if i % 5 == 0 else (
        ":" if i in (3, 17) else v) for i, v in enumerate(plain)], "x": plain, "label": frame["label"]})
    read, records = _read_own(repo, "eurostat", eurostat)
    flagged = sum(1 for i in range(rows) if i % 5 == 0)
    assert records["y2020"]["kind"] == "numeric" and records["y2020"]["flagged"] == flagged
    assert records["y2020"]["notices"] == [
        "column 'y2020': 2 cell(s) marked missing (':' x2)",
        f"column 'y2020': {flagged} number(s) written with a statistical flag after them ('p' provisional, 'e' "
        f"estimated, as Eurostat writes them) (e.g. '{plain[0]} bep'), read as the number ({float(plain[0]):g})"]
    assert not records["y2020"]["warnings"]
    assert read["y2020"].iloc[5] == float(plain[5]) and np.isnan(read["y2020"].iloc[3])
    # a sparse series: ':' in a third of the cells, and the World Bank's '..', are missing marks
    sparse = pd.DataFrame({"gdp": [":" if i % 3 == 0 else ".." if i % 7 == 0 else v for i, v in enumerate(plain)],
                           "x": plain, "label": frame["label"]})
    read, records = _read_own(repo, "sparse", sparse)
    assert records["gdp"]["kind"] == "numeric" and not records["gdp"]["warnings"]
    assert records["gdp"]["converted"] == {":": sum(1 for i in range(rows) if i % 3 == 0), "..": sum(1 for i in range(rows) if i % 3 and i % 7 == 0)}


def test_angles_in_degrees_minutes_and_seconds_are_decimal_degrees(repo):
    """Coordinates written in degrees, minutes and seconds ('45°30′15″N', "73° 59' 8\" W") or in
    degrees ('-12.5°', '87°') were categorical text: a column of latitudes became levels, folded.
    They are decimal degrees now, south and west negative, counted with a notice (a fraction after
    '.' or ','); '°C' stays a unit (its hint), and minutes of 60 or more are not an angle."""
    rows = 60
    lat = [(-1) ** i * (i * 1.37 % 80) for i in range(rows)]

    def dms(x, sides):
        d, rest = divmod(abs(x) * 3600, 3600)
        m, sec = divmod(rest, 60)
        return f"{int(d)}\u00b0{int(m)}\u2032{sec:.1f}\u2033{sides[x < 0]}", (d + m / 60 + round(sec, 1) / 3600) * (
            -1 if x < 0 else 1)

    written, values = zip(*(dms(x, "NS") for x in lat))
    frame = pd.DataFrame({
        "lat": written, "lon": [f"{int(abs(x))}\u00b0 {i % 60}' {i % 7}\" {'W' if x < 0 else 'E'}"
                                for i, x in enumerate(lat)],
        "angle": [f"{x:.2f}\u00b0" for x in lat], "temp": [f"{x:.1f} \u00b0C" for x in lat],
        "odd": [f"{i % 9}\u00b0{60 + i}'" for i in range(rows)], "comma": ["45,5\u00b0", "12\u00b030,5\u2032S"] * 30,
        "label": ["ab"[i % 2] for i in range(rows)]})
    read, records = _read_own(repo, "coords", frame)
    np.testing.assert_allclose(read["comma"].to_numpy(), [45.5, -(12 + 30.5 / 60)] * 30, rtol=1e-12)
    np.testing.assert_allclose(read["lat"].to_numpy(), values, rtol=1e-12)
    assert records["lat"]["degrees"] == rows and records["lat"]["notices"] == [
        f"column 'lat': {rows} number(s) written in degrees (with minutes and seconds or not) (e.g. '{written[0]}'), "
        f"read as decimal degrees, south and west negative ({values[0]:g})"]
    np.testing.assert_allclose(read["lon"].to_numpy(), [(-1 if x < 0 else 1) * (int(abs(x)) + i % 60 / 60
                                                        + i % 7 / 3600) for i, x in enumerate(lat)], rtol=1e-12)
    np.testing.assert_allclose(read["angle"].to_numpy(), [round(x, 2) for x in lat], rtol=1e-12)
    assert records["temp"]["kind"] == records["odd"]["kind"] == "categorical"
    assert "degrees" not in records["temp"] and "degrees" not in records["odd"]


def test_missing_indicators_add_a_column_beside_each_numeric_column_with_missing_cells(repo):
    """Mean imputation (the paper's) keeps no trace of which rows of a numeric column were missing.
    ``sources.<name>.missing_indicators: true`` adds a 0/1 column after each numeric column with
    missing cells, 1 where the cell is missing, under a free name, counted in a note and recorded
    (``indicator_of`` in the schema report); numeric columns without missing cells and categorical
    ones (a missing level is an all-zero block already) get none, and the default adds nothing.
    The option applies only to local tables."""
    from seba.core.config import load_params
    from seba.core.data import schema_report

    rows = 60
    frame = pd.DataFrame({"dose": ["" if i % 4 == 0 else f"{i / 3:.2f}" for i in range(rows)],
                          "dose (missing)": [(i * 7) % 5 for i in range(rows)],
                          "age": [20 + (i * 13) % 50 for i in range(rows)],
                          "colour": ["" if i % 5 == 0 else "rgb"[i % 3] for i in range(rows)],
                          "label": ["ab"[i % 2] for i in range(rows)]})
    plain, plain_records = _read_own(repo, "gaps", frame)
    assert list(plain.columns) == ["dose", "dose (missing)", "age", "colour", "class"]
    read, records = _read_own(repo, "gaps", frame, missing_indicators=True)
    assert list(read.columns) == ["dose", "dose (missing 2)", "dose (missing)", "age", "colour", "class"]
    np.testing.assert_array_equal(read["dose (missing 2)"].to_numpy(), [float(i % 4 == 0) for i in range(rows)])
    assert records["dose (missing 2)"] == {"column": "dose (missing 2)", "forced": None, "converted": {}, "warnings": [],
                                           "notices": [], "read_as": "missing indicator", "kind": "numeric",
                                           "missing": 0, "indicator_of": "dose"}
    pd.testing.assert_frame_equal(read.drop(columns="dose (missing 2)"), plain)
    table = encode_table(read)
    entries = {e["column"]: e for e in schema_report("gaps", read, table, {})["columns"]}
    assert entries["dose (missing 2)"]["indicator_of"] == "dose" and entries["dose (missing 2)"]["kind"] == "numeric"
    assert list(table.columns) == ["dose", "dose (missing 2)", "dose (missing)", "age", "colour"]
    edit_params(repo, lambda p: p["sources"]["diabetes"].update(missing_indicators=True))
    with pytest.raises(ConfigError, match=r"'sources.diabetes.missing_indicators' applies only to local tables"):
        load_params(repo / "params.yaml")


def test_merge_spellings_reads_a_level_or_class_written_in_several_ways_as_one(repo, capsys):
    """Levels that are one value written in several ways ('TRUE' beside 'True', as files joined from
    Excel's and Python's exports write a boolean; 'New York' beside 'New  york'; "'A" beside 'A';
    '1' beside '1.0') stay different levels with a notice, and there was no way but editing the
    file to read them as one. ``sources.<name>.merge_spellings`` lists the ways to merge; each
    group becomes the spelling most of its cells use, in the features and the target, with a
    notice and the count in the schema report; the notices and the target's warning or error name
    the key, and a way not listed keeps its levels apart. A bad value is a named error."""
    from seba.core.config import load_params
    from seba.core.data import schema_report

    rows = 120
    frame = pd.DataFrame({
        "flag": ["TRUE" if i % 3 else "True" for i in range(rows)],
        "city": ["New York" if i % 4 else "New  york" if i % 8 else "Boston" for i in range(rows)],
        "grade": ["'A" if i % 4 == 0 else "A" if i % 2 else "B" for i in range(rows)],
        "code": ["1" if i % 2 else "1.0" if i % 3 else "2" for i in range(rows)],
        "x": [i / 7 for i in range(rows)],
        "label": ["yes" if i % 5 else "Yes" if i % 2 else "no" for i in range(rows)]})
    read, records = _read_own(repo, "spelled", frame)
    assert records["flag"]["levels"] == 2 and records["flag"]["notices"] == [
        "column 'flag': levels that are the same word in other cases ('TRUE' x80 / 'True' x40) stay different "
        "levels: list 'case' in 'sources.spelled.merge_spellings' to read them as one"]
    assert ("WARNING target column 'label': classes that differ only in case ('Yes' x12 / 'yes' x96) are different "
            "classes: list 'case' in 'sources.spelled.merge_spellings' to read them as one") in capsys.readouterr().err
    read, records = _read_own(repo, "spelled", frame, merge_spellings=["case", "spacing", "mark"],
                              categorical=["code"])
    assert set(read["flag"].astype(str)) == {"TRUE"} and records["flag"]["merged_levels"] == 1
    assert records["flag"]["notices"] == [
        "column 'flag': 1 other spelling(s) read as the one most cells use (merge_spellings: case, spacing, mark; "
        "40 cells): 'True' -> 'TRUE'"]
    assert read["city"].value_counts().to_dict() == {"New York": 105, "Boston": 15}
    assert read["grade"].value_counts().to_dict() == {"A": 90, "B": 30}
    assert sorted(read["class"].unique()) == ["no", "yes"] and (read["class"] == "yes").sum() == 108
    assert ("target column 'label': 1 other spelling(s) read as the one most cells use (merge_spellings: case, "
            "spacing, mark; 12 cells): 'Yes' -> 'yes'") in capsys.readouterr().err
    assert set(read["code"].astype(str)) == {"1", "1.0", "2"} and "merged_levels" not in records["code"]
    assert "list 'number' in 'sources.spelled.merge_spellings'" in records["code"]["notices"][0]
    read, records = _read_own(repo, "spelled", frame, merge_spellings=["number"], categorical=["code"])
    assert read["code"].value_counts().to_dict() == {"1": 100, "2": 20} and records["flag"]["levels"] == 2
    entries = {e["column"]: e for e in schema_report("spelled", read, encode_table(read), {})["columns"]}
    assert entries["code"]["merged_levels"] == 1
    with pytest.raises(DataError, match=r"target column 'label' writes a class in several ways \('1' x80 / '1.0' "
                                        r"x20\), .*, or list 'number' in 'sources.spelled.merge_spellings'"):
        _read_own(repo, "spelled", frame.assign(label=["1" if i % 3 else "1.0" if i % 2 else "2"
                                                       for i in range(rows)]))
    read, _ = _read_own(repo, "spelled", frame.assign(label=["1" if i % 3 else "1.0" if i % 2 else "2"
                                                             for i in range(rows)]), merge_spellings=["number"])
    assert read["class"].value_counts().to_dict() == {"1": 100, "2": 20}
    for bad in ("case", ["Case"], ["case", 1]):
        edit_params(repo, lambda p: p["sources"].update(
            mine={"path": "data/local/spelled.csv", "target": "label", "merge_spellings": bad}))
        with pytest.raises(ConfigError, match=r"'sources.mine.merge_spellings' must be a list of 'case', 'spacing', "
                                              r"'mark', 'number'"):
            load_params(repo / "params.yaml")


def test_numbers_with_fortrans_exponent_letter_are_numbers_with_a_power_of_ten(repo):
    """Fortran writes a double's exponent with 'D' ('1.6505D+02', '-3.1d-05'): a column of them was
    categorical text, its levels folded into 'other' with no word of why. They are numbers now,
    counted as powers of ten, alone or beside plain numbers; a letter 'D' without the exponent's
    sign ('3D6' dice, '12D4' seat codes) stays text."""
    rows = 90
    values = [(-1) ** i * (i + 1.25) * 10.0 ** (i % 7 - 3) for i in range(rows)]
    fortran = [f"{v:.4E}".replace("E", "D") for v in values]
    frame = pd.DataFrame({
        "flux": fortran,
        "mixed": [f.lower() if i % 3 == 0 else f"{v:.6g}" for i, (f, v) in enumerate(zip(fortran, values))],
        "dice": [f"{i % 4 + 1}D6" for i in range(rows)],
        "seat": [f"{i}D{i % 5}" for i in range(rows)],
        "label": ["ab"[i % 2] for i in range(rows)]})
    read, records = _read_own(repo, "fortran", frame)
    np.testing.assert_allclose(read["flux"].to_numpy(), [float(f.replace("D", "E")) for f in fortran], rtol=0)
    assert records["flux"]["powers_of_ten"] == rows and records["flux"]["notices"] == [
        f"column 'flux': {rows} number(s) written with a power of ten (e.g. '{fortran[0]}'), read as their value "
        f"({float(fortran[0].replace('D', 'E')):g})"] and not records["flux"]["warnings"]
    assert records["mixed"]["kind"] == "numeric" and records["mixed"]["powers_of_ten"] == rows // 3
    assert read["mixed"].iloc[3] == float(fortran[3].replace("D", "E"))
    assert records["dice"]["kind"] == records["seat"]["kind"] == "categorical"
    assert "powers_of_ten" not in records["dice"] and "powers_of_ten" not in records["seat"]


def test_numbers_written_with_several_units_get_a_notice_to_write_one(repo):
    """Numbers written with a few units of one quantity ('1374 g' beside '2.2 kg', 'USD 5' beside
    'EUR 7') stay categorical text (converting between units is the user's), but the column's
    levels were folded into 'other' with no word of why: each unit alone was under the share the
    one-unit hint needs. A notice now names the units and asks for one; a column of one unit keeps
    its notice, and numbers among many different words, or after single letters ('C85', a cabin), get
    none. Feet and inches ('5'11"') got the
    one-unit notice, to remove '"' (which leaves no number): theirs says to write one number. A list
    or mapping per cell ("['red', 'blue']", '{"math": 3}'), each distinct one a level, got no word:
    its notice says to write the items as columns."""
    rows = 120
    frame = pd.DataFrame({
        "weight": [f"{1 + i / 40:.1f} kg" if i % 2 else f"{1000 + 17 * i} g" for i in range(rows)],
        "price": [f"{'USD' if i % 3 else 'EUR'} {100 + 7 * i}" for i in range(rows)],
        "mass": [f"{1 + i / 40:.2f} kg" for i in range(rows)],
        "notes": [f"{i} {w}" for i, w in zip(range(rows), ["apples", "pears", "cars", "bikes", "dogs", "cats"] * 20)],
        "height": [f"{5 + i % 2}'{i % 12}\"" for i in range(rows)],
        "tags": [str(["red", "blue", "green"][: i % 4]) for i in range(rows)],
        "scores": [f'{{"math": {i}, "art": {i % 7}}}' for i in range(rows)],
        "cabin": [f"{'ABCDE'[i % 5]}{i % 37 + 1}" for i in range(rows)],
        "label": ["ab"[i % 2] for i in range(rows)]})
    read, records = _read_own(repo, "units", frame)
    assert records["tags"]["kind"] == "categorical" and records["tags"]["notices"] == [
        "column 'tags' holds a list or a mapping per cell (e.g. '['red']'), read as categorical text, each "
        "distinct one a level: write its items as columns of their own in the file (a column per position, or a "
        "0/1 column per item a cell may hold)"]
    assert records["scores"]["notices"][0].startswith("column 'scores' holds a list or a mapping per cell (e.g. "
                                                      "'{\"math\": 0, \"art\": 0}'), read as categorical text")
    assert records["height"]["kind"] == "categorical" and records["height"]["notices"] == [
        "column 'height' holds two numbers per cell written with ' and \" (e.g. '5'0\"'), feet and inches or "
        "minutes and seconds, read as categorical text: write each as one number in the file (inches, seconds) to "
        "read them as numbers"]
    assert records["weight"]["kind"] == "categorical" and records["weight"]["notices"] == [
        "column 'weight' holds numbers followed by 2 different words ('g' (e.g. '1000 g'), 'kg' (e.g. '1.0 kg')), "
        "read as categorical text: if they are units of one quantity, convert every cell to one unit and remove it "
        "in the file to read them as numbers"]
    assert records["price"]["notices"] == [
        "column 'price' holds numbers preceded by 2 different words ('USD' (e.g. 'USD 107'), 'EUR' (e.g. 'EUR "
        "100')), read as categorical text: if they are units of one quantity, convert every cell to one unit and "
        "remove it in the file to read them as numbers"]
    assert records["mass"]["notices"] == [
        "column 'mass' holds numbers followed by 'kg' (e.g. '1.00 kg'), read as categorical text: if 'kg' is a "
        "unit, list 'mass' in 'sources.units.numeric' to read them as the numbers without it"]
    assert records["notes"]["kind"] == "categorical" and not records["notes"]["notices"]
    # single letters before numbers are codes (a cabin, a grid square), not units
    assert records["cabin"]["kind"] == "categorical" and not records["cabin"]["notices"]


def test_a_column_named_in_numeric_reads_numbers_written_with_one_word_as_the_numbers(repo):
    """A column of numbers written with a unit of letters ('71.3 kg', 'USD 775') is categorical
    text, with a notice naming the unit; listing it in 'numeric', as a user would, made every cell
    missing and dropped the column. Such a column's numbers are now read without the word, with a
    notice and the unit in its record (cells without it are numbers too), and the hint names
    'numeric'. Not taken off: several words ('1374 g' beside '0.7 kg': not one scale; the warning
    names them); a magnitude suffix ('1.2k' beside '800') is its value (1200). A column named
    in 'numeric' with no number at all is an error that says what its cells hold (it was dropped)."""
    rows = 120
    weight = [50 + (i * 37) % 400 / 10 for i in range(rows)]
    frame = pd.DataFrame({
        "weight": [f"{v:.1f} kg" if i % 4 else f"{v:.1f}" for i, v in enumerate(weight)],
        "price": [f"USD {100 + 7 * i}" for i in range(rows)],
        "delay": [f"{10 + i}ms" for i in range(rows)],
        "mass": [f"{1 + i / 40:.1f} kg" if i % 2 else f"{1000 + 17 * i} g" for i in range(rows)],
        "count": [f"{1 + i / 10:.1f}k" if i % 2 else f"{800 + i}" for i in range(rows)],
        "x": [i / 7 for i in range(rows)],
        "label": ["ab"[i % 2] for i in range(rows)]})
    with pytest.raises(DataError, match=r"column 'mass' is listed in 'sources.worded.numeric', but none of its cells "
                                        r"is a number \('1.1 kg' x2, .*\), so it would be dropped: unlisted, column "
                                        r"'mass' holds numbers followed by 2 different words \('g' \(e.g. '1000 g'\), "
                                        r"'kg' \(e.g. '1.0 kg'\)\)"):
        _read_own(repo, "worded", frame, numeric=["mass"])
    frame["mass"] = [f"{1 + i / 40:.1f} kg" if i % 2 else f"{1000 + 17 * i} g" if i % 3 else "700" for i in range(rows)]
    read, records = _read_own(repo, "worded", frame, numeric=["weight", "price", "delay", "mass", "count"])
    np.testing.assert_allclose(read["weight"].to_numpy(), [round(v, 1) for v in weight])
    assert records["weight"]["unit"] == "kg" and records["weight"]["notices"] == [
        "column 'weight': numbers written with 'kg' (e.g. '53.7 kg'), read as the numbers without it (53.7)"]
    assert not records["weight"]["warnings"]
    np.testing.assert_array_equal(read["price"].to_numpy(), [100 + 7 * i for i in range(rows)])
    assert records["price"]["unit"] == "USD"
    np.testing.assert_array_equal(read["delay"].to_numpy(), [10 + i for i in range(rows)])
    assert records["delay"]["unit"] == "ms"
    assert read["mass"].notna().sum() == rows // 6 and "unit" not in records["mass"]
    assert records["mass"]["warnings"][0].endswith(
        "; its numbers are written with 2 different words ('kg', 'g'): if they are units of one quantity, convert "
        "every cell to one unit in the file")
    np.testing.assert_array_equal(read["count"].to_numpy(), [800 + i if i % 2 == 0 else 1000 * round(1 + i / 10, 1)
                                                             for i in range(rows)])
    assert "unit" not in records["count"] and records["count"]["magnitudes"] == rows // 2
    _, hinted = _read_own(repo, "worded", frame.drop(columns=["mass", "count"]))
    assert hinted["weight"]["kind"] == "categorical" and hinted["weight"]["notices"] == [
        "column 'weight' holds numbers followed by 'kg' (e.g. '53.7 kg'), read as categorical text: if 'kg' is a "
        "unit, list 'weight' in 'sources.worded.numeric' to read them as the numbers without it"]


def test_a_column_of_booleans_named_in_numeric_is_one_and_zero(repo):
    """A column of true / false or yes / no (text in a CSV, or a parquet boolean column) named in
    'numeric' had every cell missing and was dropped: such cells are 1 and 0 now, counted, with a
    notice; other words stay missing."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    rows = 60
    frame = pd.DataFrame({"smoker": ["yes" if i % 3 else "No" for i in range(rows)],
                          "active": ["TRUE" if i % 4 else "FALSE" if i % 8 else "maybe" for i in range(rows)],
                          "x": [i / 7 for i in range(rows)], "label": ["ab"[i % 2] for i in range(rows)]})
    read, records = _read_own(repo, "truth", frame, numeric=["smoker", "active"])
    np.testing.assert_array_equal(read["smoker"].to_numpy(), [1.0 if i % 3 else 0.0 for i in range(rows)])
    assert records["smoker"]["booleans"] == rows and records["smoker"]["notices"] == [
        f"column 'smoker': {rows} number(s) written as true / false or yes / no (e.g. 'No'), read as 1 for true, 0 "
        f"for false (0)"]
    maybe = sum(i % 8 == 0 for i in range(rows))
    assert read["active"].isna().sum() == maybe and records["active"]["booleans"] == rows - maybe
    pq.write_table(pa.table({"flag": pa.array([bool(i % 3) for i in range(rows)]), "x": frame["x"],
                             "y": frame["x"] * 2, "label": frame["label"]}), repo / "data" / "local" / "truth.parquet")
    read, info = load_local_table("truth", SourceConfig(path="data/local/truth.parquet", target="label",
                                                        numeric=["flag"]), repo)
    np.testing.assert_array_equal(read["flag"].to_numpy(), [float(bool(i % 3)) for i in range(rows)])


def test_a_text_column_with_a_different_text_in_every_row_is_dropped(repo):
    """A column of names or comments, a different text in every row, was categorical: its levels
    (each one row) folded into 'other' with a warning, leaving a feature that marks 49 arbitrary
    rows. It is dropped now, with a notice and its reason in the record; kept when named in
    'categorical', when the table has no more rows than max_categories, when a cell repeats, and
    when most cells hold digits (a measurement written oddly, '21.5°C', stays for its hint)."""
    rows = 120
    first, last = ["Ann", "Bob", "Cy", "Di", "Ed", "Flo"], ["Lee", "Kim", "Roe", "Fox", "Day"]
    names = [f"{first[i % 6]} {last[i // 6 % 5]} {'ABCD'[i // 30]}" for i in range(rows)]
    frame = pd.DataFrame({"name": names, "temp": [f"{20 + i / 10:.1f}\u00b0C" for i in range(rows)],
                          "town": [first[i % 6] for i in range(rows)], "x": [i / 7 for i in range(rows)],
                          "label": ["ab"[i % 2] for i in range(rows)]})
    read, records = _read_own(repo, "people", frame)
    assert "name" not in read.columns and records["name"]["kind"] == "dropped"
    assert records["name"]["reason"] == "a different text in every row" and records["name"]["notices"] == [
        "column 'name' dropped: a different text in every one of its 120 rows (e.g. 'Ann Lee A', 'Bob Lee A'), as a "
        "name or a comment has, which tells the rows apart but no row like another; list it in "
        "'sources.people.categorical' to keep it"]
    assert records["temp"]["kind"] == "categorical" and records["town"]["kind"] == "categorical"
    read, records = _read_own(repo, "people", frame, categorical=["name"])
    assert records["name"]["kind"] == "categorical"
    read, records = _read_own(repo, "people", frame.head(40))
    assert records["name"]["kind"] == "categorical"


def test_a_column_with_a_different_code_in_every_row_is_dropped(repo):
    """A column of ids written as codes ('P-00017': letters before a zero-padded number) was folded
    into 'other' with a hint that 'P-' may be a unit to list in 'numeric'. It is dropped now, with a
    notice naming how its codes are written; amounts after a unit word ('USD 775', 'USD 1020': no
    padding, numbers of several widths) and periods ('Week 001': a space before the number) keep
    their hint, and the codes stay when named in 'categorical' or when a code repeats."""
    rows = 120
    frame = pd.DataFrame({"pid": [f"P-{(i * 7919) % 100000:05d}" for i in range(rows)],
                          "sku": [f"A-{i:04d}-X" for i in range(rows)],
                          "usd": [f"USD {700 + 3 * i}" for i in range(rows)],
                          "x": [i / 7 for i in range(rows)], "label": ["ab"[i % 2] for i in range(rows)]})
    read, records = _read_own(repo, "codes", frame)
    assert list(read.columns) == ["usd", "x", "class"]
    assert records["pid"]["reason"] == records["sku"]["reason"] == "a different code in every row"
    assert records["pid"]["notices"] == [
        "column 'pid' dropped: a different code in every one of its 120 rows (e.g. 'P-00000', 'P-07919'), 'P-' "
        "before numbers of 5 digits, some with leading zeros, as ids are written, which tells the rows apart but "
        "no row like another; list it in 'sources.codes.numeric' to read its numbers (if they count or measure "
        "something) or in 'sources.codes.categorical' to keep it"]
    assert "'A-' before and '-X' after numbers of 4 digits" in records["sku"]["notices"][0]
    weeks = frame.assign(pid=[f"Week {i + 1:03d}" for i in range(rows)])  # a space: periods counted, not ids
    read, records = _read_own(repo, "codes", weeks)
    assert records["pid"]["kind"] == "categorical" and "'Week' is a unit" in records["pid"]["notices"][0]
    assert records["usd"]["kind"] == "categorical" and "preceded by 'USD'" in records["usd"]["notices"][0]
    read, records = _read_own(repo, "codes", frame, categorical=["pid"])
    assert records["pid"]["kind"] == "categorical"
    frame.loc[1, "pid"] = frame.loc[0, "pid"]
    read, records = _read_own(repo, "codes", frame)
    assert records["pid"]["kind"] == "categorical" and "'P-' is a unit" in records["pid"]["notices"][0]


def test_a_sheets_total_row_below_the_table_is_dropped_with_a_notice(repo):
    """A report exported from a sheet ends in a total row ('Total', then the sums of the columns
    above, the class codes summed too): it was read as a row of data, a class of its own that the
    few-shot split refuses, or features 100 times their others. It is dropped with a notice naming
    it and the columns it sums, also with a note below it; a row that reads 'Total' whose numbers
    are not the sums stays."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table
    from seba.core.raw import SCHEMA_ATTR

    def read_own(frame):
        frame.to_csv(repo / "data" / "local" / "report.csv", index=False)
        return load_local_table("report", SourceConfig(path="data/local/report.csv", target="label"), repo)

    rows = 100
    frame = pd.DataFrame({"name": [f"item {i % 9}" for i in range(rows)], "x": [round(i / 3, 2) for i in range(rows)],
                          "n": [1000 + 17 * i for i in range(rows)], "label": [i % 2 for i in range(rows)]})
    sums = {"name": "Total", "x": round(frame["x"].sum(), 2), "n": int(frame["n"].sum()), "label": 50}
    total = pd.concat([frame, pd.DataFrame([sums])], ignore_index=True)
    read, info = read_own(total)
    assert len(read) == rows and info["notes"] == [
        "data row 101 dropped: it reads 'Total' (column 'name') and its numbers are the sums of the rows above it "
        "('x', 'n', 'label'), as a sheet's total row is, not a row of data"]
    assert info["dropped_rows"] == 1 and json.loads(read.attrs[SCHEMA_ATTR])["total_row"] == 101
    noted = pd.concat([total, pd.DataFrame([{"name": "Source: the sales office"}])], ignore_index=True)
    read, info = read_own(noted)
    assert len(read) == rows and info["notes"][0].startswith("data row 101 dropped: it reads 'Total'")
    assert info["notes"][1] == "dropped 1 row without a target (data row 102)"
    other = pd.concat([frame, pd.DataFrame([{"name": "Total", "x": 2.5, "n": 1200, "label": 1}])], ignore_index=True)
    read, info = read_own(other)
    assert len(read) == rows + 1 and info["notes"] == []


def test_a_header_less_column_with_values_in_few_rows_is_dropped_as_beside_the_table(repo):
    """Notes or a calculation written beside a table in a sheet ('Note: values in kg' in two rows,
    a sum in one) come as a header-less column: it was kept, levels or a number marking those few
    rows. It is dropped with a notice; a header-less column with values in more than a tenth of its
    rows stays, and one named in 'categorical' too."""
    rows = 200
    notes, calc, half = [None] * rows, [None] * rows, [None if i % 2 else f"v{i % 3}" for i in range(rows)]
    notes[0], notes[1], calc[5] = "Note: values in kg", "Source: survey 2020", 123.5
    frame = pd.DataFrame({"x": [i / 3 for i in range(rows)], "y": [float(i % 5) for i in range(rows)],
                          "Unnamed: 3": notes, "Unnamed: 4": calc, "Unnamed: 5": half,
                          "label": ["ab"[i % 2] for i in range(rows)]})
    read, records = _read_own(repo, "sheet", frame)
    assert list(read.columns) == ["x", "y", "Unnamed: 5", "class"]
    assert records["Unnamed: 3"]["reason"] == records["Unnamed: 4"]["reason"] == "beside the table"
    assert records["Unnamed: 3"]["notices"] == [
        "column 'Unnamed: 3' dropped: it has no header name and values in only 2 of its 200 rows (e.g. 'Note: "
        "values in kg', 'Source: survey 2020'), as notes or a calculation beside a table have; list it in "
        "'sources.sheet.numeric' or 'sources.sheet.categorical' to keep it"]
    assert "values in only 1 of its 200 rows (e.g. '123.5')" in records["Unnamed: 4"]["notices"][0]
    read, records = _read_own(repo, "sheet", frame, categorical=["Unnamed: 3"])
    assert records["Unnamed: 3"]["kind"] == "categorical"


def test_missing_values_find_cells_written_as_excels_text_formula(repo):
    """A cell written as Excel's text formula ('="unknown"', '="-999"') is read as the text it gives,
    but 'missing_values' was matched before that: the listed value marked nothing, a warning said no
    cell held it, and the column stayed categorical (or kept -999 as a number). The listed values
    now find such cells."""
    rows = 120
    frame = pd.DataFrame({
        "code": ['="unknown"' if i % 6 == 0 else f'="{i % 9}"' for i in range(rows)],
        "level": ['="-999"' if i % 5 == 0 else f'="{i % 7}"' for i in range(rows)],
        "x": [i / 7 for i in range(rows)],
        "label": ["ab"[i % 2] for i in range(rows)]})
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    frame.to_csv(repo / "data" / "local" / "formulas_missing.csv", index=False)
    read, info = load_local_table("formulas_missing", SourceConfig(
        path="data/local/formulas_missing.csv", target="label", missing_values=["unknown", -999]), repo)
    records = {r["column"]: r for r in info["columns"]}
    assert not any("which no feature cell holds" in note for note in info["notes"])
    assert records["code"]["kind"] == records["level"]["kind"] == "numeric"
    assert read["code"].isna().sum() == rows // 6 and read["level"].isna().sum() == rows // 5
    assert records["code"]["converted"] == {"unknown": rows // 6} and records["level"]["converted"] == {
        "-999": rows // 5}


def test_typeset_fractions_and_minuses_are_numbers_and_pairs_get_a_hint(repo):
    """Fractions of one character ('9½', '¾') and a minus typeset as a dash ('–0.5', as text copied
    from a PDF writes it) were categorical text (a warning offered to make them missing): they are
    numbers now, the fractions counted. Two numbers per cell written with 'x' ('1920x1080') or a
    comma and a space ('40.7128, -74.0060') stay text with a notice to write two columns; so do
    ratios and scores written with a colon ('1:3', '2 : 1'), which had no word, and clock times
    ('7:05') stay hours. Fiscal or school years ('2000/01', '2015-16') were categorical text (with
    the day-and-month hint), and those whose second year is 12 or less ('2005-06') months: they are
    their first year, counted, in their order."""
    frame = pd.DataFrame({
        "size": ["9\u00bd", "\u00be", "7", "1 \u215b", "-2\u00bc"] * 8,
        "change": ["\u20130.5", "1.25", "\u20133", "\uff0d2", "4"] * 8,
        "screen": [f"{640 + 10 * i}x{480 + i}" for i in range(40)],
        "where": [f"{40 + i / 100:.4f}, {-74 - i / 100:.4f}" for i in range(40)],
        "ratio": [f"1:{i % 9 + 3}" for i in range(40)], "score": [f"{i % 4} : {i % 3}" for i in range(40)],
        "clock": [f"{i % 24}:{i % 60:02d}" for i in range(40)],
        "fiscal": [f"{2000 + i % 20}/{(i % 20 + 1) % 100:02d}" for i in range(40)],
        "school": [f"{2005 + i % 6}-{6 + i % 6:02d}" for i in range(40)],
        "label": ["ab"[i % 2] for i in range(40)]})
    read, records = _read_own(repo, "typeset", frame)
    np.testing.assert_array_equal(read["fiscal"].to_numpy(), [2000 + i % 20 for i in range(40)])
    assert records["fiscal"]["fiscal_years"] == 40 and records["fiscal"]["notices"] == [
        "column 'fiscal': 40 number(s) written as fiscal or school years (e.g. '2000/01'), read as their first year "
        "(2000): list 'fiscal' in 'sources.typeset.categorical' to keep them as levels"]
    np.testing.assert_array_equal(read["school"].to_numpy(), [2005 + i % 6 for i in range(40)])  # not months
    assert records["school"]["fiscal_years"] == 40 and "time_as" not in records["school"]
    np.testing.assert_array_equal(read["size"].to_numpy(), [9.5, 0.75, 7, 1.125, -2.25] * 8)
    assert records["size"]["fractions"] == 32 and not records["size"]["warnings"]
    np.testing.assert_array_equal(read["change"].to_numpy(), [-0.5, 1.25, -3, -2, 4] * 8)
    assert not records["change"]["warnings"]
    for name, example in (("screen", "640x480"), ("where", "40.0000, -74.0000")):
        assert records[name]["kind"] == "categorical" and records[name]["notices"] == [
            f"column '{name}' holds two numbers per cell (e.g. '{example}'), read as categorical text: if they are "
            f"two measurements (a width and a height, a latitude and a longitude, a match's score), write them as "
            f"two columns in the file"]
    for name, example in (("ratio", "1:3"), ("score", "0 : 0")):
        assert records[name]["kind"] == "categorical" and records[name]["notices"] == [
            f"column '{name}' holds two numbers per cell (e.g. '{example}'), read as categorical text: if they are "
            f"two measurements (a width and a height, a latitude and a longitude, a match's score), write them as "
            f"two columns in the file or their ratio as one number"]
    assert records["clock"]["kind"] == "numeric" and records["clock"]["time_as"] == "hours"


def test_ordinals_are_numbers_and_ranges_of_numbers_get_a_hint(repo):
    """Ordinals ('1st', '2nd', '3RD', '4 th') were categorical levels without a word, their order
    lost: they are their number now, with a notice and their count in the schema record (as levels
    when the source lists the column in `categorical`). Ranges ('40-49', '$10-$20', '60+', '65-'),
    as binned ages and incomes are written, stay levels (which range's middle stands for it is the
    user's choice) with a notice saying that their order is not used, also intervals beside words
    ('<100', '100<=X<500', 'no known savings', which were told to be listed in `numeric`, reading
    '<100' as 100 and the intervals as missing); month-year cells ('01-2020') are months and scores
    ('3-1') not ranges."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    frame = pd.DataFrame({
        "grade": ["1st", "2nd", "3RD", "4 th", "11th", "12", None, "21st"] * 5,
        "age": ["10-19", "20-29", "30-39", "40-49", "50-59", "60+", "0-9", "20-29"] * 5,
        "income": ["$10-$20", "$20-$30", "$30-$50", "$50+"] * 10,
        "band": ["0-14", "15-64", "65-", "15-64"] * 10,
        "month": ["01-2020", "02-2020", "11-2021", "12-2019"] * 10,
        "score": ["3-1", "1-2", "0-0", "2-2"] * 10,
        "bins": ["1-1000", "5-5000", "2-2000", "9-9000"] * 10,  # not months: 1000 and 5000 are no years
        "savings": ["<100", "100<=X<500", "500<=X<1000", ">=1000", "<100", "no known savings", "<100", "<100"] * 5,
        "label": ["ab"[i % 2] for i in range(40)]})
    read, records = _read_own(repo, "binned", frame)
    np.testing.assert_array_equal(read["grade"].to_numpy(), [1, 2, 3, 4, 11, 12, np.nan, 21] * 5)
    assert records["grade"]["ordinals"] == 30 and not records["grade"]["warnings"]
    assert records["grade"]["notices"] == [
        "column 'grade': 30 number(s) written as ordinals (e.g. '1st'), read as their number (1), which keeps "
        "their order: list 'grade' in 'sources.binned.categorical' to keep them as levels"]
    for name, example in (("age", "10-19"), ("income", "$10-$20"), ("band", "0-14"), ("bins", "1-1000"),
                          ("savings", "100<=X<500")):  # intervals beside words, as credit-g writes them
        assert records[name]["kind"] == "categorical" and not records[name]["warnings"], records[name]
        assert records[name]["notices"] == [
            f"column '{name}' holds ranges of numbers (e.g. '{example}'), read as categorical levels, which keep "
            f"them apart but not their order: to use the order, write one number per cell in the file (the middle "
            f"of each range, or its lower end)"]
    assert records["month"]["kind"] == "numeric" and records["month"]["time_as"].startswith("days")  # months
    assert records["score"]["kind"] == "categorical" and not records["score"]["notices"], records["score"]
    kept, info = load_local_table("binned", SourceConfig(path="data/local/binned.csv", target="label",
                                                         categorical=["grade"]), repo)
    assert kept["grade"].iloc[0] == "1st" and "ordinals" not in info["columns"][0]


def test_text_written_in_decomposed_unicode_is_one_level_with_its_composed_form(repo):
    """'Zürich' with a combining diaeresis (as macOS writes text) and with the composed 'ü' are one
    level of a feature, and 'café' written either way one class of the target, each with a notice
    counting the cells read in their composed form; an ASCII column gets none."""
    import unicodedata

    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    city, cafe = "Z\u00fcrich", "caf\u00e9"
    split = {w: unicodedata.normalize("NFD", w) for w in (city, cafe)}
    assert all(len(split[w]) == len(w) + 1 for w in split)
    rows = "".join(f"{i % 7},{(city, split[city], 'Bern')[i % 3]},{(cafe, split[cafe], 'bar')[i // 2 % 3]}\n"
                   for i in range(30))
    (repo / "data" / "local" / "accents.csv").write_text("a,city,label\n" + rows, encoding="utf-8")
    read, info = load_local_table("accents", SourceConfig(path="data/local/accents.csv", target="label"), repo)
    assert list(read["city"].cat.categories) == ["Bern", city] and list(read["class"].cat.categories) == ["bar", cafe]
    records = {r["column"]: r for r in info["columns"]}
    assert any("10 cell(s) written with decomposed characters" in n for n in records["city"]["notices"])
    assert not records["a"]["notices"]
    assert [n for n in info["notes"] if "repeat an earlier row" not in n] == [
        "target column 'label': 10 cell(s) written with decomposed characters read in their "
        "composed form, so that a class written either way is one class"]


def test_months_beside_dates_and_iso_weeks_are_dates(repo):
    """Months beside full dates ('2020-01' where the day is unknown, '2020-01-15' where it is known)
    were categorical levels without a word, and ISO weeks ('2020-W05') levels folded into 'other'
    past max_categories: both are days now, a month its first day, a week its Monday or the weekday
    it gives; a week 53 that its year does not have is missing with the warning. Months beside
    dates with a zone, and a few months among words, stay text."""
    n = 60
    frame = pd.DataFrame({
        "seen": [f"2020-{i % 12 + 1:02d}" if i % 3 else f"2020-{i % 12 + 1:02d}-15" for i in range(n)],
        "week": [f"2020-W{i % 53 + 1:02d}" for i in range(n)],
        "shift": [f"{2019 + i % 2}W{i % 52 + 1:02d}-{i % 7 + 1}" for i in range(n - 1)] + ["2021-W53"],
        "zoned": [f"2020-{i % 12 + 1:02d}" if i % 3 else f"2020-{i % 12 + 1:02d}-15T10:00Z" for i in range(n)],
        "label": ["ab"[i % 2] for i in range(n)]})
    read, records = _read_own(repo, "weeks", frame)
    expected = pd.to_datetime([f"2020-{i % 12 + 1:02d}-{'01' if i % 3 else '15'}" for i in range(n)])
    np.testing.assert_array_equal(read["seen"].to_numpy(), (expected - expected.min()).days.to_numpy())
    assert records["seen"]["notices"][0].startswith(
        "column 'seen': dates and months (each month its first day) read as numbers, days since the column's "
        f"earliest, {expected.min()}")
    mondays = pd.Series([datetime.date.fromisocalendar(2020, i % 53 + 1, 1) for i in range(n)], dtype="datetime64[ns]")
    np.testing.assert_array_equal(read["week"].to_numpy(), ((mondays - mondays.min()).dt.days).to_numpy())
    assert records["week"]["kind"] == "numeric" and "folded" not in records["week"]
    assert records["week"]["notices"][0].startswith("column 'week': ISO weeks (each its Monday, or the weekday "
                                                    "given) read as numbers, days since the column's earliest")
    days = pd.Series([datetime.date.fromisocalendar(2019 + i % 2, i % 52 + 1, i % 7 + 1) for i in range(n - 1)],
                     dtype="datetime64[ns]")
    np.testing.assert_array_equal(read["shift"].to_numpy()[:-1], ((days - days.min()).dt.days).to_numpy())
    assert np.isnan(read["shift"].iloc[-1]) and records["shift"]["converted"] == {"2021-W53": 1}
    assert records["shift"]["warnings"] == [  # it was called non-numeric, as a word in a column of numbers is
        "column 'shift' is read as ISO weeks (each its Monday, or the weekday given) (98.3% of its cells are): 1 "
        "other cell(s) read as missing ('2021-W53' x1): a day or time that does not exist, or not one"]
    assert records["zoned"]["kind"] == "categorical"


def test_a_column_of_one_number_and_missing_cells_keeps_which_rows_have_it(repo):
    """A numeric column holding one number and missing cells ('1' where a condition was seen, empty
    elsewhere) became, imputed to the mean, a constant: which rows have it was lost without a word.
    It is categorical now, a level or missing, with a notice; listed in 'numeric', it stays a
    number, with a warning that it is a constant so (it had none). Columns that hold one value in
    every row are kept, named in one note and their ``constant`` record field (a schema report
    field); other columns read as before."""
    from seba.core.config import SourceConfig
    from seba.core.data import schema_report
    from seba.core.own_table import load_local_table

    n = 40
    frame = pd.DataFrame({"seen": ["1" if i % 3 == 0 else "" for i in range(n)], "x": [i * 0.5 for i in range(n)],
                          "unit": ["kg"] * n, "zero": [0] * n, "label": ["ab"[i % 2] for i in range(n)]})
    read, records = _read_own(repo, "flags", frame)
    assert records["seen"]["kind"] == "categorical" and list(read["seen"].cat.categories) == ["1"]
    assert read["seen"].isna().tolist() == [i % 3 != 0 for i in range(n)]
    assert records["seen"]["notices"] == [
        "column 'seen' holds one number (1) and 26 missing cell(s): read as categorical, a level '1' or missing, "
        "since as a number its missing cells would become that value and the column a constant"]
    table = encode_table(read)
    block = table.X[:, table.groups == list(table.columns).index("seen")]
    assert block[:, 0].tolist() == [1.0 if i % 3 == 0 else 0.0 for i in range(n)]
    assert {c: records[c].get("constant") for c in ("seen", "x", "unit", "zero")} == {
        "seen": None, "x": None, "unit": "kg", "zero": "0"}
    frame.to_csv(repo / "data" / "local" / "flags.csv", index=False)
    _, info = load_local_table("flags", SourceConfig(path="data/local/flags.csv", target="label"), repo)
    assert "2 column(s) hold one value in every row, which tells no row from another ('unit': 'kg', 'zero': '0'): " \
           "kept, as constants" in info["notes"]
    entries = {e["column"]: e for e in schema_report("flags", read, table, {})["columns"]}
    assert entries["zero"]["constant"] == "0" and "constant" not in entries["x"]
    forced, records = _read_own(repo, "flags", frame, numeric=["seen"])
    assert records["seen"]["kind"] == "numeric" and forced["seen"].isna().sum() == 26
    assert not records["seen"]["notices"] and "constant" not in records["seen"]
    assert records["seen"]["warnings"] == [
        "column 'seen' is listed in 'sources.flags.numeric' but holds one number (1) and 26 missing cell(s): as a "
        "number, its missing cells become that value and the column a constant, which tells no row from another; "
        "remove it from 'sources.flags.numeric' to read it as a level or missing"]


def test_missing_values_written_as_quoted_numbers_are_numbers_and_values_found_nowhere_warn(repo):
    """A number quoted in ``missing_values`` ('-999', as YAML users write it) found only cells
    written exactly so, not '-999.0' or -999 stored as a number, although the code notice had
    asked for it there: a text written as a plain number is that number too ('007', with its
    leading zero, stays a text). A listed value that no feature cell holds (a typo) gets a warning
    naming it; the values found get none."""
    from seba.core.config import SourceConfig
    from seba.core.own_table import load_local_table

    n = 40
    frame = pd.DataFrame({"score": [-999.0 if i % 10 == 0 else float(i) for i in range(n)],
                          "code": ["007" if i % 8 == 1 else "7" if i % 8 == 5 else f"{i % 5}" for i in range(n)],
                          "label": ["ab"[i % 2] for i in range(n)]})
    read, records = _read_own(repo, "quoted", frame, missing_values=["-999", "unknwon", -5, "77.5"])
    assert int(read["score"].isna().sum()) == 4 and records["score"]["converted"] == {"-999.0": 4}
    assert records["code"]["converted"] == {} and read["code"].notna().all()
    _, info = load_local_table("quoted", SourceConfig(path="data/local/quoted.csv", target="label",
                                                      missing_values=["-999", "unknwon", -5, "77.5"]), repo)
    assert ("WARNING 'sources.quoted.missing_values' lists 'unknwon', -5, '77.5', which no feature cell holds: "
            "check how the file writes them") in info["notes"]
    read, records = _read_own(repo, "quoted", frame, missing_values=["007", -999])
    assert records["code"]["converted"] == {"007": 5} and int(read["score"].isna().sum()) == 4
    assert int((read["code"] == 7).sum()) == 5  # '007' is a text: not the number 7
    _, info = load_local_table("quoted", SourceConfig(path="data/local/quoted.csv", target="label",
                                                      missing_values=["007", -999]), repo)
    assert not any("missing_values' lists" in note for note in info["notes"])


def test_missing_values_per_column_mark_only_the_columns_named(repo):
    """A value that is missing in some columns only (Pima's 0 glucose and 0 BMI, where 0 pregnancies
    is a count) could not be marked: ``missing_values`` applied to every feature column. As a
    mapping from columns to values it marks each named column's own values only; a value no cell
    of its column holds is warned per column, a column not in the file or the target is an error
    before any work, and a malformed mapping is a params error naming the key."""
    from seba.core.config import SourceConfig, load_params
    from seba.core.own_table import load_local_table

    n = 60
    frame = pd.DataFrame({"preg": [i % 5 for i in range(n)],
                          "glucose": [0 if i % 7 == 0 else 80 + (i * 3) % 90 for i in range(n)],
                          "bmi": ["0" if i % 9 == 0 else f"{20 + i / 10:.1f}" for i in range(n)],
                          "label": ["ab"[i % 2] for i in range(n)]})
    listed = {"glucose": [0], "bmi": [0, "n/k"]}
    read, records = _read_own(repo, "pima", frame, missing_values=listed)
    assert int((read["preg"] == 0).sum()) == 12 and read["preg"].notna().all()  # its zeros are counts
    assert read["glucose"].isna().tolist() == [i % 7 == 0 for i in range(n)]
    assert read["bmi"].isna().tolist() == [i % 9 == 0 for i in range(n)]
    assert records["glucose"]["converted"] == {"0": 9} and records["bmi"]["converted"] == {"0": 7}
    assert records["preg"]["converted"] == {}
    _, info = load_local_table("pima", SourceConfig(path="data/local/pima.csv", target="label",
                                                    missing_values=listed), repo)
    assert ("WARNING 'sources.pima.missing_values' lists 'n/k' (for 'bmi'), which no cell of its column holds: "
            "check how the file writes it") in info["notes"]
    for wrong, message in (({"glucos": [0]}, r"'missing_values' names column\(s\) not in the file: \['glucos'\]"),
                           ({"label": ["b"]}, r"the target 'label' is listed in 'missing_values'")):
        with pytest.raises(DataError, match=message):
            load_local_table("pima", SourceConfig(path="data/local/pima.csv", target="label",
                                                  missing_values=wrong), repo)
    edit_params(repo, lambda p: p["sources"].update(pima={"path": "data/local/pima.csv", "target": "label",
                                                          "missing_values": {"glucose": 0}}))
    with pytest.raises(ConfigError, match=r"sources.pima.missing_values.*must be a list of the values that mark a "
                                          r"missing cell"):
        load_params(repo / "params.yaml")


def test_numbers_in_another_convention_beside_words_name_the_setting(repo):
    """A column of numbers with a thousands separator or a decimal comma that the settings do not
    read, beside a word ('7,464.85' and 'unknown'), was categorical with no word but the
    max_categories fold (the error for such numbers needs 95 % of the cells): it is still
    categorical, with a warning naming the setting and the word. With the setting made, the word
    is what the usual warning names; a column that no setting reads better gets no such warning."""
    n = 60
    frame = pd.DataFrame({
        "income": ["unknown" if i % 5 == 0 else f"{1000 + 37.25 * i:,.2f}" for i in range(n)],
        "dose": ["unknown" if i % 5 == 0 else f"{i / 4:.2f}".replace(".", ",") for i in range(n)],
        "plain": ["unknown" if i % 5 == 0 else str(i) for i in range(n)],
        "label": ["ab"[i % 2] for i in range(n)]})
    _, records = _read_own(repo, "foreign", frame)
    assert records["income"]["kind"] == "categorical" and records["income"]["warnings"][0] == (
        "column 'income' is read as categorical: 0.0% of its cells are numbers with no thousands separator and "
        "decimal mark '.', but 80.0% are numbers written like '1,037.25' (other values: 'unknown' x12); set "
        "thousands: ',' in 'sources.foreign' to read them as numbers, and list 'unknown' in "
        "'sources.foreign.missing_values' if it marks a missing value (or list the column in "
        "'sources.foreign.numeric': the rest become missing)")
    assert "set decimal: ',' in 'sources.foreign'" in records["dose"]["warnings"][0]
    assert records["plain"]["warnings"][0].startswith("column 'plain' is read as categorical: only 80.0% of its")
    _, records = _read_own(repo, "foreign", frame, thousands=",")
    assert records["income"]["warnings"][0].startswith("column 'income' is read as categorical: only 80.0% of its")
    assert records["dose"]["warnings"][0].startswith("column 'dose' is read as categorical: 0.0% of its cells are "
                                                     "numbers with thousands separator ','")
    read, _ = _read_own(repo, "foreign", frame.drop(columns="dose"), thousands=",", missing_values=["unknown"])
    numbers = sorted(1000 + 37.25 * i for i in range(n) if i % 5)
    assert sorted(read["income"].dropna()) == numbers  # (rows with every feature missing are dropped)


def test_durations_as_pandas_and_iso_8601_write_them_are_seconds(repo):
    """A timedelta column that pandas wrote to CSV ('2 days 03:15:00', '-1 days +23:00:00'), or
    Python's str() of one ('1 day, 2:03:04'), and ISO 8601 durations ('PT2H30M', 'P1W') were
    categorical levels, folded into 'other' past max_categories: they are seconds now, with the
    notice; years and months of ISO durations at their average lengths, named in it. Codes that
    start with a P ('P1', 'Pete') stay text."""
    n = 60
    spans = pd.to_timedelta([(i - 3) * 3917.5 for i in range(n)], unit="s")
    iso = ["PT2H30M", "P1W", "-PT5M", "P2DT3H", "PT1,5S", "PT45M"]
    frame = pd.DataFrame({
        "waited": spans.astype(str),
        "python": [str(s.to_pytimedelta()) for s in spans],
        "iso": [iso[i % len(iso)] for i in range(n)],
        "contract": ["P1Y6M" if i % 2 else "P3M" for i in range(n)],
        "code": ["Pete", "Paul"] + [f"P{i % 7}" for i in range(n - 2)],
        "label": ["ab"[i % 2] for i in range(n)]})
    assert frame["waited"][0] == "-1 days +20:44:07.500000" and frame["python"][0] == "-1 day, 20:44:07.500000"
    read, records = _read_own(repo, "spans", frame)
    np.testing.assert_allclose(read["waited"].to_numpy(), spans.total_seconds().to_numpy())
    np.testing.assert_allclose(read["python"].to_numpy(), spans.total_seconds().to_numpy())
    assert records["waited"]["time_as"] == "seconds" and records["waited"]["notices"][0].startswith(
        "column 'waited': durations written as days and hours:minutes:seconds read as numbers, seconds")
    seconds = [9000, 604800, -300, 183600, 1.5, 2700]
    np.testing.assert_allclose(read["iso"].to_numpy(), [seconds[i % len(seconds)] for i in range(n)])
    assert records["iso"]["notices"][0] == ("column 'iso': ISO 8601 durations read as numbers, seconds (e.g. "
                                            "'PT2H30M' is 9000)")
    np.testing.assert_allclose(read["contract"].to_numpy()[:2], [3 * 30.436875 * 86400, 1.5 * 365.2425 * 86400])
    assert "(a year 365.2425 days and a month 30.436875, their average lengths)" in records["contract"]["notices"][0]
    assert records["code"]["kind"] == "categorical"
