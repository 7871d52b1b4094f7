import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from conftest import committed_params
import seba.baselines
import seba.core.config

from seba.baselines.catboost import CatboostConfig
from seba.baselines.d2r2 import D2r2Config
from seba.baselines.knn import KnnConfig
from seba.baselines.logreg import LogregConfig
from seba.baselines.meanteacher import MeanteacherConfig
from seba.baselines.pseudolabel import PseudolabelConfig
from seba.baselines.saint import SaintConfig
from seba.baselines.scarf import ScarfConfig
from seba.baselines.stunt import StuntConfig
from seba.baselines.subtab import SubtabConfig
from seba.baselines.tabpfn import TabpfnConfig
from seba.baselines.tjepa import TjepaConfig
from seba.baselines.vime import VimeConfig
from seba.baselines import tabpfn as tabpfn_baseline
from seba.baselines.base import RepresentationMethod, check_baselines, load_method, method_config
from seba.core.config import EvaluateConfig, baseline_names, parse_params
from seba.episodes import sample_episodes
from seba.core.errors import ConfigError, DataError
from seba.evaluate import episode_scores, support_hash
from seba.report import check_same_episodes, comparison_markdown, comparison_table

# One small configuration per method for the toy table (one line per method).
CONFIGS = {
    "knn": KnnConfig(),
    "logreg": LogregConfig(),
    "catboost": CatboostConfig(iterations=50),
    "stunt": StuntConfig(ways=3, queries=5, task_pool=50, encoder_hidden=64, encoder_out=32, max_steps=100, patience=50),
    "scarf": ScarfConfig(encoder_hidden=64, encoder_out=32, batch_size=64, max_epochs=15, patience=5),
    "vime": VimeConfig(encoder_hidden=64, encoder_out=32, batch_size=32, max_epochs=15, patience=5),
    "subtab": SubtabConfig(encoder_hidden=64, encoder_out=32, batch_size=32, max_epochs=15, patience=5),
    "tjepa": TjepaConfig(dim=16, layers=1, dim_feedforward=16, pred_dim=8, pred_layers=1, pred_dim_feedforward=16,
                         batch_size=32, max_epochs=5, patience=3),
    "saint": SaintConfig(official_rules=False, embedding_size=32, depth=1, heads=2, batch_size=32, epochs=10, lr=1e-3,
                         precision="fp32"),
    "d2r2": D2r2Config(hidden=32, layers=2, batch_size=32, max_steps=150, eval_every=50, min_accepted_step=50),
    "pseudolabel": PseudolabelConfig(hidden=32, steps=100, batch_size=32),
    "meanteacher": MeanteacherConfig(hidden=32, steps=100, batch_size=32),
    "tabpfn": TabpfnConfig(n_estimators=2),  # runs only with the tabpfn extra and a checkpoint (TABPFN_MODEL_CACHE_DIR)
}


def test_every_method_has_a_toy_configuration():
    assert set(CONFIGS) == set(baseline_names())


def toy(n_per_class=40, n_classes=3, dim=10, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, dim)) * 4
    X = np.concatenate([c + rng.normal(size=(n_per_class, dim)) for c in centres]).astype(np.float32)
    return X, np.repeat(np.arange(n_classes), n_per_class)


@pytest.mark.parametrize("method", sorted(CONFIGS))
@pytest.mark.parametrize("shot", [1, 5])
def test_each_baseline_learns_a_separable_toy_table(method, shot):
    X, y = toy()
    cls = load_method(method)
    if method == "tabpfn":  # only with its package and weights; tests/test_baseline_tabpfn.py tests its plumbing
        try:
            tabpfn_baseline.import_classifier()
            tabpfn_baseline.checkpoint(CONFIGS[method])
        except ConfigError as exc:
            pytest.skip(str(exc)[:160])
    if issubclass(cls, RepresentationMethod):
        model = cls(CONFIGS[method], 0, torch.device("cpu"), EvaluateConfig(probe_max_iters=300))
    else:
        model = cls(CONFIGS[method], 0, torch.device("cpu"))
    model.fit(X[:90], X[90:], np.arange(X.shape[1]))
    episodes = sample_episodes(y, 3, shot, n_episodes=5, seed=0)
    scores = model.scores(X, episodes.support, episodes.support_labels, 3, shot)
    assert scores.shape == (5, len(y), 3)
    accuracy, _ = episode_scores(scores.argmax(-1)[None], torch.as_tensor(y), torch.as_tensor(episodes.query), 3)
    assert accuracy.mean() > 0.9  # chance is 1/3


