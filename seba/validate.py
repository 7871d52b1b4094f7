"""Check the whole ``params.yaml`` at once, before a long run: ``seba-validate`` (or
``python -m seba.validate``). `dvc repro` runs the same checks as its first stage, ``validate``,
before DVC removes any other stage's outputs (docs/failures.md).

First the file itself (every key, type, range and choice; dataset names and ratios that name
files). Then what the settings need from this machine and repository: a CUDA device where
``pretrain.device`` asks for one, a Ray cluster that answers at its address where
``executor.kind`` is ray, a readable offline-snapshot manifest. Then, for every dataset
whose table is at hand (fetched into data/raw from the same source, a local table, or the
offline snapshot), the checks that need its rows: the split fractions leave every part
non-empty for every class, and every seed's test part can serve the largest shot. Exit 0 when
all is well, 2 with one line per problem otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import pandas as pd

from seba.core import paths
from seba.baselines.base import check_baselines, load_method, method_config
from seba.core.config import Params, load_params
from seba.core.data import check_shots, make_split, read_manifest, reading, supplied_copy_missing, verified_snapshot
from seba.core.errors import ConfigError, DataError
from seba.core.own_table import load_local_table
from seba.executor import PROBE_SECONDS, capacity, local_nodes, probe_address
from seba.pretrain import member_bytes, plan_stacks, plan_workers
from seba.core.runtime import repo_root, select_device, write_text
from seba.theorem import load_theorem

# What the `validate` stage writes when every check passes: the same bytes whatever the params,
# so that stages after it (every other stage depends on it) rerun only for their own reasons.
STAMP = Path(paths.VALIDATED)
STAMP_TEXT = ("params.yaml passed seba-validate. Written by the `validate` stage, which runs ahead of every "
              "other stage (docs/failures.md).\n")


def _labels(name: str, params: Params, root: Path):
    """Label codes and class names of a dataset, and where they were read; (None, None, why)
    when the table is not at hand (not fetched from its current source, not in the snapshot),
    ``why`` saying where its fetch must get it.

    A snapshot file the table may come from is verified first: DVC runs every ``fetch`` again
    when the snapshot folder changes, and a damaged file would stop it after DVC removed its
    outputs. A fetched table that cannot be read is left to ``fetch``, which writes it again (DVC
    reruns a stage whose output changed); its rows are read from the snapshot instead."""
    source = params.sources[name]
    raw = paths.raw_table(root, name)
    snapshot = root / paths.SNAPSHOT
    if source.is_local:
        frame, _ = load_local_table(name, source, root, stage="validate")  # its notices tagged as validate's
        return _codes(frame) + (source.path,)
    entry = read_manifest(snapshot).get(str(source.openml_id))
    verified = None  # the snapshot file, once checked
    if entry is not None and params.fetch.source != "openml" and not supplied_copy_missing(entry, snapshot):
        verified, _ = verified_snapshot(source.openml_id, snapshot)  # a DataError naming a damaged file
    unreadable = ""
    if raw.exists() and _fetched_from(root, name) == source.openml_id:
        try:
            with reading(raw, f"fetch@{name}"):
                return _codes(pd.read_parquet(raw, columns=["class"])) + (str(raw.relative_to(root)),)
        except DataError:
            unreadable = (f"; {raw.relative_to(root)} cannot be read, and fetch@{name} writes it again (DVC reruns "
                          f"a stage whose output changed)")
    if entry is None:
        if params.fetch.source == "snapshot":
            raise DataError(f"dataset '{name}': OpenML id {source.openml_id} is not in the offline "
                            f"snapshot, and 'fetch.source' is snapshot")
        return None, None, (f"OpenML id {source.openml_id} is not in the offline snapshot (a table only OpenML "
                            f"gives; if the id is mistyped, check 'sources.{name}.openml_id')")
    if supplied_copy_missing(entry, snapshot) and params.fetch.source != "snapshot":
        try:  # a copy the user supplies: fetch tries OpenML first (and names the copy)
            verified_snapshot(source.openml_id, snapshot)
        except DataError as exc:
            return None, None, str(exc)
    path = verified or verified_snapshot(source.openml_id, snapshot)[0]
    return _codes(pd.read_parquet(path, columns=["class"])) + ("offline snapshot" + unreadable,)


def _codes(frame: pd.DataFrame) -> tuple:
    label = frame["class"].dropna().astype("category").cat.remove_unused_categories()
    return label.cat.codes.to_numpy(), [str(c) for c in label.cat.categories]


def openml_unreachable() -> str | None:
    """Why the OpenML server the client is configured with accepts no connection within
    ``PROBE_SECONDS``, or None when it does."""
    import socket
    import urllib.parse

    import openml

    url = urllib.parse.urlparse(openml.config.server)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=PROBE_SECONDS).close()
    except OSError as exc:
        return f"{url.hostname}: {'no answer' if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)}"
    return None


def _in_openml_cache(root: Path, openml_id: int) -> bool:
    """Whether the openml client's cache holds the table (its fetch then needs no connection)."""
    return any(p.is_dir() for p in (root / paths.OPENML_CACHE).glob(f"**/datasets/{openml_id}"))


