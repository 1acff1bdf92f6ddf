#!/usr/bin/env bash
# test_coord_holders_kill — a stage's holders killed one by one, checkpoints on the peers and no
# shared path (--checkpoint-storage peers --checkpoint-copies 2, each peer its own --data-dir).
# A 2 x 1 run on five peers (two members, three standbys). Twice: the member of stage 1 — the
# writer of its shards, so one of their two copies — is killed with kill -9. No live member
# holds stage 1 in memory then, so the standby that takes its seat must fetch the committed
# shard from the one copy left; the test checks that one copy was all that was left, that the
# run resumed from the committed step, and that the coordinator made the second copy again
# before the next kill. The run then ends at an undisturbed run's final loss bit for bit.
# Placement takes lab8.json's links as they are (--links scenario): no probe epoch first.
#   tests/coordinator/test_coord_holders_kill.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
ARGS=(--open --stages 2 --replicas 1 --steps 200 --checkpoint-every 10 --heartbeat 0.25
      --liveness 4 --peer-timeout 5 --exit-when-done --checkpoint-storage peers
      --checkpoint-copies 2 --scenario "$(dirname "$0")/lab8.json" --time-scale 3
      --links scenario)
status() { curl -sf "http://127.0.0.1:$(cat "$STATE/http_port")/status"; }
# doubled: "STEP MEMBER HOLDERS..." for the newest step whose stage-1 shard has two live holders
# or more, with the id of the peer training stage 1 now; nothing when there is none
doubled() {
  status | python3 -c "
import json, sys
s = json.load(sys.stdin)
m = next((p['id'] for p in s['peers'] if p['stage'] == 1 and p['state'] == 'training'), None)
for e in s.get('shards', []):
    if e['stage'] == 1 and e['replica'] == 0 and len(e['holders']) >= 2 and m is not None:
        print(e['step'], m, *e['holders'])
        break" 2>/dev/null
}

# the undisturbed run
STATE=$WORK/u PEER_LOG=u-peer
start_coord u.log "${ARGS[@]}"
for i in 1 2; do start_peer "$i" --region lab; done
wait_exit "$CPID" 90 || fail "the undisturbed run did not finish"
LU=$(json_field u.log loss)
echo "undisturbed: final loss $LU"

STATE=$WORK/k PEER_LOG=k-peer
start_coord k.log "${ARGS[@]}"
for i in 11 12 13 14 15; do start_peer "$i" --region lab; done
floor=20
for round in 1 2; do
  wait_committed "$WORK/k.log" "$floor" 40 || fail "round $round: no checkpoint at or past step $floor"
  # the newest step whose stage-1 shard has both copies; then kill stage 1's member, a holder
  got=""
  for _ in $(seq 100); do
    got=$(doubled) && [ -n "$got" ] && break
    sleep 0.05
  done
  [ -n "$got" ] || fail "round $round: no step of stage 1 has two live holders"
  read -r step victim h <<<"$got"
  [[ " $h " == *" $victim "* ]] || fail "round $round: stage 1's member $victim holds no copy of step $step ($h)"
  pid=$(pid_of_peer "$victim") || fail "round $round: no process for peer $victim"
  kill -9 "$pid"
  echo "round $round: step $step stage 1 held by peers [$h]; killed peer $victim (stage 1's member)"
  for _ in $(seq 400); do
    [ "$(grep -c "recovered: training resumed" "$WORK/k.log")" -ge "$round" ] && break
    sleep 0.1
  done
  [ "$(grep -c "recovered: training resumed" "$WORK/k.log")" -ge "$round" ] ||
    fail "round $round: the run did not resume"
  # the recovery epoch's start and the copies left when it formed
  from=$(grep -oE "predicted cost .* from step [0-9]+" "$WORK/k.log" | tail -1 | grep -oE "[0-9]+$")
  [ "$from" -ge "$step" ] || fail "round $round: resumed from $from, below the committed step $step"
  grep -hE "fetched step $from stage 1 replica 0 from" "$WORK"/k-peer*.log >/dev/null ||
    fail "round $round: no standby fetched step $from of stage 1 from the copy left"
  echo "round $round: resumed from step $from; stage 1's seat fetched it from the one copy left"
  floor=$((from + 20))
done
wait_exit "$CPID" 60 || fail "the run did not finish after the kills"
LK=$(json_field k.log loss)
[ "$LK" = "$LU" ] || fail "final loss $LK differs from the undisturbed run's $LU"
echo "after two kills: final loss $LK (bit for bit)"
echo "test_coord_holders_kill: all checks passed"
