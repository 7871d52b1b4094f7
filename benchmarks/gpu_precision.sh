#!/usr/bin/env bash
# The precision check on a GPU machine in one command: SeBA (no baselines) on every table of
# params.yaml with N seeds, once in fp32 and once in another precision (tf32 or bf16; the tables'
# own `pretrain` values in `sources` included), through the stages' own code in-process
# (benchmarks/gpu_protocol.py), then benchmarks/precision_check.py on the two logs.
#
# Usage (repository root of a throwaway checkout):
#     bash benchmarks/gpu_precision.sh OUTDIR SECONDS [SEEDS] [PRECISION]   # defaults: 10 seeds, tf32
# OUTDIR receives fp32.log, <precision>.log, timings_fp32.json, timings_<precision>.json,
# precision.csv and check.txt. SECONDS is the budget of both runs; each gets half. The tests of
# tests/test_cuda.py run first (test_cuda.log). Packages the machine lacks go in .whl/ (as in
# benchmarks/gpu_checks.sh).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${1:?OUTDIR SECONDS}; budget=${2:?OUTDIR SECONDS}; seeds=${3:-10}; other=${4:-tf32}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
. benchmarks/wheels.sh  # packages the machine lacks, carried as wheels in .whl/
t0=$(date +%s)
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py > "$out/test_cuda.log" 2>&1
tail -3 "$out/test_cuda.log"
half=$(( (budget - ($(date +%s) - t0)) / 2 ))
# the tables whose own `pretrain` values in `sources` set a precision (params.yaml pins fp32 on some)
pinned=$(python3 -c "import yaml; p = yaml.safe_load(open('params.yaml'))
print(' '.join(t for t in p['datasets'] if 'precision' in (p['sources'][t].get('pretrain') or {})))")
for precision in fp32 "$other"; do
  sets=(seeds="$seeds" fetch.source=snapshot 'baselines.methods=[]' pretrain.precision="$precision")
  for t in $pinned; do sets+=("sources.$t.pretrain.precision=$precision"); done
  rm -rf "/tmp/run_$precision"
  timeout "$half" python3 benchmarks/gpu_protocol.py --set "${sets[@]}" --out "/tmp/run_$precision" > "$out/$precision.log" 2>&1
  echo "$precision: exit $?; $(grep -c '^\[evaluate' "$out/$precision.log") seed lines"
  cp "/tmp/run_$precision/timings.json" "$out/timings_$precision.json" 2>/dev/null
  rm -rf data/models reports/episodes  # the next run trains its own
done
python3 benchmarks/precision_check.py "$out/fp32.log" "$out/$other.log" --csv "$out/precision.csv" | tee "$out/check.txt"