def _fetched_from(root: Path, name: str) -> int | None:
    """The OpenML id data/raw/<name> was fetched from (its fetch record), if it can be read."""
    try:
        return json.loads(paths.raw_info(root, name).read_text()).get("openml_id")
    except (OSError, ValueError, AttributeError):
        return None


def _check_devices(params: Params) -> list[str]:
    """``pretrain.device: cuda`` (in the section or a dataset's own values) needs a CUDA device."""
    wanted = [("pretrain.device", params.pretrain.device)] + [
        (f"sources.{name}.pretrain.device", params.pretrain_for(name).device) for name in params.datasets
        if "device" in params.sources[name].pretrain]
    problems = []
    for key, device in wanted:
        if device == "cuda":
            try:
                select_device(device, key)
            except ConfigError as exc:
                problems.append(str(exc))
    return problems


def encoded_shape(path: Path) -> tuple[int, int] | None:
    """(rows, columns) of the encoded table ``X`` in a preprocess output (read from the file's
    header, without loading it), or None when there is none to read."""
    import zipfile

    import numpy as np

    try:
        with zipfile.ZipFile(path) as archive, archive.open("X.npy") as fh:
            version = np.lib.format.read_magic(fh)
            read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
            shape = read[version](fh)[0]
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    return (int(shape[0]), int(shape[1])) if len(shape) == 2 else None


def memory_notes(params: Params, root: Path) -> list[str]:
    """Where a dataset's encoded table is at hand (data/processed, from an earlier run) and its
    seeds train here (not as Ray tasks, which plan with their node's memory), whether one seed of
    its pretraining fits the memory the pretrain stage would plan with (the stage's own estimate
    and rule, seba.pretrain.plan_stacks). A note, not a refusal: DVC may not rerun that stage."""
    if params.executor.kind == "ray":
        return []
    out = []
    for name in params.datasets:
        shape = encoded_shape(paths.processed(root, name))
        if shape is None:
            continue
        cfg = params.pretrain_for(name)
        rows, columns = shape
        n_test = math.ceil(params.split.test_fraction * rows)
        n_val = math.ceil(params.split.val_fraction * (rows - n_test))
        try:
            device = select_device(cfg.device)
            workers, _ = plan_workers(cfg, len(params.seeds), device)
            plan_stacks(len(params.seeds), workers, member_bytes(rows - n_test - n_val, n_val, columns, cfg), cfg,
                        device, where=f"dataset '{name}' (pretrain, {columns} encoded columns)")
        except ConfigError as exc:
            out.append(f"{exc}; its pretrain stages will stop so if they rerun here")
    return out


def notes(params: Params) -> list[str]:
    """Settings that are valid but change nothing (most likely an oversight): one line each."""
    found: dict[str, list[str]] = {}  # note -> the datasets it holds for
    for name in params.datasets:
        cfg, key = params.pretrain_for(name), lambda k: params.pretrain_key(name, k)
        if cfg.mask_bias and not cfg.conditioned:
            found.setdefault(f"{key('mask_bias')} is true but {key('conditioned')} is false: no mask reaches the "
                             f"projector, so it changes nothing", []).append(name)
        if cfg.random_ratio_range != type(cfg)().random_ratio_range and "random" not in params.ratios:
            found.setdefault(f"{key('random_ratio_range')} is {list(cfg.random_ratio_range)}, but ratios has "
                             f"no 'random' ratio, the only one that uses it", []).append(name)
    out = [f"{note} ({', '.join(names)})" for note, names in found.items()]
    if note := params.evaluate.unevaluated_prototype_shots():
        out.append(note)
    cores = os.cpu_count() or 1
    over = {params.pretrain_key(d, "threads"): params.pretrain_for(d).threads for d in params.datasets}
    for key, n in over.items():
        if n > cores:
            out.append(f"{key} {n}: more than this machine's {cores} cores, so the threads would wait on each "
                       f"other (0 = all cores)")
    if params.executor.kind == "local":
        given, defaults = params.executor, type(params.executor)()
        ray_only = [f"{key} {value!r}" if isinstance(value, str) else f"{key} {value:g}"
                    for key in ("address", "cpus_per_task", "gpus_per_task", "tasks", "retries", "local_cpus")
                    if (value := getattr(given, key)) != getattr(defaults, key)]
        if ray_only:
            out.append(f"executor {', '.join(ray_only)}: used with executor.kind ray only (kind is local)")
    return out


