#!/usr/bin/env bash
# Runs the long DiLoCo experiments of docs/compression.md ("Long runs: which setting crosses a
# slow link at the least loss"): synchronous fp32 data parallelism against DiLoCo with plain
# averaging or Nesterov outer steps over H = 10 to 1000, pseudo-gradient codecs (fp16, int8,
# int4, sign, top-k with and without error feedback at H = 100; fp16 at H = 10, int8 + EF at
# H = 30), and
# streaming DiLoCo — 4 workers x 6,000 steps each (6.1 M tokens, 20x the 300-step tables),
# seeded. Every run prints one JSON line; they are collected in $OUT/runs.jsonl and tabulated
# (all runs, Pareto front, best setting per byte budget, loss over the run) in $OUT/tables.md.
#
#   scripts/run_compression_long.sh                  # tool in build/, results in build/compression-long
#   BUILD=build OUT=/tmp/long JOBS=16 scripts/run_compression_long.sh
#   ONLY='-s1$' SKIP='^st-' scripts/run_compression_long.sh  # runs whose name matches / does not
#   TABLES_ONLY=1 OUT=/tmp/long scripts/run_compression_long.sh   # tabulate what is there
#
# A run whose $OUT/runs/NAME.json exists already is not repeated, so a set can be resumed or
# gathered from several machines. Wall time: 47 runs of 100 s (idle core) to 8 min (loaded
# machine) each, one core per run; measured on the shared 2-core machine: about 11,000 s of run
# time, about 80 min with 2-3 runs in parallel (docs/compression.md).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/compression-long}
JOBS=${JOBS:-2}
STEPS=${STEPS:-6000}
ONLY=${ONLY:-.}
SKIP=${SKIP:-^$}
SHARED=${WT_SHARED_DIR:-../shared}
DATA=${DATA:-$SHARED/data/tinyshakespeare.txt}
if [ "$DATA" != synthetic ] && [ ! -f "$DATA" ]; then
  echo "note: $DATA not found; using the synthetic corpus" >&2
  DATA=synthetic
fi
TOOL=$BUILD/bin/compress-experiments
mkdir -p "$OUT/runs"
COMMON="--data $DATA --layers 2 --channels 64 --heads 4 --seq 64 --batch 4 --workers 4 --threads 1
 --steps $STEPS --eval-batches 64 --eval-every $((STEPS / 12))"

# The outer step of the codec and streaming runs: DiLoCo's published 0.7 / 0.9, which the H=100
# sweep (the first runs below) found far better than plain averaging.
BEST="--outer-lr 0.7 --outer-momentum 0.9"
BEST_TAG=lr0.7-m0.9

# Settings of the Pareto front that get seeds 2 and 3 (names without the -sN suffix).
SEEDED=${SEEDED:-"sync-fp32 dl-H100-lr0.7-m0.9-fp32 dl-H100-lr0.7-m0.9-int4 dl-H100-lr0.7-m0.9-int4-ef dl-H100-lr0.7-m0.9-sign dl-H30-lr0.7-m0.9-int8-ef dl-H500-lr0.7-m0.9-int4-ef dl-H500-lr0.7-m0.9-sign dl-H1000-lr0.7-m0.9-int4-ef dl-H1000-lr0.7-m0.9-sign-ef"}

