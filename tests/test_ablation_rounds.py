"""`python -m seba.ablations collect --merge` over rounds whose defaults differ (another machine's):
each variant pairs with its own round's default through any chain of merges, written and read
back; collections with a failed or partly missing default still read; which default a table shows
stays put."""

import numpy as np
import pandas as pd
import pytest

from seba import ablations as ab
from seba.core import paths
from test_ablations import BASE, EFFECT, fake_reader, show_entry, show_of, paper  # noqa: F401

SAME_CODE = lambda a, b: []  # noqa: E731
SHIFT: dict[str, float] = {}  # rev -> accuracy shift of that experiment's episodes (its "machine")


def reader(exp, dataset):
    episodes = fake_reader(exp, dataset)
    return episodes.assign(accuracy=episodes["accuracy"] + SHIFT.get(exp.rev, 0.0))


def run(tag, slugs, datasets, shift=0.0, baseline="b" * 40, states=None, var_datasets=None):
    """A round: experiments abl-<slug> with revs <tag><k>... (deterministic), every one shifted by
    ``shift`` (the machine); ``var_datasets``: per slug, other datasets than the default's."""
    entries = []
    for k, slug in enumerate(slugs):
        rev = (f"{tag}{k:02d}" * 40)[:40]
        SHIFT[rev] = shift
        ds = (var_datasets or {}).get(slug, datasets)
        entries.append(show_entry(f"abl-{slug}", slug, rev=rev, datasets=ds,
                                  state=(states or {}).get(slug, "success"), **{"evaluate.shots": [5]}))
    return show_of(*entries, baseline=baseline)


def rev(tag, k=0):
    return (f"{tag}{k:02d}" * 40)[:40]


@pytest.fixture(autouse=True)
def more_tables(monkeypatch):
    monkeypatch.setitem(BASE, "karhunen", 60.0)
    monkeypatch.setitem(BASE, "semeion", 70.0)
    monkeypatch.setitem(BASE, "income", 75.0)
    monkeypatch.setitem(EFFECT, "head-finetune", 0.5)
    monkeypatch.setitem(EFFECT, "enc-ft", -3.0)


def roundtrip(c, tmp_path, name):
    ab.write(c, tmp_path / name)
    return ab.read_collected(paths.ablation_reports(tmp_path / name))


def eff(c, ablation, variant):
    return c.effects.set_index(["ablation", "shot", "variant"]).loc[(ablation, 5, variant)]


def cell(c, ablation, variant, dataset):
    return c.table.set_index(["ablation", "variant", "dataset", "shot"]).loc[(ablation, variant, dataset, 5)]


# ----------------------------------------------------------------------------- what a collection holds
@pytest.mark.parametrize("case", ["default failed", "default lacks a table", "default failed, file without default_rev"])
def test_a_collection_with_a_default_without_rows_reads_back(paper, tmp_path, case):
    """A round whose default failed, or whose episodes of one table could not be read, is still a
    collection (its variants there have no paired difference): what collect wrote reads back, in
    either file format."""
    def partial(exp, dataset):
        if exp.slug == ab.DEFAULT and dataset == "dna":
            raise FileNotFoundError(dataset)
        return reader(exp, dataset)
    if case == "default lacks a table":
        first = ab.collect(run("a", [ab.DEFAULT, "prep-marginal"], ("cmc", "dna")), partial, paper)
    else:
        first = ab.collect(run("a", [ab.DEFAULT, "prep-marginal"], ("cmc",), states={ab.DEFAULT: "failed"}),
                           reader, paper)
        assert len(first.scores) == 3 and set(first.scores["default_rev"]) == {rev("a")}
    ab.write(first, tmp_path / "one")
    folder = paths.ablation_reports(tmp_path / "one")
    if case.endswith("without default_rev"):
        pd.read_csv(folder / "seed_scores.csv").drop(columns="default_rev").to_csv(folder / "seed_scores.csv", index=False)
    scores, _ = ab.read_collected(folder)
    assert len(scores) == len(first.scores)


