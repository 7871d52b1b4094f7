"""A warm process that stage instances fork from, so that each does not pay its imports.

A stage run by `dvc repro` spends most of its start-up importing torch, numpy and pandas (about
2 s of a 2-core CPU per torch stage, against 0.1 s of DVC's own bookkeeping). The first stage of a
`dvc repro` starts this worker in the background and runs as usual; the following stages connect
to it (``delegate``, called by ``seba.core.cli`` before a stage script's own imports): the worker forks a
child that already has every module imported, and the child runs the stage script exactly as
``python stages/<stage>.py ...`` would: the same arguments, working directory and environment,
its output on the stage's own stdout and stderr (their file descriptors are passed over the
socket), its exit status returned to the stage process, which exits with it. A signal to the
stage process (Ctrl-C) goes on to the child; if the stage process dies (`dvc repro` killed), the
child ends as a stage does (``seba.core.runtime.exit_with_parent``).

The worker serves one version of the code: its socket's name derives from the interpreter and
the size and time of every file of the ``seba`` package, so after an edit the stages start a
new worker (the old one ends when idle). It serves one process context too: what a process
passes on to its children and files beyond its environment (umask, resource limits, nice value,
cgroup, CPU affinity, scheduling policy, I/O priority, OOM score adjustment, and the environment
variables read only at start-up, such as ``OMP_NUM_THREADS``; ``process_context``) is in the socket's name, and a worker runs a stage only when the
stage process's context is its own (else the stage runs itself), so a `ulimit -f`, `umask 077` or
memory-capped cgroup (or a ``taskset``, ``ionice``) of a `dvc repro` applies to its stages as to stages run alone. It ends after ``IDLE_SECONDS`` without a request.
``SEBA_WORKER=0`` turns it off (every stage imports for itself).
"""

from __future__ import annotations

import array
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path

import seba
from seba.core.runtime import exit_with_parent

IDLE_SECONDS = float(os.environ.get("SEBA_WORKER_IDLE", 120))  # seconds without a request before it ends
_HEADER = struct.Struct("!I")
_STATUS = struct.Struct("!i")
_PRELOAD = ("numpy", "pandas", "torch", "torch.nn.functional", "yaml", "psutil")


def _package_files() -> list[Path]:
    package = Path(__file__).resolve().parents[1]  # the seba package
    return sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)


def code_key(context: list | None = None) -> str:
    """The interpreter, the size and modification time of every file of the seba package, the
    modification time of the environment's site-packages (a ``pip install`` or upgrade adds and
    removes ``*.dist-info`` folders in site-packages: a worker never serves an older torch), and
    this process's context (``process_context``)."""
    digest = hashlib.sha256(sys.executable.encode())
    for path in _package_files():
        stat = path.stat()
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    for folder in sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}):
        try:
            digest.update(f"{folder}\0{os.stat(folder).st_mtime_ns}\0".encode())
        except OSError:
            continue
    digest.update(json.dumps(process_context() if context is None else context).encode())
    return digest.hexdigest()[:20]


def process_context() -> list:
    """What a forked child inherits from its parent and would not get from the stage process's
    request: the file-creation mask, every resource limit, the nice value, the cgroup, the CPU
    affinity (``taskset``), the scheduling policy (``chrt``), the I/O priority (``ionice``), the
    OOM score adjustment, and the environment variables read only at start-up
    (``STARTUP_VARIABLES``: thread counts, the hash seed) (a process's own, read where it is
    single-threaded: reading the umask means setting it)."""
    import resource

    mask = os.umask(0o022)
    os.umask(mask)
    limits = {name: list(resource.getrlimit(getattr(resource, name)))
              for name in sorted(dir(resource)) if name.startswith("RLIMIT_")}
    proc = Path("/proc/self")
    cgroup, oom = (_read(proc / name) for name in ("cgroup", "oom_score_adj"))
    scheduling = _scheduling()
    startup = {name: os.environ.get(name) for name in STARTUP_VARIABLES}
    return [mask, limits, os.nice(0), cgroup, scheduling, _ionice(), oom, startup]


