"""Each stage's `deps` in dvc.yaml lists exactly the `seba` modules the stage really imports.

The imports are read from the code (ast), transitively from the stage script. This only works if
every import of a `seba` module is at module level, where it runs when the module is imported: an
import hidden inside a function would escape it (and DVC would not rerun the stage when that
module changes), so such imports are refused. Third-party imports may stay inside functions.

Two places need a rule beyond reading imports:
- the `baseline` matrix stage imports its one method's module through ``importlib``
  (``seba.baselines.base.load_method``; the methods are the modules of ``seba/baselines/`` but
  ``base.py``), so it depends on ``seba/baselines/${item.method}.py`` with what that module imports; a module some method imports besides its own (Mean Teacher builds on
  Pseudo-label's stacked MLPs) is listed for every method, since DVC's matrix cannot give one
  method an extra dependency.
- a directory dep stands for every module in it, and the stage depends on what each of them imports:
  `validate` checks every method's section and `aggregate` reads the methods' rows in the paper's
  tables, each through ``load_method``, so both depend on ``seba/baselines`` (a new method needs
  no edit of dvc.yaml; .dvcignore keeps ``__pycache__`` out of the directory's hash).
  ``seba/core`` is the other directory dep, for fewer dependency entries (a faster no-op
  ``dvc repro``): it must hold only modules that every stage listing it imports anyway, so that it
  never reruns a stage an edit does not affect.
`seba/__init__.py` (run by every import of the package) is left out of the deps; it must hold only
the package docstring and its version.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
import yaml

from seba.core.config import NOT_METHODS

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_INIT = "seba/__init__.py"
METHOD_DEP = "seba/baselines/${item.method}.py"


def module_file(name: str) -> str | None:
    """'seba.x.y' -> 'seba/x/y.py' or 'seba/x/y/__init__.py' (None if neither exists)."""
    base = Path(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if (ROOT / candidate).is_file():
            return candidate.as_posix()
    return None


def _package_of(path: str) -> str:
    parts = Path(path).with_suffix("").parts
    return ".".join(parts[:-1])


def seba_imports(path: str) -> tuple[set[str], list[str]]:
    """The seba module files `path` imports at module level (with the packages they run), and a
    description of each seba import found inside a function."""
    tree = ast.parse((ROOT / path).read_text(), filename=path)
    found: set[str] = set()
    hidden: list[str] = []

    def names(node) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        base = node.module or ""
        if node.level:  # relative: resolve against the importing module's package
            package = _package_of(path).split(".")
            package = package[:len(package) - node.level + 1]
            base = ".".join(package + ([node.module] if node.module else []))
        out = [base]
        out += [f"{base}.{a.name}" for a in node.names if module_file(f"{base}.{a.name}")]  # from pkg import module
        return out

    def visit(node, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                mods = [m for m in names(child) if m == "seba" or m.startswith("seba.")]
                if mods and in_function:
                    hidden.append(f"{path}:{child.lineno} imports {', '.join(mods)} inside a function")
                elif mods:
                    for mod in mods:
                        parts = mod.split(".")
                        for i in range(2, len(parts) + 1):  # the subpackages it runs on the way
                            file = module_file(".".join(parts[:i]))
                            if file:
                                found.add(file)
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found, hidden


def closure(entries: set[str]) -> set[str]:
    """Every seba module file reachable from `entries` through module-level imports."""
    seen: set[str] = set()
    todo = list(entries)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        todo.extend(seba_imports(path)[0] - seen)
    return {p for p in seen if p.startswith("seba/")}


def baseline_modules() -> list[str]:
    """The method modules: every module of seba/baselines/ but base.py (seba.core.config.baseline_names)."""
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "seba" / "baselines").glob("*.py")
                  if p.stem not in NOT_METHODS)


def expand(dep: str) -> set[str]:
    """A dep as the seba module files it covers (a directory: every module in it)."""
    if (ROOT / dep).is_dir():
        return {p.relative_to(ROOT).as_posix() for p in (ROOT / dep).rglob("*.py") if "__pycache__" not in p.parts}
    return {dep}


PIPELINES = ("dvc.yaml", "analyses/dvc.yaml")  # the main pipeline and the opt-in one (paths from the root)


def stages() -> dict[str, dict]:
    """Stage name -> {'cmd': ..., 'deps': [...]} with the foreach / matrix body unwrapped, for
    every pipeline file (``analyses/dvc.yaml:<stage>`` for the opt-in one)."""
    found = {}
    for pipeline in PIPELINES:
        spec = yaml.safe_load((ROOT / pipeline).read_text())["stages"]
        prefix = "" if pipeline == "dvc.yaml" else f"{pipeline}:"
        found.update({prefix + name: body.get("do", body) for name, body in spec.items()})
    return found


def test_every_pipeline_file_is_checked():
    files = {p.relative_to(ROOT).as_posix() for p in ROOT.rglob("dvc.yaml")
             if not {".venv", ".git", ".dvc"} & set(p.relative_to(ROOT).parts)}
    assert files == set(PIPELINES)
    for pipeline in PIPELINES[1:]:  # an opt-in stage's paths are the root's
        assert all(body.get("wdir") == ".." for body in yaml.safe_load((ROOT / pipeline).read_text())["stages"].values())


def script_of(stage: dict) -> str:
    match = re.match(r"python (\S+\.py)", stage["cmd"])
    assert match, f"stage command does not run a python script: {stage['cmd']}"
    return match.group(1)


def stage_ids():
    return sorted(stages())


@pytest.mark.parametrize("name", stage_ids())
def test_stage_deps_are_exactly_its_seba_imports(name):
    stage = stages()[name]
    script = script_of(stage)
    deps = [str(d) for d in stage["deps"]]
    assert script in deps, f"stage '{name}': its script {script} is not in its deps"
    seba_deps = [d for d in deps if d.startswith("seba")]
    listed: set[str] = set()
    entries = {script}
    for dep in seba_deps:
        if dep == METHOD_DEP:
            continue
        assert (ROOT / dep).exists(), f"stage '{name}': dep {dep} does not exist"
        covered = expand(dep)
        listed |= covered
        if (ROOT / dep).is_dir():
            entries |= covered  # the stage loads every module of the directory
    if METHOD_DEP in seba_deps:  # the baseline matrix: one method per instance
        shared = closure(entries)
        needed_besides_own: set[str] = set()
        for module in baseline_modules():
            needs = shared | closure({module})
            missing = needs - listed - {module}
            assert not missing, (f"stage '{name}' for method {Path(module).stem}: dvc.yaml deps lack "
                                 f"{sorted(missing)}")
            needed_besides_own |= needs - {module}
        extra = listed - needed_besides_own
        assert not extra, f"stage '{name}': dvc.yaml lists modules no method imports: {sorted(extra)}"
        return
    needed = closure(entries) - {PACKAGE_INIT}
    assert listed == needed, (f"stage '{name}': dvc.yaml deps lack {sorted(needed - listed)}, "
                              f"and list modules it does not import: {sorted(listed - needed)}")


CORE = "seba/core"


@pytest.mark.parametrize("name", stage_ids())
def test_a_stage_lists_the_core_directory_exactly_when_it_imports_all_of_it(name):
    """Listed by a stage that does not import all of it, the directory would rerun the stage for
    edits that do not affect it; a stage that imports all of it lists the directory, not its
    modules one by one."""
    stage = stages()[name]
    listed = CORE in [str(d) for d in stage["deps"]]
    beyond = expand(CORE) - closure({script_of(stage)})
    if listed:
        assert not beyond, (f"stage '{name}' depends on {CORE}/ but does not import {sorted(beyond)}: move "
                            "them out of seba/core, or list the stage's core modules one by one")
    else:
        assert beyond, f"stage '{name}' imports all of {CORE}/: list the directory"


def test_no_seba_import_inside_a_function():
    files = sorted(p.relative_to(ROOT).as_posix() for folder in ("seba", "stages")
                   for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)
    hidden = [h for f in files for h in seba_imports(f)[1]]
    assert not hidden, "seba imports must be at module level:\n" + "\n".join(hidden)


def test_package_init_holds_only_docstring_and_version():
    tree = ast.parse((ROOT / PACKAGE_INIT).read_text())
    body = tree.body[1:] if ast.get_docstring(tree) else tree.body
    assert all(isinstance(n, ast.Assign) and [t.id for t in n.targets if isinstance(t, ast.Name)] == ["__version__"]
               for n in body), "seba/__init__.py runs in every stage but is not a dep: keep it to the docstring and version"


def test_the_checker_sees_hidden_imports_and_the_transitive_closure(tmp_path, monkeypatch):
    """The rules above on a hand-made package: a function-level import is reported, and the
    closure follows module-level imports through a subpackage."""
    root = tmp_path
    (root / "seba" / "sub").mkdir(parents=True)
    (root / "seba" / "__init__.py").write_text('"""doc"""\n__version__ = "0"\n')
    (root / "seba" / "a.py").write_text("import os\nfrom seba.sub import b\n\ndef f():\n    from seba import c\n")
    (root / "seba" / "sub" / "__init__.py").write_text("")
    (root / "seba" / "sub" / "b.py").write_text("from . import d\n")
    (root / "seba" / "sub" / "d.py").write_text("import json\n")
    (root / "seba" / "c.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", root)
    found, hidden = seba_imports("seba/a.py")
    assert found == {"seba/sub/__init__.py", "seba/sub/b.py"}
    assert hidden == ["seba/a.py:5 imports seba, seba.c inside a function"]
    assert closure({"seba/a.py"}) == {"seba/a.py", "seba/sub/__init__.py", "seba/sub/b.py", "seba/sub/d.py"}


def test_stage_scripts_are_thin():
    """A stage script parses its arguments, reads params.yaml and calls the library (<= 40 lines):
    what a stage does is in `seba`, where the tests and the dependency check see it."""
    long = {p.name: n for p in (ROOT / "stages").glob("*.py") if (n := len(p.read_text().splitlines())) > 40}
    assert not long, f"stage scripts over 40 lines: {long}"


@pytest.mark.parametrize("folder, order", [
    ("seba/core/own_table", ["numbers", "files", "notations", "columns", "__init__"]),
    ("seba/ablations", ["variants", "experiments", "queueing", "merging", "collecting", "writing", "cli",
                        "__init__", "__main__"]),
])
def test_each_package_module_imports_only_those_before_it(folder, order):
    """A package's modules in their order (its docstring's; the package's __init__ near the end): a
    module that imports a later one makes a cycle, which breaks the import of whichever module is
    loaded first."""
    assert sorted(p.stem for p in (ROOT / folder).glob("*.py")) == sorted(order), "a module not in the order"
    for i, name in enumerate(order):
        found, _ = seba_imports(f"{folder}/{name}.py")
        own = {Path(f).stem for f in found if f.startswith(folder + "/")} - {name, "__init__"}
        later = own - set(order[:i])
        assert not later, f"{folder}/{name}.py imports {sorted(later)}, which come after it"
