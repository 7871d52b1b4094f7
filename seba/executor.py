"""Where a stage's independent pieces run: on this machine (``executor.kind: local``) or as Ray
tasks on a cluster (``ray``; docs/scale-out.md).

A piece is a call ``fn(*args)`` whose result depends on its arguments and its torch thread count
only (a chunk of seeds to pretrain, a chunk of seeds of one baseline). ``RayExecutor.map`` submits
every piece as a Ray task that asks for ``executor.cpus_per_task`` CPUs (and its torch threads)
and ``gpus_per_task`` GPUs, and yields the results in the order of the pieces, each with where it
ran, as they finish. The stage itself (the Ray driver) writes its DVC outputs and MLflow records,
so caching and tracking are those of a local run. The code of the driver's ``seba`` package goes
to the cluster with the tasks (Ray's ``py_modules``); the workers need the package's
dependencies (torch, numpy, pandas, scikit-learn) installed.

Ray is optional (``pip install -e ".[ray]"``) and imported only here, when a stage asks for it.
"""

from __future__ import annotations

import os
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from seba.core.errors import ConfigError, DataError, EpisodeError, ExecutorError, OutputError, TrainingDiverged
from seba.core.runtime import log, select_device

# errors whose message already names the problem: a task that raises one fails the stage with it
NAMED_ERRORS = (ConfigError, DataError, EpisodeError, TrainingDiverged, OutputError, ExecutorError)
_connected: str | None = None  # the address this process's Ray connection was made for


def ray_module():
    try:
        import ray
    except ImportError:
        raise ConfigError("params.yaml: 'executor.kind' is ray but Ray is not installed; install it with "
                          "pip install -e \".[ray]\" or set executor.kind: local") from None
    return ray


PROBE_SECONDS = 5.0  # how long a cluster's address may take to accept a connection


def probe_address(address: str | None, source: str) -> None:
    """A ConfigError, at once, when nothing accepts a TCP connection at a cluster address
    (``host:port`` or ``ray://host:port``): ``ray.init`` would retry such an address for minutes
    on end. ``auto``, ``local``, no address (a local instance) and other schemes than ``ray://``
    are not probed; anything else that is not ``host:port`` (an empty string, a missing port) is a
    ConfigError too."""
    import socket

    if address is None or address in ("auto", "local"):
        return
    scheme, sep, rest = address.partition("://")
    if sep and scheme != "ray":
        return  # another scheme (a provider's client address): Ray resolves it
    hostport = (rest if sep else address).split("/", 1)[0].split("?", 1)[0]  # (a client address may carry a path)
    host, _, port = hostport.rpartition(":")
    if not host.strip() or not port.isdigit():
        raise ConfigError(f"params.yaml: executor.kind ray: {address!r} ({source}) is not a cluster address: give "
                          f"host:port (e.g. 10.0.0.5:6379, ray://head:10001), 'auto' or 'local', or no address "
                          f"(null) for $RAY_ADDRESS or a local instance")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_SECONDS).close()
    except OSError as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
        raise ConfigError(f"params.yaml: executor.kind ray: nothing accepts connections at {address!r} ({source}: "
                          f"{reason} within {PROBE_SECONDS:g} s); start the cluster or correct the address") from None


def connect(cfg) -> Any:
    """The ``ray`` module, connected: to ``executor.address``, else to ``$RAY_ADDRESS``, else to a
    local instance started here (``executor.local_cpus`` CPUs, 0 = all cores). A connection this
    process already holds for the same address is reused. An unreachable cluster is a ConfigError."""
    global _connected
    ray = ray_module()
    address = cfg.address if cfg.address is not None else (os.environ.get("RAY_ADDRESS") or None)
    if ray.is_initialized():
        if _connected == (address or ""):
            return ray
        ray.shutdown()
    probe_address(address, "executor.address" if cfg.address is not None else "$RAY_ADDRESS")
    kwargs: dict[str, Any] = {"address": address, "include_dashboard": False, "logging_level": "WARNING",
                              "log_to_driver": True,
                              "runtime_env": {"py_modules": [str(Path(__file__).resolve().parent)]}}
    if address is None and cfg.local_cpus:
        kwargs["num_cpus"] = cfg.local_cpus
    try:
        ray.init(**kwargs)
    except Exception as exc:  # ConnectionError, a timeout, a version mismatch, a bad address ...
        where = f"the Ray cluster at {address!r}" if address else "a local Ray instance"
        source = ("executor.address" if cfg.address else "$RAY_ADDRESS") if address else "executor.local_cpus"
        raise ConfigError(f"params.yaml: executor.kind ray could not start or reach {where} ({source}): "
                          f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"
                          ) from None
    _connected = address or ""
    return ray


