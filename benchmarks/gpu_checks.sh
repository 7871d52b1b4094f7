#!/usr/bin/env bash
# The GPU checks of docs/performance.md in one command, for a GPU machine that runs one command
# for a limited time: the CUDA tests, the stacked step and stacked training against the per-seed
# path (benchmarks/stacking.py), then the 100-seed protocol table after table
# (benchmarks/gpu_protocol.py) until the time is spent. Each part has its own time limit, so a
# failure or an overrun in one leaves the others' results.
#
# Usage (repository root of a throwaway checkout):
#     bash benchmarks/gpu_checks.sh OUTDIR SECONDS [BASELINE_CODE]
# OUTDIR receives checks.log (machine, tests, stacking), protocol.log, and gpu_protocol.py's
# timings.json and tables_<k>.tgz. SECONDS is the whole run's budget. BASELINE_CODE is a folder
# holding the `seba` package of the per-seed path (`git archive 61acc39 seba | tar x -C DIR`;
# default: extracted from git, which needs the repository's history). METHODS=[knn] leaves out the
# logistic-regression baseline; TABLES="dna pixel" runs the protocol on those tables only, in that
# order (default: params.yaml's datasets, cheapest first); STACKING=0 skips the stacking benchmark, TESTS=0
# the CUDA tests; METHODS=[] runs SeBA alone (the baselines' stages need no GPU: run them elsewhere);
# DEADLINE=S starts no table after S seconds of the protocol (default: two thirds of its time), so
# that a table too long for the time left is not started and lost. STAGE_DEADLINE=S starts no
# pretrain stage after S seconds, and RESUME=1 keeps the pretrain stages an earlier call finished
# on the same (warm) machine: a table longer than one call runs in two (gpu_protocol.py --resume).
# SEEDS=A..B runs those seeds instead of 0..99 (a table split by seeds over calls or machines).
# FT_SPEED=karhunen,dna times the FT-Transformer's training step against the MLP's on those tables
# (benchmarks/encoder_speed.py --device cuda, before the protocol; 200 s at most).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${1:?OUTDIR SECONDS}; budget=${2:?OUTDIR SECONDS}; baseline=${3:-}
tables=${TABLES:-}  # empty: params.yaml's datasets, cheapest first (gpu_protocol.py's CHEAPEST_FIRST)
methods=${METHODS:-[knn,logreg]}  # the baselines run beside SeBA (logreg: scikit-learn on the CPU)
case "$budget" in
  ''|*[!0-9]*) echo "SECONDS must be a whole number of seconds, got '$budget'" >&2; exit 2 ;;
esac
# the checks before the protocol may take their caps (90 s tests, 150 s stacking, 200 s encoder speed)
need=$(( 15 + 30 + (${TESTS:-1} != 0 ? 90 : 0) + (${STACKING:-1} != 0 ? 150 : 0) + (${FT_SPEED:+1} + 0 ? 200 : 0) ))
if [ "$budget" -lt "$need" ]; then
  echo "SECONDS $budget leaves the protocol no time after the checks' caps ($need s with TESTS=${TESTS:-1}," \
       "STACKING=${STACKING:-1}${FT_SPEED:+, FT_SPEED}); give more, or TESTS=0 / STACKING=0" >&2
  exit 2
fi
mkdir -p "$out"
export PYTHONUNBUFFERED=1
. benchmarks/wheels.sh  # packages the machine lacks, carried as wheels in .whl/
t0=$(date +%s)
left() { echo $(( budget - ($(date +%s) - t0) )); }
python3 -c "import seba.core.config" \
  || { echo "seba does not import here (pydantic? carry the wheels in .whl/: benchmarks/device_wheels.py)" >&2; exit 1; }
if [ -n "$tables" ]; then order=(--datasets $tables); else order=(--cheapest-first); fi
sets=(--set "seeds=${SEEDS:-100}" fetch.source=snapshot "baselines.methods=$methods")
if [ "${TESTS:-1}" != 0 ] || [ "${STACKING:-1}" != 0 ] || [ -n "${FT_SPEED:-}" ]; then
  # the protocol's params and tables checked before the checks that precede it (a missing table, a bad SEEDS)
  python3 benchmarks/gpu_protocol.py "${sets[@]}" "${order[@]}" --validate-only > "$out/validate.log" 2>&1 \
    || { cat "$out/validate.log"; echo "== the protocol's params or tables are refused (above): nothing run" >&2; exit 1; }
  rm -f "$out/validate.log"
fi
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  python3 -c "import platform, torch; print('python', platform.python_version(), 'torch', torch.__version__, 'cpu', platform.processor())"
  nproc
  echo "== tests/test_cuda.py"
  [ "${TESTS:-1}" = 0 ] || timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py 2>&1
  echo "== stacking: $(left) s left"
  [ "${STACKING:-1}" = 0 ] || timeout 150 python3 benchmarks/stacking.py --device cuda --dataset karhunen --stacks 1,5,25,100 \
    --seeds 10 --max-epochs 100 --repeats 1 ${baseline:+--baseline-code "$baseline"} 2>&1
  echo "== stacking done: $(left) s left"
  if [ -n "${FT_SPEED:-}" ]; then
    echo "== encoder speed: $FT_SPEED"
    timeout 200 python3 benchmarks/encoder_speed.py --device cuda --tables "$FT_SPEED" --repeats 3 2>&1
    echo "== encoder speed done: $(left) s left"
  fi
} > "$out/checks.log" 2>&1
cat "$out/checks.log"
rest=$(( $(left) - 15 ))
if [ "$rest" -lt 30 ]; then
  echo "== protocol not started: $rest s left of SECONDS $budget after the checks"
  exit 1
fi
echo "== protocol: $rest s"
timeout "$rest" python3 benchmarks/gpu_protocol.py "${sets[@]}" "${order[@]}" \
  --deadline "${DEADLINE:-$(( rest * 2 / 3 ))}" ${STAGE_DEADLINE:+--stage-deadline "$STAGE_DEADLINE"} \
  $([ "${RESUME:-0}" = 1 ] && echo --resume) --out "$out" > "$out/protocol.log" 2>&1
status=$?
echo "protocol exit $status"
grep '^==' "$out/protocol.log"
ls -la "$out"
exit "$status"  # a failed or timed-out protocol is the command's failure too
