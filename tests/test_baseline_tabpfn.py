"""The TabPFN baseline without its weights (they cannot be downloaded here): its params section,
the checkpoint lookup and the errors that stop a stage before any work (no checkpoint, no package,
too many classes or features), and its plumbing through the stage interface with a stand-in for
tabpfn's classifier, imported by the method as the real package would be. With the real package
installed, a tiny randomly initialised TabPFN v2 checkpoint runs it end to end."""

import copy
import sys

import numpy as np
import pytest
import torch
import yaml

from conftest import committed_params
from seba.baselines.base import evaluate_baseline, method_config
from seba.baselines.tabpfn import TabPFN, TabpfnConfig, checkpoint
from seba.core.config import EvaluateConfig, parse_params
from seba.core.data import EncodedTable, Split, scale
from seba.episodes import sample_episodes
from seba.core.errors import ConfigError, DataError
from seba.evaluate import support_hash

CPU = torch.device("cpu")

# A stand-in for the tabpfn package: TabPFNClassifier's interface (keyword arguments, fit,
# predict_proba, classes_); it predicts from the nearest class mean of its context rows.
FAKE_TABPFN = '''
import os
import numpy as np

TELEMETRY_AT_IMPORT = os.environ.get("TABPFN_DISABLE_TELEMETRY")
MADE = []


class TabPFNClassifier:
    def __init__(self, **kwargs):
        self.kwargs = kwargs
        MADE.append(self)

    def fit(self, X, y):
        self.fit_X, self.fit_y = np.array(X), np.array(y)
        self.classes_ = np.unique(y)
        self.means_ = np.stack([X[y == c].mean(0) for c in self.classes_])
        return self

    def predict_proba(self, X):
        self.predicted_shape = X.shape
        d = ((X[:, None, :] - self.means_[None]) ** 2).sum(-1)
        p = np.exp(-(d - d.min(1, keepdims=True)))
        return p / p.sum(1, keepdims=True)
'''


@pytest.fixture()
def fake_tabpfn(tmp_path, monkeypatch):
    """The stand-in, importable as ``tabpfn`` (not yet imported); the real one is put back after."""
    (tmp_path / "fake" / "tabpfn").mkdir(parents=True)
    (tmp_path / "fake" / "tabpfn" / "__init__.py").write_text(FAKE_TABPFN)
    monkeypatch.syspath_prepend(str(tmp_path / "fake"))
    monkeypatch.setitem(sys.modules, "tabpfn", None)  # restored (or removed) at teardown
    del sys.modules["tabpfn"]
    monkeypatch.delenv("TABPFN_DISABLE_TELEMETRY", raising=False)
    return lambda: sys.modules["tabpfn"]


@pytest.fixture()
def weights(tmp_path, monkeypatch):
    """A file where a checkpoint would be, named by TABPFN_MODEL_CACHE_DIR."""
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "tabpfn-v2-classifier.ckpt").write_bytes(b"not really weights")
    monkeypatch.setenv("TABPFN_MODEL_CACHE_DIR", str(folder))
    return folder / "tabpfn-v2-classifier.ckpt"


