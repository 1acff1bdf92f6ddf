#!/usr/bin/env bash
# test_coord_flood — one client that opens 1100 CURVE connections (fresh keys, each sending a
# registration with a bad token) from 127.0.0.2 and holds them for 15 s, against a coordinator
# under ulimit -n 1024: within 10 s the coordinator has refused the connections over its caps
# and holds a bounded number of descriptors, and, while the flood still holds, /status answers
# and a peer with a valid token from 127.0.0.1 joins. Once the flood is over its connections
# no longer count: 60 new ones from the same address are let through to be refused by token.
#   tests/coordinator/test_coord_flood.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
ulimit -Sn 1024 || fail "cannot set the open-file limit"
STATE=$WORK/state
mkdir -p "$STATE"
tok=$("$BIN/coordinator" token new --state-dir "$STATE" --uses 0) || fail "token new"
start_coord coord.log --stages 2 --replicas 4 --heartbeat 0.2
port=$(cat "$STATE/http_port")
"$BIN/tests/coord_flood" "$EP" "$STATE/coordinator.pub" 127.0.0.2 1100 15 register \
  >"$WORK/flood.log" 2>&1 &
FLOOD=$!
PIDS+=("$FLOOD")
wait_for "$WORK/flood.log" "connections open" 20 || fail "the flood client did not start"
end=$((SECONDS + 10))
while fds=$(ls "/proc/$CPID/fd" | wc -l) && [ "$fds" -ge 200 ] && [ $SECONDS -lt $end ]; do
  sleep 0.2
done
echo "coordinator descriptors during the flood: $fds, $((SECONDS - end + 10)) s after it began"
[ "$fds" -lt 200 ] || fail "the coordinator still holds $fds descriptors after 10 s of the flood"
python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/status', timeout=3).read()" ||
  fail "/status does not answer during the flood"
start_peer 1 --token "$tok" --register-timeout 10
wait_for "$WORK/peer1.log" "admitted" 10 || fail "a peer with a valid token was not admitted"
grep -q "refused a connection from 127.0.0.2: too many connections" "$WORK/coord.log" ||
  fail "the coordinator does not say it refused connections"
kill -0 "$FLOOD" 2>/dev/null || fail "the flood ended before the checks: they prove nothing"
lines=$(wc -l <"$WORK/coord.log")
[ "$lines" -lt 100 ] || fail "the flood wrote $lines lines to the coordinator's log"
refused() {
  python3 -c "import json, urllib.request; print(json.load(urllib.request.urlopen('http://127.0.0.1:$port/status', timeout=3))['refused'])"
}
wait_exit "$FLOOD" 20 || fail "the flood client did not end"
sleep 1
before=$(refused)
"$BIN/tests/coord_flood" "$EP" "$STATE/coordinator.pub" 127.0.0.2 60 2 register >"$WORK/flood2.log" 2>&1 ||
  fail "the second flood client failed"
after=$(refused)
[ $((after - before)) -ge 60 ] ||
  fail "after the flood, only $((after - before)) of 60 new registrations from its address got through"
echo "test_coord_flood: all checks passed"
