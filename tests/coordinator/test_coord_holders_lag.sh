#!/usr/bin/env bash
# test_coord_holders_lag — copies that lag behind the commits lose no restorable step
# (docs/coordinator.md "Checkpoints on the peers", "The pinned step"). A 2 x 1 run on three
# peers, checkpoints on the peers (--checkpoint-copies 2, --keep 2, each peer its own
# --data-dir), every background copy delayed by 2 s (WT_TEST_PEERD_COPY_DELAY_S, a test-only
# knob), a checkpoint every 5 steps: the writers commit steps faster than the copies land, so
# the pinned step falls behind each writer's two newest steps. Stage 1's member — the writer of
# its shards — is killed with kill -9 once the pin is at least two checkpoints behind the
# committed step: its stage then survives only in copies older than what a writer that kept its
# two newest steps would still hold. The run must resume, from the pinned step or newer, and
# finish its steps.
#   tests/coordinator/test_coord_holders_lag.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
STATE=$WORK/state PEER_LOG=peer
export WT_TEST_PEERD_COPY_DELAY_S=2
start_coord coord.log --open --stages 2 --replicas 1 --steps 300 --checkpoint-every 5 --keep 2 \
  --heartbeat 0.25 --liveness 4 --peer-timeout 5 --exit-when-done --checkpoint-storage peers \
  --checkpoint-copies 2 --scenario "$(dirname "$0")/lab8.json" --time-scale 3
status() { curl -sf "http://127.0.0.1:$(cat "$STATE/http_port")/status"; }
for i in 1 2 3; do start_peer "$i" --region lab; done
wait_committed "$WORK/coord.log" 10 60 || fail "no checkpoint at or past step 10"
# "PINNED COMMITTED MEMBER": once the pin is two checkpoints or more behind the committed step,
# with the id of the peer training stage 1 now
got="" end=$((SECONDS + 30))
while [ $SECONDS -lt $end ]; do
  got=$(status | python3 -c "
import json, sys
s = json.load(sys.stdin)
m = next((p['id'] for p in s['peers'] if p['stage'] == 1 and p['state'] == 'training'), None)
if m is not None and s['pinned_step'] > 0 and s['committed_step'] - s['pinned_step'] >= 10:
    print(s['pinned_step'], s['committed_step'], m)" 2>/dev/null) && [ -n "$got" ] && break
  sleep 0.05
done
[ -n "$got" ] || fail "the pinned step never fell two checkpoints behind the committed one in 30 s"
read -r pinned committed victim <<<"$got"
pid=$(pid_of_peer "$victim") || fail "no process for peer $victim"
kill -9 "$pid"
echo "pinned step $pinned, committed step $committed; killed peer $victim (stage 1's member)"
wait_for "$WORK/coord.log" "recovered: training resumed" 40 ||
  fail "the run did not resume (the newest restorable step was lost?)"
from=$(grep -oE "predicted cost .* from step [0-9]+" "$WORK/coord.log" | tail -1 | grep -oE "[0-9]+$")
[ "$from" -ge "$pinned" ] || fail "resumed from $from, below the pinned step $pinned"
grep -hE "fetched step $from stage 1 replica 0 from" "$WORK"/peer*.log >/dev/null ||
  fail "no standby fetched step $from of stage 1 from a copy"
echo "resumed from step $from (pinned $pinned, committed $committed when killed: $(((committed - from) / 5)) checkpoints back)"
grep -oE "recovered: training resumed past step [0-9]+ [0-9.]+ s after the loss" "$WORK/coord.log" | head -1
grep -hoE "fetched step $from stage 1 replica 0 from .* in [0-9.]+ s" "$WORK"/peer*.log | head -1
wait_exit "$CPID" 90 || fail "the run did not finish after the kill"
grep -q "the run finished 300 steps" "$WORK/coord.log" || fail "the run did not complete its 300 steps"
echo "test_coord_holders_lag: all checks passed"
