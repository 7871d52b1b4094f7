"""Every relative link in the repository's Markdown leads somewhere: the file exists in the
checkout, and a `#fragment` into a Markdown file names one of its headings (GitHub's anchors)."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", flags=re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")


def markdown_files() -> list[Path]:
    try:
        listed = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / p for p in listed.stdout.split()]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but '-' and '_' dropped, spaces -> '-'."""
    text = CODE.sub(lambda m: m.group(0).strip("`"), heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, flags=re.M):
        s = slug(m.group(1))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def broken_links(files: list[Path], root: Path = ROOT) -> list[str]:
    bad = []
    for f in files:
        text = CODE.sub("", FENCE.sub("", f.read_text(encoding="utf-8")))
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"[a-zA-Z][a-zA-Z+.-]*:", target):  # https:, mailto:, ...
                continue
            path, _, fragment = target.partition("#")
            dest = (f.parent / path).resolve() if path else f
            where = f"{f.relative_to(root)}: ({target})"
            if not dest.exists():
                bad.append(f"{where} no such file")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                bad.append(f"{where} no heading with that anchor in {dest.relative_to(root)}")
    return bad


def test_slug_follows_githubs_anchors():
    assert slug("Collapse and divergence (`seba/health.py`)") == "collapse-and-divergence-sebahealthpy"
    assert slug("Results: cmc, diabetes and semeion on the 2-core CPU") == \
        "results-cmc-diabetes-and-semeion-on-the-2-core-cpu"


def test_a_broken_link_is_found(tmp_path):
    page = tmp_path / "a.md"
    page.write_text("# Title\n\n## Two words\n\n[ok](#two-words) [ok](a.md#title) [bad](#three) [gone](b.md)\n"
                    "`[not a link](c.md)` [web](https://example.org/x.md)\n```\n[fenced](d.md)\n```\n")
    assert broken_links([page], tmp_path) == ["a.md: (#three) no heading with that anchor in a.md",
                                              "a.md: (b.md) no such file"]


def test_every_relative_link_in_the_markdown_resolves():
    bad = broken_links(markdown_files())
    assert not bad, "broken links:\n" + "\n".join(bad)


def test_the_experiments_index_names_the_documents_that_cite_each_folder():
    """reports/experiments/README.md's "cited in" column lists exactly the README and docs/ pages
    that name the folder (a page that stops citing a run, or starts to, updates the index)."""
    index = ROOT / "reports" / "experiments" / "README.md"
    pages = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
    texts = {("README" if p.parent == ROOT else f"docs/{p.name}"): p.read_text(encoding="utf-8") for p in pages}
    rows = re.findall(r"^\| \[([\w.-]+)/\]\(\1/\) \| .* \| ([^|]*) \|$", index.read_text(encoding="utf-8"), flags=re.M)
    folders = sorted(p.name for p in index.parent.iterdir() if p.is_dir())
    assert sorted(f for f, _ in rows) == folders, "every experiments folder has one row"
    wrong = []
    for folder, cited in rows:
        named = re.compile(rf"(?<![\w-]){re.escape(folder)}(?![\w-])(?!\.py)")
        actual = [name for name, text in texts.items() if named.search(text)]
        if [c.strip() for c in cited.split(",") if c.strip()] != actual:
            wrong.append(f"{folder}: the index says {cited.strip()!r}, cited in {', '.join(actual) or 'nothing'}")
    assert not wrong, "\n".join(wrong)
