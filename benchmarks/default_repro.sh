#!/usr/bin/env bash
# The README's command 1 timed: a fresh clone and venv per revision, `dvc repro` on the default
# params.yaml, then three no-op `dvc repro` (docs/performance.md, "The pipeline on the CPU").
#
# Usage (repository root):
#     bash benchmarks/default_repro.sh [REV ...]        # default: HEAD
#     QUICK=1 bash benchmarks/default_repro.sh [REV ...]  # the README's quick variant instead
#
# Each revision (a commit of this repository) runs in its own clone under a temporary folder, one
# after the other, with `pip install -e ".[test]"` as the README says. Prints, per revision: the
# wall seconds of `dvc repro` (not the install), the number of stage instances run, the sum of
# their stage bodies (this tree's benchmarks/stage_times.py, from MLflow, also written as the clone's
# stage_times.csv; the rest is DVC's and Python's start-up), the three no-op times, and the ratio of
# each wall time to the first revision's.
# The clones stay (their logs, stage_times.csv and reports/) for inspection; the last line names
# the folder. Run it with nothing else on the machine: the figures are wall times.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/seba-default-repro-XXXX)
revs=("$@"); [ ${#revs[@]} -eq 0 ] && revs=(HEAD)
export DVC_NO_ANALYTICS=1
now() { date +%s.%N; }
first=""
for rev in "${revs[@]}"; do
  sha=$(git -C "$root" rev-parse --short "$rev") || { echo "unknown revision: $rev"; exit 1; }
  dir="$work/$sha"
  git clone -q "$root" "$dir" && git -C "$dir" checkout -q "$sha" || exit 1
  cd "$dir" || exit 1
  python3 -m venv .venv && . .venv/bin/activate || exit 1
  pip install -q -e ".[test]" > install.log 2>&1 || { echo "$sha: install failed ($dir/install.log)"; exit 1; }
  if [ "${QUICK:-0}" = 1 ]; then
    python - <<'PY' || { echo "$sha: could not set the quick variant's params"; exit 1; }
import yaml
try:  # the revision's own YAML 1.2 reader and writer; revisions before them: PyYAML's
    from seba.core.config import ParamsLoader, dump_params
except ImportError:
    ParamsLoader, dump_params = yaml.SafeLoader, lambda p: yaml.safe_dump(p, sort_keys=False)
p = yaml.load(open("params.yaml"), Loader=ParamsLoader)
p["datasets"] = ["diabetes", "cmc", "karhunen"]
p["pretrain"].update(max_epochs=20)
(p if "ratios" in p else p["pretrain"])["ratios"] = [0.2, 0.5]  # revisions before the top-level key: in the section
p["evaluate"]["episodes"] = 20
open("params.yaml", "w").write(dump_params(p))
PY
  fi
  start=$(now); dvc repro > repro.log 2>&1; rc=$?; end=$(now)
  [ $rc -eq 0 ] || { echo "$sha: dvc repro failed (rc $rc, $dir/repro.log)"; exit 1; }
  wall=$(echo "$end - $start" | bc)
  stages=$(grep -c "^Running stage" repro.log)
  noops=""
  for i in 1 2 3; do
    s=$(now); dvc repro > "noop-$i.log" 2>&1; e=$(now)
    noops="$noops $(printf '%.2f' "$(echo "$e - $s" | bc)")"
  done
  python "$root/benchmarks/stage_times.py" --csv stage_times.csv > stage_times.txt 2>&1  # this tree's script
  bodies=$(grep "total (stage bodies)" stage_times.txt | awk '{print $(NF-1)}')
  deactivate
  [ -z "$first" ] && first=$wall
  printf '%s  dvc repro %7.1f s  stages %3s  stage bodies %s s  no-op%s s  wall / first %.2f\n' \
    "$sha" "$wall" "$stages" "$bodies" "$noops" "$(echo "$wall / $first" | bc -l)"
done
echo "clones: $work"
