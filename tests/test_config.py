import copy

import pytest
import yaml

from seba.config import load_params, parse_params
from seba.errors import ConfigError


@pytest.fixture()
def raw(root):
    return yaml.safe_load((root / "params.yaml").read_text())


def test_default_params_are_the_papers(root):
    p = load_params(root / "params.yaml")
    assert p.pretrain.ratios == (0.1, 0.2, 0.3, 0.4, 0.5)
    assert (p.pretrain.lr, p.pretrain.batch_size, p.pretrain.patience, p.pretrain.max_epochs) == (1e-3, 1024, 100, 10000)
    assert (p.pretrain.encoder_hidden, p.pretrain.projector_hidden, p.pretrain.projector_out) == (1024, 1024, 256)
    assert p.evaluate.shots == (1, 5, 10) and p.evaluate.episodes == 100
    assert p.split.test_fraction == pytest.approx(1 / 6) and p.split.val_fraction == 0.1
    assert set(p.datasets) == {"cmc", "diabetes", "dna", "income", "karhunen", "optdigits", "pixel", "semeion"}
    assert {k: v.openml_id for k, v in p.sources.items()} == {
        "cmc": 23, "diabetes": 37, "dna": 40670, "income": 1590, "karhunen": 16, "optdigits": 28,
        "pixel": 40979, "semeion": 1501}


@pytest.mark.parametrize("edit,message", [
    (lambda r: r["pretrain"].update(ratio=[0.1]), "unknown key 'pretrain.ratio' \\(did you mean 'ratios'\\?\\)"),
    (lambda r: r.update(seed=[1]), "unknown key 'seed' \\(did you mean 'seeds'\\?\\)"),
    (lambda r: r["pretrain"].update(ratios=[0.1, 1.5]), "'pretrain.ratios' values must lie in \\(0, 1\\)"),
    (lambda r: r["pretrain"].update(ratios=[0.2, 0.2]), "'pretrain.ratios' has duplicates"),
    (lambda r: r["pretrain"].update(batch_size="big"), "'pretrain.batch_size' must be an integer"),
    (lambda r: r["pretrain"].update(patience=0), "'pretrain.patience' must be > 0"),
    (lambda r: r["pretrain"].update(fill="mean"), "'pretrain.fill' is 'mean'; allowed: zero, marginal"),
    (lambda r: r["pretrain"].update(device="tpu"), "'pretrain.device' is 'tpu'; allowed: auto, cpu, cuda"),
    (lambda r: r.update(seeds=[]), "'seeds' must be a non-empty list"),
    (lambda r: r.update(datasets=["cmc", "nope"]), "dataset 'nope' is listed in 'datasets' but has no entry"),
    (lambda r: r["split"].update(test_fraction=1.2), "'split.test_fraction' must lie in \\(0, 1\\)"),
    (lambda r: r["evaluate"].update(episodes=-3), "'evaluate.episodes' must be > 0"),
])
def test_bad_params_name_the_key(raw, edit, message):
    bad = copy.deepcopy(raw)
    edit(bad)
    with pytest.raises(ConfigError, match=message):
        parse_params(bad)


def test_every_pretrain_and_evaluate_setting_is_a_dvc_param_of_its_stage(root):
    """A params.yaml key that a stage reads but dvc.yaml does not list would not rerun the stage."""
    import dataclasses

    from seba.config import EvaluateConfig, PretrainConfig

    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    pretrain = set(stages["pretrain"]["params"])
    missing = [f"pretrain.{f.name}" for f in dataclasses.fields(PretrainConfig)
               if f.name != "ratios" and f"pretrain.{f.name}" not in pretrain]
    assert not missing, f"pretrain stage does not list {missing}"
    evaluate = set(stages["evaluate"]["do"]["params"])
    missing = [f"evaluate.{f.name}" for f in dataclasses.fields(EvaluateConfig) if f"evaluate.{f.name}" not in evaluate]
    assert not missing, f"evaluate stage does not list {missing}"


def test_every_baseline_section_in_params_yaml_matches_its_dataclass_defaults(raw):
    """A method left out of params.yaml runs with its dataclass defaults: the two must agree."""
    import dataclasses

    from seba.config import BASELINE_SECTIONS

    for name, cls in BASELINE_SECTIONS.items():
        assert raw["baselines"][name] == dataclasses.asdict(cls()), name