def test_this_runs_variant_beyond_its_defaults_tables_leaves_them_to_the_merged_collection(paper, tmp_path):
    """This run's prep-marginal ran on karhunen too, its default did not: unpaired there, it is left
    out (a note says so) and karhunen comes whole from the earlier collection, each variant once."""
    earlier = roundtrip(ab.collect(run("a", [ab.DEFAULT, "prep-marginal"], ("karhunen",), shift=1.0), reader, paper),
                        tmp_path, "one")
    c = ab.collect(run("b", [ab.DEFAULT, "prep-marginal"], ("cmc",), var_datasets={"prep-marginal": ("cmc", "karhunen")}),
                   reader, paper, merge=[earlier], code_diff=SAME_CODE)
    kh = c.scores[(c.scores["dataset"] == "karhunen") & (c.scores["slug"] == "prep-marginal")]
    assert len(kh) == 3 and set(kh["default_rev"]) == {rev("a")}
    assert any(n.startswith("left out of the merge") and "`abl-prep-marginal` on karhunen" in n for n in c.notes)
    assert len(roundtrip(c, tmp_path, "two")[0]) == len(c.scores)


# ----------------------------------------------------------------------------- chains of merges
def expected_diff(slug):
    from test_ablations import JITTER
    return float(np.mean([EFFECT.get(slug, 0.0) + JITTER.get((slug, s), 0.0) for s in (0, 1, 2)]))


def check(c, label):
    """Every row once; each variant on a table pairs with one default that the table holds; every
    variant's paired difference is its own effect (each round's machine shift cancels)."""
    s = c.scores
    assert not s.duplicated(["slug", "dataset", "shot", "seed", "default_rev"]).any(), f"{label}: duplicated rows"
    for (slug, dataset), part in s[s["slug"] != ab.DEFAULT].groupby(["slug", "dataset"]):
        revs = set(part["default_rev"])
        assert len(revs) == 1, f"{label}: {slug} on {dataset} pairs with {revs}"
        assert ((s["slug"] == ab.DEFAULT) & (s["dataset"] == dataset) & (s["default_rev"] == revs.pop())).any(), \
            f"{label}: {slug} on {dataset}: its default is not there"
    for a in ab.ABLATIONS:
        for variant, slug in a.variants[1:]:
            e = eff(c, a.name, variant)
            if e["n_tables"]:
                assert e["ours_diff"] == pytest.approx(expected_diff(slug), abs=1e-4), f"{label}: {slug} {e['tables']}"


def summary(c):
    s = c.scores
    return sorted(s.groupby(["dataset", "slug", "default_rev"]).size().items())


def test_a_chain_of_whole_own_round_and_equal_default_merges(paper, tmp_path):
    """Round a (cmc, karhunen); g on another machine adds the FT-Transformer on karhunen with its own
    default; c, on a's machine, adds ratio 0.2 beside a default equal to a's; then semeion, then
    income: at each level every row once, each variant paired with a default the table holds, its
    difference its own effect, and the default shown on karhunen the same."""
    e1 = ab.collect(run("a", [ab.DEFAULT, "prep-marginal", "head-finetune"], ("cmc", "karhunen")), reader, paper)
    check(e1, "e1")
    E1 = roundtrip(e1, tmp_path, "e1")
    e2 = ab.collect(run("g", [ab.DEFAULT, "enc-ft"], ("karhunen",), shift=1.0, baseline="c" * 40), reader, paper,
                    merge=[E1], code_diff=SAME_CODE)
    check(e2, "e2")
    E2 = roundtrip(e2, tmp_path, "e2")
    # same machine as round a: its default equals a's on karhunen, bit for bit
    e3 = ab.collect(run("c", [ab.DEFAULT, "ratio-0.2"], ("karhunen",), baseline="d" * 40), reader, paper,
                    merge=[E2], code_diff=SAME_CODE)
    check(e3, "e3")
    E3 = roundtrip(e3, tmp_path, "e3")
    e4 = ab.collect(run("d", [ab.DEFAULT, "head-proto-cos"], ("semeion",), baseline="e" * 40), reader, paper,
                    merge=[E3], code_diff=SAME_CODE)
    check(e4, "e4")
    E4 = roundtrip(e4, tmp_path, "e4")
    e5 = ab.collect(run("f", [ab.DEFAULT], ("income",), baseline="f" * 40), reader, paper,
                    merge=[E4], code_diff=SAME_CODE)
    check(e5, "e5")
    assert [x for x in summary(e5) if x[0][0] != "income"] == summary(e4)
    for c in (e3, e4, e5):
        assert c.shown["karhunen"] == e3.shown["karhunen"], "the shown default stays"


