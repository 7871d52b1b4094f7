"""End to end: `dvc repro` on a tiny params override in a temporary git copy of the repo, then
checks of the outputs, the MLflow runs, and which stages DVC reruns after params edits."""

import json

import pandas as pd
import pytest
import torch
import yaml

from tiny_pipeline import TINY, run, set_params, stages_run, start_long_repro, stop_repro

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def repo(tiny_pipeline):
    return tiny_pipeline


def test_repro_builds_every_stage_and_the_reports(repo):
    work, env, output = repo
    expected = {"validate", "fetch@diabetes", "fetch@cmc", "preprocess@diabetes", "preprocess@cmc", "split@diabetes",
                "split@cmc", "pretrain@diabetes-0.2", "pretrain@diabetes-0.5", "pretrain@cmc-0.2",
                "pretrain@cmc-0.5", "evaluate@diabetes", "evaluate@cmc", "baseline@knn-diabetes",
                "baseline@knn-cmc", "aggregate", "track"}
    assert stages_run(output) == expected
    assert "using the offline snapshot" in output or '"source": "openml"' in (work / "data/raw/cmc.json").read_text()
    for ratio in ("r0.2", "r0.5"):
        assert (work / "data/models/cmc" / ratio / "seed0.pt").exists()
    episodes = pd.read_csv(work / "reports/episodes/cmc.csv")
    assert len(episodes) == 1 * 3 * 3 * 3  # seeds x shots x episodes x (2 ratios + ensemble)
    assert set(episodes["member"]) == {"r0.2", "r0.5", "ensemble"}
    results = pd.read_csv(work / "reports/results.csv")
    ens = results[results["member"] == "ensemble"]
    assert sorted(zip(ens["dataset"], ens["shot"])) == sorted(
        (d, s) for d in ("diabetes", "cmc") for s in (1, 5, 10))
    assert ens["paper"].notna().all() and ens["accuracy"].between(0, 100).all()
    md = (work / "reports/results.md").read_text()
    assert "| cmc | 10 |" in md and "| diabetes | 1 |" in md
    summary = json.loads((work / "reports/summary.json").read_text())
    assert "cmc_5shot_ensemble" in summary and "mean_abs_diff_vs_paper" in summary
    assert (work / "reports/figures/accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    metrics = run(["dvc", "metrics", "show", "--json"], work, env).stdout
    assert "cmc_5shot_ensemble" in metrics
    # the baseline ran on SeBA's episodes and is ranked beside it
    knn = pd.read_csv(work / "reports/episodes/knn/cmc.csv")
    seba = episodes[episodes["member"] == "ensemble"]
    assert list(knn["support_hash"]) == list(seba["support_hash"])
    assert "## 5-shot" in md and "| knn |" in md and "avg rank" in md
    assert "rank_1shot_knn" in summary
    assert (work / "reports/figures/ranks.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_mlflow_has_a_run_per_stage_with_seed_children(repo):
    work, env, _ = repo
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{work / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("seba")
    runs = client.search_runs([experiment.experiment_id], max_results=500)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    by_stage = {}
    for r in parents:
        by_stage.setdefault(r.data.tags["stage"], []).append(r)
    opt_in = {"analysis", "theorem"}  # analyses/dvc.yaml's stages, when a test ran them in this pipeline
    assert {k: len(v) for k, v in by_stage.items() if k not in opt_in} == {
        "fetch": 2, "preprocess": 2, "split": 2, "pretrain": 4, "evaluate": 2, "baseline": 2, "aggregate": 1}
    assert all(r.info.status == "FINISHED" for r in runs)
    pretrain = by_stage["pretrain"][0]
    assert pretrain.data.params["pretrain.lr"] == "0.001"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == pretrain.info.run_id]
    assert len(children) == 1
    curve = client.get_metric_history(children[0].info.run_id, "val_loss")
    assert 1 <= len(curve) <= 4 and [m.step for m in curve] == list(range(1, len(curve) + 1))
    evaluate = by_stage["evaluate"][0]
    assert any(k.startswith("5shot_ensemble") for k in evaluate.data.metrics)
    assert {a.path for a in client.list_artifacts(evaluate.info.run_id)} & {"cmc.csv", "diabetes.csv"}
    seed_run = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == evaluate.info.run_id][0]
    per_episode = client.get_metric_history(seed_run.info.run_id, "5shot_ensemble_episode_accuracy")
    assert sorted(m.step for m in per_episode) == [0, 1, 2]
    artifacts = {a.path for a in client.list_artifacts(by_stage["aggregate"][0].info.run_id)}
    assert {"results.md", "results.csv", "summary.json", "figures"} <= artifacts


def test_only_affected_stages_rerun_after_params_edits(repo):
    work, env, _ = repo
    dry = lambda: stages_run(run(["dvc", "repro", "--dry"], work, env).stdout)  # noqa: E731
    assert dry() == set()

    set_params(work, {"evaluate": {"episodes": 2}})  # baselines share SeBA's episodes: they rerun too
    # `validate` reruns on every params.yaml edit; its output never changes, so it reruns nothing
    expected = {"validate", "evaluate@diabetes", "evaluate@cmc", "baseline@knn-diabetes", "baseline@knn-cmc",
                "aggregate"}
    assert dry() == expected
    # (a real run also pushes the stages' MLflow records: `track`, which `--dry` cannot foresee)
    assert stages_run(run(["dvc", "repro"], work, env).stdout) == expected | {"track"}
    assert dry() == set()

    set_params(work, {"ratios": [0.2, 0.5, 0.3]})
    assert dry() == {"validate", "pretrain@diabetes-0.3", "pretrain@cmc-0.3", "evaluate@diabetes", "evaluate@cmc",
                     "aggregate"}
    set_params(work, {"ratios": [0.2, 0.5]})
    assert dry() == set()

    # adding a method adds only its stages; one method's hyper-parameter reruns only that method
    k = yaml.safe_load((work / "params.yaml").read_text())["baselines"]["knn"]["k"]
    set_params(work, {"baselines": {"methods": ["knn", "logreg"]}})
    assert dry() == {"validate", "baseline@logreg-diabetes", "baseline@logreg-cmc", "aggregate"}
    set_params(work, {"baselines": {"methods": ["knn"], "knn": {"k": k + 2}}})
    assert dry() == {"validate", "baseline@knn-diabetes", "baseline@knn-cmc", "aggregate"}
    set_params(work, {"baselines": {"knn": {"k": k}}})
    assert dry() == set()

    # editing one method's module reruns only that method's stages, and the two stages that import
    # every method: validate (which checks their sections; its output never changes, so nothing
    # after it reruns for it) and aggregate (their paper rows), each a few seconds
    modules = {name: work / "seba" / "baselines" / f"{name}.py" for name in ("knn", "logreg")}
    originals = {name: path.read_text() for name, path in modules.items()}
    modules["logreg"].write_text(originals["logreg"] + "\n# edited\n")  # logreg is not in methods
    assert dry() == {"validate", "aggregate"}
    modules["knn"].write_text(originals["knn"] + "\n# edited\n")
    assert dry() == {"validate", "baseline@knn-diabetes", "baseline@knn-cmc", "aggregate"}
    for name, path in modules.items():
        path.write_text(originals[name])
    assert dry() == set()

    # a dataset's own pretrain value reruns its pretraining only (its fetch reruns, reads the same
    # table, and nothing between fetch and pretrain follows), and is what its encoders record
    run(["dvc", "repro", "analyses/dvc.yaml"], work, env)  # the opt-in analyses: up to date, or run now
    set_params(work, {"sources": {"diabetes": {"openml_id": 37, "pretrain": {"patience": 3}}}})
    assert stages_run(run(["dvc", "repro"], work, env).stdout) == {
        "validate", "fetch@diabetes", "pretrain@diabetes-0.2", "pretrain@diabetes-0.5", "evaluate@diabetes", "aggregate",
        "track"}
    assert dry() == set()
    # the k-NN analysis lists no `sources`: a dataset's own pretrain values reach it through the
    # encoders (their checkpoints record them)
    assert "analyses/dvc.yaml:analysis" in stages_run(run(["dvc", "repro", "analyses/dvc.yaml"], work, env).stdout)
    assert dry() == set()
    for name, patience in (("diabetes", 3), ("cmc", TINY["pretrain"]["patience"])):
        checkpoint = torch.load(work / "data" / "models" / name / "r0.2" / "seed0.pt", weights_only=True)
        assert checkpoint["pretrain_config"]["patience"] == patience

    # `dvc repro --dry` cannot know that changed outputs will change downstream stages: run it
    set_params(work, {"sources": {"cmc": {"openml_id": 20}}})  # another table from the snapshot
    assert stages_run(run(["dvc", "repro"], work, env).stdout) == {"validate", "fetch@cmc", "preprocess@cmc", "split@cmc", "pretrain@cmc-0.2", "pretrain@cmc-0.5",
                     "evaluate@cmc", "baseline@knn-cmc", "aggregate", "track"}
    assert dry() == set()

    # an edit of how a local table is read that leaves the table as it was reruns its fetch only: the
    # pretrain stages depend on the dataset's own pretrain values as fetch writes them, not on its source entry
    (work / "data/local").mkdir(exist_ok=True)
    table = pd.read_parquet(work / "data/raw/cmc.parquet")
    table.to_csv(work / "data/local/cmc.csv", index=False)
    table.to_csv(work / "data/local/cmc.csv.gz", index=False)
    set_params(work, {"sources": {"cmc": {"path": "data/local/cmc.csv", "target": "class"}}})
    assert "pretrain@cmc-0.2" in stages_run(run(["dvc", "repro"], work, env).stdout)
    assert json.loads((work / "data/raw/cmc.pretrain.json").read_text()) == {}
    set_params(work, {"sources": {"cmc": {"path": "data/local/cmc.csv.gz", "target": "class", "delimiter": ",",
                                          "max_categories": 60}}})
    # (aggregate records the whole params.yaml)
    assert stages_run(run(["dvc", "repro"], work, env).stdout) == {"validate", "fetch@cmc", "aggregate", "track"}
    set_params(work, {"sources": {"cmc": {"path": "data/local/cmc.csv.gz", "target": "class",
                                          "pretrain": {"patience": 3}}}})
    assert stages_run(run(["dvc", "repro"], work, env).stdout) == {
        "validate", "fetch@cmc", "pretrain@cmc-0.2", "pretrain@cmc-0.5", "evaluate@cmc", "aggregate", "track"}
    assert json.loads((work / "data/raw/cmc.pretrain.json").read_text()) == {"patience": 3}
    assert dry() == set()


def test_ablation_switches_rerun_only_what_they_affect_and_run(repo):
    work, env, _ = repo
    dry = lambda: stages_run(run(["dvc", "repro", "--dry"], work, env).stdout)  # noqa: E731
    assert dry() == set()
    evaluation = {"validate", "evaluate@diabetes", "evaluate@cmc", "aggregate"}
    set_params(work, {"evaluate": {"head": "nn_cosine"}})  # SeBA's head: the baselines keep theirs
    assert dry() == evaluation
    set_params(work, {"evaluate": {"head": "linear"}, "pretrain": {"normalise": False}})
    # (`--dry` cannot foresee that new encoders rerun the evaluations; the real run below does)
    assert dry() == {"validate", "aggregate"} | {f"pretrain@{d}-{r}" for d in ("diabetes", "cmc") for r in (0.2, 0.5)}

    # a real run of three switches at once: raw inputs, a random-ratio encoder, fine-tuning
    set_params(work, {"ratios": [0.2, "random"], "evaluate": {"head": "finetune"}})
    assert stages_run(run(["dvc", "repro"], work, env).stdout) == evaluation | {"track"} | {
        f"pretrain@{d}-{r}" for d in ("diabetes", "cmc") for r in (0.2, "random")}
    for ratio in ("r0.2", "rrandom"):
        checkpoint = torch.load(work / "data/models/cmc" / ratio / "seed0.pt", weights_only=True)
        assert checkpoint["pretrain_config"]["normalise"] is False
    log = json.loads((work / "data/models/cmc/rrandom/log.json").read_text())
    assert log["seeds"]["0"]["masked_columns"] == 0  # drawn per view
    assert log["seeds"]["0"]["precision"] == log["precision"] in ("fp32", "bf16")  # each seed's own, recorded
    episodes = pd.read_csv(work / "reports/episodes/cmc.csv")
    assert set(episodes["member"]) == {"r0.2", "rrandom", "ensemble"}
    tuned = episodes[(episodes["shot"] > 1) & (episodes["member"] != "ensemble")]
    assert (tuned["probe_iterations"] >= 0).all() and (tuned["probe_iterations"] > 0).any()  # fine-tuning ran
    assert episodes["accuracy"].between(0, 100).all()
    assert "rrandom" in (work / "reports/results.md").read_text()

    # back as it was: DVC's run cache restores the earlier outputs
    set_params(work, {"ratios": TINY["ratios"], "pretrain": {"normalise": True},
                      "evaluate": {"head": "linear"}})
    run(["dvc", "repro"], work, env)
    assert dry() == set()


def test_adding_seeds_trains_only_the_new_ones(repo):
    """A pretrain stage whose seeds grow reuses the seeds of its earlier output (dvc.lock, DVC's
    cache) that were trained on the same rows with the same values and code: the encoders are the
    earlier bytes and the log entries the earlier entries; only the new seed trains."""
    work, env, _ = repo
    original = (work / "params.yaml").read_text()
    models = work / "data/models/diabetes/r0.2"
    one_thread = {"workers": 1, "threads": 1}  # the threads a seed trains with are part of what it is
    set_params(work, {"seeds": [0, 1], "pretrain": one_thread})
    run(["dvc", "repro"], work, env)
    before = {p.name: p.read_bytes() for p in models.glob("seed*.pt")}
    logged = json.loads((models / "log.json").read_text())["seeds"]
    assert set(before) == {"seed0.pt", "seed1.pt"} and all(len(e["key"]) == 32 for e in logged.values())
    set_params(work, {"seeds": [0, 1, 2]})
    output = run(["dvc", "repro"], work, env)
    said = output.stdout + output.stderr
    assert "[pretrain diabetes r=0.2] 2 of 3 seeds reused from this stage's earlier output" in said, said[-3000:]
    assert "[pretrain diabetes r=0.2 seed 2 (3/3)] done" in said and "seed 0 (1/3)] done" not in said
    assert {p.name for p in models.glob("seed*.pt")} == {"seed0.pt", "seed1.pt", "seed2.pt"}
    assert all(before[name] == (models / name).read_bytes() for name in before)
    after = json.loads((models / "log.json").read_text())["seeds"]
    assert {s: after[s] for s in ("0", "1")} == logged and "2" in after
    # a run of the same seeds (forced) trains them all
    output = run(["dvc", "repro", "--force", "--single-item", "pretrain@diabetes-0.2"], work, env)
    assert "reused" not in output.stdout + output.stderr and "seed 0 (1/3)] done" in output.stdout + output.stderr
    # another value of a `pretrain` key: nothing is reused
    set_params(work, {"pretrain": {"lr": 0.002}})
    assert "reused" not in (lambda r: r.stdout + r.stderr)(run(["dvc", "repro"], work, env))
    (work / "params.yaml").write_text(original)
    run(["dvc", "repro"], work, env)  # the earlier outputs, from DVC's run cache
    assert stages_run(run(["dvc", "repro", "--dry"], work, env).stdout) == set()


def test_a_broken_mlflow_store_only_warns_and_outputs_are_complete(repo):
    work, env, _ = repo
    (work / "reports/results.md").unlink()
    broken = {**env, "MLFLOW_TRACKING_URI": "sqlite:////proc/seba-no-such-dir/mlflow.db"}
    run(["python", "stages/aggregate.py"], work, broken)
    assert "| cmc | 1 |" in (work / "reports/results.md").read_text()
    result = run(["python", "stages/track.py"], work, broken)  # exits 0: the record waits
    assert "WARNING: MLflow start failed" in result.stderr and "1 stage record(s) wait" in result.stderr
    assert "pushed" in run(["python", "stages/track.py"], work, env).stderr


def test_a_params_mistake_is_one_clear_line_before_any_work(repo):
    work, env, _ = repo
    original = (work / "params.yaml").read_text()
    try:
        params = yaml.safe_load(original)
        params["pretrain"]["patiance"] = params["pretrain"].pop("patience")
        (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        result = run(["python", "stages/pretrain.py", "--dataset", "cmc", "--ratio", "0.2"], work, env, check=False)
        assert result.returncode == 2
        assert "unknown key 'pretrain.patiance' (did you mean 'patience'?)" in result.stderr
        assert "Traceback" not in result.stderr
    finally:
        (work / "params.yaml").write_text(original)


def test_a_second_repro_is_locked_out_and_a_killed_repro_is_redone_cleanly(repo):
    """Kill `dvc repro` (and its stage) in the middle of pretraining, the way an out-of-memory
    kill does; a concurrent `dvc repro` meanwhile gets DVC's lock message. The next `dvc repro`
    redoes the interrupted work and ends with every stage up to date."""
    import time

    work, env, _ = repo
    original = (work / "params.yaml").read_text()
    first, log_path = start_long_repro(work, env, "killed_repro.log")
    try:
        deadline = time.time() + 600
        while "Running stage 'pretrain@" not in log_path.read_text():
            assert first.poll() is None, log_path.read_text()
            assert time.time() < deadline, "pretraining never started"
            time.sleep(0.5)
        time.sleep(3)  # well inside the first pretraining
        second = run(["dvc", "repro"], work, env, check=False)
        assert second.returncode != 0
        assert "lock" in (second.stdout + second.stderr).lower()
        assert first.poll() is None  # the first run is unharmed by the second
    finally:
        stop_repro(first)  # the way an out-of-memory kill does, or a failed assertion's clean-up
    # nothing half-written carries a final name: every model file present loads
    import torch

    for model in (work / "data" / "models").rglob("*.pt"):
        torch.load(model, map_location="cpu", weights_only=True)
    status = run(["dvc", "status"], work, env).stdout
    assert "pretrain@" in status  # DVC knows the interrupted work is not done
    again = run(["dvc", "repro"], work, env)
    assert {"evaluate@diabetes", "evaluate@cmc", "aggregate"} <= stages_run(again.stdout)
    assert stages_run(run(["dvc", "repro", "--dry"], work, env).stdout) == set()
    assert "| cmc | 1 |" in (work / "reports/results.md").read_text()
    (work / "params.yaml").write_text(original)