def episodes_frame(y, member, seed=0, shots=(1, 5), n=4, shift=0):
    frames = []
    for shot in shots:
        ep = sample_episodes(y, 3, shot, n, seed + shift)
        frames.append(pd.DataFrame({"seed": seed, "shot": shot, "episode": range(n), "member": member,
                                    "accuracy": np.linspace(50, 60, n) + (5 if member == "knn" else 0),
                                    "support_hash": [support_hash(r) for r in ep.support]}))
    return pd.concat(frames, ignore_index=True)


def test_baselines_must_use_sebas_episodes_and_are_ranked():
    _, y = toy()
    seba = episodes_frame(y, "ensemble")
    same = episodes_frame(y, "knn")
    check_same_episodes(seba, same, "knn", "toy")
    with pytest.raises(DataError, match="baseline 'knn' on dataset 'toy' was not scored on SeBA's episodes"):
        check_same_episodes(seba, episodes_frame(y, "knn", shift=1), "knn", "toy")
    paper = pd.DataFrame({"table": "main", "method": ["kNN", "SeBA"], "dataset": "toy", "shot": 1,
                          "accuracy": [50.0, 61.0], "std": np.nan})
    table = comparison_table({"toy": seba}, {("knn", "toy"): same}, paper, {"knn": "kNN"})
    one = table[table["shot"] == 1].set_index("method")
    assert one.loc["knn", "rank"] == 1 and one.loc["SeBA", "rank"] == 2
    assert one.loc["knn", "paper"] == 50.0 and one.loc["SeBA", "paper"] == 61.0
    text = comparison_markdown(table)
    assert "## 1-shot" in text and "| knn | **60.00** (50.00) | 1.00 |" in text



def test_bold_and_ranks_agree_on_ties_and_near_ties():
    """A tie in float noise (the same correct counts summed in another order: one ulp apart)
    shares rank 1 and the bold; a real difference of 1e-4 points does not, in the rank or the bold."""
    paper = pd.DataFrame({"table": "main", "method": ["SeBA"], "dataset": ["toy"], "shot": [1],
                          "accuracy": [np.nan], "std": [np.nan]})
    seba = pd.DataFrame({"member": "ensemble", "seed": 0, "shot": 1, "episode": 0, "accuracy": [70.0],
                         "support_hash": "h"})
    for second, ranks, bold in ((np.nextafter(70.0, 0.0), [1.5, 1.5], 2), (70.0 - 1e-4, [1.0, 2.0], 1)):
        knn = seba.assign(member="knn", accuracy=second)
        ranked = comparison_table({"toy": seba}, {("knn", "toy"): knn}, paper, {"knn": None})
        assert list(ranked.sort_values("method")["rank"]) == ranks, (second, ranked)  # SeBA, knn
        assert comparison_markdown(ranked).count("**") == 2 * bold, second


NEW_METHOD = '''"""Nearest class mean: a method added as one module (tests/test_baselines.py)."""

import torch

from seba.baselines import register
from seba.baselines.base import Method
from seba.core.schema import Fraction, section


@section
class NearestMeanConfig:
    shrink: Fraction = 1.0  # scale of the class means (1: none)


@register
class NearestMean(Method):
    name = "nearest_mean"
    paper_name = None
    Config = NearestMeanConfig

    def scores(self, x_test, support, support_labels, n_classes, shot):
        X = torch.as_tensor(x_test, dtype=torch.float32)
        rows = X[torch.as_tensor(support)]  # [E, S, D]
        onehot = torch.nn.functional.one_hot(torch.as_tensor(support_labels), n_classes).float()  # [S, C]
        means = self.cfg.shrink * torch.einsum("esd,sc->ecd", rows, onehot) / onehot.sum(0)[None, :, None]
        return -torch.cdist(X[None].expand(len(rows), -1, -1), means)
'''


