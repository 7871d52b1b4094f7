"""Wheels that let `dvc repro` run on a GPU machine that has PyTorch but no DVC (Python 3.12,
x86-64 Linux, no network): DVC and everything it needs, at the versions installed here, less the
packages such a machine already has. MLflow is left out on purpose (about 60 MB of wheels):
without it every stage warns once and writes its DVC outputs as usual.

Usage (repository root, in the project's virtual environment, with PyPI reachable):
    python benchmarks/device_wheels.py [--dest .whl] [--python 3.12] [--have numpy,pandas,...]

Then on the machine, from the repository root:
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
    git init -q && dvc repro   # or `dvc exp run -S seeds=...`
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import re
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

# What a GPU machine of this workplace already has (the device's package list), and what the
# pipeline's SeBA stages never import there.
HAVE = ("torch numpy pandas scikit-learn scipy joblib threadpoolctl pyyaml python-dateutil pytz tzdata six "
        "setuptools filelock jinja2 markupsafe sympy networkx fsspec typing-extensions mpmath packaging "
        "requests urllib3 idna certifi charset-normalizer attrs click colorama pygments rich markdown-it-py "
        "mdurl psutil pyparsing pathspec tabulate aiohttp aiosignal frozenlist multidict yarl propcache "
        "aiohappyeyeballs pyarrow matplotlib")
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in (5, 17, 24, 26, 27, 28, 31, 34, 35)] + ["manylinux2014_x86_64",
                                                                                      "manylinux1_x86_64"]


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(roots: list[str], have: set[str]) -> dict[str, str]:
    """Installed distributions that ``roots`` need (their non-extra requirements, transitively)."""
    found: dict[str, str] = {}
    stack = list(roots)
    while stack:
        name = normalise(stack.pop())
        if name in found or name in have:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found[name] = dist.version
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                stack.append(requirement.name)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dest", default=".whl")
    parser.add_argument("--python", default="3.12")
    parser.add_argument("--have", default=",".join(HAVE.split()))
    args = parser.parse_args()
    dest = Path(args.dest)
    dest.mkdir(exist_ok=True)
    wanted = closure(["dvc"], {normalise(n) for n in args.have.split(",") if n})
    failed = []
    for name, version in sorted(wanted.items()):
        binary = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                  "--python-version", args.python, "--implementation", "cp", "-d", str(dest), f"{name}=={version}"]
        for platform in PLATFORMS:
            binary[4:4] = ["--platform", platform]
        if subprocess.run(binary, capture_output=True).returncode == 0:
            continue
        # a source-only release (pure Python, e.g. antlr4-python3-runtime): build its wheel here
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dest),
                                f"{name}=={version}"], capture_output=True)
        if built.returncode != 0:
            failed.append(f"{name}=={version}")
    size = sum(f.stat().st_size for f in dest.glob("*.whl"))
    print(f"{len(wanted) - len(failed)} of {len(wanted)} distributions in {dest}/, {size / 2**20:.1f} MiB")
    if failed:
        raise SystemExit("not downloaded: " + ", ".join(failed))


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
