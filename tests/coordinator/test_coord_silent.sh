#!/usr/bin/env bash
# test_coord_silent — a member that heartbeats but never binds its data socket (a coord_swarm
# peer: the fastest device, so the placement would want it) does not stall the run: the epoch
# it is given aborts at the bind deadline, it is marked sidelined (the reason in the log and in
# /status), and within the next two epochs the two real peers train without it, to the end,
# without seating it again (the fastest standby is what a promotion at a checkpoint would take).
#   tests/coordinator/test_coord_silent.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
start_coord coord.log --open --stages 2 --replicas 1 --steps 30 --heartbeat 0.2 --liveness 10 \
  --bind-timeout 4 --sideline 600 --peer-timeout 5 --exit-when-done
port=$(cat "$STATE/http_port")
"$BIN/tests/coord_swarm" --endpoint "$EP" --server-key "$STATE/coordinator.pub" --peers 1 \
  --flops 1e15 --duration 100 --json "$WORK/swarm.json" >"$WORK/swarm.log" 2>&1 &
PIDS+=("$!")
wait_for "$WORK/swarm.log" "1 admitted" 10 || fail "the silent peer was not admitted"
silent=$(grep -oE "joined: peer [0-9]+" "$WORK/coord.log" | head -1 | grep -oE "[0-9]+$")
start_peer 1
start_peer 2
wait_for "$WORK/coord.log" "sidelined: peer $silent " 30 ||
  fail "the silent peer $silent was not sidelined"
grep -q "sidelined: peer $silent .*did not bind its data socket within the 4 s deadline" \
  "$WORK/coord.log" || fail "the log does not say why"
stalled=$(grep -oE "abort: epoch [0-9]+" "$WORK/coord.log" | head -1 | grep -oE "[0-9]+$")
curl -sf "http://127.0.0.1:$port/status" | python3 -c "
import json, sys
s = json.load(sys.stdin)
p = [p for p in s['peers'] if p['id'] == '$silent'][0]
print('/status of the silent peer:', {k: p.get(k) for k in ('state', 'sidelined', 'sidelined_for_s')})
sys.exit(0 if 'did not bind' in p.get('sidelined', '') and p['sidelined_for_s'] > 0 and s['peers_sidelined'] == 1 else 1)" ||
  fail "/status does not show it sidelined"
wait_for "$WORK/coord.log" "epoch [0-9]+: train" 40 || fail "no train epoch after sidelining it"
train=$(grep -oE "epoch [0-9]+: train" "$WORK/coord.log" | head -1 | grep -oE "[0-9]+" | head -1)
members=$(grep -oE "epoch $train: train .*peers by world rank \[[0-9 ]+\]" "$WORK/coord.log" |
  grep -oE "\[[0-9 ]+\]")
echo "epoch $stalled stalled on peer $silent; train epoch $train with peers $members"
[ "$train" -le $((stalled + 2)) ] || fail "training began only at epoch $train (stalled: $stalled)"
case " ${members//[\[\]]/} " in *" $silent "*) fail "the silent peer is in the train epoch" ;; esac
wait_exit "$CPID" 90 || fail "the run did not complete without the silent peer"
grep -q "complete: the run finished 30 steps" "$WORK/coord.log" || fail "the run did not finish"
# nothing seats it again while it is sidelined: not a standby's promotion, not a re-placement
grep -E "epoch [0-9]+: train .*peers by world rank" "$WORK/coord.log" | grep -oE "\[[0-9 ]+\]" |
  tr -d '[]' | tr ' ' '\n' | grep -qx "$silent" && fail "the sidelined peer was seated in a train epoch"
[ "$(grep -c "sidelined: peer $silent " "$WORK/coord.log")" = 1 ] || fail "the peer was sidelined more than once"
echo "test_coord_silent: all checks passed"
