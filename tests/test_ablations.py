"""seba/ablations/: the paper's ablations queued as DVC experiments and collected into a report."""

import copy
import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import committed_params
from seba import ablations as ab
from seba.ablations import cli as ab_cli  # the commands: their DVC, git and file calls are patched there
from seba.core import paths
from seba.core.config import parse_params

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def paper():
    return ab.load_paper(ROOT)


# ----------------------------------------------------------------------------- the variant table
def test_the_table_covers_every_ablation_number_of_the_paper(paper):
    ours = {(a.name, v, s) for a in ab.ABLATIONS for v, _ in a.variants for s in a.shots}
    theirs = set(zip(paper["ablation"], paper["variant"], paper["shot"]))
    assert ours == theirs
    assert len(paper) == 200 and paper.groupby(["ablation", "variant", "shot"]).size().eq(8).all()
    assert (ROOT / paths.PAPER_ABLATIONS).read_bytes() == (ROOT / "data/reference/paper_ablations.csv").read_bytes()


def test_every_variant_is_one_experiment_and_each_default_row_the_default_experiment():
    for a in ab.ABLATIONS:
        assert a.variants[0][0].endswith("(*)") and a.variants[0][1] == ab.DEFAULT
        assert all(not v.endswith("(*)") and s != ab.DEFAULT for v, s in a.variants[1:])
    used = [s for a in ab.ABLATIONS for _, s in a.variants[1:]]
    assert sorted(used) == sorted(set(used)) == sorted(set(ab.EXPERIMENTS) - {ab.DEFAULT})
    signatures = {tuple(ab.canonical(v) for v in ab.signature(s).values()) for s in ab.EXPERIMENTS}
    assert len(signatures) == len(ab.EXPERIMENTS)  # the params tell every experiment apart
    assert all(set(o) <= set(ab.DEFAULTS) for o in ab.EXPERIMENTS.values())


def set_dotted(raw: dict, key: str, value) -> None:
    """raw['a']['b'] = value for key 'a.b' (a top-level key: raw[key])."""
    *parents, last = key.split(".")
    for part in parents:
        raw = raw[part]
    raw[last] = value


def test_the_defaults_are_params_yaml_and_every_variant_is_valid_params():
    raw = yaml.safe_load(committed_params())
    flat = ab.flatten(raw)
    assert {k: flat[k] for k in ab.DEFAULTS} == ab.DEFAULTS  # the committed params are the paper's SeBA
    assert ab.identify(flat) == ab.DEFAULT
    for slug in ab.EXPERIMENTS:
        params = copy.deepcopy(raw)
        for key, value in ab.signature(slug).items():
            set_dotted(params, key, value)
        parse_params(params)  # every switch value is accepted
        assert ab.identify(ab.flatten(params)) == slug


def test_an_experiment_run_before_the_ratios_left_the_pretrain_section_is_identified():
    """Experiments (and collections' records) made when the ratios were `pretrain.ratios` read as if
    made with the top-level `ratios`: a single-ratio run is still its variant, the default still the
    default."""
    def legacy(slug):
        entry = show_entry(f"abl-{slug}", slug)
        raw = entry["revs"][0]["data"]["params"]["params.yaml"]["data"]
        raw["pretrain"]["ratios"] = raw.pop("ratios")
        return entry

    found = {e.name: e.slug for e in ab.read_show(show_of(legacy(ab.DEFAULT), legacy("ratio-0.3")))}
    assert found == {"abl-default": ab.DEFAULT, "abl-ratio-0.3": "ratio-0.3"}
    flat = ab.current_keys(ab.flatten({"pretrain": {"ratios": [0.3], "fill": "zero"}}))
    assert flat == {"ratios": [0.3], "pretrain.fill": "zero"}
    record = [{"name": "a", "variant": ab.DEFAULT, "rev": "r1", "params": {"pretrain": {"ratios": [0.1, 0.5]}}},
              {"name": "b", "variant": "ratio-0.1", "rev": "r2", "params_differing_from_default": {"pretrain.ratios": [0.1]}}]
    chosen = ab.experiments_from_record(record)
    assert chosen[ab.DEFAULT].params["ratios"] == [0.1, 0.5] and chosen["ratio-0.1"].params["ratios"] == [0.1]
    assert "pretrain.ratios" not in chosen["ratio-0.1"].params


# ----------------------------------------------------------------------------- queue
def options(plans):
    return {p.slug: dict(arg.split("=", 1) for arg in p.command()[p.command().index("-S"):] if arg != "-S")
            for p in plans}


def test_queue_plans_one_dvc_exp_run_per_experiment():
    plans = ab.plan()
    assert [p.slug for p in plans][0] == ab.DEFAULT and len(plans) == len(ab.EXPERIMENTS) == 17
    assert plans[0].command()[:7] == ["dvc", "exp", "run", "--queue", "-n", "abl-default", "-m"]
    opts = options(plans)
    for slug, o in opts.items():
        assert o["seeds"] == "[0,1,2,3,4]" and o["baselines.methods"] == "[]" and "datasets" not in o
        assert o["evaluate.shots"] == ("[1,5,10]" if slug in (ab.DEFAULT, "cond-no") else "[5]")
        assert o["evaluate.prototype_shots"] == ("[1]" if slug in (ab.DEFAULT, "cond-no") else "[]")  # no warning
        assert set(ab.DEFAULTS) <= set(o)  # every switch set: the experiment is what its name says
    assert opts[ab.DEFAULT]["ratios"] == "[0.1,0.2,0.3,0.4,0.5]"
    assert opts["ratio-0.1"]["ratios"] == "[0.1]"
    assert opts["ratio-random"]["ratios"] == "['random']"
    assert opts["cond-no"]["pretrain.conditioned"] == "false" and opts[ab.DEFAULT]["pretrain.conditioned"] == "true"
    assert opts["prep-raw-marginal"]["pretrain.normalise"] == "false"
    assert opts["prep-raw-marginal"]["pretrain.fill"] == "'marginal'"
    assert opts["head-finetune"]["evaluate.head"] == "'finetune'"
    assert opts["enc-ft"]["pretrain.encoder"] == "'ft_transformer'"
    assert "ratio_mode: Ratio 0.1" in plans[[p.slug for p in plans].index("ratio-0.1")].message


def test_queue_options():
    plans = ab.plan(["ratio_mode"], seeds=[3, 4], datasets=["cmc", "dna"], prefix="t",
                    extra=ab.parse_set(["evaluate.episodes=20"]))
    assert [p.name for p in plans] == ["t-default"] + [f"t-ratio-{r}" for r in ("0.1", "0.2", "0.3", "0.4", "0.5",
                                                                                  "random")]
    opts = options(plans)
    assert opts["default"]["evaluate.shots"] == "[5]"  # only the shots the chosen ablations report
    assert all(o["seeds"] == "[3,4]" and o["datasets"] == "['cmc','dna']" and o["evaluate.episodes"] == "20"
               for o in opts.values())
    assert [p.slug for p in ab.plan(only=["head-nn-cos", "ratio-0.2"])] == ["ratio-0.2", "head-nn-cos"]
    with pytest.raises(SystemExit):
        ab.plan(only=["nope"])
    for bad in (["pretrain.fill=marginal"], ["seeds=[1]"], ["novalue"]):
        with pytest.raises(SystemExit):
            ab.parse_set(bad)


def show_entry(name, slug, state="success", rev=None, seeds=(0, 1, 2), datasets=("cmc", "dna"), log=None, **extra):
    """One experiment as `dvc exp show --json` (DVC 3) lists it."""
    raw = yaml.safe_load(committed_params())
    for key, value in {**(ab.signature(slug) if slug else {}), **extra}.items():
        set_dotted(raw, key, value)
    raw["seeds"], raw["datasets"] = list(seeds), list(datasets)
    rev = rev or f"{abs(hash(name)):040x}"[:40]
    executor = None if state == "success" and log is None else {
        "state": state, "name": "dvc-task", "local": {"log": log, "returncode": 0 if state == "success" else 255}}
    return {"revs": [{"rev": rev, "name": name, "error": {"msg": "Experiment run failed"} if state == "failed" else None,
                      "data": {"rev": rev, "timestamp": "2026-01-01T00:00:00", "params": {"params.yaml": {"data": raw}},
                               "metrics": {}}, "experiments": None}],
            "executor": executor, "name": name}


def show_of(*entries, baseline="b" * 40):
    return [{"rev": "workspace", "name": None, "data": {}, "error": None, "experiments": None},
            {"rev": baseline, "name": "main", "data": {}, "error": None, "experiments": list(entries)}]


