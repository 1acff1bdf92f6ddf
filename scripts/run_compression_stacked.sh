#!/usr/bin/env bash
# run_compression_stacked — do DiLoCo, quantised pseudo-gradients and AC-SGD activation
# compression compose? Runs `wantrain launch` (real processes over ZeroMQ on loopback) with a
# 2-stage x 2-replica pipeline on tiny-Shakespeare for 6,000 steps, the same 121k-parameter GPT as
# run_compression_long.sh, for each setting below and each seed, and prints one JSON line per run
# (final validation loss, pipeline and data-parallel bytes, iteration time) to OUT (default
# compression-stacked.jsonl).
#
#   BUILD=build SEEDS="1 2 3" STEPS=6000 [SETTINGS="sync wan"] scripts/run_compression_stacked.sh [OUT]
#
# SETTINGS picks settings by name (default: all). Each run takes about 100 s on a 2-core machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
out=${1:-compression-stacked.jsonl}
steps=${STEPS:-6000}
data=${DATA:-$root/../shared/data/tinyshakespeare.txt}
[ -f "$data" ] || { echo "run_compression_stacked: $data not found (set DATA=)" >&2; exit 1; }
common=(--stages 2 --replicas 2 --micro-batches 2 --data "$data" --layers 2 --channels 64
        --heads 4 --seq 64 --batch 16 --steps "$steps" --val-every 0 --val-batches 32)
settings=(
  "sync|"
  "sync+delta4|--act-codec delta4"
  "sync+direct8|--act-codec direct8"
  "wan|--preset wan"
  "wan+delta4|--preset wan --act-codec delta4"
  "wan+direct8|--preset wan --act-codec direct8"
  "lan|--preset lan"
  "lan+delta4|--preset lan --act-codec delta4"
  "lan+direct8|--preset lan --act-codec direct8"
)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for seed in ${SEEDS:-1}; do
  for s in "${settings[@]}"; do
    name=${s%%|*} flags=${s#*|}
    [ -z "${SETTINGS:-}" ] || [[ " $SETTINGS " == *" $name "* ]] || continue
    t0=$SECONDS
    # shellcheck disable=SC2086
    "$build/bin/wantrain" launch "${common[@]}" $flags --seed "$seed" \
      --json-log "$work/$name-$seed.jsonl" >"$work/$name-$seed.log" 2>&1 ||
      { echo "run_compression_stacked: $name seed $seed failed:" >&2; tail -5 "$work/$name-$seed.log" >&2; exit 1; }
    python3 - "$work/$name-$seed.jsonl" "$name" "$seed" "$flags" $((SECONDS - t0)) >>"$out" <<'PY'
import json, sys
done = [json.loads(l) for l in open(sys.argv[1]) if '"event":"done"' in l][-1]
print(json.dumps({"setting": sys.argv[2], "seed": int(sys.argv[3]), "flags": sys.argv[4],
                  "steps": done["steps"], "val_loss": done["val_loss"],
                  "bytes_pipeline": done["bytes_pipeline"], "bytes_data": done["bytes_data"],
                  "iteration_s": done["iteration_s"], "wall_s": int(sys.argv[5])}))
PY
    tail -1 "$out"
  done
done
