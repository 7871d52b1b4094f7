"""seba/core/paths.py and dvc.yaml spell the same paths: each stage writes where DVC expects it."""

from pathlib import Path

import yaml

from seba.core import paths

ROOT = Path(__file__).resolve().parents[1]
HERE = Path()


def entries(items) -> set[str]:
    return {next(iter(i)) if isinstance(i, dict) else str(i) for i in items}


def body(name: str) -> dict:
    stage = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"][name]
    return stage.get("do", stage)


def spelled(*found: Path | str) -> set[str]:
    return {Path(p).as_posix() for p in found}


def test_every_stage_output_is_a_path_of_seba_paths():
    d, ds, m = "${item}", "${item.dataset}", "${item.method}"
    assert entries(body("validate")["outs"]) == spelled(paths.VALIDATED)
    assert entries(body("fetch")["outs"]) == spelled(paths.raw_table(HERE, d), paths.raw_info(HERE, d),
                                                         paths.own_pretrain(HERE, d))
    assert entries(body("preprocess")["outs"]) == spelled(paths.processed(HERE, d), paths.schema_report(HERE, d))
    assert entries(body("split")["outs"]) == spelled(paths.splits(HERE, d))
    [models] = entries(body("pretrain")["outs"])
    assert models.replace("${item.ratio}", "0.25") == paths.models(HERE, ds, 0.25).as_posix()
    assert paths.checkpoint(HERE, ds, 0.25, 3).parent == paths.training_log(HERE, ds, 0.25).parent == Path(
        models.replace("${item.ratio}", "0.25"))
    assert entries(body("evaluate")["outs"]) == spelled(paths.episodes(HERE, d))
    assert entries(body("evaluate")["metrics"]) == spelled(paths.metrics(HERE, d))
    assert entries(body("baseline")["outs"]) == spelled(paths.episodes(HERE, ds, m))
    aggregate = body("aggregate")
    assert entries(aggregate["outs"]) | entries(aggregate["metrics"]) == spelled(*(
        paths.report(HERE, name) for name in ("results.md", "results.csv", "comparison.csv", "params_used.yaml",
                                              "figures", "summary.json")))


def test_stage_inputs_are_paths_of_seba_paths():
    assert {paths.SNAPSHOT, paths.LOCAL} <= entries(body("validate")["deps"])
    assert paths.PAPER_RESULTS in entries(body("aggregate")["deps"])
    assert spelled(paths.processed(HERE, "${item.dataset}"), paths.splits(HERE, "${item.dataset}"),
                   paths.own_pretrain(HERE, "${item.dataset}")) <= entries(body("pretrain")["deps"])
    assert Path(paths.episodes(HERE, "x")).parent.as_posix() in entries(body("aggregate")["deps"])