def test_a_new_method_is_one_module(tmp_path, monkeypatch, request):
    """Adding a method is its module file and its params.yaml section, nothing else: the config
    accepts its name and section, seba-validate's check reads its params class from the module,
    and the stage's loader runs it (docs/adding-a-method.md)."""
    folder = tmp_path / "baselines"
    folder.mkdir()
    for module in seba.core.config.BASELINES_DIR.glob("*.py"):
        (folder / module.name).symlink_to(module)
    (folder / "nearest_mean.py").write_text(NEW_METHOD)
    monkeypatch.setattr(seba.core.config, "BASELINES_DIR", folder)
    monkeypatch.setattr(seba.baselines, "__path__", [str(folder), *seba.baselines.__path__])
    monkeypatch.setitem(seba.baselines.METHODS, "nearest_mean", None)  # restored (removed) after the test
    request.addfinalizer(lambda: (sys.modules.pop("seba.baselines.nearest_mean", None),
                                  vars(seba.baselines).pop("nearest_mean", None)))
    raw = yaml.safe_load(committed_params())
    raw["baselines"]["methods"] = ["knn", "nearest_mean"]
    raw["baselines"]["nearest_mean"] = {"shrink": 1.0}
    params = parse_params(raw)
    assert params.baselines.methods == ("knn", "nearest_mean")
    check_baselines(params.baselines)
    cls = load_method("nearest_mean")
    cfg = method_config(params.baselines, "nearest_mean")
    assert cls.paper_name is None and cfg == cls.Config(shrink=1.0)
    X, y = toy()
    episodes = sample_episodes(y, 3, 5, n_episodes=5, seed=0)
    scores = cls(cfg, 0, torch.device("cpu")).scores(X, episodes.support, episodes.support_labels, 3, 5)
    accuracy, _ = episode_scores(scores.argmax(-1)[None], torch.as_tensor(y), torch.as_tensor(episodes.query), 3)
    assert accuracy.mean() > 0.9
    raw["baselines"]["nearest_mean"] = {"shrink": 1.5}
    with pytest.raises(ConfigError, match="'baselines.nearest_mean.shrink' must lie in \\(0, 1\\]"):
        check_baselines(parse_params(raw).baselines)
    raw["baselines"]["nearest_maen"] = {}
    with pytest.raises(ConfigError, match="unknown key 'baselines.nearest_maen' \\(did you mean 'nearest_mean'\\?\\)"):
        parse_params(raw)


@pytest.mark.parametrize("method, values, message", [
    ("catboost", {"depth": 17}, "'baselines.catboost.depth' must be <= 16, got 17"),
    ("stunt", {"min_column_fraction": 0.6}, "'baselines.stunt.max_column_fraction' (0.5) must be >= min_column_fraction"),
    ("stunt", {"ways": 1}, "'baselines.stunt.ways' must be >= 2"),
    ("stunt", {"val_clusters": 1}, "'baselines.stunt.val_clusters' must be >= 2"),
    ("stunt", {"max_steps": 40}, "'baselines.stunt.eval_every' (50) is past 'max_steps' (40)"),
    ("d2r2", {"max_steps": 200}, "no checkpoint would be pseudo-validated: the first is at step 1000"),
    ("scarf", {"batch_size": 1}, "'baselines.scarf.batch_size' must be at least 2"),
    ("subtab", {"batch_size": 1}, "'baselines.subtab.batch_size' must be at least 2"),
    ("saint", {"batch_size": 1}, "'baselines.saint.batch_size' must be at least 2"),
    ("subtab", {"contrastive_weight": -1.0}, "baselines.subtab: contrastive_weight -1.0 (need >= 0)"),
    ("subtab", {"noise_level": -0.1}, "baselines.subtab: noise_level -0.1 (need >= 0)"),
    ("d2r2", {"alpha": -1.0}, "baselines.d2r2: alpha -1.0 (need >= 0)"),
    ("d2r2", {"noise_aug_scale": -1.0}, "baselines.d2r2: noise_aug_scale -1.0 (need >= 0)"),
    ("d2r2", {"val_clusters": 1}, "val_clusters 1 (need >= 2"),
    ("scarf", {"min_delta": -0.5}, "'baselines.scarf.min_delta' must lie in [0, 1), got -0.5"),
    ("vime", {"min_delta": 1.0}, "'baselines.vime.min_delta' must lie in [0, 1), got 1.0"),
    ("subtab", {"min_delta": -0.1}, "'baselines.subtab.min_delta' must lie in [0, 1)"),
    ("tjepa", {"min_delta": 2.0}, "'baselines.tjepa.min_delta' must lie in [0, 1)"),
])
def test_values_a_method_cannot_train_with_are_refused_by_validation(method, values, message):
    """Each was accepted and then failed (a raw CatBoost error, STUNT's own checks) or trained nothing
    (one-row batches, no pseudo-validated checkpoint) inside the baseline stage, after pretraining."""
    raw = yaml.safe_load(committed_params())
    raw["baselines"][method] = {**(raw["baselines"].get(method) or {}), **values}
    with pytest.raises(ConfigError) as error:
        check_baselines(parse_params(raw).baselines)
    assert message in str(error.value)