# Seed 1 of every setting, one line per run, most important first: NAME ARGS...
plan_s1() {
  echo "sync-fp32-s1 --experiment dp --codec none --seed 1"
  # The outer step at H = 100: plain averaging against Nesterov momentum.
  for o in "0.7 0.9" "1 0" "0.4 0.9" "1 0.9" "1 0.5"; do
    set -- $o
    echo "dl-H100-lr$1-m$2-fp32-s1 --experiment diloco --H 100 --outer-lr $1 --outer-momentum $2 --codec none --seed 1"
  done
  # Pseudo-gradient codecs with and without error feedback.
  for c in fp16 fp16-ef int8 int8-ef int4 int4-ef sign sign-ef topk topk-ef; do
    echo "dl-H100-$BEST_TAG-$c-s1 --experiment diloco --H 100 $BEST --codec ${c%-ef} $([ "$c" != "${c%-ef}" ] && echo --ef) --seed 1"
  done
  for c in fp32 sign topk-ef int4-ef; do
    echo "dl-H500-$BEST_TAG-$c-s1 --experiment diloco --H 500 $BEST --codec $([ $c = fp32 ] && echo none || echo ${c%-ef}) $([ "$c" != "${c%-ef}" ] && echo --ef) --seed 1"
  done
  # Shorter and longer intervals.
  echo "dl-H10-lr1-m0-fp16-s1 --experiment diloco --H 10 --outer-lr 1 --outer-momentum 0 --codec fp16 --seed 1"
  echo "dl-H30-$BEST_TAG-int8-ef-s1 --experiment diloco --H 30 $BEST --codec int8 --ef --seed 1"
  echo "dl-H1000-$BEST_TAG-int4-ef-s1 --experiment diloco --H 1000 $BEST --codec int4 --ef --seed 1"
  echo "dl-H1000-$BEST_TAG-sign-ef-s1 --experiment diloco --H 1000 $BEST --codec sign --ef --seed 1"
  # Streaming DiLoCo: 4 fragments at staggered times, results arriving at once or 5 steps late.
  echo "st-H100-f4-t0-$BEST_TAG-fp32-s1 --experiment diloco --H 100 $BEST --fragments 4 --codec none --seed 1"
  echo "st-H100-f4-t5-$BEST_TAG-fp32-s1 --experiment diloco --H 100 $BEST --fragments 4 --overlap 5 --codec none --seed 1"
  # Control: one worker alone (a quarter of the tokens, nothing sent) — what a replica learns
  # without any synchronisation.
  echo "solo-fp32-s1 --experiment dp --workers 1 --codec none --seed 1"
}

# Every run: seed 1 of each setting, then seeds 2 and 3 of the front's settings.
plan() {
  plan_s1
  for seed in 2 3; do
    for run in $SEEDED; do
      plan_s1 | awk -v n="$run-s1" -v s=$seed '$1 == n { sub(/-s1$/, "-s" s, $1); $NF = s; print }'
    done
  done
}

run_one() {
  local name=$1
  shift
  [ -s "$OUT/runs/$name.json" ] && return 0
  # shellcheck disable=SC2086
  if ! "$TOOL" $COMMON "$@" > "$OUT/runs/$name.tmp" 2> "$OUT/runs/$name.err"; then
    echo "FAILED: $name (see $OUT/runs/$name.err)" >&2
    return 0
  fi
  mv "$OUT/runs/$name.tmp" "$OUT/runs/$name.json"
  echo "done: $name" >&2
}
export -f run_one
export TOOL OUT COMMON

if [ -z "${TABLES_ONLY:-}" ]; then
  if [ ! -x "$TOOL" ]; then
    echo "error: $TOOL not built; run: cmake --build $BUILD --target compress-experiments" >&2
    exit 1
  fi
  start=$(date +%s)
  todo="$OUT/plan-$$.txt" # per invocation: several may fill one $OUT at once
  plan | awk -v re="$ONLY" -v skip="$SKIP" '$1 ~ re && $1 !~ skip' > "$todo"
  # Each line of the plan becomes one `run_one NAME ARGS...`, JOBS at a time.
  xargs -P "$JOBS" -L 1 bash -c 'run_one "$@"' _ < "$todo"
  echo "$(wc -l < "$todo") runs in $(( $(date +%s) - start )) s" >&2
  rm -f "$todo"
fi
: > "$OUT/runs.jsonl"
for f in "$OUT"/runs/*.json; do
  [ -s "$f" ] || continue
  name=$(basename "$f" .json)
  sed "s/^{/{\"name\":\"$name\",/" "$f" >> "$OUT/runs.jsonl"
done
python3 tools/compress-experiments/long_tables.py "$OUT/runs.jsonl" > "$OUT/tables.md"
echo "$(wc -l < "$OUT/runs.jsonl") runs -> $OUT/runs.jsonl, tables -> $OUT/tables.md" >&2