def _nodes(ray) -> list[dict]:
    return [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]


def local_nodes(cfg) -> list[dict]:
    """The one node of the local Ray instance a stage starts here (no address): its CPUs
    (``executor.local_cpus``, 0 = all cores) and the GPUs torch sees."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return [{"CPU": float(cfg.local_cpus or os.cpu_count() or 1), "GPU": float(gpus)}]


def capacity(cfg, device_setting: str, ray=None, nodes: list[dict] | None = None,
             cluster: str = "the Ray cluster") -> tuple[int, float]:
    """(tasks the connected cluster runs at once, GPUs per task). Raises a ConfigError when no node
    can run a task (too many CPUs or GPUs asked for, or ``pretrain.device: cuda`` on a cluster
    without GPUs). ``nodes``: these nodes' resources instead of the connected cluster's (``cluster``
    names them in the message)."""
    nodes = nodes if nodes is not None else _nodes(ray or ray_module())
    total_gpus = sum(n.get("GPU", 0) for n in nodes)
    if cfg.gpus_per_task is not None:
        gpus = float(cfg.gpus_per_task)
    else:
        gpus = 1.0 if total_gpus > 0 and device_setting != "cpu" else 0.0
    if device_setting == "cuda" and total_gpus == 0:
        raise ConfigError(f"params.yaml: 'pretrain.device' is 'cuda' but {cluster} has no GPU; use auto or cpu")
    fits = [n for n in nodes if n.get("CPU", 0) >= cfg.cpus_per_task and n.get("GPU", 0) >= gpus]
    if not fits:
        largest = max((f"{n.get('CPU', 0):g} CPUs, {n.get('GPU', 0):g} GPUs" for n in nodes), default="no node")
        raise ConfigError(f"params.yaml: executor asks {cfg.cpus_per_task} CPUs and {gpus:g} GPUs per task "
                          f"(executor.cpus_per_task, executor.gpus_per_task) but no node of {cluster} has "
                          f"them (largest: {largest})")
    slots = sum(int(n.get("CPU", 0) // cfg.cpus_per_task) if not gpus
                else min(int(n.get("CPU", 0) // cfg.cpus_per_task), int(n.get("GPU", 0) // gpus)) for n in fits)
    return slots, gpus


def plan(cfg, device_setting: str, n_items: int, ray=None) -> tuple[int, float]:
    """(tasks, GPUs per task) for ``n_items`` seeds on the connected cluster (``capacity``).
    ``executor.tasks`` 0 = as many tasks as the cluster runs at once (at most one per seed)."""
    slots, gpus = capacity(cfg, device_setting, ray)
    return max(1, min(cfg.tasks or slots, n_items)), gpus


def placement_tags(placement: dict | None) -> dict:
    """A seed's MLflow tags for where its Ray task ran (none for a local run)."""
    return {"ray_node": placement["node_ip"], "ray_node_id": placement["node_id"]} if placement else {}


def stage_device(device_setting: str, executor):
    """The device of the stage process itself: ``pretrain.device`` for a local run; with Ray the
    tasks pick their own, and the stage's (for checks of returned results) never needs a GPU."""
    return select_device(device_setting if executor is None else ("cpu" if device_setting == "cpu" else "auto"))


def chunks(items: list, n: int) -> list[list]:
    """``items`` in ``n`` consecutive parts whose sizes differ by at most one."""
    n = max(1, min(n, len(items)))
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (i < extra)
        out.append(items[start:end])
        start = end
    return out


def _run_piece(fn: Callable, threads: int, *args) -> tuple[Any, dict]:
    """A Ray task's body: ``fn(*args)`` with ``threads`` torch threads; returns it with where it ran."""
    import ray
    import torch

    torch.set_num_threads(threads)
    context = ray.get_runtime_context()
    start = time.perf_counter()
    result = fn(*args)
    return result, {"node_id": context.get_node_id(), "node_ip": ray.util.get_node_ip_address(),
                    "gpu_ids": [str(g) for g in ray.get_gpu_ids()], "pid": os.getpid(),
                    "seconds": round(time.perf_counter() - start, 3)}


