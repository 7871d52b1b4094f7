#!/usr/bin/env bash
# `dvc repro` on a GPU machine that has torch but neither DVC nor MLflow, in pieces that each end
# within a time limit (a machine that runs one command for at most some minutes, keeps running
# what it started in between and is given back when idle), then its results packed for the way
# home (docs/performance.md, "Running the pipeline on a GPU machine").
#
# Usage (repository root; the wheels from `python benchmarks/device_wheels.py --dest .whl`):
#     bash benchmarks/gpu_run.sh start [KEY=VALUE ...]   # install .whl/, set params, start dvc repro
#     bash benchmarks/gpu_run.sh wait SECONDS OUTDIR     # follow it; once it has ended, pack into OUTDIR
#
# `start` installs the carried wheels into /tmp/site (if .whl/ is there), makes the folder a git
# repository if it is none (DVC runs inside one), applies each KEY=VALUE to params.yaml (dotted
# keys, YAML values: `seeds=100` is short for seeds 0..99, `pretrain.precision=tf32`), runs
# `seba-validate`, and starts `dvc repro` in its own process session, logging to gpu_run/repro.log.
# `wait` prints progress (stage instances done, the running stage's last line) every 30 s until the
# run ends or SECONDS pass; call it again to go on following. After the run it writes to OUTDIR:
# six files: run.txt (exit status, wall seconds, stage count), stage_times.csv (each stage's own
# time, from the stages' records), seed_spread.txt (per seed and cell, benchmarks/seed_spread.py),
# reports.tgz (the pipeline's reports/ but the episodes, dvc.lock, params.yaml, repro.log),
# episodes.tgz (reports/episodes/), logs.tgz (every encoder's log.json); over 16 MiB is warned of.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
state=gpu_run
site=/tmp/site
export DVC_NO_ANALYTICS=1 PYTHONUNBUFFERED=1

environment() {
  if [ -d "$site" ]; then export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" PATH="$site/bin:$PATH"; fi
}

case "${1:-}" in
start)
  shift
  if [ -d .whl ] && ! python3 -c "import dvc" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl \
      || { echo "installing .whl/ failed"; exit 1; }
  fi
  environment
  command -v dvc >/dev/null || { echo "no dvc: carry its wheels in .whl/ (python benchmarks/device_wheels.py --dest .whl)"; exit 1; }
  [ -e "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null && { echo "a run is going already (pid $(cat "$state/pid"))"; exit 1; }
  git rev-parse --git-dir >/dev/null 2>&1 || git init -q || exit 1
  cp params.yaml "$state.params.yaml"  # put back if an edit is refused
  python3 - "$@" <<'PY' && python3 -m seba.validate || { mv "$state.params.yaml" params.yaml; echo "params.yaml unchanged"; exit 1; }
import sys
from pathlib import Path
sys.path.insert(0, "benchmarks")
from gpu_protocol import edit_params  # KEY=VALUE edits, shared with the in-process runner
path = Path("params.yaml")
path.write_text(edit_params(path.read_text(), sys.argv[1:]))
PY
  rm -f "$state.params.yaml"
  rm -rf "$state" && mkdir -p "$state"
  date +%s > "$state/start"
  setsid bash -c "dvc repro > $state/repro.log 2>&1; echo \$? > $state/rc; date +%s > $state/end" < /dev/null &
  echo $! > "$state/pid"
  echo "dvc repro started ($(python3 -c "import yaml; p = yaml.safe_load(open('params.yaml')); print(len(p['seeds']), 'seeds,', len(p['datasets']), 'tables')")); log: $state/repro.log"
  ;;
wait)
  limit=${2:?wait SECONDS OUTDIR}; out=${3:?wait SECONDS OUTDIR}
  [ -e "$state/start" ] || { echo "no run: bash benchmarks/gpu_run.sh start first"; exit 1; }
  environment
  t0=$(date +%s)
  while [ ! -e "$state/rc" ] && [ $(( $(date +%s) - t0 )) -lt "$limit" ]; do
    sleep 5
    [ $(( ($(date +%s) - t0) % 30 )) -lt 5 ] || continue
    printf '%5ds  %3d stage instances started; %s\n' "$(( $(date +%s) - $(cat "$state/start") ))" \
      "$(grep -c '^Running stage' "$state/repro.log")" "$(grep -v '^\s*$' "$state/repro.log" | tail -1 | cut -c1-150)"
  done
  [ -e "$state/rc" ] || { echo "still running: call wait again"; exit 0; }
  mkdir -p "$out"
  rc=$(cat "$state/rc"); wall=$(( $(cat "$state/end") - $(cat "$state/start") ))
  printf 'dvc repro exit %s, %s s wall, %s stage instances\n' "$rc" "$wall" "$(grep -c '^Running stage' "$state/repro.log")" | tee "$out/run.txt"
  # the stage bodies from the records (no MLflow), or from MLflow where `track` pushed them there
  { python3 benchmarks/stage_times.py --records --csv "$out/stage_times.csv" 2>/dev/null \
      || python3 benchmarks/stage_times.py --csv "$out/stage_times.csv"; } | tail -8
  python3 benchmarks/seed_spread.py > "$out/seed_spread.txt" 2>&1
  cp "$state/repro.log" repro.log
  tar czf "$out/reports.tgz" --exclude=reports/episodes --exclude=reports/experiments --exclude=reports/ablations \
    reports dvc.lock params.yaml repro.log
  rm repro.log
  tar czf "$out/episodes.tgz" reports/episodes
  find data/models -name log.json -print0 | tar czf "$out/logs.tgz" --null -T -
  for f in "$out"/*; do
    [ "$(stat -c %s "$f")" -le $((16 * 1024 * 1024)) ] || echo "WARNING: $f is over 16 MiB"
  done
  ls -la "$out"
  exit "$rc"
  ;;
*)
  sed -n '2,20p' "$0"; exit 2
  ;;
esac