def test_queue_refuses_names_in_use_and_runs_the_queue(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(ab_cli, "dvc_json", lambda args, root: show_of(show_entry("abl-default", ab.DEFAULT)))
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: (None if cmd[0] == "git" else calls.append(cmd))
                        or type("R", (), {"returncode": 0}))  # git: the tables it tracks
    monkeypatch.setattr(ab_cli, "follow_queue", lambda cmd, root: calls.append(cmd) or 0)
    monkeypatch.delenv("DVC_SITE_CACHE_DIR", raising=False)
    with pytest.raises(SystemExit, match="abl-default"):
        ab.main(["queue", "--only", "default", "ratio-0.2"])
    assert calls == []
    assert ab.main(["queue", "--only", "default", "ratio-0.2", "--skip-existing", "--run", "--jobs", "2"]) == 0
    assert [c[:6] for c in calls] == [["dvc", "exp", "run", "--queue", "-n", "abl-ratio-0.2"],
                                      ["dvc", "exp", "run", "--run-all", "--jobs", "2"]]
    calls.clear()
    ab.main(["queue", "--only", "ratio-0.3", "--start"])
    assert calls[-1] == ["dvc", "queue", "start", "--jobs", "1"]
    assert "skipped abl-default" in capsys.readouterr().out
    # a `dvc exp run --queue` that fails (e.g. DVC's lock is held by a run) is one line, saying what was queued
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: type("R", (), {"returncode": 255}))
    with pytest.raises(SystemExit, match="failed for abl-ratio-0.4 .* 0 experiment\\(s\\) before it were queued"):
        ab.main(["queue", "--only", "ratio-0.4", "ratio-0.5", "--skip-existing"])


def test_queue_run_runs_the_queue_again_while_its_worker_leaves_experiments_queued(monkeypatch, capsys):
    # DVC's worker can end with tasks still queued (treeverse/dvc#10562): --run starts it again while
    # that makes progress, and says so; a run that ends none of them stops it with exit status 1
    monkeypatch.delenv("DVC_SITE_CACHE_DIR", raising=False)
    def states(*queued):
        return show_of(*[show_entry(n, ab.DEFAULT, state="queued" if n in queued else "success")
                         for n in ("abl-default", "abl-ratio-0.2", "abl-ratio-0.3")])

    def scenario(after_each_run):
        shows, runs = iter(after_each_run), []
        monkeypatch.setattr(ab_cli, "dvc_json", lambda args, root: next(shows) if runs else show_of())
        monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: type("R", (), {"returncode": 0}))
        monkeypatch.setattr(ab_cli, "follow_queue", lambda cmd, root: runs.append(cmd) or 0)
        code = ab.main(["queue", "--only", "default", "ratio-0.2", "ratio-0.3", "--run"])
        return code, len(runs)

    assert scenario([states()]) == (0, 1)
    assert scenario([states("abl-ratio-0.2", "abl-ratio-0.3"), states("abl-ratio-0.3"), states()]) == (0, 3)
    assert "ended with 2 experiment(s) still queued (abl-ratio-0.2, abl-ratio-0.3)" in capsys.readouterr().out
    assert scenario([states("abl-ratio-0.3"), states("abl-ratio-0.3")]) == (1, 2)
    assert "still queued, and the last run of the queue ran none of them: abl-ratio-0.3" in capsys.readouterr().out


def test_a_bad_set_value_queues_nothing(monkeypatch):
    """Every experiment's params are checked before anything is queued (each would fail its
    validate stage)."""
    calls = []
    monkeypatch.setattr(ab_cli, "dvc_json", lambda args, root: show_of())
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: (None if cmd[0] == "git" else calls.append(cmd))
                        or type("R", (), {"returncode": 0}))  # git: the tables it tracks
    monkeypatch.delenv("DVC_SITE_CACHE_DIR", raising=False)
    with pytest.raises(SystemExit, match=r"abl-default would fail its validate stage, so nothing was queued: "
                                         r"params.yaml: 'evaluate.probe_lr' must be > 0, got -1.0"):
        ab.main(["queue", "--only", "default", "ratio-0.2", "--set", "evaluate.probe_lr=-1"])
    assert calls == []


OVERRIDES = [None, True, False, 0, -3, 10**12, 1e-4, 0.00012345678, 1000.0, float("inf"), -0.0, "auto", ",", " ",
             "a b", "it's", "1e3", "null", "true", "010", "caf\u00e9", "back\\slash", "end\\", "\\'", "${x}",
             "x\\${y}", "x:y", "a=b", "[1]", "", [0, 1, 2], [0.2, 0.5], ["knn", "logreg"], [], [None, "x, y"]]


def test_set_values_reach_the_experiments_as_given(tmp_path):
    """`-S key=VALUE` as queue writes it is read back by DVC's own override parser as the value
    given: null stays null, text stays text (',' ' ', 'null', '1e3', quotes, backslashes, ${}),
    floats keep every digit."""
    from dvc.utils.hydra import apply_overrides

    from seba.core.config import ParamsLoader, dump_params

    path = tmp_path / "params.yaml"
    for value in OVERRIDES:
        path.write_text(dump_params({"k": "old", "other": 1}))
        apply_overrides(path, [f"k={ab.override_text(value)}"])
        back = yaml.load(path.read_text(), Loader=ParamsLoader)
        assert back == {"k": value, "other": 1} and type(back["k"]) is type(value), (value, ab.override_text(value))
    with pytest.raises(ValueError, match="no `dvc exp run -S` text"):
        ab.override_text({"a": 1})


def test_set_refuses_a_whole_section_and_queue_a_prefix_that_is_no_experiment_name(monkeypatch):
    for bad in ("pretrain={max_epochs: 5}", "sources.cmc.pretrain={lr: 0.1}", "x=[[1], [2]]"):
        with pytest.raises(SystemExit, match="give each setting its own key"):
            ab.parse_set([bad])
    assert ab.parse_set(["executor.gpus_per_task=null"]) == {"executor.gpus_per_task": None}
    with pytest.raises(SystemExit, match="params.yaml has no key 'sources.diabetes.pretrain.precision', and DVC's -S "
                                         "only changes keys that params.yaml has"):
        ab.main(["queue", "--dry-run", "--only", "default", "--set", "sources.diabetes.pretrain.precision=fp32"])
    for prefix in ("a b", "", "a/b", "x:y", "-x", "a..b", "x.lock", "x."):
        with pytest.raises(SystemExit, match="experiment names are git references"):
            ab.main(["queue", "--dry-run", f"--prefix={prefix}", "--only", "default"])


def test_tables_git_does_not_hold_travel_with_each_queued_experiment(tmp_path):
    """DVC builds a queued experiment's temporary copy from git: a supplied table (Fashion-MNIST's
    copy in data/snapshot/) or an own table git does not track is named to it with `-C`, or its
    fetch stage would find nothing; tables in git are not."""

    shutil.copytree(ROOT / "data" / "snapshot", tmp_path / "data" / "snapshot",
                    ignore=shutil.ignore_patterns("fashion.parquet"))
    (tmp_path / ".gitignore").write_text("/data/snapshot/fashion.parquet\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    (tmp_path / "data" / "snapshot" / "fashion.parquet").write_bytes(b"a supplied copy")
    (tmp_path / "data" / "local").mkdir()
    (tmp_path / "data" / "local" / "mine.csv").write_text("a,label\n1,0\n")
    raw = yaml.safe_load(committed_params())
    raw["sources"]["mine"] = {"path": "data/local/mine.csv", "target": "label"}
    params = parse_params(raw)
    assert ab.untracked_inputs(params, ["cmc", "fashion", "mine", "devnagari"], tmp_path) == \
        ["data/snapshot/fashion.parquet", "data/local/mine.csv"]  # devnagari: no copy here
    assert ab.untracked_inputs(params, ["cmc", "karhunen"], tmp_path) == []
    cmd = ab.Plan("abl-default", ab.DEFAULT, {"seeds": [0]}, "m", ("data/snapshot/fashion.parquet",)).command()
    assert cmd[cmd.index("-C") + 1] == "data/snapshot/fashion.parquet" and cmd.index("-C") < cmd.index("-S")


def test_queue_checks_the_rows_as_each_validate_stage_would(capsys):
    """A split whose test part cannot serve the shots fails every experiment's validate stage:
    refused before anything is queued, naming the class (the table from the offline snapshot)."""
    with pytest.raises(SystemExit, match=r"abl-default would fail its validate stage, so nothing was queued: .*diabetes"):
        ab.main(["queue", "--dry-run", "--only", "default", "--datasets", "diabetes", "--set", "split.test_fraction=0.01"])
    assert ab.main(["queue", "--dry-run", "--only", "default", "--datasets", "diabetes"]) == 0


def test_a_failed_experiment_fails_queue_run_though_dvc_exits_0(monkeypatch, capsys):
    """`dvc exp run --run-all` (DVC 3.67) exits 0 when an experiment fails: the states decide."""
    monkeypatch.delenv("DVC_SITE_CACHE_DIR", raising=False)
    ran = []
    after = show_of(show_entry("abl-default", ab.DEFAULT), show_entry("abl-ratio-0.2", "ratio-0.2", state="failed"))
    monkeypatch.setattr(ab_cli, "dvc_json", lambda args, root: after if ran else show_of())
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: type("R", (), {"returncode": 0}))
    monkeypatch.setattr(ab_cli, "follow_queue", lambda cmd, root: ran.append(cmd) or 0)
    assert ab.main(["queue", "--only", "default", "ratio-0.2", "--run"]) == 1
    assert "failed: abl-ratio-0.2 (`dvc queue logs NAME`)" in capsys.readouterr().out


