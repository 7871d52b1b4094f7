"""Where the pretraining loop synchronises with the GPU (run from the repository root on a CUDA
machine: python reports/runs/gpu_h100_2026-11-22/sync_locations.py). Counts each synchronising
call of three karhunen epochs (r = 0.3, fp32) by its call site, at batch sizes 32 and 512, with
seba.runtime.count_cuda_syncs (torch's sync debug mode). The two output files in this folder
came from an earlier copy of this script that set the debug mode up inline, with the same
call-site format."""
import collections
import dataclasses
import sys
from pathlib import Path

import torch

sys.path.insert(0, ".")
from seba.config import load_params  # noqa: E402
from seba.data import encode_table, load_snapshot, make_split, scale  # noqa: E402
from seba.pretrain import pretrain_encoder  # noqa: E402
from seba.runtime import count_cuda_syncs  # noqa: E402

p = load_params(Path("params.yaml"))
frame, _ = load_snapshot(p.sources["karhunen"].openml_id, Path("data/snapshot"))
t = encode_table(frame)
s = make_split(t.y, 0, p.split.test_fraction, p.split.val_fraction)
X = scale(t, s.train)
for bs in (32, 512):
    cfg = dataclasses.replace(p.pretrain, max_epochs=3, batch_size=bs, precision="fp32", progress_seconds=1e9)
    where = collections.Counter()
    count, _ = count_cuda_syncs(
        lambda: pretrain_encoder(X[s.train], X[s.val], t.groups, 0.3, 0, cfg, torch.device("cuda")), where)
    print(f"batch {bs}: {count} syncs")
    for k, v in where.most_common():
        print(f"  {v:4d}  {k}")
