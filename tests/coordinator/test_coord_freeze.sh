#!/usr/bin/env bash
# test_coord_freeze — a frozen member (SIGSTOP) is found from measured deadlines, not the fixed
# ones. 2 stages x 2 replicas plus a standby on loopback in lab8.json's emulated lab slowed 25
# times (50 ms one way), so that a step takes about 0.35 s on any machine; --peer-timeout 20 (the
# fixed receive deadline, now only the cap) and --liveness 8 x --heartbeat 0.25. Once the peers
# have measured their steps, /status shows each member's derived receive deadline (3 x the 90th
# percentile of its step times, at least 1 s, and never below the one derived from its links)
# and the test prints both; then one member is stopped
# with SIGSTOP. A neighbour's receive must give up within 5 x the stopped member's step time, and
# the coordinator must drop it, by its measured heartbeat gaps, before the fixed 2 s window. Then
# the frozen process is killed and the run finishes from the survivors' state, and no other member
# is sidelined: the neighbours that timed out waiting on the frozen one's neighbours are a chain
# of waits the lost member explains, not a fault of their own.
#   tests/coordinator/test_coord_freeze.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
STEPS=60
STATE=$WORK/state PEER_LOG=peer
start_coord coord.log --open --stages 2 --replicas 2 --steps $STEPS --checkpoint-every 1000 \
  --heartbeat 0.25 --liveness 8 --peer-timeout 20 --exit-when-done \
  --scenario "$(dirname "$0")/lab8.json" --links scenario --time-scale 25
for i in 1 2 3 4 5; do start_peer "$i" --region lab; done
status() { curl -sf "http://127.0.0.1:$(cat "$STATE/http_port")/status" 2>/dev/null; }

# wait until every member has a derived receive deadline below the cap
end=$((SECONDS + 40)) ready=""
while [ $SECONDS -lt $end ]; do
  ready=$(status | python3 -c "
import json, sys
s = json.load(sys.stdin)
m = [p for p in s['peers'] if p['stage'] >= 0 and 'recv_s' in p.get('deadline', {})]
if len(m) == 4 and all(p['deadline']['recv_s'] < 20 for p in m) and s['step'] >= 12:
    v = min(m, key=lambda p: p['id'])
    print(v['id'], v['deadline']['recv_s'], v['deadline']['step_q90_s'], s['step'],
          max(p['deadline']['recv_s'] for p in m), v['deadline']['heartbeat_s'],
          v['deadline']['links']['recv_s'], v['deadline']['links']['state_s'])" 2>/dev/null)
  [ -n "$ready" ] && break
  sleep 0.2
done
[ -n "$ready" ] || fail "the members never reported a derived receive deadline"
read -r victim recv_s step_s at_step recv_max hb_s link_s state_s <<<"$ready"
vpid=$(pid_of_peer "$victim") || fail "no pid for peer $victim"
echo "derived: peer $victim's steps take ${step_s} s (90th percentile); receive deadlines up to ${recv_max} s (cap 20 s); heartbeat deadline ${hb_s} s (cap 2 s); from its links: receive ${link_s} s, state ${state_s} s; at step $at_step"
# the emulated lab's links are fast: what the links need must not hold a frozen peer longer
python3 -c "import sys; sys.exit(0 if $link_s < 5 * $step_s else 1)" ||
  fail "the link-derived receive deadline $link_s s is not below 5 x the step time $step_s s"
before=$(cat "$WORK"/peer*.log | grep -c "no message from rank")
t0=$(date +%s.%N)
kill -STOP "$vpid"
detected=""
end=$((SECONDS + 15))
while [ $SECONDS -lt $end ]; do
  if [ "$(cat "$WORK"/peer*.log | grep -c "no message from rank")" -gt "$before" ]; then
    detected=$(python3 -c "print(round($(date +%s.%N) - $t0, 3))"); break
  fi
  sleep 0.01
done
[ -n "$detected" ] || fail "no neighbour gave up on the frozen peer $victim within 15 s"
grep -h "no message from rank" "$WORK"/peer*.log | head -1
echo "freeze: a neighbour gave up $detected s after SIGSTOP: $(python3 -c "print(round($detected / $step_s, 1))") x the frozen peer's step time"
wait_for "$WORK/coord.log" "peer $victim sent no heartbeat" 10 || fail "the coordinator never dropped the frozen peer"
grep -h "peer $victim sent no heartbeat" "$WORK/coord.log" | head -1
python3 -c "import sys; sys.exit(0 if $detected <= 5 * $step_s else 1)" ||
  fail "the frozen peer was found after $detected s, more than 5 x its step time $step_s s"
lost=$(grep -oE "peer $victim sent no heartbeat for [0-9.]+ s" "$WORK/coord.log" | head -1 | grep -oE "[0-9.]+ s$" | grep -oE "[0-9.]+")
python3 -c "import sys; sys.exit(0 if $lost < 2.0 else 1)" ||
  fail "the coordinator waited $lost s, not less than the fixed 2 s window"
kill -9 "$vpid"
wait_for "$WORK/coord.log" "the run finished $STEPS steps" 60 || fail "the run did not finish after the freeze"
if grep -q "sidelined: " "$WORK/coord.log"; then
  fail "a member was sidelined for the frozen one's timeouts: $(grep -m1 "sidelined: " "$WORK/coord.log")"
fi
echo "RESULT detect_s=$detected step_s=$step_s recv_deadline_s=$recv_s heartbeat_lost_s=$lost"
echo "test_coord_freeze: all checks passed"
