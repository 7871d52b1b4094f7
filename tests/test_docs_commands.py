"""Every command quoted in README.md, docs/*.md and reports/**/README.md (inline code spans, shell
code blocks fenced or indented) still names what exists, read statically (nothing is run):

- `dvc exp run -S KEY=VALUE` / `--set-param` (and a `-S KEY=VALUE` span on its own): KEY is a dotted
  path into params.yaml (DVC's -S changes the keys the file has; a missing one is an error), and
  `FILE:KEY` one into FILE; Hydra's `+KEY` (add) needs the parent, `~KEY` (delete) the key;
- the params edits of the repository's own tools, checked the same way: `--set KEY=VALUE` of
  `benchmarks/gpu_protocol.py` and of `python -m seba.ablations queue`, `bash benchmarks/gpu_run.sh
  start KEY=VALUE ...`, `benchmarks/variants.py --variant k=v,...` (a split or pretrain key) and
  `benchmarks/baseline_variant.py METHOD DATASET k=v ...` (a key of baselines.METHOD);
- `python[3] PATH.py`, a span or line that starts with `benchmarks/X.py`, `python -m seba.X` and the
  console scripts of pyproject.toml (`seba-*`): the file (entry point) exists, the sub-command (if
  the parser has sub-commands) is one of them, and each `--long-flag` is one its argparse parser
  declares, spelled out (argparse would take an unambiguous abbreviation, which a new flag breaks).
  The flags are read with `ast` from `add_argument("--x", ...)` calls, and from `parse_args(__doc__,
  dataset=str)` (seba/core/cli.py: the stages' `--dataset`); `--help` runs in a subprocess only for a
  script whose own source builds no parser;
- `bash X.sh`, `. X.sh`: the file exists, and each `NAME=value` before `bash` is a variable the
  script reads (but for the environment variables of COMMON_ENV, which the programs it runs read);
- `dvc repro TARGET`: its dvc.yaml exists and has the stage (the part before `@`); the part after
  `@` is an instance the stage can have: for a stage expanded over `${datasets}`, a dataset of
  `sources`; over `${ratios}`, a ratio in (0, 1) or `random`; over `${baselines.methods}`, a method
  section of `baselines` (matrix stages: the values joined by `-`, in the matrix's order);
- `make TARGET`: a target of the Makefile; `pip install -e ".[EXTRAS]"`: extras of pyproject.toml;
- values: a flag's value is one of its parser's literal `choices`, and dataset names (the values of
  `--dataset`, `--datasets`, `--tables`, of `DATASETS=` / `TABLES=` before a script, and of
  `-S datasets=[...]`) are datasets of params.yaml's `sources`.

The Makefile's recipes (the README's shortcuts) are checked the same way. No key is exempt but the
generic `-S key=value` (GENERIC_KEYS): a per-dataset `sources.<ds>.pretrain.<k>` must be in
params.yaml like any other key (DVC's -S adds none).

A token that is a placeholder (`<stage>`, `…`, `...`, `$T`) is not checked."""

from __future__ import annotations

import ast
import difflib
import functools
import re
import shlex
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

# fenced blocks in these languages hold commands (the others: python, yaml, json ... hold none)
SHELL_FENCES = {"", "bash", "sh", "shell", "console", "zsh"}
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)")
SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", flags=re.S)
PLACEHOLDER = re.compile(r"<[^<>\s]*>|…|\.\.\.|\$")
ENV_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")
# what names datasets: flags (their values up to the next option) and variables set for a script
DATASET_FLAGS = {"--dataset", "--datasets", "--tables"}
DATASET_ENV = {"DATASETS", "TABLES"}
SEPARATORS = {"&&", "||", ";", "|", "&"}
# words before the command itself (`timeout` also takes its duration)
PREFIXES = {"time", "nohup", "exec", "env", "do", "then", "else", "!", "sudo", "command"}
# read by the programs a shell script runs (torch, numpy, Python, DVC), not by the script itself
COMMON_ENV = {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONPATH", "PYTHONUNBUFFERED", "CUDA_VISIBLE_DEVICES",
              "DVC_NO_ANALYTICS", "MLFLOW_TRACKING_URI", "PATH", "TMPDIR", "HOME"}
# the generic forms, which name no key: README's "`dvc exp run -S key=value` runs a variant", and
# `KEY=VALUE` as the tools' usage lines write it
GENERIC_KEYS = {"key", "KEY"}
# the repository's tools that take params edits: script -> how (see params_edits)
EDIT_TOOLS = {"benchmarks/gpu_protocol.py": "set-nargs", "seba/ablations/cli.py": "set-append",
              "benchmarks/gpu_run.sh": "start-args", "benchmarks/variants.py": "variant",
              "benchmarks/baseline_variant.py": "baseline-changes"}