# read once, when the interpreter or a preloaded library starts: a child forked from the worker
# keeps the worker's values whatever its own environment says (e.g. OpenBLAS's thread count)
STARTUP_VARIABLES = ("PYTHONHASHSEED", "PYTHONPATH", "PYTHONWARNINGS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                     "MKL_NUM_THREADS", "GOTO_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _scheduling() -> list:
    """This process's CPU affinity and scheduling policy (``taskset``, ``chrt``; None for what
    cannot be read: a sandbox's seccomp filter may refuse the calls, which must not stop a stage)."""
    values = []
    for read in (lambda: sorted(os.sched_getaffinity(0)), lambda: os.sched_getscheduler(0)):
        try:
            values.append(read())
        except (AttributeError, OSError):
            values.append(None)
    return values


def _ionice() -> list:
    """This process's I/O scheduling class and level (``ionice``; empty where it cannot be read:
    psutil raises its own AccessDenied, not an OSError, where a seccomp filter refuses ioprio_get)."""
    try:
        import psutil

        return [int(v) for v in psutil.Process().ionice()]
    except Exception:  # ImportError, AttributeError, OSError, psutil.Error: the stage goes on all the same
        return []


def socket_path(key: str | None = None, context: list | None = None) -> Path:
    """Short (a Unix socket's path is limited to 107 bytes) and private to this user;
    ``SEBA_WORKER_SOCKET`` names another (the tests' own workers)."""
    if os.environ.get("SEBA_WORKER_SOCKET"):
        return Path(os.environ["SEBA_WORKER_SOCKET"])
    return Path(tempfile.gettempdir()) / f"seba-worker-{os.getuid()}" / f"{key or code_key(context)}.sock"


# ---------------------------------------------------------------------- the stage process's side
def _send(conn: socket.socket, payload: bytes, fds: list[int] | None = None) -> None:
    data = _HEADER.pack(len(payload)) + payload
    if fds:
        conn.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    else:
        conn.sendall(data)


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the worker closed the connection")
        data += chunk
    return data


def _start_worker(path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DVC_STAGE"}
    env["SEBA_WORKER"] = "0"  # the worker's own imports of seba.core.cli must not delegate
    subprocess.Popen([sys.executable, "-m", "seba.core.worker", str(path)], env=env, start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     close_fds=True)


def is_stage_process() -> bool:
    """Whether this process is ``python stages/<stage>.py ...`` itself (not a process it spawned,
    which imports the script as ``__mp_main__`` with the same ``sys.argv``)."""
    script = sys.argv[0] if sys.argv else ""
    return (len(sys.orig_argv) >= 2 and script.endswith(".py") and os.path.isfile(script)
            and os.path.abspath(sys.orig_argv[1]) == os.path.abspath(script)
            and os.path.basename(os.path.dirname(os.path.abspath(script))) == "stages")


def delegate() -> None:
    """Run this stage process's script in a child of the warm worker and exit with its status.

    Returns (and the script runs here, importing for itself) when this is not a stage process,
    or no worker answers: then one is started for the stages that follow."""
    if not is_stage_process():
        return
    context = process_context()  # once: it names the socket and goes with the request
    path = socket_path(context=context)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        try:
            _start_worker(path)
        except OSError:
            pass
        return
    request = {"script": os.path.abspath(sys.argv[0]), "argv": sys.argv, "cwd": os.getcwd(),
               "env": dict(os.environ), "pid": os.getpid(), "context": context}
    child, pending = None, []

    def forward(signum, frame):  # a signal to this process goes on to the run (kept until it starts)
        if child is None:
            pending.append(signum)
        else:
            os.kill(child, signum)

    previous = {signum: signal.signal(signum, forward) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        _send(conn, json.dumps(request).encode(), [0, 1, 2])
        (child,) = _STATUS.unpack(_recv_exact(conn, _STATUS.size))
        if child == REFUSED:
            raise ConnectionRefusedError("the worker runs in another process context")
    except OSError:
        conn.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in pending:
            os.kill(os.getpid(), signum)
        return  # the worker went away before starting anything: run here
    for signum in pending:
        os.kill(child, signum)
    try:
        (status,) = _STATUS.unpack(_recv_exact(conn, _STATUS.size))
    except OSError as exc:
        print(f"error: the stage's worker process ended unexpectedly ({exc})", file=sys.stderr, flush=True)
        os._exit(1)
    os._exit(status if status >= 0 else 128 - status)


# ---------------------------------------------------------------------- the worker's side
def _run_child(request: dict, fds: list[int]) -> None:
    """In the forked child: become the stage process and run its script."""
    import runpy

    code = 1
    try:
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = list(request["argv"])
        sys.path[0] = os.path.dirname(request["script"])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        exit_with_parent(of=request["pid"])
        try:
            runpy.run_path(request["script"], run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, int) and exc.code is not None:
                print(exc.code, file=sys.stderr)
        except KeyboardInterrupt:
            code = 130
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _serve(conn: socket.socket) -> None:
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if struct.unpack("3i", creds)[1] != os.getuid():
            return  # only this user's stage processes

        first, ancillary, _, _ = conn.recvmsg(_HEADER.size, socket.CMSG_LEN(3 * array.array("i").itemsize))
        fds = array.array("i")
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
        if len(first) < _HEADER.size:
            first += _recv_exact(conn, _HEADER.size - len(first))
        (length,) = _HEADER.unpack(first)
        request = json.loads(_recv_exact(conn, length))
        fds = list(fds)
        if len(fds) != 3:
            return
        if request.get("context") != _CONTEXT:  # another umask, limit or cgroup: the stage runs itself
            for fd in fds:
                os.close(fd)
            conn.sendall(_STATUS.pack(REFUSED))
            return
        pid = os.fork()
        if pid == 0:
            conn.close()
            _run_child(request, fds)
        for fd in fds:
            os.close(fd)
        conn.sendall(_STATUS.pack(pid))
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        conn.sendall(_STATUS.pack(code))
    except (OSError, ValueError):
        pass
    finally:
        conn.close()


def serve(path: Path) -> None:
    """Import what the stages import, then fork a child per request until idle."""
    import importlib
    import pkgutil

    global _CONTEXT
    _CONTEXT = json.loads(json.dumps(process_context()))  # as a request carries it

    for name in _PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401  (the report figures)
    except ImportError:
        pass
    for module in pkgutil.walk_packages(seba.__path__, "seba."):
        if module.name != "seba.core.worker":
            importlib.import_module(module.name)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        if path.parent.stat().st_uid != os.getuid():
            return  # not ours: never serve from a folder another user controls
        os.chmod(path.parent, 0o700)
        path.unlink(missing_ok=True)
        server.bind(str(path))
    except OSError:
        return  # another worker got there first
    global _inode
    _inode = os.stat(path).st_ino
    server.listen(16)
    server.settimeout(IDLE_SECONDS)
    try:
        while True:
            try:
                conn, _ = server.accept()
            except socket.timeout:
                if not _busy():
                    break
                continue
            conn.settimeout(None)
            threading.Thread(target=_track(_serve), args=(conn,), daemon=True).start()
    finally:
        server.close()
        try:
            if os.stat(path).st_ino == _inode:
                path.unlink()
        except OSError:
            pass


_ACTIVE = 0
_LOCK = threading.Lock()
_CONTEXT: list | None = None  # the worker's process context, read before its threads start
REFUSED = 0  # the worker's answer in place of a child's pid: run the stage here
_inode = -1


def _busy() -> bool:
    with _LOCK:
        return _ACTIVE > 0


def _track(fn):
    def run(conn):
        global _ACTIVE
        with _LOCK:
            _ACTIVE += 1
        try:
            fn(conn)
        finally:
            with _LOCK:
                _ACTIVE -= 1
    return run


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