def table(n_classes=3, per_class=40, dim=6, seed=0) -> tuple[EncodedTable, dict]:
    """A separable table and one seed's split (a quarter of each class for train and validation)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, dim)) * 4
    X = np.concatenate([c + rng.normal(size=(per_class, dim)) for c in centres]).astype(np.float32)
    y = np.repeat(np.arange(n_classes), per_class)
    t = EncodedTable(X=X, y=y, groups=np.arange(dim), numeric=np.ones(dim, bool),
                     columns=np.array([f"c{j}" for j in range(dim)]),
                     encoded_names=np.array([f"c{j}" for j in range(dim)]),
                     classes=np.array([f"k{c}" for c in range(n_classes)]))
    order = rng.permutation(len(y))
    split = Split(seed=0, train=order[:len(y) // 5], val=order[len(y) // 5:len(y) // 4], test=order[len(y) // 4:])
    return t, {0: split}


class Tracker:
    def child(self, *args, **kwargs):
        return None

    def log_metrics(self, *args, **kwargs):
        pass

    def end_child(self, *args, **kwargs):
        pass


# ---------------------------------------------------------------------------- the params section

def test_its_section_holds_the_defaults_and_it_does_not_run_by_default():
    raw = yaml.safe_load(committed_params())
    params = parse_params(raw)
    assert "tabpfn" not in params.baselines.methods  # it cannot run without its weights
    cfg = method_config(params.baselines, "tabpfn")
    assert cfg == TabpfnConfig() and cfg.model_path is None and cfg.too_many_features == "error"
    assert (cfg.n_estimators, cfg.softmax_temperature, cfg.max_features) == (8, 0.9, 500)


@pytest.mark.parametrize("edit,message", [
    ({"n_estimators": 0}, "'baselines.tabpfn.n_estimators' must be > 0"),
    ({"n_estimators": 2.5}, "'baselines.tabpfn.n_estimators' must be an integer"),
    ({"softmax_temperature": -1.0}, "'baselines.tabpfn.softmax_temperature' must be > 0"),
    ({"max_features": 0}, "'baselines.tabpfn.max_features' must be > 0"),
    ({"too_many_features": "drop"}, "'baselines.tabpfn.too_many_features' is 'drop'; allowed: error, subsample, "
                                    "ignore_limits"),
    ({"device": "tpu"}, "'baselines.tabpfn.device' is 'tpu'; allowed: stage, cpu, cuda"),
    ({"inference_precision": "fp16"}, "'baselines.tabpfn.inference_precision' is 'fp16'"),
    ({"average_before_softmax": "no"}, "'baselines.tabpfn.average_before_softmax' must be true or false"),
    ({"model_path": 5}, "'baselines.tabpfn.model_path'"),
    ({"n_estimator": 4}, "unknown key 'baselines.tabpfn.n_estimator' \\(did you mean 'n_estimators'\\?\\)"),
])
def test_bad_values_name_the_key(edit, message):
    raw = copy.deepcopy(yaml.safe_load(committed_params()))
    raw["baselines"]["tabpfn"].update(edit)
    with pytest.raises(ConfigError, match=message):
        method_config(parse_params(raw).baselines, "tabpfn")


def test_a_model_path_and_the_options_are_accepted():
    raw = copy.deepcopy(yaml.safe_load(committed_params()))
    raw["baselines"]["methods"] = ["knn", "tabpfn"]
    raw["baselines"]["tabpfn"].update(model_path="~/w/tabpfn-v2-classifier.ckpt", too_many_features="subsample",
                                      device="cpu", inference_precision="fp32")
    cfg = method_config(parse_params(raw).baselines, "tabpfn")
    assert cfg.model_path == "~/w/tabpfn-v2-classifier.ckpt" and cfg.too_many_features == "subsample"


# ---------------------------------------------------------------------------- the checkpoint

def test_without_a_checkpoint_it_says_where_to_get_one_and_where_to_put_it(monkeypatch):
    monkeypatch.delenv("TABPFN_MODEL_CACHE_DIR", raising=False)
    with pytest.raises(ConfigError) as error:
        checkpoint(TabpfnConfig())
    message = str(error.value)
    for part in ("'baselines.tabpfn.model_path' is null", "TABPFN_MODEL_CACHE_DIR is not set",
                 "https://huggingface.co/Prior-Labs/TabPFN-v2-clf", "tabpfn-v2-classifier.ckpt",
                 "not downloaded", "params.yaml"):
        assert part in message, part


def test_a_checkpoint_named_but_absent_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("TABPFN_MODEL_CACHE_DIR", raising=False)
    with pytest.raises(ConfigError, match="'baselines.tabpfn.model_path' is .*nowhere.ckpt, which does not exist.*"
                                          "huggingface.co/Prior-Labs/TabPFN-v2-clf"):
        checkpoint(TabpfnConfig(model_path=str(tmp_path / "nowhere.ckpt")))
    monkeypatch.setenv("TABPFN_MODEL_CACHE_DIR", str(tmp_path))  # an empty folder
    with pytest.raises(ConfigError, match="TABPFN_MODEL_CACHE_DIR is the folder .* holds no TabPFN classifier "
                                          "checkpoint"):
        checkpoint(TabpfnConfig())


def test_the_checkpoint_comes_from_model_path_else_the_packages_cache_variable(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "tabpfn-v2-regressor.ckpt").write_bytes(b"r")  # a regressor and other files are not candidates
    (cache / "notes.txt").write_text("")
    (cache / "tabpfn-v2-classifier.ckpt").write_bytes(b"c")
    monkeypatch.setenv("TABPFN_MODEL_CACHE_DIR", str(cache))
    assert checkpoint(TabpfnConfig()) == cache / "tabpfn-v2-classifier.ckpt"
    # model_path wins over the variable: a file, relative to the repository root, or a folder
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "mine.safetensors").write_bytes(b"m")
    cfg = TabpfnConfig(model_path="weights/mine.safetensors")
    assert checkpoint(cfg, root=tmp_path) == tmp_path / "weights" / "mine.safetensors"
    assert checkpoint(TabpfnConfig(model_path=str(tmp_path / "weights"))) == tmp_path / "weights" / "mine.safetensors"
    # a folder with two classifier checkpoints: name one
    (cache / "tabpfn-v2-classifier-finetuned-zk73skhh.ckpt").write_bytes(b"c")
    with pytest.raises(ConfigError, match="holds 2 classifier checkpoints \\(tabpfn-v2-classifier-finetuned-zk73skhh"
                                          "\\.ckpt, tabpfn-v2-classifier\\.ckpt\\); set 'baselines.tabpfn.model_path'"):
        checkpoint(TabpfnConfig())


def test_the_stage_stops_before_any_work_without_a_checkpoint(fake_tabpfn, monkeypatch):
    monkeypatch.delenv("TABPFN_MODEL_CACHE_DIR", raising=False)
    t, splits = table()
    with pytest.raises(ConfigError, match="no checkpoint"):
        evaluate_baseline(TabPFN, TabpfnConfig(), t, splits, EvaluateConfig(shots=(1,), episodes=2), "toy", CPU,
                          Tracker())
    assert fake_tabpfn().MADE == []  # no classifier was made


# ---------------------------------------------------------------------------- limits and the package

def test_more_than_ten_classes_are_refused_naming_the_dataset(weights):
    t, splits = table(n_classes=11, per_class=20)
    with pytest.raises(DataError, match="baseline 'tabpfn' on dataset 'many': the table has 11 classes; TabPFN "
                                        "classifies at most 10"):
        evaluate_baseline(TabPFN, TabpfnConfig(), t, splits, EvaluateConfig(shots=(1,), episodes=2), "many", CPU,
                          Tracker())
    with pytest.raises(DataError, match="11 classes"):  # and by the method itself
        TabPFN(TabpfnConfig(), 0, CPU).scores(t.X, np.zeros((1, 11), np.int64), np.arange(11), 11, 1)


def test_more_features_than_the_limit_are_an_error_unless_an_option_says_otherwise(fake_tabpfn, weights):
    t, _ = table(dim=12)
    TabPFN.check(TabpfnConfig(max_features=12), t, "wide")  # at the limit: fine
    with pytest.raises(DataError, match="dataset 'wide': the table has 12 feature columns \\(after encoding\\), more "
                                        "than 'baselines.tabpfn.max_features' \\(11.*too_many_features"):
        TabPFN.check(TabpfnConfig(max_features=11), t, "wide")
    TabPFN.check(TabpfnConfig(max_features=11, too_many_features="subsample"), t, "wide")
    TabPFN.check(TabpfnConfig(max_features=11, too_many_features="ignore_limits"), t, "wide")


def test_without_the_package_it_says_how_to_install_it(monkeypatch, weights):
    monkeypatch.setitem(sys.modules, "tabpfn", None)  # as if not installed
    t, _ = table()
    with pytest.raises(ConfigError, match="needs the tabpfn package, an optional extra of this project: "
                                          "pip install -e \"\\.\\[tabpfn\\]\""):
        TabPFN.check(TabpfnConfig(), t, "toy")
    with pytest.raises(ConfigError, match="pip install -e"):
        TabPFN(TabpfnConfig(), 0, CPU).scores(t.X, np.zeros((1, 3), np.int64), np.arange(3), 3, 1)


def test_an_unavailable_device_is_refused_at_stage_start(fake_tabpfn, weights, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="'baselines.tabpfn.device' is 'cuda'"):
        TabPFN.check(TabpfnConfig(device="cuda"), table()[0], "toy")


# ---------------------------------------------------------------------------- plumbing (stand-in classifier)

def test_it_runs_through_the_stage_on_sebas_episodes_with_the_configured_classifier(fake_tabpfn, weights):
    t, splits = table()
    cfg = TabpfnConfig(n_estimators=3, softmax_temperature=0.5, inference_precision="fp32")
    evaluate = EvaluateConfig(shots=(1, 5), episodes=4)
    frame = evaluate_baseline(TabPFN, cfg, t, splits, evaluate, "toy", CPU, Tracker())
    fake = fake_tabpfn()
    assert fake.TELEMETRY_AT_IMPORT == "1"  # telemetry off before the package was imported
    assert len(fake.MADE) == 8  # one classifier per episode and shot
    first = fake.MADE[0]
    assert first.kwargs == {"model_path": str(weights), "device": "cpu", "n_estimators": 3, "softmax_temperature": 0.5,
                            "average_before_softmax": False, "balance_probabilities": False,
                            "inference_precision": torch.float32, "ignore_pretraining_limits": False,
                            "random_state": first.kwargs["random_state"]}
    seeds = [m.kwargs["random_state"] for m in fake.MADE]
    assert len(set(seeds)) == 8 and all(0 <= s < 2**31 for s in seeds)  # one seed per episode
    # each fitted on its episode's support rows, asked for every test row; scored on SeBA's episodes
    scaled, y_test = scale(t, splits[0].train)[splits[0].test], t.y[splits[0].test]
    for shot, made in zip((1, 5), (fake.MADE[:4], fake.MADE[4:])):
        episodes = sample_episodes(y_test, 3, shot, 4, 0, "toy")
        assert list(frame[frame["shot"] == shot]["support_hash"]) == [support_hash(r) for r in episodes.support]
        for m, rows in zip(made, episodes.support):
            assert m.fit_X.shape == (3 * shot, 6) and list(m.fit_y) == list(episodes.support_labels)
            assert np.array_equal(m.fit_X, scaled[rows])  # the standardised features every method gets
            assert m.predicted_shape == (len(y_test), 6)
    assert frame["accuracy"].mean() > 90  # the probabilities' argmax scores the query rows
    again = evaluate_baseline(TabPFN, cfg, t, splits, evaluate, "toy", CPU, Tracker())
    assert [m.kwargs["random_state"] for m in fake.MADE[8:]] == seeds  # seeds are stable
    assert again.equals(frame)


def test_scores_are_class_probabilities_with_each_class_in_its_column(fake_tabpfn, weights):
    t, _ = table()
    method = TabPFN(TabpfnConfig(), 0, CPU)
    assert "tabpfn-v2-classifier.ckpt" in method.log and "sha256" in method.log
    support = np.array([[0, 1, 80, 81], [2, 3, 82, 83]])  # classes 0 and 2 only: class 1's column stays 0
    scores = method.scores(t.X, support, np.array([0, 0, 2, 2]), 3, 2)
    assert scores.shape == (2, len(t.X), 3) and scores.dtype == torch.float32
    assert torch.allclose(scores.sum(-1), torch.ones(2, len(t.X))) and (scores[..., 1] == 0).all()
    assert (scores.argmax(-1)[:, :40] == 0).all() and (scores.argmax(-1)[:, 80:] == 2).all()


def test_subsample_gives_each_episode_its_own_columns_and_ignore_limits_passes_the_flag(fake_tabpfn, weights):
    t, _ = table(dim=12)
    support, labels = np.array([[0, 40, 80], [1, 41, 81], [2, 42, 82]]), np.arange(3)
    TabPFN(TabpfnConfig(max_features=5, too_many_features="subsample"), 0, CPU).scores(t.X, support, labels, 3, 1)
    made = fake_tabpfn().MADE
    assert all(m.fit_X.shape == (3, 5) and m.predicted_shape == (len(t.X), 5) for m in made)
    chosen = [tuple(np.flatnonzero((t.X[:1].T == m.fit_X[:1]).any(1))) for m in made]  # which columns it got
    assert len(set(chosen)) > 1 and not made[0].kwargs["ignore_pretraining_limits"]
    TabPFN(TabpfnConfig(max_features=5, too_many_features="ignore_limits"), 0, CPU).scores(t.X, support, labels, 3, 1)
    assert made[-1].kwargs["ignore_pretraining_limits"] and made[-1].fit_X.shape == (3, 12)


# ---------------------------------------------------------------------------- the real package, random weights

def test_the_real_package_runs_it_from_a_local_checkpoint(tmp_path, monkeypatch):
    """tabpfn itself (when installed) with a tiny TabPFN v2 of random weights saved as a checkpoint:
    it accepts the method's arguments and returns probabilities, the same twice for one seed."""
    pytest.importorskip("tabpfn", reason="the tabpfn extra is not installed")
    from tabpfn.architectures import ARCHITECTURES

    architecture = ARCHITECTURES["tabpfn_v2"]
    config = {"emsize": 16, "nlayers": 1, "nhead": 2, "features_per_group": 2, "max_num_classes": 10}
    torch.manual_seed(0)
    model = architecture.get_architecture(architecture.parse_config(config)[0])
    torch.save({"state_dict": model.state_dict(), "config": config}, tmp_path / "tiny-v2-classifier.ckpt")
    monkeypatch.setenv("TABPFN_MODEL_CACHE_DIR", str(tmp_path))
    t, _ = table()
    support, labels = np.array([[0, 1, 40, 41, 80, 81]]), np.array([0, 0, 1, 1, 2, 2])
    method = TabPFN(TabpfnConfig(n_estimators=2), 0, CPU)
    scores = method.scores(t.X, support, labels, 3, 2)
    assert scores.shape == (1, len(t.X), 3)
    assert torch.allclose(scores.sum(-1), torch.ones(1, len(t.X)), atol=1e-5) and (scores >= 0).all()
    assert torch.equal(scores, method.scores(t.X, support, labels, 3, 2))
