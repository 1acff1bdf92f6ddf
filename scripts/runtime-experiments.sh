#!/usr/bin/env bash
# Runs the emulated-WAN experiments of docs/runtime.md with `wantrain launch` and prints their
# tables (Markdown) to stdout; the JSON logs stay in $OUT.
#   sim vs real         8 tasklets (4 stages x 2 replicas) in 4 emulated regions, the ga
#                       placement, GPipe and 1F1B: measured iteration time vs netsim's
#   assignment matters  the same runs with random placements (uniform draws, seeds 1-2): the
#                       measured and the predicted speed-up of ga over each
#   compression         4 replicas in 2 regions joined by a 10 Mbit/s link: tokens/s and the
#                       final loss with no codec, fp16, int8 and DiLoCo H=10
#
#   scripts/runtime-experiments.sh                    # build/ tools, results in build/runtime-exp
#   BUILD=build-x OUT=/tmp/r STEPS=40 scripts/runtime-experiments.sh
#
# Measured iteration time = median of the step times after WARMUP steps (the launcher's json
# log); tokens/s = global batch x seq / that median. netsim's prediction is the launcher's, fed
# with the run's own per-stage compute and bytes (docs/runtime.md). Wall time: ~3.5 minutes on the
# shared 2-core machine (printed at the end). Time scale 1: the scenario's milliseconds are wall
# milliseconds, 35-115 ms between regions, so the emulated WAN dominates the tiny models'
# compute (a few ms per pass) and the CPU noise of a loaded machine.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/runtime-exp}
STEPS=${STEPS:-30}
CSTEPS=${CSTEPS:-60}
WARMUP=${WARMUP:-5}
TOOL=$BUILD/bin/wantrain
SCEN=netsim/scenarios/emulated-wan.json
if [ ! -x "$TOOL" ]; then
  echo "error: $TOOL not built; run: cmake --build $BUILD --target wantrain" >&2
  exit 1
fi
mkdir -p "$OUT"
start=$(date +%s)

# 4 stages x 2 replicas, 4 micro-batches of 1 sequence per replica, a 4-layer 32-wide GPT.
pipe_run() { # name schedule placement-flags...
  local name=$1 sched=$2
  shift 2
  rm -f "$OUT/$name.jsonl"
  "$TOOL" launch --stages 4 --replicas 2 --schedule "$sched" --micro-batches 4 --batch 8 \
    --seq 32 --layers 4 --channels 32 --heads 2 --steps "$STEPS" --log-every "$STEPS" \
    --scenario "$SCEN" --scenario-name four_regions --solver none --json-log "$OUT/$name.jsonl" "$@" \
    >"$OUT/$name.txt" 2>&1
}
# A random placement: one uniform permutation of the 8 devices (not assign/'s `random` solver,
# which keeps the best of many draws). Replica r's pipeline is devices 4r..4r+3 of it.
for seed in 1 2; do
  python3 -c "import json, random; p = random.Random($seed).sample(range(8), 8);
print(json.dumps({'pipelines': [p[:4], p[4:]]}))" >"$OUT/random-$seed.json"
done
# 1 stage x 4 replicas on the slow link, a 2-layer 64-wide GPT (0.12 M parameters).
dp_run() { # name extra-flags...
  local name=$1
  shift
  rm -f "$OUT/$name.jsonl"
  "$TOOL" launch --stages 1 --replicas 4 --batch 16 --seq 64 --layers 2 --channels 64 \
    --heads 4 --steps "$CSTEPS" --log-every "$CSTEPS" --scenario "$SCEN" \
    --scenario-name slow_wan --solver none --json-log "$OUT/$name.jsonl" "$@" >"$OUT/$name.txt" 2>&1
}

for sched in gpipe 1f1b; do
  pipe_run "$sched-ga" "$sched" --solver ga
  for seed in 1 2; do pipe_run "$sched-random$seed" "$sched" --assignment "$OUT/random-$seed.json"; done
done
dp_run none
dp_run fp16 --grad-codec fp16
dp_run int8 --grad-codec int8
dp_run diloco10 --diloco 10

python3 - "$OUT" "$WARMUP" <<'EOF'
import json, statistics, sys
out, warm = sys.argv[1], int(sys.argv[2])
def load(name):
    steps, done = [], None
    for line in open(f"{out}/{name}.jsonl"):
        j = json.loads(line)
        if j.get("event") == "done": done = j
        elif "step" in j: steps.append(j)
    med = statistics.median(s["step_s"] for s in steps if s["step"] > warm)
    return med, done, steps
print("### Sim vs real (four_regions, 4 stages x 2 replicas, ga placement, time scale 1)\n")
print("| schedule | measured (median) | netsim | error | pipeline | tied | reduce | norm |")
print("|---|---|---|---|---|---|---|---|")
res = {}
for sched in ("gpipe", "1f1b"):
    for solver in ("ga", "random1", "random2"):
        res[sched, solver] = load(f"{sched}-{solver}")
    med, d, _ = res[sched, "ga"]
    p = d["predicted_iteration_s"]
    print(f"| {sched} | {med:.4f} s | {p:.4f} s | {100 * (med / p - 1):+.1f}% | "
          f"{d['pipeline_s']:.4f} | {d['tied_s']:.4f} | {d['reduce_s']:.4f} | {d['norm_s']:.4f} |")
print("\n### Assignment matters (same scenario: ga vs random placements)\n")
print("| schedule | placement | measured | netsim | error | measured speed-up of ga "
      "| predicted speed-up of ga |")
print("|---|---|---|---|---|---|---|")
for sched in ("gpipe", "1f1b"):
    mg, dg, _ = res[sched, "ga"]
    pg = dg["predicted_iteration_s"]
    for solver in ("ga", "random1", "random2"):
        m, d, _ = res[sched, solver]
        p = d["predicted_iteration_s"]
        print(f"| {sched} | {solver} | {m:.4f} s | {p:.4f} s | {100 * (m / p - 1):+.1f}% | "
              f"{m / mg:.2f}x | {p / pg:.2f}x |")
print("\n### Compression pays on a slow link (slow_wan: 1 stage x 4 replicas, 10 Mbit/s between "
      "the 2 regions)\n")
print("| gradient sync | tokens/s (median step) | vs none | data-parallel MB | final loss |")
print("|---|---|---|---|---|")
base = None
for name, label in (("none", "none (fp32 ring)"), ("fp16", "fp16"), ("int8", "int8"),
                    ("diloco10", "DiLoCo H=10")):
    med, d, steps = load(name)
    tok = 16 * 64 / med
    # DiLoCo's outer steps come every 10 steps: its throughput is the mean over the run
    if name == "diloco10":
        tail = [s["step_s"] for s in steps if s["step"] > warm]
        tok = 16 * 64 * len(tail) / sum(tail)
    base = base or tok
    print(f"| {label} | {tok:.0f} | {tok / base:.2f}x | {d['bytes_data'] / 1e6:.1f} | "
          f"{d['loss']:.4f} |")
EOF
echo
echo "wall time: $(($(date +%s) - start)) s; logs in $OUT"