def is_placeholder(text: str) -> bool:
    return bool(PLACEHOLDER.search(text))


# ---------------------------------------------------------------- the documents' code


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md")), *sorted((root / "reports").glob("**/README.md"))]


def makefile_snippets(text: str) -> list[tuple[int, str]]:
    """(line number, command) of a Makefile's recipe lines (tab-indented)."""
    return logical_lines([(n, line[1:]) for n, line in enumerate(text.split("\n"), 1) if line.startswith("\t")])


def logical_lines(numbered: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Shell lines with their `\\` continuations joined, each with its first line's number."""
    out, buf, start = [], [], None
    for n, line in numbered:
        start = n if start is None else start
        if line.rstrip().endswith("\\"):
            buf.append(line.rstrip()[:-1])
            continue
        buf.append(line)
        out.append((start, " ".join(" ".join(buf).split())))
        buf, start = [], None
    if buf:
        out.append((start, " ".join(" ".join(buf).split())))
    return out


def snippets(text: str) -> list[tuple[int, str]]:
    """(line number, code) of every shell code block line and inline code span of a Markdown text."""
    out: list[tuple[int, str]] = []
    prose: list[str] = []  # the text outside fences, fence lines blanked (same line numbers)
    fence, shell, block = None, False, []
    indented, in_indented, blank_before = [], False, True
    for n, line in enumerate(text.split("\n"), 1):
        if fence:
            if re.fullmatch(rf" {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*", line):
                out += logical_lines(block) if shell else []
                fence, block = None, []
            elif shell:
                block.append((n, re.sub(r"^\s*\$ ", "", line)))
            prose.append("")
            continue
        m = FENCE.match(line)
        if m:
            fence, shell, block = m.group(1), m.group(2).lower() in SHELL_FENCES, []
            prose.append("")
            blank_before, in_indented = True, False
            continue
        prose.append(line)
        if re.match(r"( {4,}|\t)\S", line) and (blank_before or in_indented):
            indented.append((n, line.strip()))
            in_indented = True
        elif line.strip():
            in_indented = False
        blank_before = not line.strip()
    out += logical_lines(indented)
    # inline code spans: within a paragraph (a span may wrap to the next line, not past a blank one)
    start = 1
    for i, para in enumerate(re.split(r"(\n(?:[ \t]*\n)+)", "\n".join(prose))):
        if i % 2 == 0:  # a paragraph (odd: the blank lines between two)
            for m in SPAN.finditer(para):
                out.append((start + para.count("\n", 0, m.start()), " ".join(m.group(2).split())))
        start += para.count("\n")
    return sorted(out)


def commands(code: str) -> list[list[str]]:
    """The simple commands of a line of shell, as argument lists."""
    try:
        tokens = shlex.split(code, comments=True)
    except ValueError:  # an unbalanced quote
        tokens = code.split()
    out, current = [], []
    for token in tokens:
        if token in SEPARATORS:
            out.append(current)
            current = []
        elif token.endswith(";"):
            current.append(token[:-1])
            out.append(current)
            current = []
        else:
            current.append(token)
    out.append(current)
    return [c for c in out if c]


# ---------------------------------------------------------------- what the repository has


@dataclass
class Parser:
    """The long flags a program's argparse parser(s) declare: `top` for every call, `subs` per sub-command."""
    top: set[str] = field(default_factory=set)
    subs: dict[str, set[str]] = field(default_factory=dict)
    built: bool = False  # the source builds a parser itself (else: --help)
    choices: dict[str, set[str]] = field(default_factory=dict)  # flag -> its literal choices, as text


def parser_of(source: str) -> Parser:
    """Parser from a script's source: `X.add_argument("--flag", ...)` calls, each to the parser `X`
    belongs to (a sub-command's `sub.add_parser("name")`, a group of it), and `parse_args(__doc__,
    name=type)` (seba/core/cli.py: `--name`)."""
    tree, found = ast.parse(source), Parser()
    owner: dict[str, str | None] = {}  # variable -> sub-command (None: the top parser)

    def base(node) -> str | None:
        return node.func.value.id if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute):
            call, names = node.value, [t.id for t in node.targets if isinstance(t, ast.Name)]
            if call.func.attr == "add_parser" and call.args and isinstance(call.args[0], ast.Constant):
                for name in names:
                    owner[name] = call.args[0].value
                    found.subs.setdefault(call.args[0].value, set())
            elif call.func.attr in ("add_mutually_exclusive_group", "add_argument_group"):
                for name in names:
                    owner[name] = owner.get(base(call))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "ArgumentParser":
            found.built = True
        if isinstance(func, ast.Attribute) and func.attr == "add_argument":
            found.built = True
            flags = {a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")}
            sub = owner.get(base(node))
            (found.top if sub is None else found.subs.setdefault(sub, set())).update(flags)
            for keyword in node.keywords:
                if keyword.arg == "choices":
                    try:
                        values = ast.literal_eval(keyword.value)
                    except ValueError:  # not a literal (a name, a call): not checked
                        continue
                    for flag in flags:
                        found.choices[flag] = {str(v) for v in values}
        elif isinstance(func, ast.Name) and func.id == "parse_args" and node.keywords:
            found.built = True
            found.top.update(f"--{k.arg}" for k in node.keywords if k.arg)
    return found


def parser_from_help(path: Path) -> Parser:
    """The flags of `python PATH --help`, for a script whose parser is built elsewhere."""
    try:
        done = subprocess.run([sys.executable, str(path), "--help"], cwd=path.parent, capture_output=True,
                              text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return Parser()
    return Parser(top=set(re.findall(r"(?<![\w-])--[A-Za-z][\w-]*", done.stdout)), built=done.returncode == 0)


@dataclass
class Repo:
    root: Path

    @functools.cached_property
    def params(self) -> dict:
        return yaml.safe_load((self.root / "params.yaml").read_text(encoding="utf-8"))

    @functools.cached_property
    def pyproject(self) -> dict:
        return tomllib.loads((self.root / "pyproject.toml").read_text(encoding="utf-8"))

    @functools.cached_property
    def make_targets(self) -> set[str]:
        text = (self.root / "Makefile").read_text(encoding="utf-8")
        return set(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, flags=re.M))

    @functools.cache
    def parser(self, path: Path, flags: bool) -> Parser:
        """The program's flags: from its source; with ``flags`` to check and no parser built there,
        from `--help`, if the source uses argparse through something it imports (run otherwise,
        a script without a parser would do its work instead of printing help)."""
        source = path.read_text(encoding="utf-8")
        found = parser_of(source)
        if found.built or not flags or not re.search(r"argparse|parse_args|ArgumentParser", source):
            return found
        return parser_from_help(path)

    @functools.cache
    def stages(self, dvcfile: Path) -> set[str]:
        return set(self.stage_defs(dvcfile))

    @functools.cache
    def stage_defs(self, dvcfile: Path) -> dict:
        return (yaml.safe_load(dvcfile.read_text(encoding="utf-8")) or {}).get("stages") or {}

    def item_values(self, expression) -> Callable[[str], bool] | None:
        """Whether a text is one value of a `foreach` / `matrix` expression (``${datasets}``, ...): a
        value the stage could be expanded over, whatever the list holds today; None: not known."""
        name = expression[2:-1] if isinstance(expression, str) and expression.startswith("${") else None
        if name == "datasets":
            return lambda text: text in (self.params.get("sources") or {})
        if name == "ratios":
            return lambda text: text == "random" or bool(re.fullmatch(r"0?\.\d+|\d(\.\d+)?e-\d+", text))
        if name == "baselines.methods":
            return lambda text: isinstance((self.params.get("baselines") or {}).get(text), dict)
        return None

    def main_file(self, path: Path) -> Path:
        """The file that builds the parser of a package's ``__main__.py`` that only imports ``main``
        from one of the repository's modules and calls it (seba/ablations/cli.py); else ``path``."""
        if path.name != "__main__.py":
            return path
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                    and "main" in {a.name for a in node.names} and (self.root / node.module.split(".")[0]).is_dir():
                return self.module_file(node.module) or path
        return path

    def module_file(self, module: str) -> Path | None:
        base = self.root.joinpath(*module.split("."))
        # `python -m PACKAGE` runs its __main__.py
        return next((p for p in (base.with_suffix(".py"), base / "__main__.py", base / "__init__.py") if p.is_file()), None)

    def __hash__(self) -> int:
        return hash(self.root)


def key_problem(mapping, key: str, where: str = "params.yaml") -> str | None:
    """Why dotted ``key`` is no key of ``mapping`` (read from ``where``), or None."""
    node, parts = mapping, key.split(".")
    for i, part in enumerate(parts):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            inside = ".".join(parts[:i])
            near = difflib.get_close_matches(part, [str(k) for k in node], n=1) if isinstance(node, dict) else []
            hint = f"; did you mean {'.'.join([*parts[:i], near[0]])}?" if near else ""
            return (f"{where} has no key {key!r} ({f'{inside!r} has no {part!r}' if inside else f'no top-level {part!r}'}"
                    f"{'' if isinstance(node, dict) or not inside else f': {inside!r} is no mapping'}){hint}")
    return None


# ---------------------------------------------------------------- the checks


def check_set_param(value: str, repo: Repo) -> list[str]:
    """dvc exp run's `-S [FILE:]KEY=VALUE` (Hydra's override syntax: `+KEY=V` adds, `~KEY` deletes)."""
    key, sep, _ = value.partition("=")
    if key.startswith("~"):
        key, mode = key[1:], "delete"
    elif key.startswith("+"):
        key, mode = key.lstrip("+"), "add"
    elif not sep:
        return [] if not value or is_placeholder(value) else [f"-S {value!r} is not KEY=VALUE"]
    else:
        mode = "set"
    if is_placeholder(key) or key in GENERIC_KEYS:
        return []
    file, colon, key = key.rpartition(":")
    where, mapping = "params.yaml", repo.params
    if colon and file != "params.yaml":
        path = repo.root / file
        if not path.is_file():
            return [f"-S {value!r}: no such params file {file}"]
        where, mapping = file, yaml.safe_load(path.read_text(encoding="utf-8"))
    if mode == "add":
        parent = key.rpartition(".")[0]
        problem = parent and key_problem(mapping, parent, where)
        return [f"-S {value!r}: {problem}"] if problem else []
    problem = key_problem(mapping, key, where)
    if problem:
        return [f"-S {value!r}: {problem} (DVC's -S only changes keys the file has)"]
    return dataset_problems(f"-S {value!r}", value.partition("=")[2], repo) if key == "datasets" and not colon else []


def check_edit(key: str, what: str, repo: Repo, prefixes: tuple[str, ...] = ("",)) -> list[str]:
    """A tool's KEY=VALUE edit: ``key`` under one of ``prefixes`` of params.yaml."""
    if is_placeholder(key) or key in GENERIC_KEYS:
        return []
    problems = [key_problem(repo.params, p + key) for p in prefixes]
    if all(problems):
        return [f"{what}: {problems[0]}" if len(prefixes) == 1 else
                f"{what}: {key!r} is a key of none of {', '.join(p.rstrip('.') for p in prefixes)} in params.yaml"]
    return []


def params_edits(tool: str, args: list[str], repo: Repo) -> list[str]:
    """The params edits of the repository's own tools (EDIT_TOOLS)."""
    kind, out = EDIT_TOOLS.get(tool), []
    if kind == "set-nargs":  # --set K=V K=V ... (until the next option)
        taking = False
        for a in args:
            if a.startswith("-"):
                taking = a == "--set"
            elif taking:
                out += check_edit(a.partition("=")[0], f"--set {a}", repo)
    elif kind == "set-append":  # --set K=V, repeated
        for a, b in zip(args, args[1:] + [""]):
            if a == "--set" or a.startswith("--set="):
                item = b if a == "--set" else a[len("--set="):]
                out += check_edit(item.partition("=")[0], f"--set {item}", repo)
    elif kind == "start-args":  # start K=V ...
        if args[:1] == ["start"]:
            out += [p for a in args[1:] for p in check_edit(a.partition("=")[0], f"start {a}", repo)]
    elif kind == "variant":  # --variant default | k=v,k=v (a split or pretrain key)
        for a, b in zip(args, args[1:] + [""]):
            if a == "--variant" and b != "default":
                for part in b.split(","):
                    out += check_edit(part.partition("=")[0].strip(), f"--variant {b}", repo, ("split.", "pretrain."))
    elif kind == "baseline-changes":  # METHOD DATASET k=v ... (keys of baselines.METHOD)
        positional, skip = [], False
        for a in args:
            if skip:
                skip = False
            elif a.startswith("--"):
                skip = "=" not in a
            else:
                positional.append(a)
        if positional and not is_placeholder(positional[0]):
            method = positional[0]
            if key_problem(repo.params, f"baselines.{method}"):
                out.append(f"no method {method!r} in params.yaml's baselines")
            else:
                out += [p for a in positional[2:]
                        for p in check_edit(a.partition("=")[0], a, repo, (f"baselines.{method}.",))]
    return out


def check_flags(path: Path, args: list[str], repo: Repo) -> list[str]:
    """Each `--flag` in ``args`` is one the program at ``path`` declares (for its sub-command)."""
    name = path.relative_to(repo.root).as_posix()
    flags = [a for a in args if a.startswith("--") and len(a) > 2 and not is_placeholder(a)]
    parser, out = repo.parser(path, bool(flags)), []
    if flags and not parser.built:
        return [f"{name} builds no argparse parser that this test can read: {', '.join(flags)} not checked"]
    allowed = set(parser.top) | {"--help"}
    if parser.subs:
        sub = next((a for a in args if not a.startswith("-")), None)
        if sub is None or is_placeholder(sub):
            allowed |= set().union(*parser.subs.values())
        elif sub not in parser.subs:
            return [f"{name} has no sub-command {sub!r} (it has: {', '.join(sorted(parser.subs))})"]
        else:
            allowed |= parser.subs[sub]
    for a in args:
        if a == "--":
            break
        flag = a.split("=", 1)[0]
        if not flag.startswith("--") or len(flag) == 2 or is_placeholder(flag) or flag in allowed:
            continue
        longer = sorted(f for f in allowed if f.startswith(flag))
        if len(longer) == 1:
            out.append(f"{flag} is an abbreviation of {name}'s {longer[0]}: spell it out")
        else:
            near = difflib.get_close_matches(flag, sorted(allowed), n=1)
            out.append(f"{name} has no option {flag}" + (f" (did you mean {near[0]}?)" if near else
                                                         f" (it has: {', '.join(sorted(allowed))})"))
    return out + check_values(name, args, allowed, parser.choices, repo)


def option_values(args: list[str]) -> list[tuple[str, list[str]]]:
    """(flag, its values) for each `--flag` of ``args``: `--flag=v`, or the arguments up to the next option."""
    out = []
    for i, a in enumerate(args):
        if a == "--":
            break
        if not a.startswith("--") or len(a) == 2:
            continue
        flag, eq, value = a.partition("=")
        if eq:
            out.append((flag, [value]))
            continue
        values = []
        for b in args[i + 1:]:
            if b.startswith("-"):
                break
            values.append(b)
        out.append((flag, values))
    return out


def dataset_problems(where: str, text: str, repo: Repo) -> list[str]:
    """Each dataset named in ``text`` (split on commas and spaces) is one of params.yaml's sources."""
    sources = repo.params.get("sources") or {}
    out = []
    for name in re.split(r"[,\s]+", text.strip("[]'\"")):
        name = name.strip("'\"")
        if name and not is_placeholder(name) and name not in sources:
            near = difflib.get_close_matches(name, sorted(sources), n=1)
            out.append(f"{where}: no dataset {name!r} in params.yaml's sources" + (f" (did you mean {near[0]!r}?)"
                                                                                    if near else ""))
    return out


def check_values(name: str, args: list[str], allowed: set[str], choices: dict[str, set[str]], repo: Repo) -> list[str]:
    """A declared flag's value is one of its literal choices; the dataset flags' values are datasets."""
    out = []
    for flag, values in option_values(args):
        if flag not in allowed:
            continue
        if flag in choices and values and not is_placeholder(values[0]) and values[0] not in choices[flag]:
            out.append(f"{name} {flag} {values[0]}: not one of its choices ({', '.join(sorted(choices[flag]))})")
        joined = " ".join(values)
        if flag in DATASET_FLAGS and not is_placeholder(joined) and not re.search(r"<[^<>]*>", joined):  # `<all eight>`
            for value in values:
                out += dataset_problems(f"{name} {flag}", value, repo)
    return out


def script_path(token: str, repo: Repo) -> tuple[Path | None, list[str]]:
    """(the file, []) of a script argument, (None, [why]) if it is missing, (None, []) if it is not
    this repository's: a placeholder, an absolute path, or one in a folder the repository lacks
    (another project's `scripts/launch_tjepa.sh`, quoted as the source of a setting)."""
    parts = Path(token).parts
    if is_placeholder(token) or token.startswith(("/", "~")) or ".." in parts:
        return None, []
    path = repo.root / token
    if path.is_file():
        return path, []
    if len(parts) == 1 or (repo.root / parts[0]).is_dir():
        return None, [f"no such file {token}"]
    return None, []


def check_python(args: list[str], repo: Repo) -> list[str]:
    """`python [options] SCRIPT ARGS` or `python -m MODULE ARGS`."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-m":
        if args[i] == "-c":
            return []
        i += 2 if args[i] in ("-X", "-W") else 1
    if i >= len(args):
        return []
    if args[i] == "-m":
        if i + 1 >= len(args):
            return []
        module, rest = args[i + 1], args[i + 2:]
        top = module.split(".")[0]
        if is_placeholder(module) or not (repo.root / top).is_dir():
            return []  # not this repository's (venv, pip, pytest)
        path = repo.module_file(module)
        if path is None:
            return [f"no module {module} in the repository"]
        path = repo.main_file(path)
        tool = path.relative_to(repo.root).as_posix()
        return check_flags(path, rest, repo) + params_edits(tool, rest, repo)
    path, out = script_path(args[i], repo)
    if path is None:
        return out
    return check_flags(path, args[i + 1:], repo) + params_edits(args[i], args[i + 1:], repo)


def check_shell(args: list[str], env: dict[str, str], repo: Repo) -> list[str]:
    """`bash [options] SCRIPT ARGS` (or `. SCRIPT`), with ``env`` (name -> value) assigned before it."""
    rest = [a for a in args if not a.startswith("-")]
    if not rest:
        return []
    path, out = script_path(rest[0], repo)
    if path is None:
        return out
    text = path.read_text(encoding="utf-8")
    for name in env:
        if name not in COMMON_ENV and not re.search(rf"\$\{{?{name}\b", text):
            out.append(f"{rest[0]} reads no variable {name}")
        elif name in DATASET_ENV:
            out += dataset_problems(f"{name}= for {rest[0]}", env[name], repo)
    return out + params_edits(rest[0], rest[1:], repo)


def check_console_script(name: str, args: list[str], repo: Repo) -> list[str]:
    scripts = repo.pyproject.get("project", {}).get("scripts", {})
    if name not in scripts:
        return [f"no console script {name} in pyproject.toml (it has: {', '.join(sorted(scripts))})"]
    path = repo.module_file(scripts[name].split(":")[0])
    return [] if path is None else check_flags(path, args, repo)


def check_dvc(args: list[str], repo: Repo) -> list[str]:
    out = []
    if args[:2] == ["exp", "run"]:
        for a, b in zip(args, args[1:] + [""]):
            if a in ("-S", "--set-param"):
                out += check_set_param(b, repo)
            elif a.startswith("--set-param="):
                out += check_set_param(a[len("--set-param="):], repo)
            elif a.startswith("-S") and len(a) > 2:
                out += check_set_param(a[2:], repo)
    elif args[:1] == ["repro"]:
        for target in args[1:]:
            if target.startswith("-") or is_placeholder(target):
                continue
            file, colon, stage = target.rpartition(":")
            if not colon and target.endswith((".yaml", ".yml")):
                file, stage = target, ""
            dvcfile = repo.root / (file or "dvc.yaml")
            if not dvcfile.is_file():
                out.append(f"dvc repro {target}: no such file {dvcfile.relative_to(repo.root)}")
            elif stage and stage.split("@")[0] not in repo.stages(dvcfile):
                out.append(f"dvc repro {target}: {dvcfile.relative_to(repo.root)} has no stage {stage.split('@')[0]!r}")
            elif "@" in stage and not is_instance(repo, dvcfile, *stage.split("@", 1)):
                out.append(f"dvc repro {target}: {dvcfile.relative_to(repo.root)}'s stage {stage.split('@')[0]!r} "
                           f"has no instance {stage.split('@', 1)[1]!r}")
    return out


def is_instance(repo: Repo, dvcfile: Path, name: str, item: str) -> bool:
    """Whether ``name@item`` is an instance the stage can have (True where its expansion is not known)."""
    definition = repo.stage_defs(dvcfile)[name] or {}
    if "foreach" in definition:
        axes = [repo.item_values(definition["foreach"])]
    elif isinstance(definition.get("matrix"), dict):
        axes = [repo.item_values(values) for values in definition["matrix"].values()]
    else:
        return False  # a stage that is not expanded has no `@` instances
    if any(axis is None for axis in axes):
        return True

    def fits(text: str, rest: list) -> bool:  # the values are joined by '-', which a value may hold too
        if len(rest) == 1:
            return rest[0](text)
        parts = text.split("-")
        return any(rest[0]("-".join(parts[:i])) and fits("-".join(parts[i:]), rest[1:]) for i in range(1, len(parts)))

    return fits(item, axes)


def check_command(tokens: list[str], repo: Repo) -> list[str]:
    """What is wrong with one simple command of the documents."""
    env, i = {}, 0
    while i < len(tokens):
        m = ENV_ASSIGN.match(tokens[i])
        if m:
            env[m.group(1)] = tokens[i][m.end():]
        elif tokens[i] == "timeout":
            i += 1
        elif tokens[i] not in PREFIXES and not re.fullmatch(r"\$\(\w+\)", tokens[i]):  # a Makefile's $(ACT)
            break
        i += 1
    if i >= len(tokens):
        return []
    word, args = tokens[i].lstrip("("), [t.rstrip(")") for t in tokens[i + 1:]]
    if word == "dvc":
        return check_dvc(args, repo)
    if word in ("-S", "--set-param"):  # a span quoting dvc exp run's option alone
        return check_dvc(["exp", "run", *tokens[i:]], repo)
    if re.fullmatch(r"python(3(\.\d+)?)?", word):
        return check_python(args, repo)
    if word in ("bash", "sh", ".", "source"):
        return check_shell(args, env, repo)
    if re.fullmatch(r"[\w.-]+/[\w./-]*\.py", word):
        return check_python([word, *args], repo)
    if re.fullmatch(r"[\w.-]+/[\w./-]*\.sh", word):
        return check_shell([word, *args], env, repo)
    if word.startswith("seba-") and re.fullmatch(r"seba-[\w-]+", word):
        return check_console_script(word, args, repo)
    if word == "make":
        return [f"no target {t} in the Makefile" for t in args
                if not t.startswith("-") and "=" not in t and not is_placeholder(t) and t not in repo.make_targets]
    if word == "pip" or (word.endswith("pip") and args[:1] == ["install"]):
        extras = repo.pyproject.get("project", {}).get("optional-dependencies", {})
        out = []
        for a in args:
            m = re.fullmatch(r"\.\[([\w,-]+)\]", a)
            out += [f"no extra {e!r} in pyproject.toml" for e in (m.group(1).split(",") if m else []) if e not in extras]
        return out
    return []


def problems_in(name: str, text: str, repo: Repo, read=snippets) -> list[str]:
    """One line per problem: document, line, the command, what is wrong."""
    out = []
    for line, code in read(text):
        for tokens in commands(code):
            for problem in check_command(tokens, repo):
                shown = " ".join(tokens)
                shown = shown if len(shown) <= 120 else shown[:117] + "..."
                out.append(f"{name}:{line}: `{shown}`: {problem}")
    return list(dict.fromkeys(out))


# ---------------------------------------------------------------- the tests


@functools.cache
def repo() -> Repo:
    return Repo(ROOT)


def test_the_checker_reports_a_bad_key_flag_script_and_stage():
    doc = "\n".join([
        "# Made up",
        "",
        "Run `dvc exp run -S pretrain.no_such_key=1 -S 'seeds=[0,1]'` or `-S evaluate.shotz=[1]`, and",
        "`python benchmarks/speed.py --skip-dvc --no-such-flag`, `python benchmarks/gone.py --x`.",
        "",
        "```bash",
        "dvc exp run -S key=value -S pretrain.lr=0.01 \\",
        "    -S 'nosuch.key=3'   # a comment --not-a-flag",
        "FOO=1 TABLES=dna bash benchmarks/gpu_checks.sh OUT 100 && bash benchmarks/missing.sh",
        "seba-validate && seba-nothing",
        "python -m seba.ablations queue --prefix x --merge y && python -m seba.ablations collect --merge y",
        "python stages/pretrain.py --dataset cmc --ratio 0.2 --seed 3",
        "python benchmarks/variants.py --dataset cmc --variant test_fraction=0.2,encoder_outt=1024",
        "python benchmarks/gpu_protocol.py --set seeds=3 fetch.sourc=snapshot --datasets dna",
        "dvc repro evaluate@cmc analyses/dvc.yaml:theorem analyses/dvc.yaml:nothing pretrian@cmc-0.1",
        "python benchmarks/speed.py --skip-st",
        "dvc repro pretrain@cmc-0.7x evaluate@cmcc baseline@knn-cnae9 baseline@nosuch-cmc pretrain@cmc-random validate@x",
        "python benchmarks/variants.py --dataset cmcc dna --device tpu && python benchmarks/variants.py --device=cuda",
        "TABLES='dna pixl' bash benchmarks/gpu_checks.sh OUT 100 && TABLES=fashion bash benchmarks/gpu_checks.sh OUT 1",
        "dvc exp run -S 'datasets=[cmc,diabetis]' -S 'datasets=[cmc,dna]'",
        "```",
        "",
        "    python stages/<stage>.py --dataset <name>   # placeholders: not checked",
        "",
        "A span over two lines: `python benchmarks/speed.py",
        "--skip-dvcc`.",
    ])
    found = problems_in("made-up.md", doc, repo())
    expected = [
        ("made-up.md:3:", "'pretrain' has no 'no_such_key'"),
        ("made-up.md:3:", "evaluate.shotz"),
        ("made-up.md:4:", "benchmarks/speed.py has no option --no-such-flag"),
        ("made-up.md:4:", "no such file benchmarks/gone.py"),
        ("made-up.md:7:", "no top-level 'nosuch'"),
        ("made-up.md:9:", "benchmarks/gpu_checks.sh reads no variable FOO"),
        ("made-up.md:9:", "no such file benchmarks/missing.sh"),
        ("made-up.md:10:", "no console script seba-nothing"),
        ("made-up.md:11:", "seba/ablations/cli.py has no option --merge"),
        ("made-up.md:12:", "stages/pretrain.py has no option --seed"),
        ("made-up.md:13:", "'encoder_outt' is a key of none of split, pretrain"),
        ("made-up.md:14:", "'fetch' has no 'sourc'"),
        ("made-up.md:15:", "analyses/dvc.yaml has no stage 'nothing'"),
        ("made-up.md:15:", "dvc.yaml has no stage 'pretrian'"),
        ("made-up.md:16:", "--skip-st is an abbreviation of benchmarks/speed.py's --skip-steps"),
        ("made-up.md:17:", "stage 'pretrain' has no instance 'cmc-0.7x'"),
        ("made-up.md:17:", "stage 'evaluate' has no instance 'cmcc'"),
        ("made-up.md:17:", "stage 'baseline' has no instance 'nosuch-cmc'"),
        ("made-up.md:17:", "stage 'validate' has no instance 'x'"),
        ("made-up.md:18:", "--dataset: no dataset 'cmcc' in params.yaml's sources (did you mean 'cmc'?)"),
        ("made-up.md:18:", "benchmarks/variants.py --device tpu: not one of its choices (cpu, cuda)"),
        ("made-up.md:19:", "TABLES= for benchmarks/gpu_checks.sh: no dataset 'pixl'"),
        ("made-up.md:20:", "no dataset 'diabetis' in params.yaml's sources"),
        ("made-up.md:25:", "benchmarks/speed.py has no option --skip-dvcc"),
    ]
    for where, what in expected:
        assert any(p.startswith(where) and what in p for p in found), f"not reported: {where} {what}\n" + "\n".join(found)
    assert len(found) == len(expected), "\n".join(found)


def test_snippets_read_spans_fences_and_indented_blocks():
    text = "a `x`\n`y\nz` b\n\n```yaml\nk: `v`\n```\n\n    ind \\\n    ented\n\n````sh\n$ one\n````\n\n\n`two`\n"
    assert snippets(text) == [(1, "x"), (2, "y z"), (9, "ind ented"), (13, "one"), (17, "two")]
    assert commands("A=1 b 'c d' && e; f # g") == [["A=1", "b", "c d"], ["e"], ["f"]]
    assert makefile_snippets("x: y\n\t$(ACT) dvc exp run -S a=1 \\\n\t  -S b=2\nz:\n") == [(2, "$(ACT) dvc exp run -S a=1 -S b=2")]
    assert check_command(["$(ACT)", "dvc", "exp", "run", "-S", "nosuch=1"], repo())


def test_flags_of_a_parser_built_elsewhere_come_from_help():
    # a plain temporary folder: pytest's tmp_path prunes its old folders first, seconds on a busy /tmp
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "helper.py").write_text("import argparse\n\ndef build():\n    p = argparse.ArgumentParser()\n"
                                          "    p.add_argument('--from-elsewhere')\n    return p\n")
        (folder / "tool.py").write_text("from helper import build\n\nbuild().parse_args()\n")
        (folder / "plain.py").write_text("print('working')\n")
        tmp = Repo(folder)
        assert check_python(["tool.py", "--from-elsewhere", "1"], tmp) == []
        assert check_python(["tool.py", "--elsewhere"], tmp) == \
            ["tool.py has no option --elsewhere (did you mean --from-elsewhere?)"]
        assert check_python(["plain.py", "--x"], tmp) == \
            ["plain.py builds no argparse parser that this test can read: --x not checked"]


def test_every_command_quoted_in_the_documents_names_what_exists():
    found = []
    for path in documents():
        found += problems_in(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"), repo())
    found += problems_in("Makefile", (ROOT / "Makefile").read_text(encoding="utf-8"), repo(), makefile_snippets)
    assert not found, f"{len(found)} stale commands in the documentation:\n" + "\n".join(found)