def test_collect_with_no_experiment_keeps_the_report_and_says_where_they_are(monkeypatch, capsys):
    """An empty collection would replace the committed report: refused, exit 1, pointing at
    --all-commits when the experiments belong to another commit."""
    written = []
    other = show_of(show_entry("abl-default", ab.DEFAULT), baseline="c" * 40)
    monkeypatch.setattr(ab_cli, "dvc_json", lambda args, root: other if "--all-commits" in args else show_of())
    monkeypatch.setattr(ab_cli, "write", lambda c, root: written.append(c))
    assert ab.main(["collect"]) == 1 and written == []
    err = capsys.readouterr().err
    assert "no experiment named abl-* among the current commit's experiments; nothing written" in err
    assert "1 are on other commits: add --all-commits" in err
    monkeypatch.setattr(ab_cli, "dvc_json", lambda args, root: show_of())
    assert ab.main(["collect", "--all-commits"]) == 1 and written == []
    assert "Queue them first" in capsys.readouterr().err


def test_following_the_queue_stops_once_its_worker_has_ended(tmp_path, monkeypatch, capsys):
    # a queue worker that crashes leaves `dvc exp run --run-all` following the logs for ever: it is
    # stopped after `patience` checks that find no worker alive, and left alone while one lives
    class Follower:
        def __init__(self, cmd, cwd):
            self.cmd, self.returncode, self.signals = cmd, None, []

        def poll(self):
            return self.returncode

        def terminate(self):
            self.signals.append("TERM")
            self.returncode = -15

        def wait(self, timeout=None):
            return self.returncode

    followers = []
    monkeypatch.setattr(subprocess, "Popen", lambda cmd, cwd: followers.append(Follower(cmd, cwd)) or followers[-1])
    answers = iter([False, True, False, False, False, True])
    checks = []
    code = ab.follow_queue(["dvc", "exp", "run", "--run-all"], tmp_path, poll=5, patience=3,
                           alive=lambda root: checks.append(root) or next(answers), sleep=lambda s: None)
    assert code == 0 and followers[0].signals == ["TERM"] and len(checks) == 5  # alive again resets the count
    assert "DVC's queue worker has ended" in capsys.readouterr().out

    def finishing(after):  # a follower that ends by itself after `after` checks: its status, no signal
        ticks = iter(range(after + 1))
        return lambda root: None if next(ticks) < after else followers[-1].__setattr__("returncode", 2)

    assert ab.follow_queue(["dvc"], tmp_path, alive=finishing(4), sleep=lambda s: None) == 2
    assert followers[-1].signals == []  # unknown (no worker files to read) never stops it

    # the worker files DVC's process manager keeps: pid, and returncode once the worker has ended
    folder = tmp_path / ab.WORKER_INFO
    assert ab.queue_worker_alive(tmp_path) is None
    folder.mkdir(parents=True)
    (folder / "dvc-exp-worker-1.json").write_text(json.dumps({"pid": os.getpid(), "returncode": 0}))
    assert ab.queue_worker_alive(tmp_path) is False
    (folder / "dvc-exp-worker-2.json").write_text(json.dumps({"pid": os.getpid(), "returncode": None}))
    assert ab.queue_worker_alive(tmp_path) is True
    (folder / "dvc-exp-worker-2.json").write_text("{half written")
    assert ab.queue_worker_alive(tmp_path) is False


def test_queue_warns_about_experiments_left_running_by_a_dead_worker(tmp_path, monkeypatch, capsys):
    states = {"r11-prep-raw": "running", "r11-default": "success", "r12-default": "queued"}
    # a worker that died (its terminal closed): its file keeps no returncode, its pid is gone
    dead = lambda root: False  # noqa: E731
    assert ab.warn_stale_running(states, tmp_path, alive=dead) == ["r11-prep-raw"]
    out = capsys.readouterr().out
    assert "no queue worker of this repository is alive: r11-prep-raw" in out
    assert "`dvc queue kill r11-prep-raw`" in out and "`dvc queue remove r11-prep-raw`" in out
    assert "stage record(s) wait in" not in out
    # the records of the stages it finished, in the workspace's spool: said, with what pushes them
    (tmp_path / "data" / "tracking").mkdir(parents=True)
    (tmp_path / "data" / "tracking" / "0001-a.json").write_text("{}")
    ab.warn_stale_running(states, tmp_path, alive=dead)
    assert "note: 1 stage record(s) wait in data/tracking/ for MLflow" in capsys.readouterr().out
    (tmp_path / "data" / "tracking" / "0001-a.json").unlink()
    # a live worker, or nothing to tell: no warning; nothing running: no warning
    assert ab.warn_stale_running(states, tmp_path, alive=lambda root: True) == []
    assert ab.warn_stale_running(states, tmp_path, alive=lambda root: None) == []
    assert ab.warn_stale_running({"a": "success", "b": "failed"}, tmp_path, alive=dead) == []
    assert capsys.readouterr().out == ""
    # `queue` says it before queueing, from the worker files DVC keeps
    folder = tmp_path / ab.WORKER_INFO
    folder.mkdir(parents=True)
    (folder / "dvc-exp-worker-1.json").write_text(json.dumps({"pid": 2 ** 22 + 12345, "returncode": None}))
    monkeypatch.setattr(ab_cli, "repo_root", lambda: tmp_path)
    (tmp_path / "params.yaml").write_text(committed_params())  # what queue checks the plans with
    shutil.copytree(ROOT / "data" / "snapshot", tmp_path / "data" / "snapshot",  # and the tables' rows
                    ignore=shutil.ignore_patterns("fashion.parquet"))
    monkeypatch.setattr(ab_cli, "dvc_json", lambda args, root: show_of(show_entry("old-ratio-0.2", "ratio-0.2", state="running")))
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: type("R", (), {"returncode": 0}))
    monkeypatch.delenv("DVC_SITE_CACHE_DIR", raising=False)
    assert ab.main(["queue", "--only", "default"]) == 0
    assert "running, but no queue worker of this repository is alive: old-ratio-0.2" in capsys.readouterr().out


def test_queue_collect_runs_the_queue_then_collects_its_prefix(monkeypatch, capsys):
    # queue, run and report in one command; a failed run is collected too (the report names what
    # failed) and keeps its exit status
    monkeypatch.delenv("DVC_SITE_CACHE_DIR", raising=False)
    calls, collected, status = [], [], {"run": 0}
    monkeypatch.setattr(ab_cli, "dvc_json", lambda args, root: show_of())
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: (None if cmd[0] == "git" else calls.append(cmd))
                        or type("R", (), {"returncode": 0}))  # git: the tables it tracks
    monkeypatch.setattr(ab_cli, "follow_queue", lambda cmd, root: calls.append(cmd) or status["run"])
    monkeypatch.setattr(ab_cli, "collect_command", lambda a: collected.append((a.prefix, a.merge)) or 0)
    assert ab.main(["queue", "--only", "default", "ratio-0.2", "--prefix", "opt", "--collect"]) == 0
    assert [c[:4] for c in calls][-1] == ["dvc", "exp", "run", "--run-all"] and collected == [("opt", None)]
    assert "python -m seba.ablations collect --prefix opt" in capsys.readouterr().out
    status["run"] = 1
    assert ab.main(["queue", "--only", "default", "--collect"]) == 1 and collected[-1] == ("abl", None)
    calls.clear()
    assert ab.main(["queue", "--only", "default", "--collect", "--dry-run"]) == 0
    assert calls == [] and len(collected) == 2
    assert capsys.readouterr().out.splitlines()[-2:] == ["dvc exp run --run-all --jobs 1",
                                                         "python -m seba.ablations collect"]
    assert ab.main(["queue", "--only", "default", "--run"]) == 1 and len(collected) == 2  # --run alone: no report
    with pytest.raises(SystemExit):
        ab.main(["queue", "--only", "default", "--collect", "--start"])
    assert "cannot follow --start" in capsys.readouterr().err


def test_a_relative_site_cache_dir_is_refused(tmp_path, monkeypatch):
    (tmp_path / ".dvc").mkdir()
    (tmp_path / ".dvc" / "config").write_text("[core]\n    site_cache_dir = .dvc/tmp/site_cache\n")
    monkeypatch.delenv("DVC_SITE_CACHE_DIR", raising=False)
    with pytest.raises(SystemExit, match="relative"):
        ab.check_site_cache(tmp_path)
    monkeypatch.setenv("DVC_SITE_CACHE_DIR", str(tmp_path / "site"))
    ab.check_site_cache(tmp_path)
    ab.check_site_cache(ROOT)  # the repository's own config queues


# ----------------------------------------------------------------------------- collect
BASE = {"cmc": 50.0, "dna": 80.0}
EFFECT = {ab.DEFAULT: 0.0, "prep-marginal": -2.0, "ratio-0.2": -1.0, "head-proto-cos": 1.0}
NOISE = {0: 0.0, 1: 1.0, 2: -0.5}  # per seed, shared by every variant (what pairing removes) ...
JITTER = {("prep-marginal", 0): 0.3, ("prep-marginal", 2): -0.6, ("ratio-0.2", 1): 0.9}  # ... and not


