#!/usr/bin/env bash
# test_gpu_peerd — a coordinator and two `peerd --device cuda:0`, each its own process on one GPU,
# train a run to its end, and every step's loss is within the gpu tests' tolerance of the same
# run with `peerd --device cpu`. Exits 77 (skipped) when peerd sees no CUDA device or was built
# without CUDA. Two runs of 20 steps, each once per device:
#   - 2 stages x 1 replica: activations and gradients cross the pipeline cut between the GPUs'
#     processes (fp32: 1e-3 relative, test_gpu_launch's tolerance for 20 steps, argued there);
#   - 1 stage x 2 replicas with --grad-codec topk: each peer encodes its gradient on the GPU
#     (its log says so) and only the payload leaves the device (1e-2: a rounding difference
#     between the back ends can swap which of two near-equal magnitudes is kept, and the later
#     steps carry it on).
# Both GPU runs must say they trained on cuda:0 and their loss must fall.
#   tests/gpu/test_gpu_peerd.sh BIN_DIR      (in a gpu-pack, harness.sh lies beside it)
BIN=$1
here=$(dirname "$0")
if [ -f "$here/harness.sh" ]; then . "$here/harness.sh"; else . "$here/../coordinator/harness.sh"; fi
STEPS=20

# Skip before any run when peerd cannot use cuda:0 (it checks the device before it connects).
probe=$(timeout 60 "$BIN/peerd" --device cuda:0 --coordinator tcp://127.0.0.1:9 \
  --coordinator-key "$WORK/none.pub" --data-dir "$WORK/probe" 2>&1)
if echo "$probe" | grep -qE "no CUDA device|built without CUDA"; then
  echo "test_gpu_peerd: skipped: $(echo "$probe" | grep -m1 -E "no CUDA device|built without CUDA")"
  exit 77
fi

# run NAME DEVICE ARGS...: coordinator + 2 peerd on DEVICE to the end of the run; per-peer
# JSON logs $WORK/NAME-peerN.jsonl.
run() {
  local name=$1 device=$2
  shift 2
  STATE=$WORK/$name PEER_LOG=$name-peer
  start_coord "$name.log" --open --steps $STEPS --checkpoint-every 10 --heartbeat 0.25 \
    --exit-when-done --seq 32 --channels 64 --heads 4 "$@"
  for n in 1 2; do
    start_peer "$n" --device "$device" --json-log "$WORK/$name-peer$n.jsonl"
  done
  wait_exit "$CPID" 240 || fail "$name: the run did not finish"
  grep -q "the run finished $STEPS steps" "$WORK/$name.log" || fail "$name: the run did not train $STEPS steps"
  for n in 1 2; do wait_exit "${PEER_PID[$n]}" 30; done
  unset STATE
}

# compare CPU GPU TOL: every step's loss (the largest a peer logged for it: the last stage's)
compare() {
  python3 - "$WORK" "$1" "$2" "$3" $STEPS <<'PY'
import glob, json, sys
work, cpu, gpu, tol, steps = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
def losses(name):
    per = {}
    for f in glob.glob(f"{work}/{name}-peer*.jsonl"):
        for line in open(f):
            r = json.loads(line)
            if "step" in r and isinstance(r.get("loss"), (int, float)):
                per[r["step"]] = max(per.get(r["step"], float("-inf")), r["loss"])
    return [per.get(s) for s in range(1, steps + 1)]
c, g = losses(cpu), losses(gpu)
if None in c or None in g:
    sys.exit(f"missing steps: CPU {c}, GPU {g}")
worst = max(abs(a - b) / abs(a) for a, b in zip(c, g))
print(f"{gpu}: loss {g[0]:.4f} -> {g[-1]:.4f}, CPU {c[0]:.4f} -> {c[-1]:.4f}, "
      f"worst rel diff {worst:.2e} (tol {tol:g})")
bad = [(s + 1, a, b) for s, (a, b) in enumerate(zip(c, g)) if abs(a - b) / abs(a) > tol]
if bad:
    sys.exit(f"steps beyond the tolerance (step, CPU, GPU): {bad}")
if not g[-1] < g[0] - 0.1:
    sys.exit(f"the GPU run does not train: {g[0]:.4f} -> {g[-1]:.4f}")
PY
}

trained_on_gpu() { # NAME: both peers measured cuda:0 and trained there
  for n in 1 2; do
    grep -q "device cuda:0" "$WORK/$1-peer$n.log" || fail "$1: peer $n did not run on cuda:0"
  done
}

run pipe-cpu cpu --stages 2 --replicas 1
run pipe-gpu cuda:0 --stages 2 --replicas 1
trained_on_gpu pipe-gpu
compare pipe-cpu pipe-gpu 1e-3 || fail "2 x 1: the GPU peers' losses are not the CPU peers'"

run dp-cpu cpu --stages 1 --replicas 2 --grad-codec topk --checkpoint-storage peers
run dp-gpu cuda:0 --stages 1 --replicas 2 --grad-codec topk --checkpoint-storage peers
trained_on_gpu dp-gpu
for n in 1 2; do
  grep -q "encodes its topk gradient on the device" "$WORK/dp-gpu-peer$n.log" ||
    fail "1 x 2 topk: peer $n did not encode its gradient on the device"
done
compare dp-cpu dp-gpu 1e-2 || fail "1 x 2 topk: the GPU peers' losses are not the CPU peers'"
echo "test_gpu_peerd: all checks passed"
