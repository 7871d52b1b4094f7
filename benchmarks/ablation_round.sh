#!/usr/bin/env bash
# One round of the paper's ablations (docs/ablations.md) on a machine that receives the repository's
# files but not its git history, and maybe not DVC (a GPU machine of this workplace), in one
# command: the variants in ONLY (`default` among them) on the tables in DATASETS, queued and run by
# DVC's own queue in a clone of a git bundle of this repository (the history that the collector's
# code check needs), then collected and merged with the committed collection (reports/ablations):
# a default of this machine's own is kept beside the collection's, and each variant pairs with its
# own round's default. OUTDIR receives the log (round.log) and one archive, ablations.tgz (two
# files, as a device machine returns at most eight): the merged ablations.md and ablations/, and
# the round alone (round/); `tar xzf OUTDIR/ablations.tgz -C DIR`, then copy DIR/ablations.md and
# DIR/ablations/ over a checkout's reports/ to keep them.
#
# Usage (repository root; OUTDIR and BUNDLE relative to it):
#     mkdir -p .whl && git bundle create .whl/repo.bundle --all          # here, beside the wheels
#     ONLY="default enc-ft" DATASETS="karhunen" bash benchmarks/ablation_round.sh OUTDIR SECONDS
# The bundle must hold the commit of the files sent (the script refuses other code). .whl/ may
# hold benchmarks/device_wheels.py's wheels (DVC for a machine without it; installed by
# benchmarks/wheels.sh); BUNDLE=path names another bundle. SECONDS bounds the queue's run (the
# running experiment is killed then, the finished ones collected): on a machine that stops the
# command at a limit, leave a minute of it for the two collects. PREFIX (default abl) names the
# experiments; SET="key=value ..." passes `--set` to the queue. The merge allows a code change since
# the collection's commits (`--allow-code-change`, named in the report) only when the strict merge
# is refused for that reason. Exit 0: merged; 3: merged, but the queue did not end cleanly (an
# experiment failed or ran out of time: the report names it); 1: no merge.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${1:?OUTDIR SECONDS}; budget=${2:?OUTDIR SECONDS}
case "$budget" in
  ''|*[!0-9]*|0) echo "SECONDS must be a whole number of seconds above 0, got '$budget'" >&2; exit 2 ;;
esac
[ -n "${ONLY:-}" ] || { echo "ONLY: the variants to run, default among them (python -m seba.ablations queue --only)" >&2; exit 2; }
[ -n "${DATASETS:-}" ] || { echo "DATASETS: the tables to run them on" >&2; exit 2; }
bundle=$(realpath "${BUNDLE:-.whl/repo.bundle}" 2>/dev/null)
[ -f "$bundle" ] || { echo "no git bundle at ${BUNDLE:-.whl/repo.bundle}: git bundle create .whl/repo.bundle --all" >&2; exit 2; }
mkdir -p "$out" && out=$(realpath "$out") || { echo "OUTDIR $out cannot be made" >&2; exit 2; }
rm -rf "$out/round" "$out/ablations" "$out/ablations.md" "$out/ablations.tgz"  # an earlier call's, not to be mistaken for this one's
pack=$(mktemp -d)  # what ablations.tgz holds
here=$PWD
. benchmarks/wheels.sh
[ -n "${SEBA_WHEELS:-}" ] && export PATH=/tmp/site/bin:$PATH
export DVC_NO_ANALYTICS=1 PYTHONUNBUFFERED=1
command -v dvc > /dev/null || { echo "no dvc: carry its wheels in .whl/ (python benchmarks/device_wheels.py --dest .whl)" >&2; exit 2; }
# dvc.yaml's stages run `python`: where that is missing or lacks torch (a machine whose interpreter is
# `python3` alone), a `python` that runs python3 goes first on PATH, else every stage fails
if ! python -c "import torch" > /dev/null 2>&1; then
  shim=$(mktemp -d) && printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" > "$shim/python" && chmod +x "$shim/python" \
    && export PATH=$shim:$PATH && python -c "import torch" \
    || { echo "no python with torch for dvc.yaml's stages (python3: $(command -v python3))" >&2; exit 2; }
fi
work=$(mktemp -d)/round
git clone -q "$bundle" "$work" || exit 1
if ! diff -rq -x __pycache__ "$here/seba" "$work/seba" > /dev/null || ! diff -rq -x __pycache__ "$here/stages" "$work/stages" > /dev/null \
   || ! cmp -s "$here/dvc.yaml" "$work/dvc.yaml" || ! cmp -s "$here/params.yaml" "$work/params.yaml"; then
  echo "the bundle's commit is not the code here (seba/, stages/, dvc.yaml, params.yaml): commit, then git bundle create again" >&2
  exit 2
fi
cp -n "$here"/data/snapshot/*.parquet "$work/data/snapshot/" 2>/dev/null  # supplied tables git does not hold
cd "$work" || exit 1
prefix=${PREFIX:-abl}
sets=(); for s in ${SET:-}; do sets+=(--set "$s"); done
{
  echo "== round: $ONLY on $DATASETS, commit $(git rev-parse --short HEAD), $(nproc) cores, in $work"
  timeout "$budget" python3 -m seba.ablations queue --prefix "$prefix" --only $ONLY --datasets $DATASETS \
    ${sets[@]+"${sets[@]}"} --run
  queued=$?
  echo "== queue exit $queued"
  if [ "$queued" = 124 ]; then
    echo "== out of time: the running experiment is killed, the finished ones collected"
    dvc queue stop --kill
  fi
  python3 -m seba.ablations collect --prefix "$prefix" && mkdir -p "$pack/round" \
    && cp -r reports/ablations.md reports/ablations "$pack/round/"
  git checkout -q -- reports/ablations.md reports/ablations || exit 1  # the merge reads the committed collection
  python3 -m seba.ablations collect --prefix "$prefix" --merge reports/ablations 2> merge.err
  status=$?
  cat merge.err
  if [ "$status" != 0 ] && grep -q -- --allow-code-change merge.err && ! grep -q "git does not know" merge.err; then
    echo "== the strict merge refused a code change: merging with --allow-code-change"
    python3 -m seba.ablations collect --prefix "$prefix" --merge reports/ablations --allow-code-change
    status=$?
  fi
  echo "== merge exit $status"
  [ "$status" = 0 ] || exit 1
  cp -r reports/ablations.md reports/ablations "$pack/" || exit 1
  [ "$queued" = 0 ] || exit 3
} 2>&1 | tee "$out/round.log"
status=${PIPESTATUS[0]}
# one archive, not the ~20 files of two collections: a device machine returns at most eight files
if [ -n "$(ls -A "$pack")" ]; then
  tar czf "$out/ablations.tgz" -C "$pack" . && echo "== $out/ablations.tgz: $(cd "$pack" && find . -type f | wc -l) files"
fi
exit "$status"
