#!/usr/bin/env bash
# test_coord_wrongkey — a peerd given the wrong --coordinator-key (another coordinator's public
# key) is told so within a few seconds, not after its 30 s register timeout, and exits 1; the
# coordinator logs the failed CURVE handshakes and counts them in /status and /metrics. A peerd
# pointed at an address where nothing listens still waits out its register timeout (nothing
# answered, so nothing is said about keys), and one with the right key is admitted without
# adding to the count.
#   tests/coordinator/test_coord_wrongkey.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
start_coord coord.log --open --heartbeat 0.2
port=$(cat "$STATE/http_port")
# another coordinator's key: its state directory gets one at start
"$BIN/coordinator" --state-dir "$WORK/other" --http-port -1 >"$WORK/other.log" 2>&1 &
OTHER=$!
PIDS+=("$OTHER")
for _ in $(seq 50); do [ -s "$WORK/other/coordinator.pub" ] && break; sleep 0.1; done
[ -s "$WORK/other/coordinator.pub" ] || fail "the second coordinator wrote no key"
kill "$OTHER"
count() { # count MEMBER: a number from /status
  curl -sf "http://127.0.0.1:$port/status" | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"
}
[ "$(count handshakes_failed)" = 0 ] || fail "handshakes failed before any peer connected"

t0=$SECONDS
"$BIN/peerd" --coordinator "$EP" --coordinator-key "$WORK/other/coordinator.pub" \
  --data-dir "$WORK/wrong" --register-timeout 30 >"$WORK/wrong.log" 2>&1 &
WRONG=$!
PIDS+=("$WRONG")
wait_exit "$WRONG" 15
rc=$?
took=$((SECONDS - t0))
[ "$rc" != 124 ] || fail "peerd with the wrong key still waits after 15 s"
[ "$rc" = 1 ] || fail "peerd with the wrong key exited $rc, not 1"
grep -q "is not that coordinator's public key" "$WORK/wrong.log" ||
  fail "peerd does not say its --coordinator-key is wrong"
echo "wrong key reported after $took s (register timeout 30 s)"
[ "$took" -le 10 ] || fail "the wrong key took $took s to be reported"

failed=$(count handshakes_failed)
[ "$failed" -ge 3 ] || fail "/status counts $failed failed handshakes, not >= 3"
metrics=$(curl -sf "http://127.0.0.1:$port/metrics") || fail "/metrics did not answer"
grep -qE "^wantrain_handshakes_failed ([3-9]|[1-9][0-9]+)$" <<<"$metrics" ||
  fail "/metrics does not count the failed handshakes"
grep -q "a CURVE handshake failed" "$WORK/coord.log" || fail "the coordinator does not log them"

# nothing listening: no word about keys, the register timeout
free_port=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])")
"$BIN/peerd" --coordinator "tcp://127.0.0.1:$free_port" --coordinator-key "$STATE/coordinator.pub" \
  --data-dir "$WORK/nobody" --register-timeout 3 >"$WORK/nobody.log" 2>&1
grep -q "no answer from the coordinator" "$WORK/nobody.log" ||
  fail "peerd with nothing to talk to does not wait out its register timeout"
grep -q "public key (use" "$WORK/nobody.log" && fail "peerd blames the key when nothing listens"

start_peer 1
wait_for "$WORK/peer1.log" "admitted" 20 || fail "a peer with the right key was not admitted"
[ "$(count handshakes_failed)" = "$failed" ] || fail "the right key counted as a failed handshake"
echo "test_coord_wrongkey: all checks passed"