class RayExecutor:
    """Pieces of one stage as Ray tasks (see the module's docstring)."""

    def __init__(self, cfg, device_setting: str = "auto"):
        self.cfg = cfg
        self.ray = connect(cfg)
        self.device_setting = device_setting
        self.slots = 0  # tasks the cluster runs at once (set by ``plan``)

    def plan(self, n_items: int) -> tuple[int, float]:
        slots, gpus = capacity(self.cfg, self.device_setting, self.ray)
        tasks = max(1, min(self.cfg.tasks or slots, n_items))
        self.slots = min(tasks, slots)
        return tasks, gpus

    def put(self, value: Any) -> Any:
        """``value`` in the cluster's object store once, for many tasks."""
        return self.ray.put(value)

    def map(self, fn: Callable, pieces: Iterable[tuple], labels: list[str], gpus: float = 0.0,
            salvage: Callable[[int, tuple[Any, dict]], None] | None = None) -> Iterator[tuple[Any, dict]]:
        """``fn(*piece)`` for every piece (one per label), as Ray tasks; yields (result, placement)
        in the pieces' order. At most twice as many tasks as the cluster runs at once are
        submitted ahead (after ``plan``; the pieces are made as they are submitted, so a stage
        never holds every seed's inputs at once). A task that raises one of the named errors fails
        the stage with it; any other failure (an exception, a lost worker or node once
        ``executor.retries`` reruns are spent) becomes an ExecutorError naming the piece. Tasks
        not yet finished are cancelled when one fails or the caller stops early; those that had
        finished but were not yet yielded (they finished before an earlier one) go to
        ``salvage(index, (result, placement))`` first."""
        ray = self.ray
        remote = ray.remote(_run_piece).options(num_cpus=self.cfg.cpus_per_task, num_gpus=gpus,
                                                max_retries=self.cfg.retries, retry_exceptions=False)
        pieces = iter(pieces)
        refs: deque = deque()

        def submit() -> None:
            piece = next(pieces, None)
            if piece is not None:
                refs.append(remote.remote(fn, self.cfg.cpus_per_task, *piece))

        for _ in range(2 * self.slots if self.slots else len(labels)):
            submit()
        taken = 0
        try:
            for label in labels:
                ref = refs.popleft()
                taken += 1
                result = self._get(ref, label)
                submit()
                yield result
        except BaseException:
            if salvage is not None and refs:
                self._salvage(list(refs), taken, labels, salvage)
            raise
        finally:
            for ref in refs:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # finished meanwhile, or already gone
                    pass

    def _salvage(self, refs: list, first: int, labels: list[str], salvage: Callable) -> None:
        """``salvage`` for each of ``refs`` (pieces ``first`` on) that has finished with a result."""
        ray = self.ray
        try:
            ready = set(ray.wait(refs, num_returns=len(refs), timeout=0)[0])
        except Exception:  # the cluster is gone: nothing to take
            return
        for index, ref in enumerate(refs, start=first):
            if ref not in ready:
                continue
            try:
                result = ray.get(ref, timeout=0)
            except Exception:  # the task failed: nothing to keep
                continue
            try:
                salvage(index, result)
            except Exception as exc:  # keeping is a cache: never hide the failure being raised
                log(f"{labels[index]} warning: a finished task's result was not kept ({exc})")

    def _get(self, ref, label: str) -> tuple[Any, dict]:
        ray = self.ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, NAMED_ERRORS):
                raise type(cause)(*cause.args) from None
            what = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc).splitlines()[0]
            raise ExecutorError(f"{label}: its Ray task failed ({what[:500]}); the stage writes no outputs"
                                ) from None
        except ray.exceptions.RayError as exc:  # a worker or node lost, an object lost, a cancelled task
            first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
            raise ExecutorError(f"{label}: its Ray task did not finish ({type(exc).__name__}: {first}); "
                                f"the stage writes no outputs") from None


def executor_for(cfg, device_setting: str) -> RayExecutor | None:
    """The Ray executor for ``executor.kind: ray``, None for local."""
    return RayExecutor(cfg, device_setting) if cfg.kind == "ray" else None
