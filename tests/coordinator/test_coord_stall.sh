#!/usr/bin/env bash
# test_coord_stall — a member whose data links fail after it started: 6 simulated peers
# (coord_swarm --answer 1) on a 2 x 2 run; peer index 2 of the swarm (a member of the first
# placement: equal speeds seat the first four) keeps heartbeating "working" in every train
# epoch it is given but its data links go dead, so 2 s after START the other three members
# report the ZeroMQ transport's timeout naming its rank. The coordinator aborts the epoch,
# sidelines that member with the reason (the log and /status), and the next train epoch seats
# four others.
#   tests/coordinator/test_coord_stall.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
start_coord coord.log --open --stages 2 --replicas 2 --heartbeat 0.5 --peer-timeout 5
port=$(cat "$STATE/http_port")
"$BIN/tests/coord_swarm" --endpoint "$EP" --server-key "$STATE/coordinator.pub" --peers 6 \
  --rate 2 --duration 60 --answer 1 --regions 2 --stall 2 --stall-after 2 \
  --json "$WORK/swarm.json" >"$WORK/swarm.log" 2>&1 &
SWARM=$!
PIDS+=("$SWARM")
wait_for "$WORK/coord.log" "sidelined: .*its data links failed after it started epoch [0-9]* .train.: 3 members timed out" 50 ||
  fail "the stalled member was not sidelined with its reason"
stalled=$(grep -o "sidelined: peer [0-9]*" "$WORK/coord.log" | head -1 | grep -o "[0-9]*$")
first=$(grep -o "epoch [0-9]*: train 2 stages x 2 replicas, peers by world rank \[[0-9 ]*\]" "$WORK/coord.log" | head -1)
grep -qw "$stalled" <<<"${first##*[}" || fail "peer $stalled was not a member of the first train epoch: $first"
# the next train epoch, without it
for _ in $(seq 300); do
  [ "$(grep -c "train 2 stages x 2 replicas" "$WORK/coord.log")" -ge 2 ] && break
  sleep 0.1
done
second=$(grep -o "epoch [0-9]*: train 2 stages x 2 replicas, peers by world rank \[[0-9 ]*\]" "$WORK/coord.log" | sed -n 2p)
[ -n "$second" ] || fail "no train epoch after the stalled member was sidelined"
members=${second##*[}
! grep -qw "$stalled" <<<"${members%]}" || fail "the next train epoch seats the stalled peer $stalled again: $second"
curl -sf "http://127.0.0.1:$port/status" >"$WORK/status.json" || fail "/status did not answer"
python3 - "$WORK/status.json" "$stalled" <<'PY' || fail "/status does not show the sidelined member"
import json, sys
s, stalled = json.load(open(sys.argv[1])), sys.argv[2]
hit = [p for p in s["peers"] if str(p["id"]) == stalled]
print("/status peer", hit[0] if hit else None, "peers_sidelined", s.get("peers_sidelined"))
sys.exit(0 if hit and "data links failed" in hit[0].get("sidelined", "") and
         s.get("peers_sidelined") == 1 else 1)
PY
echo "test_coord_stall: all checks passed ($first; then $second)"