def test_a_listed_method_needs_its_section(tmp_path):
    text = committed_params()
    raw = yaml.safe_load(text)
    raw["baselines"]["methods"] = ["knn", "vime"]
    del raw["baselines"]["vime"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    with pytest.raises(ConfigError, match="'baselines.vime' is missing; a listed method's stages read its section"):
        seba.core.config.load_params(tmp_path / "params.yaml")


def test_checking_params_imports_no_method_code(committed_file):
    """The stages other than a method's own read params.yaml without importing any method (nor
    torch), so none of them depends on a method's code in DVC."""
    code = ("import sys; from seba.core.config import load_params; p = load_params(sys.argv[1]); "
            "print(sorted(m for m in sys.modules if m.startswith('seba.baselines') or m == 'torch'))")
    out = subprocess.run([sys.executable, "-c", code, str(committed_file)], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_logreg_fits_with_one_blas_thread_and_scores_as_with_the_default(monkeypatch):
    """Its tiny fits run with one BLAS thread (seba.baselines.logreg.BLAS_THREADS), which scores
    the episodes as the library's default threads do (benchmarks/logreg_threads.py times both)."""
    import sklearn.linear_model
    from threadpoolctl import threadpool_info

    import seba.baselines.logreg as logreg

    X, y = toy()
    support = np.stack([np.concatenate([np.flatnonzero(y == c)[i:i + 5] for c in range(3)]) for i in (0, 5, 10)])
    labels = np.repeat(np.arange(3), 5)
    seen = []
    fit = sklearn.linear_model.LogisticRegression.fit

    def recording_fit(self, *args, **kwargs):
        seen.append(max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"))
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(sklearn.linear_model.LogisticRegression, "fit", recording_fit)
    model = load_method("logreg")(CONFIGS["logreg"], 0, torch.device("cpu"))
    one = model.scores(X, support, labels, 3, 5)
    assert seen == [1, 1, 1]
    monkeypatch.setattr(logreg, "BLAS_THREADS", None)
    seen.clear()
    default = model.scores(X, support, labels, 3, 5)
    assert seen == [max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")] * 3
    torch.testing.assert_close(one, default)


def test_logreg_scores_a_far_row_without_a_divide_by_zero_warning():
    """A test row so far from the support that a class's probability rounds to 0 scores that class
    -inf (log 0), with no numpy warning (Fashion-MNIST's 100 seeds printed it 7 times); the row's
    prediction is the class it lies towards."""
    import warnings

    X = np.array([[-1.0], [-1.2], [1.0], [1.2], [1e6]])
    support, labels = np.array([[0, 1, 2, 3]]), np.array([0, 0, 1, 1])
    model = load_method("logreg")(CONFIGS["logreg"], 0, torch.device("cpu"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scores = model.scores(X, support, labels, 2, 2)
    assert scores[0, 4, 0] == -float("inf") and scores[0, 4].argmax() == 1
    assert scores[0, :4].argmax(-1).tolist() == [0, 0, 1, 1]


def test_a_method_refusing_a_table_names_itself_and_the_dataset():
    """A method's own refusal inside ``fit`` (T-JEPA: a one-column table leaves no room for a
    context and a disjoint target) reaches the stage as the same error, naming the method, the
    dataset and the seed: ``fit`` itself is not told the dataset."""
    from seba.baselines.base import evaluate_baseline
    from seba.core.data import EncodedTable, Split
    from seba.core.tracking import NullTracker

    X, y = toy(dim=1)
    table = EncodedTable(X=X, y=y, groups=np.zeros(1, dtype=np.int64), numeric=np.ones(1, bool),
                         columns=np.array(["a"]), encoded_names=np.array(["a"]), classes=np.array(["k0", "k1", "k2"]))
    split = Split(seed=0, train=np.arange(0, 120, 2), val=np.arange(1, 120, 4), test=np.arange(3, 120, 4))
    with pytest.raises(ConfigError, match=r"^baseline 'tjepa' on dataset 'narrow' \(seed 0\): baselines.tjepa: a table "
                                          r"of 1 feature\(s\) has no room"):
        evaluate_baseline(load_method("tjepa"), CONFIGS["tjepa"], table, {0: split}, EvaluateConfig(shots=(1,)),
                          "narrow", torch.device("cpu"), NullTracker())
