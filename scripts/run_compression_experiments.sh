#!/usr/bin/env bash
# Runs the 300-step compression experiments of docs/compression.md: gradient codecs with and
# without error feedback (AdamW and SGD) and AC-SGD at a pipeline cut (the long DiLoCo runs are
# scripts/run_compression_long.sh). Every run
# prints one JSON line; they are collected in $OUT/runs.jsonl and tabulated in $OUT/tables.md.
#
#   scripts/run_compression_experiments.sh            # tool in build/, results in build/compression
#   BUILD=build-g OUT=/tmp/c JOBS=2 STEPS=300 scripts/run_compression_experiments.sh
#   DATA=synthetic scripts/run_compression_experiments.sh   # without the Shakespeare text
#
# Sized for a 2-core machine: 53 runs of a 2-layer, 64-wide GPT, about 12-25 minutes with
# JOBS=2 depending on what else runs (seed 1 unless a run says otherwise). The OpenMP team of
# each run is 1 thread (--threads 1), so JOBS runs in parallel use JOBS cores.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/compression}
JOBS=${JOBS:-2}
STEPS=${STEPS:-300}
EPOCHS=${EPOCHS:-30}
SHARED=${WT_SHARED_DIR:-../shared}
DATA=${DATA:-$SHARED/data/tinyshakespeare.txt}
if [ "$DATA" != synthetic ] && [ ! -f "$DATA" ]; then
  echo "note: $DATA not found; using the synthetic corpus" >&2
  DATA=synthetic
fi
TOOL=$BUILD/bin/compress-experiments
if [ ! -x "$TOOL" ]; then
  echo "error: $TOOL not built; run: cmake --build $BUILD --target compress-experiments" >&2
  exit 1
fi
mkdir -p "$OUT/runs"
COMMON="--data $DATA --layers 2 --channels 64 --heads 4 --seq 64 --batch 4 --workers 4 --threads 1"

# One line per run: NAME ARGS...
plan() {
  for opt in adamw sgd; do
    echo "dp-$opt-none --experiment dp --optimizer $opt --codec none --steps $STEPS"
    for codec in fp16 bf16 int8 int8-tensor topk sign; do
      echo "dp-$opt-$codec --experiment dp --optimizer $opt --codec $codec --steps $STEPS"
      echo "dp-$opt-$codec-ef --experiment dp --optimizer $opt --codec $codec --ef --steps $STEPS"
    done
  done
  # Controls: seed spread of the baselines, error feedback without momentum, and AC-SGD with its
  # caches in mmapped files.
  for seed in 2 3; do
    for opt in adamw sgd; do
      echo "seed$seed-$opt-none --experiment dp --optimizer $opt --codec none --steps $STEPS --seed $seed"
    done
  done
  for codec in none sign topk; do
    echo "m0-sgd-$codec --experiment dp --optimizer sgd --momentum 0 --lr 1 --codec $codec --steps $STEPS"
    [ $codec != none ] && echo "m0-sgd-$codec-ef --experiment dp --optimizer sgd --momentum 0 --lr 1 --codec $codec --ef --steps $STEPS"
  done
  # Error feedback with momentum: without the clip, then with DGC's momentum correction
  # (each worker applies momentum before compressing).
  for codec in none sign topk; do
    for lm in "" "--local-momentum"; do
      tag=$([ -n "$lm" ] && echo lm || echo clip0)
      [ $codec = none ] && echo "$tag-sgd-none --experiment dp --optimizer sgd --clip 0 $lm --codec none --steps $STEPS" && continue
      echo "$tag-sgd-$codec --experiment dp --optimizer sgd --clip 0 $lm --codec $codec --steps $STEPS"
      echo "$tag-sgd-$codec-ef --experiment dp --optimizer sgd --clip 0 $lm --codec $codec --ef --steps $STEPS"
    done
  done
  echo "acsgd-delta-2-mmap --experiment acsgd --acsgd delta --bits 2 --grad-bits 8 --subset 64 --batch 8 --epochs $EPOCHS --cut 1 --cache-path $OUT/acsgd-cache"
  # AC-SGD: 64 training windows, batch 8, $EPOCHS epochs; gradients back at 8 bits.
  for mode in none direct delta; do
    for bits in 2 4 8; do
      [ $mode = none ] && [ $bits != 8 ] && continue
      echo "acsgd-$mode-$bits --experiment acsgd --acsgd $mode --bits $bits --grad-bits 8 --subset 64 --batch 8 --epochs $EPOCHS --cut 1"
    done
  done
}

