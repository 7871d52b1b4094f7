#!/usr/bin/env bash
# The cost of executor.kind ray against local for a whole `dvc repro --force` (docs/scale-out.md).
#
# Usage (repository root, the ray extra installed):
#     bash benchmarks/executor_repro.sh [ROUNDS] [THREADS]
#
# Clones this repository's HEAD into a temporary folder, sets the README's quick variant
# (diabetes, cmc, karhunen; ratios 0.2, 0.5; 20 epochs; 20 episodes) and pretrain.threads THREADS
# (default 0), runs `dvc repro` once (fetch etc.), then ROUNDS times (default 2) `dvc repro --force`
# with executor local, ray with a local instance per stage, and ray joining a running instance
# (`ray start --head --port 6399`, RAY_ADDRESS). Prints one line per run: its wall seconds and a
# hash of every checkpoint and episode file (equal hashes: byte-identical outputs).
# Note: `ray stop --force` ends every Ray instance of the machine after each joined run.
set -uo pipefail
rounds=${1:-2}
threads=${2:-0}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/seba-executor-XXXX)
git clone -q "$root" "$work/repo" && cd "$work/repo" || exit 1
export RAY_AUTH_MODE=disabled DVC_NO_ANALYTICS=1
set_params() {
  python - "$@" <<'PY'
import sys, yaml
from seba.core.config import ParamsLoader, dump_params
p = yaml.load(open("params.yaml"), Loader=ParamsLoader)
p["datasets"] = ["diabetes", "cmc", "karhunen"]
p["pretrain"].update(max_epochs=20, threads=int(sys.argv[2]))
(p if "ratios" in p else p["pretrain"])["ratios"] = [0.2, 0.5]  # revisions before the top-level key: in the section
p["evaluate"]["episodes"] = 20
p["executor"]["kind"] = sys.argv[1]
open("params.yaml", "w").write(dump_params(p))
PY
}
hashes() { find reports/episodes data/models -type f \( -name '*.csv' -o -name '*.pt' \) | sort | xargs md5sum | md5sum | cut -c1-12; }
set_params local "$threads" && dvc repro > "$work/first.log" 2>&1 || { echo "first dvc repro failed: $work/first.log"; exit 1; }
for round in $(seq "$rounds"); do
  for mode in local ray-own ray-join; do
    kind=local; [ "$mode" != local ] && kind=ray
    set_params "$kind" "$threads"
    if [ "$mode" = ray-join ]; then
      ray start --head --port 6399 --include-dashboard false --disable-usage-stats > /dev/null 2>&1
      export RAY_ADDRESS=127.0.0.1:6399
    fi
    start=$(date +%s.%N)
    dvc repro --force > "$work/$mode-$round.log" 2>&1; rc=$?
    end=$(date +%s.%N)
    if [ "$mode" = ray-join ]; then ray stop --force > /dev/null 2>&1; unset RAY_ADDRESS; fi
    printf '%s %-8s threads %s  rc %s  %6.1f s  outputs %s  load %s\n' "$round" "$mode" "$threads" "$rc" \
      "$(echo "$end - $start" | bc)" "$(hashes)" "$(cut -d' ' -f1 /proc/loadavg)"
  done
done
echo "logs: $work"