@pytest.mark.parametrize("order", ["e2 e1", "e1 e2"])
def test_the_same_collection_merged_together_with_one_that_holds_it(paper, tmp_path, order):
    """A collection and a later one that holds it, merged together (in either order) into a third
    machine's round: nothing twice, the pairings kept, and the same again after a further merge."""
    e1 = ab.collect(run("a", [ab.DEFAULT, "prep-marginal", "head-finetune"], ("cmc", "karhunen")), reader, paper)
    E1 = roundtrip(e1, tmp_path, "e1")
    e2 = ab.collect(run("g", [ab.DEFAULT, "enc-ft"], ("karhunen",), shift=1.0, baseline="c" * 40), reader, paper,
                    merge=[E1], code_diff=SAME_CODE)
    E2 = roundtrip(e2, tmp_path, "e2")
    both = {"e1": E1, "e2": E2}
    c = ab.collect(run("d", [ab.DEFAULT, "ratio-0.2"], ("karhunen",), shift=2.0, baseline="e" * 40), reader, paper,
                   merge=[both[k] for k in order.split()], code_diff=SAME_CODE)
    check(c, order)
    again = roundtrip(c, tmp_path, "c")
    c2 = ab.collect(run("h", [ab.DEFAULT], ("semeion",), baseline="f" * 40), reader, paper, merge=[again],
                    code_diff=SAME_CODE)
    check(c2, order + " again")
    assert [x for x in summary(c2) if x[0][0] != "semeion"] == summary(c)


# ----------------------------------------------------------------------------- the default shown
def test_a_tie_shows_the_same_default_after_a_merge(paper, tmp_path):
    """karhunen: round a's default with prep-marginal, round z's (another machine) with enc-ft, one
    variant each: z's report shows its own run's default; merged into a run on semeion, karhunen's
    report still shows z's (the merged collection's), not the rev that sorts first."""
    E1 = roundtrip(ab.collect(run("a", [ab.DEFAULT, "prep-marginal"], ("karhunen",)), reader, paper), tmp_path, "e1")
    z = ab.collect(run("z", [ab.DEFAULT, "enc-ft"], ("karhunen",), shift=1.0, baseline="c" * 40), reader, paper,
                   merge=[E1], code_diff=SAME_CODE)
    assert z.shown["karhunen"] == rev("z")
    Z = roundtrip(z, tmp_path, "z")
    c = ab.collect(run("d", [ab.DEFAULT], ("semeion",), baseline="e" * 40), reader, paper, merge=[Z], code_diff=SAME_CODE)
    assert c.shown["karhunen"] == z.shown["karhunen"]
    marked = lambda x: list(x.table[x.table["own_default"].notna()]["variant"].unique())  # noqa: E731
    assert marked(c) == marked(z) == ["norm=True,fill=marginal"]


def test_a_code_change_is_named_once_per_pair_of_commits(paper, tmp_path):
    """Merging across a code change (`--allow-code-change`) names each (their commit, this run's)
    pair once in the report, however many rounds of the merged collection share the commit."""
    e1 = roundtrip(ab.collect(run("a", [ab.DEFAULT, "prep-marginal"], ("cmc",)), reader, paper), tmp_path, "e1")
    e2 = roundtrip(ab.collect(run("b", [ab.DEFAULT, "enc-ft"], ("karhunen",)), reader, paper, merge=[e1],
                              code_diff=SAME_CODE), tmp_path, "e2")
    e3 = roundtrip(ab.collect(run("c", [ab.DEFAULT, "ratio-0.2"], ("dna",)), reader, paper, merge=[e2],
                              code_diff=SAME_CODE), tmp_path, "e3")  # three rounds, all of commit b...b
    calls = []

    def changed(a, b):
        calls.append((a, b))
        return ["seba/pretrain.py"]
    c = ab.collect(run("d", [ab.DEFAULT], ("semeion",), baseline="e" * 40), reader, paper, merge=[e3],
                   code_diff=changed, allow_code_change=True)
    assert calls == [("b" * 40, "e" * 40)]
    assert sum("seba/pretrain.py" in n for n in c.notes) == 1
