"""The package as users install it (`pip install .`, not editable): the wheel holds every module of
`seba/` (subpackages included), and every baseline imports from an installed copy."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def source_modules() -> set[str]:
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / "seba").rglob("*.py") if "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Build the wheel from a copy of the sources (a build in the checkout would leave build/ and
    *.egg-info there), offline: no build isolation, no dependencies."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "seba", src / "seba", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp / "dist"
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                          "-q", "-w", str(out), str(src)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    wheels = list(out.glob("seba-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_holds_every_module(wheel):
    with zipfile.ZipFile(wheel) as zf:
        shipped = {name for name in zf.namelist() if name.startswith("seba/") and name.endswith(".py")}
    modules = source_modules()
    assert "seba/baselines/__init__.py" in modules  # the subpackage the wheel once left out
    assert modules - shipped == set(), f"modules missing from the wheel: {sorted(modules - shipped)}"


def test_every_baseline_imports_from_the_installed_package(wheel, tmp_path):
    target = tmp_path / "site"
    run = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target",
                          str(target), str(wheel)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    modules = sorted(p.stem for p in (ROOT / "seba" / "baselines").glob("*.py") if p.stem != "__init__")
    code = (f"import sys; sys.path.insert(0, {str(target)!r})\n"
            "import importlib, seba, seba.baselines\n"
            f"assert seba.__file__.startswith({str(target)!r}), seba.__file__\n"
            f"for name in {modules!r}:\n"
            "    importlib.import_module('seba.baselines.' + name)\n"
            "print(sorted(seba.baselines.METHODS))\n")
    names = sorted(m for m in modules if m != "base")  # every method module registers its method
    # run from an empty directory so that the checkout's seba/ cannot be found first
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert eval(result.stdout.strip()) == names