def accuracy(slug, dataset, seed, shot):
    return BASE[dataset] + EFFECT.get(slug, 0.0) + NOISE[seed] + JITTER.get((slug, seed), 0.0) + shot


def fake_reader(exp, dataset):
    rows = []
    for seed in exp.seeds:
        for shot in exp.params["evaluate.shots"]:
            target = accuracy(exp.slug, dataset, seed, shot)
            for episode, delta in enumerate((-1.0, 0.0, 1.0)):  # episodes average to the target
                rows.append({"seed": seed, "shot": shot, "episode": episode, "member": "ensemble",
                             "accuracy": target + delta})
                rows.append({"seed": seed, "shot": shot, "episode": episode, "member": "r0.1", "accuracy": 0.0})
    return pd.DataFrame(rows)


@pytest.fixture()
def collected(paper):
    show = show_of(
        show_entry("abl-default", ab.DEFAULT, **{"evaluate.shots": [1, 5, 10]}),
        show_entry("abl-prep-marginal", "prep-marginal", **{"evaluate.shots": [5]}),
        show_entry("abl-renamed", "ratio-0.2", **{"evaluate.shots": [5]}),  # known by its params
        show_entry("abl-head-proto-cos", "head-proto-cos", **{"evaluate.shots": [5]}),
        show_entry("abl-cond-no", "cond-no", state="failed", log="/nowhere/x.out"),
        show_entry("abl-head-nn-cos", "head-nn-cos", state="queued"),
        show_entry("abl-odd", None, **{"ratios": [0.7]}),  # matches no variant
        show_entry("my-seeds", ab.DEFAULT, seeds=(5,)),  # not named abl-: not read
    )
    return ab.collect(show, fake_reader, paper, read_log=lambda path: None)


def test_a_variant_run_on_fewer_tables_is_named_so_there(paper):
    show = show_of(show_entry("abl-default", ab.DEFAULT, **{"evaluate.shots": [5]}),
                   show_entry("abl-head-finetune", "head-finetune", datasets=("cmc",), **{"evaluate.shots": [5]}))
    c = ab.collect(show, fake_reader, paper, read_log=lambda path: None)
    status = c.table.set_index(["ablation", "variant", "dataset", "shot"])["status"]
    assert status[("classifier", "fine-tuning", "cmc", 5)] == "ok"
    assert status[("classifier", "fine-tuning", "dna", 5)] == "not run on this table (abl-head-finetune ran on cmc)"


def test_the_collector_pairs_over_seeds(collected):
    c = collected
    assert set(c.chosen) == {ab.DEFAULT, "prep-marginal", "ratio-0.2", "head-proto-cos", "cond-no", "head-nn-cos"}
    assert c.datasets == ["cmc", "dna"]
    e = c.effects.set_index(["ablation", "shot", "variant"])
    row = e.loc[("norm_imputation", 5, "norm=True,fill=marginal")]
    per_seed = np.array([-2.0 + JITTER.get(("prep-marginal", s), 0.0) for s in (0, 1, 2)])
    assert row["ours_diff"] == pytest.approx(per_seed.mean(), abs=1e-4)
    assert row["ours_se"] == pytest.approx(per_seed.std(ddof=1) / math.sqrt(3), abs=1e-4)
    assert row["ours_default"] == pytest.approx(np.mean([BASE[d] + NOISE[s] + 5 for d in BASE for s in NOISE]))
    assert row["n_seeds"] == 3 and row["n_tables"] == 2
    assert row["paper_diff"] == pytest.approx((41.71 + 68.69) / 2 - (42.85 + 79.86) / 2, abs=1e-4)  # cmc, dna
    ratio = e.loc[("ratio_mode", 5, "Ratio 0.2")]
    assert ratio["ours_diff"] == pytest.approx(-1.0 + 0.9 / 3, abs=1e-4)
    head = e.loc[("classifier", 5, "Proto (cos)")]
    assert head["ours_diff"] == pytest.approx(1.0) and head["ours_se"] == pytest.approx(0.0)
    assert head["same_sign"] == (head["paper_diff"] > 0) and head["beyond_2se"]
    assert head["similar_size"] == (0.5 <= 1.0 / head["paper_diff"] <= 2)
    t = c.table.set_index(["ablation", "variant", "dataset", "shot"])
    cell = t.loc[("conditioning", "Yes (*)", "cmc", 10)]
    assert cell["ours"] == pytest.approx(np.mean([accuracy(ab.DEFAULT, "cmc", s, 10) for s in NOISE]))
    assert cell["paper"] == 46.3 and cell["seeds"] == "0 1 2" and cell["status"] == "ok"


def test_the_collector_names_what_is_missing(collected):
    c = collected
    status = c.table.drop_duplicates(["ablation", "variant"]).set_index(["ablation", "variant"])["status"]
    assert status[("conditioning", "No")] == "failed (abl-cond-no)"
    assert status[("classifier", "nn (cos)")] == "not finished when collected: queued (abl-head-nn-cos)"
    assert status[("encoder", "FT-Transformer")].startswith("missing")
    assert status[("ratio_mode", "Ratio 0.2")] == "ok"
    notes = "\n".join(c.notes)
    assert "`abl-renamed` holds the params of variant `ratio-0.2`" not in notes  # not a table name: no claim
    assert "abl-odd" in notes and "match no variant" in notes
    assert "`abl-cond-no` failed; its log: /nowhere/x.out" in notes
    assert "my-seeds" not in notes
    e = c.effects.set_index(["ablation", "shot", "variant"])
    assert math.isnan(e.loc[("conditioning", 1, "No"), "ours_diff"])
    assert e.loc[("conditioning", 1, "No"), "paper_diff"] == pytest.approx(((36.12 + 62.12) - (36.76 + 66.79)) / 2)


def test_a_name_that_disagrees_with_the_params_is_read_by_the_params(paper, monkeypatch):
    monkeypatch.setitem(EFFECT, "ratio-0.3", -1.0)
    show = show_of(show_entry("abl-default", ab.DEFAULT, **{"evaluate.shots": [5]}),
                   show_entry("abl-ratio-0.1", "ratio-0.3", **{"evaluate.shots": [5]}))
    c = ab.collect(show, fake_reader, paper)
    assert set(c.chosen) == {ab.DEFAULT, "ratio-0.3"}
    assert any("holds the params of variant `ratio-0.3`, not `ratio-0.1`" in n for n in c.notes)
    e = c.effects.set_index(["ablation", "shot", "variant"])
    assert e.loc[("ratio_mode", 5, "Ratio 0.3"), "ours_diff"] == pytest.approx(-1.0)
    assert math.isnan(e.loc[("ratio_mode", 5, "Ratio 0.1"), "ours_diff"])


def test_a_variant_equal_to_the_default_is_flagged(paper):
    show = show_of(show_entry("abl-default", ab.DEFAULT, **{"evaluate.shots": [5]}),
                   show_entry("abl-prep-raw", "prep-raw", **{"evaluate.shots": [5]}))  # EFFECT: none
    c = ab.collect(show, fake_reader, paper)
    assert any("`abl-prep-raw` has exactly the default's accuracies" in n and "pretrain.normalise=False" in n
               for n in c.notes)
    # the same seed means from other episodes are an effect that happens to cancel out: not flagged,
    # and a difference of 0 agrees with no sign
    def shuffled(exp, dataset):
        frame = fake_reader(exp, dataset)
        if exp.slug == "prep-raw":
            ensemble = frame["member"] == "ensemble"
            frame.loc[ensemble, "accuracy"] = frame.loc[ensemble].groupby(["seed", "shot"])["accuracy"].transform(
                lambda a: a.to_numpy()[::-1])
        return frame
    c = ab.collect(show, shuffled, paper)
    assert not any("has exactly the default's accuracies" in n for n in c.notes)
    row = c.effects.set_index(["ablation", "variant"]).loc[("norm_imputation", "norm=False,fill=zero")]
    assert row["ours_diff"] == 0 and row["same_sign"] is None


def test_experiments_on_other_seeds_pair_on_the_seeds_both_have(paper, monkeypatch):
    show = show_of(show_entry("abl-default", ab.DEFAULT, seeds=(0, 1, 2), **{"evaluate.shots": [5]}),
                   show_entry("abl-ratio-0.2", "ratio-0.2", seeds=(1, 2), **{"evaluate.shots": [5]}))
    c = ab.collect(show, fake_reader, paper)
    row = c.effects.set_index(["ablation", "shot", "variant"]).loc[("ratio_mode", 5, "Ratio 0.2")]
    assert row["n_seeds"] == 2 and row["ours_diff"] == pytest.approx(-1.0 + 0.9 / 2)
    assert any("`abl-ratio-0.2` differs from the default experiment in more than its switches: seeds" in n
               for n in c.notes)


