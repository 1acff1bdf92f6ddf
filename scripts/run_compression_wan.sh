#!/usr/bin/env bash
# run_compression_wan — the front's best setting within 1/1000 of fp32-sync bytes (`--preset wan`)
# on the multi-process runtime over netsim's emulated `slow_wan` links, against synchronous fp32
# training on the same links (docs/compression.md, "The 1/1000 point on the runtime over an
# emulated WAN"). Four processes (1 stage x 4 replicas) train the long runs' 121k-parameter GPT
# with the in-process runs' optimizer (weight decay 0.1) and validation set (64 batches):
#
#   wan-shaped    --preset wan, STEPS steps over the emulated links (wall-clock speed)
#   sync-shaped   synchronous fp32, SYNC_STEPS steps over the same links (its step time is
#                 stationary after the first step; the whole run would take ~1 h)
#   wan-instant   wan-shaped with the links' delays scaled to nothing (--time-scale 1e-6): its
#                 per-step losses must equal wan-shaped's (emulation delays messages, it does not
#                 change them)
#   wan-plain     no scenario: the data-parallel ring is 0,1,2,3 instead of the one netsim picks
#                 for the links, so the pseudo-gradients are summed in another order
#   wan-inproc    compress-experiments with --data-order global: the same arithmetic as
#                 wan-plain in one process, so its final validation loss must equal wan-plain's
#
# One JSON line per run to OUT (default compression-wan.jsonl), then a check of the two
# equalities. Wall time here: ~3 min (wan-shaped) + SYNC_STEPS x 0.62 s + ~5 min.
#
#   BUILD=build STEPS=6000 SYNC_STEPS=300 scripts/run_compression_wan.sh [OUT]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
out=${1:-compression-wan.jsonl}
steps=${STEPS:-6000}
sync_steps=${SYNC_STEPS:-300}
data=${DATA:-$root/../shared/data/tinyshakespeare.txt}
[ -f "$data" ] || { echo "run_compression_wan: $data not found (set DATA=)" >&2; exit 1; }
model=(--layers 2 --channels 64 --heads 4 --seq 64 --seed 1)
launch=("$build/bin/wantrain" launch --stages 1 --replicas 4 --batch 16 --weight-decay 0.1
        --data "$data" --val-every 0 --val-batches 64 "${model[@]}")
shape=(--scenario "$root/netsim/scenarios/emulated-wan.json" --scenario-name slow_wan --solver none)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run NAME FLAGS...: one launch, its done event as a JSON line in OUT.
run() {
  local name=$1
  shift
  local t0=$SECONDS
  "${launch[@]}" "$@" --json-log "$work/$name.jsonl" >"$work/$name.log" 2>&1 ||
    { echo "run_compression_wan: $name failed:" >&2; tail -5 "$work/$name.log" >&2; exit 1; }
  python3 - "$work/$name.jsonl" "$name" "$*" $((SECONDS - t0)) >>"$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
done = [r for r in rows if r.get("event") == "done"][-1]
print(json.dumps({"run": sys.argv[2], "flags": sys.argv[3], "steps": done["steps"],
                  "val_loss": done["val_loss"], "iteration_s": done["iteration_s"],
                  "bytes_data": done["bytes_data"], "bytes_control": done["bytes_control"],
                  "reduce_s": done["reduce_s"], "norm_s": done["norm_s"],
                  "losses": [r["loss"] for r in rows if "event" not in r],
                  "wall_s": int(sys.argv[4])}))
PY
  tail -1 "$out" | cut -c1-240
}

run wan-shaped --steps "$steps" --preset wan "${shape[@]}"
run sync-shaped --steps "$sync_steps" "${shape[@]}"
run wan-instant --steps "$steps" --preset wan "${shape[@]}" --time-scale 1e-6
run wan-plain --steps "$steps" --preset wan
t0=$SECONDS
"$build/bin/compress-experiments" --experiment diloco --data "$data" "${model[@]}" --batch 4 \
  --workers 4 --threads 1 --steps "$steps" --eval-batches 64 --H 100 --outer-lr 0.7 \
  --outer-momentum 0.9 --codec sign --data-order global >"$work/inproc.json"
python3 - "$work/inproc.json" $((SECONDS - t0)) >>"$out" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(json.dumps({"run": "wan-inproc", "steps": j["steps"], "val_loss": j["final_val_loss"],
                  "fraction_of_fp32_sync": j["fraction_of_fp32_sync"], "wall_s": int(sys.argv[2])}))
PY
tail -1 "$out"
python3 - "$out" <<'PY'
import json, sys
r = {}
for line in open(sys.argv[1]):
    j = json.loads(line)
    r[j["run"]] = j
a, b = r["wan-shaped"]["losses"], r["wan-instant"]["losses"]
print("emulated delays vs none: %d steps, largest loss difference %.1e, final %.6f vs %.6f" %
      (len(a), max(abs(x - y) for x, y in zip(a, b)), r["wan-shaped"]["val_loss"],
       r["wan-instant"]["val_loss"]))
print("scenario's ring vs ring 0..3: final %.6f vs %.6f" %
      (r["wan-shaped"]["val_loss"], r["wan-plain"]["val_loss"]))
print("runtime vs in-process, ring 0..3: %.6f vs %.6f" %
      (r["wan-plain"]["val_loss"], r["wan-inproc"]["val_loss"]))
w, s = r["wan-shaped"]["iteration_s"], r["sync-shaped"]["iteration_s"]
print("iteration time: wan %.4f s, sync fp32 %.4f s: %.1fx" % (w, s, s / w))
print("time to %d steps: wan %.0f s, sync fp32 %.0f s (at its measured step time)" %
      (r["wan-shaped"]["steps"], w * r["wan-shaped"]["steps"], s * r["wan-shaped"]["steps"]))
PY
