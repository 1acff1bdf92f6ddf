#!/usr/bin/env bash
# test_coord_holders_port — peerd opens its shard server's port only for a run that keeps its
# checkpoints on the peers. One peerd joins a coordinator with a shared checkpoint directory and
# another joins one with --checkpoint-storage peers (2 x 4 runs, so neither forms an epoch and
# no data link binds). The second listens on exactly one TCP port more than the first (the shard
# server), its coordinator runs a shard relay that /status shows, and the first's does not. A
# third coordinator, given a relay port range, binds its shard relay inside that range.
#   tests/coordinator/test_coord_holders_port.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
need_tool ss iproute2
listening() { ss -Hltnp | grep -c "pid=$1,"; }
status() { curl -sf "http://127.0.0.1:$(cat "$STATE/http_port")/status"; }
relay_of() { status | python3 -c "import json,sys; print(json.load(sys.stdin).get('shard_relay', {}).get('endpoint', 'none'))"; }

STATE=$WORK/shared PEER_LOG=shared-peer
start_coord shared.log --open --heartbeat 0.25 --checkpoint-dir "$WORK/ckpt"
start_peer 1
wait_for "$WORK/shared-peer1.log" "admitted" 20 || fail "the peer did not join the shared run"
sleep 1 # its first heartbeats: a report of its store would go out now
shared_ports=$(listening "${PEER_PID[1]}")
shared_relay=$(relay_of)
{ kill -9 "${PEER_PID[1]}" "$CPID"; wait "${PEER_PID[1]}" "$CPID"; } 2>/dev/null

STATE=$WORK/peers PEER_LOG=peers-peer
start_coord peers.log --open --heartbeat 0.25 --checkpoint-storage peers
start_peer 2
wait_for "$WORK/peers-peer2.log" "admitted" 20 || fail "the peer did not join the peers run"
sleep 1
peers_ports=$(listening "${PEER_PID[2]}")
peers_relay=$(relay_of)
echo "listening TCP ports: $shared_ports with a shared directory, $peers_ports with peers storage"
echo "shard relay: '$shared_relay' with a shared directory, '$peers_relay' with peers storage"
[ "$peers_ports" = $((shared_ports + 1)) ] ||
  fail "peers storage must open exactly one more port (the shard server): $shared_ports vs $peers_ports"
[ "$shared_relay" = none ] || fail "a shared-directory run runs no shard relay"
[[ "$peers_relay" == tcp://127.0.0.1:* ]] || fail "a peers-storage run runs a shard relay: '$peers_relay'"
{ kill -9 "${PEER_PID[2]}" "$CPID"; wait "${PEER_PID[2]}" "$CPID"; } 2>/dev/null

lo=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
hi=$((lo + 3))
STATE=$WORK/range
start_coord range.log --open --heartbeat 0.25 --checkpoint-storage peers \
  --relay-port-min "$lo" --relay-port-max "$hi"
sleep 1 # the status snapshot
range_relay=$(relay_of)
port=${range_relay##*:}
echo "shard relay with --relay-port-min $lo --relay-port-max $hi: '$range_relay'"
[[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -ge "$lo" ] && [ "$port" -le "$hi" ] ||
  fail "the shard relay must bind inside the operator's relay range $lo-$hi: '$range_relay'"
echo "test_coord_holders_port: all checks passed"
