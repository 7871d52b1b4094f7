"""The paper's ablations (tex `sec:ablation`) as DVC experiments: one command queues them, one
collects them into a report against the paper's numbers (docs/ablations.md).

    python -m seba.ablations queue [--ablations ...] [--seeds ...] [--datasets ...] [--run | --start]
    python -m seba.ablations collect [--merge reports/ablations]

``queue`` stages one ``dvc exp run --queue`` experiment per row of ``EXPERIMENTS`` (the default, the
paper's SeBA, is one experiment shared by every ablation's default row). Every experiment sets all
the ablation switches (``DEFAULTS`` overridden by its own), so it is the same whatever params.yaml
holds, and the collector tells the variants apart by their params, not by their names.

``collect`` reads ``dvc exp show --json`` and each experiment's per-episode results
(``reports/episodes/<dataset>.csv`` at the experiment's commit) and writes reports/ablations.md and
reports/ablations/ (CSV tables, one PNG per ablation, the experiments that made them). With
``--merge FOLDER`` it adds the tables an earlier collection has and this run lacks, when that
collection's experiments had this run's params and code (``merge_collected``).

The modules, each importing only those above it (tests/test_dvc_deps.py):

- ``variants``: the variant table (``ABLATIONS``, ``EXPERIMENTS``, ``DEFAULTS``) and the params helpers;
- ``experiments``: ``dvc exp show --json`` as ``Experiment`` records, their per-episode results;
- ``queueing``: one ``Plan`` per experiment, the checks before anything is queued, following the queue;
- ``merging``: the tables an earlier collection adds (``collect --merge``);
- ``collecting``: one experiment per variant, the tables, paired differences and "best on" counts;
- ``writing``: reports/ablations.md, the PNGs, the CSVs and the experiment record;
- ``cli``: the two commands (``python -m seba.ablations`` runs ``cli.main``).
"""

from seba.ablations.variants import (  # noqa: F401  (the package's interface)
    ABLATIONS, COMMON, DEFAULT, DEFAULTS, EXPERIMENTS, MEMBER, PAPER_SEEDS, PREFIX, Ablation, ablation, canonical,
    current_keys, differing_keys, experiment_label, experiment_shots, flatten, identify, override_text, signature)
from seba.ablations.experiments import Experiment, dvc_json, read_show  # noqa: F401
from seba.ablations.queueing import (  # noqa: F401
    WORKER_INFO, Plan, check_plans, check_site_cache, follow_queue, parse_set, plan, queue_worker_alive,
    untracked_inputs, warn_stale_running)
from seba.ablations.merging import (  # noqa: F401
    Group, experiments_from_record, git_code_diff, merge_collected, merge_differences, read_collected)
from seba.ablations.collecting import Collected, best_counts, collect  # noqa: F401
from seba.ablations.writing import commits_by_table, load_paper, markdown, write  # noqa: F401
from seba.ablations.cli import main  # noqa: F401