def test_episodes_that_lack_a_seed_of_the_experiment_are_named(paper):
    """An experiment's episodes without a seed its params list: the pairing leaves that seed out of
    the difference on every table, and a note says so (the cell shows the seeds it has)."""
    show = show_of(show_entry("abl-default", ab.DEFAULT, **{"evaluate.shots": [5]}),
                   show_entry("abl-ratio-0.2", "ratio-0.2", **{"evaluate.shots": [5]}))

    def reader(exp, dataset):
        frame = fake_reader(exp, dataset)
        return frame[frame["seed"] != 2] if exp.slug == "ratio-0.2" and dataset == "dna" else frame

    c = ab.collect(show, reader, paper)
    assert any(n.startswith("`abl-ratio-0.2`: its episodes of dna at ") and "lack 1 of the 3 (shot, seed) results its "
               "params list (first: 5-shot, seed 2)" in n for n in c.notes)
    row = c.effects.set_index(["ablation", "shot", "variant"]).loc[("ratio_mode", 5, "Ratio 0.2")]
    assert row["n_seeds"] == 2
    assert c.table.set_index(["ablation", "variant", "dataset"]).loc[("ratio_mode", "Ratio 0.2", "dna"), "seeds"] == "0 1"
    assert not any("lack" in n for n in ab.collect(show, fake_reader, paper).notes)


