"""Where the pretraining loop synchronised with the GPU before this session's fix (run from the
repository root on a CUDA machine: python reports/runs/gpu_h100_2026-11-22/sync_locations.py).
Counts each synchronising call of three karhunen epochs (r = 0.3, fp32) by its call site, at
batch sizes 32 and 512, with torch's sync debug mode."""
import collections
import dataclasses
import sys
import traceback
import warnings
from pathlib import Path

import torch

sys.path.insert(0, ".")
from seba.config import load_params  # noqa: E402
from seba.data import encode_table, load_snapshot, make_split, scale  # noqa: E402
from seba.pretrain import pretrain_encoder  # noqa: E402

p = load_params(Path("params.yaml"))
frame, _ = load_snapshot(p.sources["karhunen"].openml_id, Path("data/snapshot"))
t = encode_table(frame)
s = make_split(t.y, 0, p.split.test_fraction, p.split.val_fraction)
X = scale(t, s.train)
for bs in (32, 512):
    cfg = dataclasses.replace(p.pretrain, max_epochs=3, batch_size=bs, precision="fp32", progress_seconds=1e9)
    where = collections.Counter()

    def show(message, category, filename, lineno, file=None, line=None):
        if "synchroniz" in str(message):
            st = [f for f in traceback.extract_stack()[:-1] if "warnings" not in f.filename]
            where[" <- ".join(f"{Path(f.filename).name}:{f.lineno}:{f.name}" for f in reversed(st[-5:]))] += 1

    torch.cuda.synchronize()
    torch.set_warn_always(True)
    torch.cuda.set_sync_debug_mode("warn")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        pretrain_encoder(X[s.train], X[s.val], t.groups, 0.3, 0, cfg, torch.device("cuda"))
    torch.cuda.set_sync_debug_mode("default")
    print(f"batch {bs}: {sum(where.values())} syncs")
    for k, v in where.most_common():
        print(f"  {v:4d}  {k}")