def validate(root: Path) -> list[str]:
    """All problems found, as messages (empty when the params are usable)."""
    return checked(root)[1]


def checked(root: Path) -> tuple[Params | None, list[str]]:
    """The params (None when the file itself is refused) and all problems found."""
    try:
        params = load_params(root / "params.yaml")
        load_theorem(root / "params.yaml")  # the `theorem` section (its stage reads it itself)
        check_baselines(params.baselines)  # each method's section, by its own module
    except ConfigError as exc:
        return None, [str(exc)]
    return params, _checks(params, root)


def _checks(params: Params, root: Path) -> list[str]:
    """What the settings need from this machine and repository, and from each dataset's rows."""
    return machine_problems(params) + data_problems(params, root)


def data_problems(params: Params, root: Path, say=print) -> list[str]:
    """A readable snapshot manifest where a table may come from it, then ``row_problems``."""
    if params.fetch.source != "openml" and any(not params.sources[d].is_local for d in params.datasets):
        try:
            read_manifest(root / paths.SNAPSHOT)
        except DataError as exc:
            return [str(exc)]  # the rows' checks would only repeat it
    return row_problems(params, root, say)


def machine_problems(params: Params) -> list[str]:
    """What the settings need from this machine: devices, each listed method's setup, a Ray
    cluster that answers."""
    problems = _check_devices(params)
    for method in params.baselines.methods:  # what a listed method needs from this machine
        try:
            load_method(method).check_setup(method_config(params.baselines, method))
        except ConfigError as exc:
            problems.append(str(exc))
    if params.executor.kind == "ray":
        try:
            given = params.executor.address
            address = given if given is not None else (os.environ.get("RAY_ADDRESS") or None)
            probe_address(address, "executor.address" if given is not None else "$RAY_ADDRESS")
            if address is None:  # the stages start a local instance here: its one node must run a task
                cluster = (f"the local Ray instance a stage starts here (executor.local_cpus "
                           f"{params.executor.local_cpus or 'all'} of {os.cpu_count()} cores; no executor.address "
                           f"or $RAY_ADDRESS)")
                for device in dict.fromkeys([params.pretrain.device] + [params.pretrain_for(d).device
                                                                        for d in params.datasets]):
                    capacity(params.executor, device, nodes=local_nodes(params.executor), cluster=cluster)
        except ConfigError as exc:
            problems.append(str(exc))
    return problems


def row_problems(params: Params, root: Path, say=print) -> list[str]:
    """For every dataset whose table is at hand, what its rows say of the settings: every part of
    every seed's split holds every class, and the test part serves the largest shot. ``say``
    (None: quiet) reports each dataset's outcome."""
    say = say or (lambda *_: None)
    problems, from_openml = [], {}
    for name in params.datasets:
        try:
            y, classes, where = _labels(name, params, root)
            if y is None:
                say(f"  {name}: not fetched yet and not in the snapshot; row-level checks skipped")
                if not _in_openml_cache(root, params.sources[name].openml_id):
                    from_openml[name] = where
                continue
            for seed in params.seeds:
                split = make_split(y, seed, params.split.test_fraction, params.split.val_fraction, name, classes)
                check_shots(y[split.test], classes, params.evaluate.shots, name, seed, y, params.split.test_fraction)
            say(f"  {name}: {len(y)} rows, {len(classes)} classes ({where}): splits and shots OK "
                f"for {len(params.seeds)} seed(s)")
        except (ConfigError, DataError) as exc:
            problems.append(str(exc))
    if from_openml and (reason := openml_unreachable()):  # their fetch would fail after DVC removed its outputs
        problems += [f"dataset '{name}': its fetch needs OpenML, which accepts no connection ({reason} within "
                     f"{PROBE_SECONDS:g} s): {why}" for name, why in from_openml.items()]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=None, help="repository root (default: found from here)")
    parser.add_argument("--stamp", action="store_true",
                        help=f"when all is well, write {STAMP} (what the `validate` stage does)")
    args = parser.parse_args(argv)
    root = args.root or repo_root()
    params, problems = checked(root)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        return 2
    print(f"{root / 'params.yaml'} is valid")
    for note in notes(params) + memory_notes(params, root):
        print(f"note: {note}")
    if args.stamp and not ((root / STAMP).exists() and (root / STAMP).read_text() == STAMP_TEXT):
        write_text(root / STAMP, STAMP_TEXT)
    return 0


def main_exit() -> None:
    sys.exit(main())


if __name__ == "__main__":
    main_exit()