def test_a_switch_a_dataset_sets_for_itself_is_refused_by_queue_and_named_by_collect(paper, tmp_path):
    """`sources.<dataset>.pretrain.fill` (or another switch) would train that dataset with it in
    every experiment, the default too: queue refuses it, collect names an experiment that had it."""
    raw = yaml.safe_load(committed_params())
    raw["sources"]["cmc"]["pretrain"] = {"fill": "marginal", "precision": "fp32"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(SystemExit, match=r"params.yaml sets ablation switches for single datasets "
                                         r"\(sources.cmc.pretrain.fill: 'marginal'\).* nothing was queued"):
        ab.check_plans(ab.plan(only=["default", "prep-marginal"], datasets=["cmc"]), tmp_path)

    def own_fill(entry):
        entry["revs"][0]["data"]["params"]["params.yaml"]["data"]["sources"]["cmc"]["pretrain"] = {"fill": "marginal"}
        return entry

    show = show_of(own_fill(show_entry("abl-default", ab.DEFAULT, **{"evaluate.shots": [5]})),
                   own_fill(show_entry("abl-prep-marginal", "prep-marginal", **{"evaluate.shots": [5]})))
    notes = ab.collect(show, fake_reader, paper).notes
    assert "`abl-default` is not `default` on every table: its params set sources.cmc.pretrain.fill: 'marginal' " \
           "for those datasets" in notes
    assert not any("`abl-prep-marginal` is not" in n for n in notes)  # its own value: the variant it is


def test_a_variant_of_another_commit_whose_code_differs_is_named(paper):
    """`collect --all-commits` can pair a default of one commit with a variant of another: the
    variant is named when the code the stages run differs between the two commits."""
    default = show_of(show_entry("abl-default", ab.DEFAULT, rev="a" * 40, **{"evaluate.shots": [5]}), baseline="1" * 40)
    later = show_of(show_entry("abl-ratio-0.2", "ratio-0.2", rev="c" * 40, **{"evaluate.shots": [5]}), baseline="2" * 40)
    asked = []
    changed = lambda a, b: asked.append((a, b)) or ["seba/objective.py"]
    c = ab.collect(default + later[1:], fake_reader, paper, code_diff=changed)
    assert asked == [("2" * 40, "1" * 40)]
    assert any(n.startswith("`abl-ratio-0.2` ran the code of commit 2222222222, which differs from the default "
                            "experiment's (1111111111) in seba/objective.py") for n in c.notes)
    c = ab.collect(default + later[1:], fake_reader, paper, code_diff=lambda a, b: None)
    assert any("`abl-ratio-0.2` ran the code of commit 2222222222, which cannot be compared" in n for n in c.notes)
    c = ab.collect(default + later[1:], fake_reader, paper, code_diff=lambda a, b: [])
    assert not any("ran the code of commit" in n for n in c.notes)  # the same code: nothing to say


def test_best_counts_count_ties():
    values = pd.DataFrame({"a": [1.0, 2.0, 3.0, np.nan], "b": [1.0, 2.004, 2.0, 9.0], "c": [0.5, 1.0, 3.0, 1.0]},
                          index=["t1", "t2", "t3", "t4"])
    assert ab.best_counts(values) == {"a": 3, "b": 2, "c": 1}  # t4 lacks a value: skipped


def test_best_counts_in_the_collected_tables(collected, paper):
    b = collected.best.set_index(["ablation", "shot", "variant"])
    # the paper's 5-shot ratio table on cmc and dna: cmc best 'Ratio 0.5' / ..., counted from the CSV
    ref = paper[(paper["ablation"] == "ratio_mode") & (paper["shot"] == 5) & paper["dataset"].isin(["cmc", "dna"])]
    wide = ref.pivot(index="dataset", columns="variant", values="accuracy")
    expected = ab.best_counts(wide)
    for variant, count in expected.items():
        assert b.loc[("ratio_mode", 5, variant), "paper_best"] == count
    # ours among the variants with results: the default beats ratio 0.2 on both tables
    assert b.loc[("ratio_mode", 5, "Ensemble (*)"), "ours_best"] == 2
    assert b.loc[("ratio_mode", 5, "Ratio 0.2"), "ours_best"] == 0
    assert math.isnan(b.loc[("ratio_mode", 5, "Ratio 0.1"), "ours_best"])
    assert b.loc[("classifier", 5, "Proto (cos)"), "ours_best"] == 2


def test_the_report_files(collected, tmp_path):
    report = ab.write(collected, tmp_path)
    assert report == tmp_path / "reports" / "ablations.md"
    text = report.read_text()
    assert "| norm_imputation | 5 | norm=True,fill=marginal |" in text and "failed (abl-cond-no)" in text
    folder = paths.ablation_reports(tmp_path)
    for a in ab.ABLATIONS:
        assert (folder / f"{a.name}.png").stat().st_size > 10_000
        assert f"(ablations/{a.name}.png)" in text
    table = pd.read_csv(folder / "ablations.csv")
    assert list(table.columns[:7]) == ["ablation", "variant", "dataset", "shot", "ours", "ours_se", "paper"]
    assert len(table) == 200 // 8 * 2  # every paper row on the two tables run
    record = yaml.safe_load((folder / "experiments.yaml").read_text())
    names = [e["name"] for e in record["experiments"]]
    assert names[0] == "abl-default" and "abl-renamed" in names
    assert record["experiments"][0]["params"]["seeds"] == [0, 1, 2]
    assert pd.read_csv(folder / "effects.csv").shape[0] == sum(len(a.variants[1:]) * len(a.shots) for a in ab.ABLATIONS)
    seeds = pd.read_csv(folder / "seed_scores.csv")  # every seed's accuracy, from which the rest is derived
    assert list(seeds.columns) == ["slug", "dataset", "shot", "seed", "accuracy", "default_rev"]
    assert (seeds["default_rev"] == collected.chosen[ab.DEFAULT].rev).all()  # each row pairs with this run's default
    got = seeds.set_index(["slug", "dataset", "shot", "seed"])["accuracy"]
    assert got[("prep-marginal", "dna", 5, 2)] == pytest.approx(accuracy("prep-marginal", "dna", 2, 5))
    assert len(seeds) == 2 * 3 * (3 + 1 + 1 + 1)  # tables x seeds x (default's three shots + 3 variants at 5)


# ----------------------------------------------------------------------------- merging collections
def run_of(datasets, seeds=(0, 1, 2), baseline="b" * 40, finetune=False, **extra):
    entries = [show_entry("abl-default", ab.DEFAULT, seeds=seeds, datasets=datasets, **{"evaluate.shots": [5], **extra}),
               show_entry("abl-prep-marginal", "prep-marginal", seeds=seeds, datasets=datasets,
                          **{"evaluate.shots": [5], **extra})]
    if finetune:
        entries.append(show_entry("abl-head-finetune", "head-finetune", seeds=seeds, datasets=datasets,
                                  **{"evaluate.shots": [5], **extra}))
    for e in entries:  # revs unique per run
        e["revs"][0]["rev"] = e["revs"][0]["data"]["rev"] = f"{abs(hash((e['name'], baseline, datasets))):040x}"[:40]
    return show_of(*entries, baseline=baseline)


def test_merge_adds_an_earlier_collections_tables(paper, tmp_path, monkeypatch):
    monkeypatch.setitem(BASE, "karhunen", 60.0)
    monkeypatch.setitem(EFFECT, "head-finetune", 0.5)
    same_code = lambda a, b: []  # noqa: E731 (git: no file under seba/, stages/, dvc.yaml differs)
    first = ab.collect(run_of(("cmc",), baseline="a" * 40, finetune=True), fake_reader, paper)
    ab.write(first, tmp_path / "one")
    earlier = ab.read_collected(paths.ablation_reports(tmp_path / "one"))
    c = ab.collect(run_of(("dna",)), fake_reader, paper, merge=[earlier], code_diff=same_code)
    assert c.datasets == ["cmc", "dna"] and [g.tables for g in c.merged] == [["cmc"]]
    row = c.effects.set_index(["ablation", "shot", "variant"]).loc[("norm_imputation", 5, "norm=True,fill=marginal")]
    per_seed = np.array([-2.0 + JITTER.get(("prep-marginal", s), 0.0) for s in (0, 1, 2)])
    assert row["n_tables"] == 2 and row["ours_diff"] == pytest.approx(per_seed.mean(), abs=1e-4)
    cells = c.table.set_index(["ablation", "variant", "dataset", "shot"])
    assert cells.loc[("norm_imputation", "norm=True,fill=marginal", "cmc", 5), "rev"] == \
        first.chosen["prep-marginal"].rev[:10]  # each cell names the run it comes from
    assert cells.loc[("classifier", "fine-tuning", "cmc", 5), "status"] == "ok"
    assert cells.loc[("classifier", "fine-tuning", "dna", 5), "status"].startswith("missing")
    assert any("cmc: merged from" in n and "aaaaaaaaaa" in n for n in c.notes)
    ft = c.effects.set_index(["ablation", "shot", "variant"]).loc[("classifier", 5, "fine-tuning")]
    assert ft["tables"] == "cmc" and ft["ours_diff"] == pytest.approx(0.5)

    # written, read back and merged again: the nested collection keeps its tables and experiments
    report = ab.write(c, tmp_path / "two")
    assert "Merged from" in report.read_text() and "aaaaaaaaaa" in report.read_text()
    assert "| classifier | fine-tuning | missing (not queued or removed) | dna |" in report.read_text()
    # each commit once, with the tables its experiments fill
    commit_line = next(x for x in report.read_text().splitlines() if x.startswith("- baseline commit(s)"))
    assert commit_line.startswith(f"- baseline commit(s): {'b' * 10} (dna); {'a' * 10} (cmc) (earlier rounds merged from `")
    # a variant missing a table: its mean beside the default's on the same tables, not on all of them
    assert "| classifier | 5 | fine-tuning | 55.67* (default 55.17) | +0.50 ± 0.00 |" in report.read_text()
    record = yaml.safe_load((paths.ablation_reports(tmp_path / "two") / "experiments.yaml").read_text())
    assert record["tables"] == ["dna"] and record["merged"][0]["tables"] == ["cmc"]
    again = ab.read_collected(paths.ablation_reports(tmp_path / "two"))
    assert [g.tables for g in again[1]] == [["dna"], ["cmc"]]
    third = ab.collect(run_of(("karhunen", "dna")), fake_reader, paper, merge=[again], code_diff=same_code)
    assert third.datasets == ["cmc", "dna", "karhunen"] and [g.tables for g in third.merged] == [["cmc"]]
    assert any("dna: from this run's experiments" in n for n in third.notes)
    assert set(third.scores[third.scores["dataset"] == "dna"]["slug"]) == {ab.DEFAULT, "prep-marginal"}
    assert len(third.scores[third.scores["dataset"] == "dna"]) == 2 * 3  # this run's dna only, not also the merged
    assert ab.commits_by_table(third) == f"{'b' * 10} (dna, karhunen); {'a' * 10} (cmc)"


def test_merge_adds_variants_to_a_shared_table_only_beside_the_same_default(paper, tmp_path, monkeypatch):
    """On a table both runs have, the earlier run's extra variants join only when its default there is
    this run's, seed for seed; the cells name their runs, and the record survives a second merge."""
    monkeypatch.setitem(BASE, "karhunen", 60.0)
    monkeypatch.setitem(BASE, "semeion", 70.0)
    monkeypatch.setitem(EFFECT, "head-finetune", 0.5)
    same_code = lambda a, b: []  # noqa: E731
    first = ab.collect(run_of(("cmc", "dna"), baseline="a" * 40, finetune=True), fake_reader, paper)
    ab.write(first, tmp_path / "one")
    earlier = ab.read_collected(paths.ablation_reports(tmp_path / "one"))
    c = ab.collect(run_of(("dna", "karhunen")), fake_reader, paper, merge=[earlier], code_diff=same_code)
    assert c.datasets == ["cmc", "dna", "karhunen"]
    assert [(g.tables, g.variants) for g in c.merged] == [(["cmc", "dna"], {"dna": ["head-finetune"]})]
    cells = c.table.set_index(["ablation", "variant", "dataset", "shot"])
    assert cells.loc[("classifier", "fine-tuning", "dna", 5), "rev"] == first.chosen["head-finetune"].rev[:10]
    assert cells.loc[("norm_imputation", "norm=True,fill=marginal", "dna", 5), "rev"] == \
        c.chosen["prep-marginal"].rev[:10]  # this run's own variant stays this run's
    assert cells.loc[("classifier", "fine-tuning", "karhunen", 5), "status"].startswith("missing")
    dna = c.scores[c.scores["dataset"] == "dna"]
    assert sorted(dna.groupby("slug").size().items()) == [(ab.DEFAULT, 3), ("head-finetune", 3), ("prep-marginal", 3)]
    ft = c.effects.set_index(["ablation", "shot", "variant"]).loc[("classifier", 5, "fine-tuning")]
    assert ft["tables"] == "cmc dna" and ft["ours_diff"] == pytest.approx(0.5)
    assert any(n.startswith("dna: head-finetune merged from") for n in c.notes)

    # another default on dna (here: shifted by 0.01, as on another machine): the earlier fine-tuning
    # comes with the default of its own round and pairs with that one, not with this run's
    def other_default(exp, dataset):
        episodes = fake_reader(exp, dataset)
        return episodes.assign(accuracy=episodes["accuracy"] + 0.01) if exp.slug == ab.DEFAULT else episodes
    d = ab.collect(run_of(("dna", "karhunen")), other_default, paper, merge=[earlier], code_diff=same_code)
    assert [(g.tables, g.variants) for g in d.merged] == [(["cmc", "dna"], {"dna": ["head-finetune", ab.DEFAULT]})]
    assert any(n.startswith("dna: head-finetune merged from") and "default of their own round" in n
               and "-0.01 points" in n for n in d.notes)
    ft = d.effects.set_index(["ablation", "shot", "variant"]).loc[("classifier", 5, "fine-tuning")]
    assert ft["tables"] == "cmc dna" and ft["ours_diff"] == pytest.approx(0.5)
    marginal = d.effects.set_index(["ablation", "shot", "variant"]).loc[("norm_imputation", 5, "norm=True,fill=marginal")]
    assert marginal["ours_diff"] == pytest.approx(c.effects.set_index(["ablation", "shot", "variant"]).loc[
        ("norm_imputation", 5, "norm=True,fill=marginal"), "ours_diff"] - 0.01 * 2 / 3, abs=1e-4)  # dna, karhunen: this run's
    cells = d.table.set_index(["ablation", "variant", "dataset", "shot"])
    shown = cells.loc[("classifier", "Linear probe (*)", "dna", 5)]
    assert shown["rev"] == d.chosen[ab.DEFAULT].rev[:10]  # one variant each: this run's default is shown
    assert shown["ours"] == pytest.approx(BASE["dna"] + 5 + 0.01 + np.mean([NOISE[s] for s in (0, 1, 2)]), abs=1e-4)
    assert cells.loc[("classifier", "fine-tuning", "dna", 5), "own_default"] == pytest.approx(shown["ours"] - 0.01, abs=1e-4)
    assert np.isnan(cells.loc[("norm_imputation", "norm=True,fill=marginal", "dna", 5), "own_default"])

    # written, read back and merged into a third run: the first run's fine-tuning on dna still pairs
    # with the second run's default there, and the record keeps which variants a table took
    ab.write(c, tmp_path / "two")
    record = yaml.safe_load((paths.ablation_reports(tmp_path / "two") / "experiments.yaml").read_text())
    assert record["tables"] == ["dna", "karhunen"] and record["merged"][0]["variants"] == {"dna": ["head-finetune"]}
    assert "dna (only head-finetune)" in (tmp_path / "two" / "reports" / "ablations.md").read_text()
    again = ab.read_collected(paths.ablation_reports(tmp_path / "two"))
    third = ab.collect(run_of(("semeion",)), fake_reader, paper, merge=[again], code_diff=same_code)
    assert third.datasets == ["cmc", "dna", "karhunen", "semeion"]
    cells = third.table.set_index(["ablation", "variant", "dataset", "shot"])
    assert cells.loc[("classifier", "fine-tuning", "dna", 5), "rev"] == first.chosen["head-finetune"].rev[:10]
    assert cells.loc[("norm_imputation", "norm=True,fill=marginal", "dna", 5), "rev"] == \
        c.chosen["prep-marginal"].rev[:10]
    assert len(third.scores[third.scores["dataset"] == "dna"]) == 3 * 3
    ft = third.effects.set_index(["ablation", "shot", "variant"]).loc[("classifier", 5, "fine-tuning")]
    assert ft["tables"] == "cmc dna"


def test_a_round_with_a_default_of_its_own_pairs_its_variants_with_it(paper, tmp_path, monkeypatch):
    """A round run elsewhere (a GPU: its default is not this CPU's, bit for bit) adds the
    FT-Transformer beside a collection's other variants on karhunen: each variant − default
    difference pairs with its own round's default, the table shows the default most variants pair
    with and marks the other, and all of it survives being written, read back and merged again."""
    monkeypatch.setitem(BASE, "karhunen", 60.0)
    monkeypatch.setitem(BASE, "semeion", 70.0)
    monkeypatch.setitem(EFFECT, "head-finetune", 0.5)
    monkeypatch.setitem(EFFECT, "enc-ft", -3.0)
    same_code = lambda a, b: []  # noqa: E731
    first = ab.collect(run_of(("cmc", "karhunen"), baseline="a" * 40, finetune=True), fake_reader, paper)
    ab.write(first, tmp_path / "cpu")
    cpu = ab.read_collected(paths.ablation_reports(tmp_path / "cpu"))

    def gpu_reader(exp, dataset):  # the GPU's default is 1 point above the CPU's, its FT-Transformer 3 below that
        episodes = fake_reader(exp, dataset)
        return episodes.assign(accuracy=episodes["accuracy"] + 1.0)
    gpu_run = show_of(*[show_entry(f"gpu-{slug}", slug, rev=f"{k + 1:x}" * 40, seeds=(0, 1, 2), datasets=("karhunen",),
                                   **{"evaluate.shots": [5]}) for k, slug in enumerate((ab.DEFAULT, "enc-ft"))],
                      baseline="c" * 40)
    g = ab.collect(gpu_run, gpu_reader, paper, prefix="gpu", merge=[cpu], code_diff=same_code)
    assert [(m.tables, m.variants) for m in g.merged] == \
        [(["cmc", "karhunen"], {"karhunen": ["prep-marginal", "head-finetune", ab.DEFAULT]})]
    assert g.shown == {"cmc": first.chosen[ab.DEFAULT].rev, "karhunen": first.chosen[ab.DEFAULT].rev}
    effects = g.effects.set_index(["ablation", "shot", "variant"])
    assert effects.loc[("encoder", 5, "FT-Transformer"), "tables"] == "karhunen"
    assert effects.loc[("encoder", 5, "FT-Transformer"), "ours_diff"] == pytest.approx(-3.0)  # not -2.0
    assert effects.loc[("encoder", 5, "FT-Transformer"), "ours_default"] == pytest.approx(60 + 5 + 1 + 0.5 / 3, abs=1e-4)
    assert effects.loc[("classifier", 5, "fine-tuning"), "ours_diff"] == pytest.approx(0.5)  # not -0.5
    cells = g.table.set_index(["ablation", "variant", "dataset", "shot"])
    assert cells.loc[("encoder", "MLP (*)", "karhunen", 5), "rev"] == first.chosen[ab.DEFAULT].rev[:10]
    assert cells.loc[("encoder", "MLP (*)", "karhunen", 5), "ours"] == pytest.approx(65 + 0.5 / 3, abs=1e-4)
    ft = cells.loc[("encoder", "FT-Transformer", "karhunen", 5)]
    assert ft["rev"] == "2" * 10 and ft["default_rev"] == "1" * 10
    assert ft["ours"] == pytest.approx(63 + 0.5 / 3, abs=1e-4) and ft["own_default"] == pytest.approx(66 + 0.5 / 3, abs=1e-4)
    assert any(n.startswith("karhunen: prep-marginal, head-finetune merged from") and "+1.00 points" not in n
               and "-1.00 points" in n for n in g.notes)
    report = ab.write(g, tmp_path / "both").read_text()
    assert "| karhunen | 65.17 ± 0.44 / 87.59 | 63.17 ± 0.44 † (66.17) / 84.14 |" in report
    assert "† from a round whose own default" in report

    # read back and merged into a third run (semeion): the two rounds on karhunen stay apart
    both = ab.read_collected(paths.ablation_reports(tmp_path / "both"))
    kh = both[0][both[0]["dataset"] == "karhunen"]
    assert sorted(kh.groupby(["slug", "default_rev"]).size().items()) == [
        ((ab.DEFAULT, first.chosen[ab.DEFAULT].rev), 3), ((ab.DEFAULT, "1" * 40), 3), (("enc-ft", "1" * 40), 3),
        (("head-finetune", first.chosen[ab.DEFAULT].rev), 3), (("prep-marginal", first.chosen[ab.DEFAULT].rev), 3)]
    third = ab.collect(run_of(("semeion",)), fake_reader, paper, merge=[both], code_diff=same_code)
    effects = third.effects.set_index(["ablation", "shot", "variant"])
    assert effects.loc[("encoder", 5, "FT-Transformer"), "ours_diff"] == pytest.approx(-3.0)
    assert effects.loc[("classifier", 5, "fine-tuning"), "tables"] == "cmc karhunen"
    assert effects.loc[("classifier", 5, "fine-tuning"), "ours_diff"] == pytest.approx(0.5)
    assert third.shown["karhunen"] == first.chosen[ab.DEFAULT].rev
    assert len(third.scores[third.scores["dataset"] == "karhunen"]) == len(kh)

    # a damaged pairing is refused by name
    folder = paths.ablation_reports(tmp_path / "both")
    scores = pd.read_csv(folder / "seed_scores.csv", dtype={"default_rev": str})
    for damage, message in (("f" * 40, "pairs enc-ft on karhunen with a default (ffffffffff) it does not hold there"),
                            ("", "default_rev is blank")):
        bad = scores.copy()
        bad.loc[bad["slug"] == "enc-ft", "default_rev"] = damage
        bad.to_csv(folder / "seed_scores.csv", index=False)
        with pytest.raises(SystemExit, match=re.escape(message)):
            ab.read_collected(folder)
    bad = scores.copy()
    bad.loc[(bad["slug"] == "enc-ft") & (bad["seed"] == 0), "default_rev"] = first.chosen[ab.DEFAULT].rev
    bad.to_csv(folder / "seed_scores.csv", index=False)
    with pytest.raises(SystemExit, match="pairs enc-ft on karhunen with 2 defaults"):
        ab.read_collected(folder)


def test_a_collection_written_before_rounds_pairs_each_table_with_its_one_default(tmp_path):
    """A seed_scores.csv without the default_rev column (as collections were written before rounds
    could differ): every row of a table pairs with the default of
    the experiments that supply the table."""
    folder = tmp_path / "ablations"
    shutil.copytree(ROOT / "reports" / "ablations", folder)
    old = pd.read_csv(folder / "seed_scores.csv")
    old.drop(columns=[c for c in old.columns if c == "default_rev"]).to_csv(folder / "seed_scores.csv", index=False)
    scores, groups = ab.read_collected(folder)
    for dataset, part in scores.groupby("dataset"):
        supplier = next(g for g in groups if g.supplies(ab.DEFAULT, dataset))
        assert set(part["default_rev"]) == {supplier.chosen[ab.DEFAULT].rev}


def test_merge_refuses_what_is_not_comparable(paper, tmp_path):
    first = ab.collect(run_of(("cmc",), baseline="a" * 40), fake_reader, paper)
    ab.write(first, tmp_path)
    earlier = ab.read_collected(paths.ablation_reports(tmp_path))
    with pytest.raises(SystemExit, match="params differ from this run's in seeds"):
        ab.collect(run_of(("dna",), seeds=(0, 1)), fake_reader, paper, merge=[earlier], code_diff=lambda a, b: [])
    with pytest.raises(SystemExit, match="evaluate.episodes"):
        ab.collect(run_of(("dna",), **{"evaluate.episodes": 7}), fake_reader, paper, merge=[earlier],
                   code_diff=lambda a, b: [])
    with pytest.raises(SystemExit) as refused:  # a params difference: no code hint
        ab.collect(run_of(("dna",), seeds=(0, 1)), fake_reader, paper, merge=[earlier], code_diff=lambda a, b: [])
    assert "--allow-code-change" not in str(refused.value)
    # params that do not change SeBA's episodes do not stop a merge
    c = ab.collect(run_of(("dna",), **{"analysis.masks": 7, "executor.tasks": 3, "baselines.methods": ["knn"],
                                       "pretrain.progress_seconds": 60.0}),
                   fake_reader, paper, merge=[earlier], code_diff=lambda a, b: [])
    assert c.datasets == ["cmc", "dna"]
    changed = lambda a, b: ["seba/train.py"]  # noqa: E731
    with pytest.raises(SystemExit, match="differs from this run's .* in seba/train.py"):
        ab.collect(run_of(("dna",)), fake_reader, paper, merge=[earlier], code_diff=changed)
    with pytest.raises(SystemExit, match="git does not know both commits"):
        ab.collect(run_of(("dna",)), fake_reader, paper, merge=[earlier], code_diff=lambda a, b: None)
    c = ab.collect(run_of(("dna",)), fake_reader, paper, merge=[earlier], code_diff=changed, allow_code_change=True)
    assert c.datasets == ["cmc", "dna"] and any("seba/train.py" in n for n in c.notes)
    with pytest.raises(SystemExit, match="no seed_scores.csv"):
        ab.read_collected(tmp_path / "nowhere")
    (paths.ablation_reports(tmp_path) / "experiments.yaml").write_text("experiments: [{variant: default}]\n")
    with pytest.raises(SystemExit, match="experiments.yaml cannot be read"):
        ab.read_collected(paths.ablation_reports(tmp_path))


def test_the_code_check_compares_what_the_stages_run(tmp_path):
    """git_code_diff on a real repository: seba/, stages/ and dvc.yaml count, the collector itself
    (which no stage runs) and files elsewhere do not; a commit git does not know gives None."""

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()

    def commit(path, text):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
        git("add", "-A")
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", path)
        return git("rev-parse", "HEAD")

    git("init", "-q")
    first = commit("seba/train.py", "a = 1\n")
    commit("seba/ablations.py", "b = 1\n")
    commit("seba/ablations/cli.py", "c = 1\n")  # the collector as a package
    collector = commit("docs/ablations.md", "text\n")
    stage = commit("seba/train.py", "a = 2\n")
    diff = ab.git_code_diff(tmp_path)
    assert diff(first, collector) == []  # the collector (module, then package) and the docs changed: the stages run the same code
    assert diff(collector, stage) == ["seba/train.py"]
    assert diff(first, "f" * 40) is None


# ----------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_queue_run_collect_in_a_tiny_pipeline(root, tmp_path, monkeypatch):
    """Two experiments queued by `python -m seba.ablations queue` in a tiny copy, run by DVC's queue
    and collected in one command (`--collect`); the single-ratio experiment's pretraining comes from DVC's run cache (the
    default's encoders). The default ensemble is two ratios here (the paper's five only cost time).
    About 2 minutes on the 2-core CPU (4 when it is busy): each experiment pays DVC's temporary
    copy and a dozen stage starts."""
    from tiny_pipeline import build

    tiny = {"seeds": [0], "datasets": ["diabetes"], "pretrain": {"max_epochs": 3, "patience": 2},
            "evaluate": {"episodes": 3}, "baselines": {"methods": []}}
    work, env, _ = build(root, tmp_path / "repo", tiny, repro=False)
    monkeypatch.setitem(ab.DEFAULTS, "ratios", [0.2, 0.5])
    monkeypatch.chdir(work)
    for key in ("PATH", "DVC_NO_ANALYTICS", "SEBA_WORKER_IDLE"):
        monkeypatch.setenv(key, env[key])
    assert ab.main(["queue", "--only", "default", "ratio-0.2", "--seeds", "0", "1", "--collect"]) == 0

    c_md = (work / "reports" / "ablations.md").read_text()
    table = pd.read_csv(work / "reports" / "ablations" / "ablations.csv")
    ok = table[table["status"] == "ok"]
    assert set(ok["variant"]) == {"Yes (*)", "MLP (*)", "norm=True,fill=zero (*)", "Ensemble (*)",
                                  "Linear probe (*)", "Ratio 0.2"}
    assert ok["ours"].between(0, 100).all() and (ok["seeds"] == "0 1").all()
    effects = pd.read_csv(work / "reports" / "ablations" / "effects.csv").set_index("variant")
    assert effects.loc["Ratio 0.2", "n_seeds"] == 2 and np.isfinite(effects.loc["Ratio 0.2", "ours_se"])
    assert "missing (not queued or removed)" in c_md  # the variants not queued are named
    record = {e["variant"]: e for e in yaml.safe_load(
        (work / "reports" / "ablations" / "experiments.yaml").read_text())["experiments"]}
    pretrained = {v: [s for s in e["stages_run"] if s.startswith("pretrain@")] for v, e in record.items()}
    assert sorted(pretrained[ab.DEFAULT]) == ["pretrain@diabetes-0.2", "pretrain@diabetes-0.5"]
    assert pretrained["ratio-0.2"] == []  # the default's r0.2 encoders, from the run cache
    assert "evaluate@diabetes" in record["ratio-0.2"]["stages_run"]
    assert (work / "reports" / "ablations" / "ratio_mode.png").exists()
    # the experiments' MLflow runs are in the workspace's store (their temporary copies are gone)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{work / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    evaluations = [r for r in runs if r.data.tags.get("stage") == "evaluate"
                   and "mlflow.parentRunId" not in r.data.tags]
    assert len(evaluations) == 2  # one per experiment (each with a nested run per seed)


