#!/usr/bin/env bash
# test_coord_restart — the run survives its coordinator and its whole cluster:
#  A. the coordinator is killed with kill -9 mid-run and restarted on its state directory: the
#     peers reconnect by themselves, the run goes on in the same epoch and finishes, and the
#     restarted coordinator's /status still has the loss curve it served before the kill;
#  B. every process is killed with kill -9 and all are started again: the run resumes from the
#     latest complete checkpoint and ends at run A's final loss (resume is bit-exact);
#  C. the same, but one stage's shard of that checkpoint is corrupted first: the resume is
#     refused with a message naming the SHA-256 mismatch, and the coordinator stops the run
#     (exit 1) instead of training from damaged weights.
# The peers sit in an emulated lab with 2 ms links (lab8.json), so the kills land mid-run however
# fast the machine computes.
# Placement takes lab8.json's links as they are (--links scenario): no probe epoch first.
#   tests/coordinator/test_coord_restart.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
ARGS=(--open --stages 2 --replicas 2 --steps 150 --checkpoint-every 10 --heartbeat 0.25
      --liveness 4 --peer-timeout 5 --exit-when-done --scenario "$(dirname "$0")/lab8.json"
      --links scenario)
peers() { for i in 1 2 3 4; do start_peer "$i" --region lab; done; }
kill_coord() {
  kill -9 "$CPID" 2>/dev/null || fail "the coordinator had exited before the kill (the run ended too early)"
}
kill_all() {
  kill_coord
  for i in 1 2 3 4; do kill -9 "${PEER_PID[$i]}" 2>/dev/null; done
  wait 2>/dev/null
}

# A
STATE=$WORK/a PEER_LOG=a-peer
start_coord a.log "${ARGS[@]}"
peers
wait_committed "$WORK/a.log" 30 60 || fail "A: no checkpoint"
history() { curl -sf "http://127.0.0.1:$(cat "$WORK/a/http_port")/status" |
            python3 -c "import json,sys; print(json.dumps(json.load(sys.stdin)['loss_history']))"; }
# the history grows a point per loss report, fewer per step on a faster machine: wait for three
for _ in $(seq 300); do
  before=$(history) && [ "$(echo "$before" | python3 -c "import json,sys; print(len(json.load(sys.stdin)))")" -ge 3 ] && break
  sleep 0.1
done
[ -n "$before" ] || fail "A: /status did not answer before the kill"
kill_coord
sleep 1
start_coord a.log "${ARGS[@]}"
for _ in $(seq 50); do after=$(history) && break; sleep 0.1; done
python3 -c "
import json, sys
b, a = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f'A: loss history: {len(b)} points up to step {b[-1][0]} before the kill, {len(a)} after the restart')
sys.exit(0 if len(b) >= 3 and a[:len(b)] == b else 1)" "$before" "${after:-[]}" ||
  fail "A: the restarted coordinator lost the loss history (before: $before; after: ${after:-none})"
wait_for "$WORK/a.log" "the run finished 150 steps" 60 || fail "A: the run did not finish after the restart"
wait_exit "$CPID" 60
grep -q "restart: state loaded: .*(running)" "$WORK/a.log" || fail "A: the restart did not find the running epoch"
n_train=$(grep -c "x 2 replicas, peers by world rank" "$WORK/a.log")
[ "$n_train" = 1 ] || fail "A: $n_train train epochs; the restart should not have formed a new one"
LA=$(json_field a.log loss)
echo "A: coordinator restarted mid-run; same epoch finished, final loss $LA"

# B
STATE=$WORK/b PEER_LOG=b-peer
start_coord b.log "${ARGS[@]}"
peers
wait_committed "$WORK/b.log" 30 60 || fail "B: no checkpoint"
committed=$(grep -oE "checkpoint: step [0-9]+ complete" "$WORK/b.log" | tail -1 | grep -oE "[0-9]+")
kill_all
start_coord b.log "${ARGS[@]}"
peers
wait_for "$WORK/b.log" "the run finished 150 steps" 60 || fail "B: the run did not finish after a whole restart"
wait_exit "$CPID" 60
from=$(grep -oE "predicted cost .* from step [0-9]+" "$WORK/b.log" | tail -1 | grep -oE "[0-9]+$")
[ "$from" -ge "$committed" ] || fail "B: resumed from $from, below the committed step $committed"
LB=$(json_field b.log loss)
python3 -c "import sys; sys.exit(0 if abs($LB - $LA) <= 1e-4 * abs($LA) else 1)" ||
  fail "B: final loss $LB differs from run A's $LA"
echo "B: whole cluster restarted; resumed from step $from (committed $committed), final loss $LB"

# C
STATE=$WORK/c PEER_LOG=c-peer
start_coord c.log "${ARGS[@]}"
peers
wait_committed "$WORK/c.log" 30 60 || fail "C: no checkpoint"
kill_all
step=$(python3 -c "import json; print(json.load(open('$WORK/c/checkpoints/manifest.json'))['step'])")
shard=$(printf "%s/c/checkpoints/stage-1/step-%08d/model.safetensors" "$WORK" "$step")
[ -f "$shard" ] || fail "C: no shard $shard"
printf 'XXXXXXXX' | dd of="$shard" bs=1 seek=200 conv=notrunc 2>/dev/null
start_coord c.log "${ARGS[@]}"
peers
wait_exit "$CPID" 60
rc=$?
[ "$rc" = 1 ] || fail "C: the coordinator exited $rc with a corrupt checkpoint; expected 1"
grep -q "stopped: .*SHA-256" "$WORK/c.log" || fail "C: the stop does not name the SHA-256 mismatch"
grep -h "SHA-256" "$WORK/c.log" | head -1 | cut -c1-300
echo "test_coord_restart: all checks passed"
