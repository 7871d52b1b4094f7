#!/usr/bin/env bash
# The precision check on a GPU machine in one command: SeBA (no baselines) on every table of
# params.yaml with N seeds, once in fp32 and once in each other precision (tf32, bf16; the tables'
# own `pretrain` values in `sources` included), through the stages' own code in-process
# (benchmarks/gpu_protocol.py), then benchmarks/precision_check.py and precision_seeds.py of each
# against fp32.
#
# Usage (repository root of a throwaway checkout):
#     bash benchmarks/gpu_precision.sh OUTDIR SECONDS [SEEDS] [PRECISIONS]   # defaults: 10 seeds, tf32
# PRECISIONS is one precision or several, comma-separated ("tf32,bf16"). OUTDIR receives three
# files (a device machine returns at most eight): test_cuda.log (tests/test_cuda.py runs first),
# check.txt (each check's table and verdict, each run's exit and seconds) and runs.tgz (per
# precision <p>.log, timings_<p>.json and <p>/tables_<k>.tgz; precision_<p>.csv and seeds_<p>.csv
# per check). SECONDS is the whole budget: fp32 may use half of what is left after the tests, the
# first other precision all of what is left then (it is never slower than fp32's run in our
# measurements), and a precision after those two the rest, starting no table after three fifths
# of it (its check then covers the tables it finished and is INCOMPLETE without the others). Tables run cheapest first. Packages the
# machine lacks go in .whl/ (as in benchmarks/gpu_checks.sh). TESTS=0 skips the CUDA tests (up to 90 s),
# leaving their time to the runs.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${1:?OUTDIR SECONDS}; budget=${2:?OUTDIR SECONDS}; seeds=${3:-10}; others=${4:-tf32}
mkdir -p "$out"
work=/tmp/precision_runs; rm -rf "$work"; mkdir -p "$work"
export PYTHONUNBUFFERED=1
. benchmarks/wheels.sh  # packages the machine lacks, carried as wheels in .whl/
python3 -c "import seba.core.config" \
  || { echo "seba does not import here (pydantic? carry the wheels in .whl/: benchmarks/device_wheels.py)" >&2; exit 1; }
t0=$(date +%s)
left() { echo $(( budget - ($(date +%s) - t0) - 10 )); }  # 10 s kept for the checks
if [ "${TESTS:-1}" != 0 ]; then
  timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py > "$out/test_cuda.log" 2>&1
  tail -3 "$out/test_cuda.log"
fi
# the tables whose own `pretrain` values in `sources` set a precision (params.yaml pins fp32 on some)
pinned=$(python3 -c "import yaml; p = yaml.safe_load(open('params.yaml'))
print(' '.join(t for t in p['datasets'] if 'precision' in (p['sources'][t].get('pretrain') or {})))")
tables=$(python3 -c "import yaml; print(' '.join(yaml.safe_load(open('params.yaml'))['datasets']))")  # all of them for a PASS
cp params.yaml /tmp/params.yaml.orig  # a run stopped by its time limit leaves its edits behind
run=0
for precision in fp32 ${others//,/ }; do
  run=$((run + 1))
  deadline=0
  case $run in 1) limit=$(( $(left) / 2 ));; 2) limit=$(left);; *) limit=$(left); deadline=$(( limit * 3 / 5 ));; esac
  [ "$limit" -gt 30 ] || { echo "$precision: no time left"; break; }
  sets=(seeds="$seeds" fetch.source=snapshot 'baselines.methods=[]' pretrain.precision="$precision")
  for t in $pinned; do sets+=("sources.$t.pretrain.precision=$precision"); done
  timeout "$limit" python3 benchmarks/gpu_protocol.py --set "${sets[@]}" --cheapest-first \
    --deadline "$deadline" --out "$work/$precision" > "$work/$precision.log" 2>&1
  echo "$precision: exit $? after $(( $(date +%s) - t0 )) s (limit $limit s); $(grep -c '^\[evaluate' "$work/$precision.log") seed lines" \
    | tee -a "$out/check.txt"
  mv "$work/$precision/timings.json" "$work/timings_$precision.json" 2>/dev/null
  cp /tmp/params.yaml.orig params.yaml
  rm -rf data/models reports/episodes  # the next run trains its own
done
for precision in ${others//,/ }; do
  [ -s "$work/$precision.log" ] || continue
  echo "== $precision against fp32"
  python3 benchmarks/precision_check.py "$work/fp32.log" "$work/$precision.log" --csv "$work/precision_$precision.csv" \
    --expect $tables
  python3 benchmarks/precision_seeds.py "$work/fp32" "$work/$precision" --csv "$work/seeds_$precision.csv"
done 2>&1 | tee -a "$out/check.txt"
tar czf "$out/runs.tgz" -C "$work" .