def test_a_param_added_later_matches_experiments_recorded_without_it():
    """Experiments recorded before `pretrain.mask_bias` existed ran without it (false): a merge
    treats the missing key as false, and still refuses a collection that ran with it true."""
    old = {"pretrain.lr": 0.001, "datasets": ["cmc"]}
    assert ab.merge_differences(old, {**old, "pretrain.mask_bias": False}) == []
    assert ab.merge_differences({**old, "pretrain.mask_bias": True}, old) == ["pretrain.mask_bias"]
    # evaluate.probe_stop (added after the committed collection's experiments, which stopped each
    # probe at 100 % train accuracy, the released code's rule): the same, and `none` refused
    assert ab.merge_differences(old, {**old, "evaluate.probe_stop": "train_accuracy"}) == []
    assert ab.merge_differences({**old, "evaluate.probe_stop": "none"}, old) == ["evaluate.probe_stop"]


def test_the_committed_collection_merges_with_this_params_yaml():
    """An ablation round queued from params.yaml as committed must be mergeable with the committed
    collection (a round on a GPU machine merges there, at the end of its time): every default of
    reports/ablations differs from params.yaml's only in what the queue sets per round."""
    import yaml

    _, groups = ab.read_collected(ROOT / "reports" / "ablations")
    here = ab.flatten(yaml.safe_load(committed_params()))
    per_round = ("seeds", "datasets", "evaluate.shots", "evaluate.prototype_shots", "baselines.methods")
    for group in groups:
        theirs = group.chosen[ab.DEFAULT].params
        mine = {**here, **{k: v for k, v in ab.flatten(theirs).items() if k in per_round}}
        assert ab.merge_differences(mine, theirs) == [], group.origin


