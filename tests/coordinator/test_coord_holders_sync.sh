#!/usr/bin/env bash
# test_coord_holders_sync — a run that keeps state across steps (int8 gradients with error
# feedback every step; a DiLoCo run would recover live instead, test_coord_live) with its
# checkpoints on the peers and no shared path. Every replica's
# .state is a shard of its own, copied like the stage checkpoints. A 2 x 2 run on five peers
# loses the member at world rank 3 (stage 1, replica 1) once every shard of a committed step has
# its two copies: every member resumes from the newest held step, the seats that lack a shard
# (the standby's, and any member moved to another seat) fetch it, and the run ends at an
# undisturbed run's final loss bit for bit.
# Placement takes lab8.json's links as they are (--links scenario): no probe epoch first.
#   tests/coordinator/test_coord_holders_sync.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
ARGS=(--open --stages 2 --replicas 2 --steps 160 --checkpoint-every 10 --heartbeat 0.25
      --liveness 4 --peer-timeout 5 --exit-when-done --checkpoint-storage peers
      --grad-codec int8 --grad-ef on --scenario "$(dirname "$0")/lab8.json" --time-scale 3
      --links scenario)

STATE=$WORK/u PEER_LOG=u-peer
start_coord u.log "${ARGS[@]}"
for i in 1 2 3 4; do start_peer "$i" --region lab; done
wait_exit "$CPID" 60 || fail "the undisturbed run did not finish"
LU=$(json_field u.log loss)
echo "undisturbed: final loss $LU"

STATE=$WORK/k PEER_LOG=k-peer
start_coord k.log "${ARGS[@]}"
for i in 11 12 13 14 15; do start_peer "$i" --region lab; done
wait_committed "$WORK/k.log" 40 40 || fail "no checkpoint at step 40"
# the newest step whose four shards (two stages x two replicas) all have two live holders
doubled() {
  curl -sf "http://127.0.0.1:$(cat "$STATE/http_port")/status" | python3 -c "
import json, sys
by = {}
for e in json.load(sys.stdin).get('shards', []):
    by.setdefault(e['step'], []).append(len(e['holders']))
print(next((st for st in sorted(by, reverse=True) if len(by[st]) == 4 and min(by[st]) >= 2), ''))" 2>/dev/null
}
held=""
for _ in $(seq 100); do
  held=$(doubled) && [ -n "$held" ] && break
  sleep 0.05
done
[ -n "$held" ] || fail "no step has two copies of every shard"
victim=$(grep -oE "peers by world rank \[[0-9 ]+\]" "$WORK/k.log" | tail -1 | grep -oE "[0-9]+" | sed -n 4p)
pid=$(pid_of_peer "$victim") || fail "no process for peer $victim"
kill -9 "$pid"
wait_for "$WORK/k.log" "recovered: training resumed" 40 || fail "the run did not resume"
from=$(grep -oE "predicted cost .* from step [0-9]+" "$WORK/k.log" | tail -1 | grep -oE "[0-9]+$")
[ "$from" -ge "$held" ] || fail "resumed from $from, before step $held, whose shards had two copies"
grep -qE "copies step [0-9]+ stage [01] replica 1 " "$WORK/k.log" ||
  fail "no replica-1 .state shard was copied"
fetched=$(grep -hcE "fetched step $from stage" "$WORK"/k-peer*.log | paste -sd+ | bc)
[ "$fetched" -ge 1 ] || fail "no seat fetched a shard of step $from"
echo "killed peer $victim (world rank 3) with step $held held twice; resumed from step $from, $fetched shard(s) fetched"
wait_exit "$CPID" 60 || fail "the run did not finish after the kill"
LK=$(json_field k.log loss)
[ "$LK" = "$LU" ] || fail "final loss $LK differs from the undisturbed run's $LU"
echo "final loss $LK (bit for bit)"
echo "test_coord_holders_sync: all checks passed"
