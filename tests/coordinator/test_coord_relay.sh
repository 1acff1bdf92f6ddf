#!/usr/bin/env bash
# test_coord_relay — peers that accept no inbound connection train through outboxes and the
# coordinator's relay, on loopback (tests/netns/test_netns_nat.sh does it behind real NAT). A
# 2 x 2 run with four reachable peers, then the same run with three of them started with
# --unreachable: the coordinator marks them so in /status without testing, the epoch gets relay
# inboxes for the three, the relay forwards their pairs' traffic, and the run ends at exactly
# the first run's loss (--solver none: the same seats and rings, so the same sums). Then once
# more with --relay peer: the reachable peer hosts the relay, to the same loss.
#   tests/coordinator/test_coord_relay.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
ARGS=(--open --stages 2 --replicas 2 --steps 30 --solver none --heartbeat 0.25 --exit-when-done)

run() { # run NAME FLAGS1 FLAGS2 FLAGS3 FLAGS4: a coordinator and four peers, each with its flags
  local name=$1; shift
  STATE=$WORK/$name PEER_LOG=$name-peer
  start_coord "$name.log" "${ARGS[@]}"
  local i=0
  for flags in "$@"; do
    i=$((i + 1))
    # shellcheck disable=SC2086 # FLAGS is a word list
    start_peer "$i" $flags
  done
}

run direct "" "" "" ""
wait_exit "$CPID" 90 || fail "the direct run did not finish"
L0=$(json_field direct.log loss)
grep -q "relay inboxes" "$WORK/direct.log" && fail "the direct run made a relay"

run relayed "" --unreachable --unreachable --unreachable
end=$((SECONDS + 20)); reach=""
while [ $SECONDS -lt $end ]; do
  reach=$(curl -sf "http://127.0.0.1:$(cat "$WORK/relayed/http_port" 2>/dev/null)/status" 2>/dev/null |
    python3 -c "import json,sys; print(' '.join(sorted(p['reachable'] for p in json.load(sys.stdin)['peers'])))" 2>/dev/null)
  [ "$reach" = "no no no yes" ] && break
  sleep 0.2
done
echo "reachable per peer: $reach"
[ "$reach" = "no no no yes" ] || fail "want three unreachable peers and one reachable"
wait_exit "$CPID" 90 || fail "the relayed run did not finish"
grep -q "relay inboxes for 3 unreachable members" "$WORK/relayed.log" ||
  fail "the relayed run's epoch had no relay inboxes for its three unreachable members"
fwd=$(grep -oE "relays forwarded [0-9]+ bytes" "$WORK/relayed.log" | tail -1 | grep -oE "[0-9]+")
echo "the relay forwarded ${fwd:-0} bytes"
[ "${fwd:-0}" -gt 10000 ] || fail "the relay forwarded too little to carry the unreachable pairs"
L=$(json_field relayed.log loss)
echo "final loss: relayed $L, direct $L0"
[ "$L" = "$L0" ] || fail "the relayed run's loss $L differs from the direct run's $L0"

ARGS+=(--relay peer)
run peer "" --unreachable --unreachable --unreachable
wait_exit "$CPID" 90 || fail "the run with a peer relay did not finish"
grep -q "hosts relay inboxes for 3 unreachable members" "$WORK/peer.log" ||
  fail "--relay peer: no member hosted the relay"
grep -q "hosting the relay of epoch" "$WORK/peer-peer1.log" ||
  fail "--relay peer: the reachable peer did not host the relay"
pfwd=$(grep -oE "relay of epoch [0-9]+ forwarded [0-9]+ messages, [0-9]+ bytes" "$WORK/peer-peer1.log" |
  grep -oE "[0-9]+ bytes" | grep -oE "[0-9]+" | sort -n | tail -1)
echo "the peer's relay forwarded ${pfwd:-0} bytes"
[ "${pfwd:-0}" -gt 10000 ] || fail "--relay peer: the peer's relay forwarded too little"
grep -qE "epoch [0-9]+: relay inboxes for" "$WORK/peer.log" && fail "--relay peer: the coordinator relayed too"
L2=$(json_field peer.log loss)
echo "final loss: peer relay $L2, direct $L0"
[ "$L2" = "$L0" ] || fail "the peer-relayed run's loss $L2 differs from the direct run's $L0"
echo "test_coord_relay: all checks passed"