def test_prototype_shots_count_only_for_the_shots_an_experiment_evaluates():
    """A 5-shot experiment queued before the queue kept only the prototype shots it evaluates listed
    1-shot; the same experiment queued now lists none: the same results, so a merge takes them."""
    before = {"evaluate.shots": [5], "evaluate.prototype_shots": [1], "evaluate.head": "prototype_cosine"}
    assert ab.merge_differences(before, {**before, "evaluate.prototype_shots": []}) == []
    every = {"evaluate.shots": [1, 5, 10], "evaluate.prototype_shots": [1]}
    assert ab.merge_differences(every, {**every, "evaluate.prototype_shots": []}) == ["evaluate.prototype_shots"]


@pytest.mark.parametrize("damage, message", [
    ("record a list", "experiments.yaml cannot be read: a YAML list, not a collection's record"),
    ("scores empty", "seed_scores.csv cannot be read (EmptyDataError"),
    ("scores header only", "seed_scores.csv holds no scores"),
    ("accuracy not a number", "line 2: accuracy 'abc' is not an accuracy in [0, 100]"),
    ("accuracy blank", "line 2: accuracy blank is not an accuracy in [0, 100]"),
    ("shot a word", "line 2: shot 'five' is not a whole number"),
    ("unknown variant", "line 2: variant 'abl-nope' is not in the table"),
    ("row twice", "appears more than once"),
    ("cut short", "(shot, seed) scores of"),
])
def test_merging_a_damaged_collection_is_refused_by_name(tmp_path, damage, message):
    """`collect --merge` reads an earlier collection (the committed reports/ablations): a damaged
    or hand-edited seed_scores.csv or experiments.yaml is refused, naming the file and the row,
    instead of a traceback or scores merged in silence."""
    folder = tmp_path / "ablations"
    shutil.copytree(ROOT / "reports" / "ablations", folder)
    scores, record = folder / "seed_scores.csv", folder / "experiments.yaml"
    lines = scores.read_text().splitlines()
    first = lines[1].split(",")
    edits = {
        "scores empty": lambda: scores.write_text(""),
        "scores header only": lambda: scores.write_text(lines[0] + "\n"),
        "accuracy not a number": lambda: scores.write_text("\n".join([lines[0], ",".join(first[:4] + ["abc"])] + lines[2:]) + "\n"),
        "accuracy blank": lambda: scores.write_text("\n".join([lines[0], ",".join(first[:4] + [""])] + lines[2:]) + "\n"),
        "shot a word": lambda: scores.write_text("\n".join([lines[0], ",".join(first[:2] + ["five"] + first[3:])] + lines[2:]) + "\n"),
        "unknown variant": lambda: scores.write_text("\n".join([lines[0], ",".join(["abl-nope"] + first[1:])] + lines[2:]) + "\n"),
        "row twice": lambda: scores.write_text("\n".join(lines + [lines[1]]) + "\n"),
        "cut short": lambda: scores.write_text("\n".join(lines[: len(lines) // 2]) + "\n"),
        "record a list": lambda: record.write_text("- a\n"),
    }
    edits[damage]()
    with pytest.raises(SystemExit, match=re.escape(message)):
        ab.read_collected(folder)
    assert len(ab.read_collected(ROOT / "reports" / "ablations")[0]) > 0  # the committed one reads
