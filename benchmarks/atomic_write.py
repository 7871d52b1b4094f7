"""What the flushes of `seba.core.runtime.atomic_path` cost: files of the sizes the stages write (a
report, an encoder checkpoint of a small and of the widest table), written through it as the
stages write them, with its two fsyncs (the new bytes before the rename, the folder after it) and
with them skipped, alternating in the same run.

Usage (repository root):
    python benchmarks/atomic_write.py [--files 50] [--repeats 3] [--dir DIR]

Printed per size: milliseconds per file with and without the flushes (the best of ``--repeats``
rounds of ``--files`` files each) and their ratio. The files go to a temporary folder under
``--dir`` (default: data/, the disk the stages write to), removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (what, bytes): a report; the fp32 weights of an encoder D -> 1024 -> 256 for D = 24 and for
# Fashion-MNIST's 784 columns
SIZES = (("report (10 kB)", 10_000), ("encoder, D = 24 (1.2 MB)", 4 * (24 * 1024 + 1024 * 256 + 1280)),
         ("encoder, D = 784 (4.3 MB)", 4 * (784 * 1024 + 1024 * 256 + 1280)))


def main() -> int:
    from entry import positive  # benchmarks/entry.py

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=positive, default=50)
    parser.add_argument("--repeats", type=positive, default=3)
    parser.add_argument("--dir", type=Path, default=ROOT / "data")
    args = parser.parse_args()

    from seba.core import runtime

    synced = runtime._fsync

    def skipped(path, directory=False):
        return None

    args.dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="atomic-write-", dir=args.dir))
    try:
        print(f"{args.files} files per round, best of {args.repeats} rounds, in {args.dir}")
        for what, size in SIZES:
            data = os.urandom(size)
            best = {"flushed": float("inf"), "not flushed": float("inf")}
            for _ in range(args.repeats):
                for name, fsync in (("flushed", synced), ("not flushed", skipped)):
                    runtime._fsync = fsync
                    start = time.perf_counter()
                    for i in range(args.files):
                        with runtime.atomic_path(work / f"file{i}") as tmp:
                            tmp.write_bytes(data)
                    best[name] = min(best[name], (time.perf_counter() - start) / args.files)
            print(f"{what:<26} flushed {best['flushed'] * 1e3:6.2f} ms, not flushed {best['not flushed'] * 1e3:6.2f} ms "
                  f"per file ({best['flushed'] / best['not flushed']:.2f}x)")
    finally:
        runtime._fsync = synced
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    from entry import run_main  # benchmarks/entry.py: a user's bad input is one line

    raise SystemExit(run_main(main))