run_one() {
  local name=$1
  shift
  # shellcheck disable=SC2086
  if ! "$TOOL" $COMMON "$@" > "$OUT/runs/$name.json" 2> "$OUT/runs/$name.err"; then
    echo "FAILED: $name (see $OUT/runs/$name.err)" >&2
    return 0
  fi
  echo "done: $name" >&2
}
export -f run_one
export TOOL OUT COMMON

start=$(date +%s)
plan > "$OUT/plan.txt"
# Each line of the plan becomes one `run_one NAME ARGS...`, JOBS at a time.
xargs -P "$JOBS" -L 1 bash -c 'run_one "$@"' _ < "$OUT/plan.txt"
: > "$OUT/runs.jsonl"
while read -r name _; do
  [ -s "$OUT/runs/$name.json" ] && sed "s/^{/{\"name\":\"$name\",/" "$OUT/runs/$name.json" >> "$OUT/runs.jsonl"
done < "$OUT/plan.txt"
echo "$(wc -l < "$OUT/runs.jsonl") runs in $(( $(date +%s) - start )) s -> $OUT/runs.jsonl" >&2

# ---- tables (markdown) from runs.jsonl ----------------------------------------------------------
python3 - "$OUT/runs.jsonl" > "$OUT/tables.md" <<'PY'
import json, sys
runs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[r["name"]] = r

def loss(name, key="final_val_loss"):
    r = runs.get(name)
    if r is None: return "not run"
    v = r.get(key)
    return "diverged" if r.get("diverged") or v is None else f"{v:.4f}"

def kib(x): return f"{x / 1024:.1f}"

print("### Gradient codecs, synchronous data parallelism (final validation loss)\n")
print("| codec | AdamW | AdamW + EF | SGD-m | SGD-m + EF | KiB/worker/step | vs fp32 |")
print("|---|---|---|---|---|---|---|")
for codec in ["none", "fp16", "bf16", "int8", "int8-tensor", "topk", "sign"]:
    ref = runs.get(f"dp-adamw-{codec}") or runs.get(f"dp-sgd-{codec}")
    b = f"{kib(ref['bytes_per_worker_per_step'])} | {ref['ratio_vs_fp32_ring']:.2f}x" if ref else "- | -"
    ef = lambda o: "n/a" if codec == "none" else loss(f"dp-{o}-{codec}-ef")
    print(f"| {codec} | {loss(f'dp-adamw-{codec}')} | {ef('adamw')} | {loss(f'dp-sgd-{codec}')} | {ef('sgd')} | {b} |")

print("\n### Controls\n")
print("| run | final val loss | final train loss | KiB/worker/step |")
print("|---|---|---|---|")
for name in ["seed2-adamw-none", "seed3-adamw-none", "seed2-sgd-none", "seed3-sgd-none",
             "m0-sgd-none", "m0-sgd-sign", "m0-sgd-sign-ef", "m0-sgd-topk", "m0-sgd-topk-ef",
             "clip0-sgd-none", "clip0-sgd-sign", "clip0-sgd-sign-ef", "clip0-sgd-topk",
             "clip0-sgd-topk-ef", "lm-sgd-none", "lm-sgd-sign", "lm-sgd-sign-ef", "lm-sgd-topk",
             "lm-sgd-topk-ef"]:
    r = runs.get(name)
    if r: print(f"| {name} | {loss(name)} | {loss(name, 'final_train_loss')} | {kib(r['bytes_per_worker_per_step'])} |")

print("\n### AC-SGD at a pipeline cut (2 stages, cut after layer 1; gradients back at 8 bits)\n")
print("| activations | bits | final train loss (subset) | final val loss | activation rel. error, last epoch | fwd KiB/step | bwd KiB/step |")
print("|---|---|---|---|---|---|---|")
for mode in ["none", "direct", "delta", "delta-mmap"]:
    for bits in [2, 4, 8]:
        name = f"acsgd-{mode}-{bits}" if mode != "delta-mmap" else f"acsgd-delta-{bits}-mmap"
        r = runs.get(name)
        if r is None: continue
        print(f"| {mode} | {r['bits']} | {loss(name, 'final_train_loss')} | {loss(name)} | "
              f"{r['act_rel_err_last_epoch']:.4f} | {kib(r['fwd_bytes_per_step'])} | {kib(r['bwd_bytes_per_step'])} |")
PY
echo "tables -> $OUT/tables.md" >&2
