#!/usr/bin/env bash
# test_netns_slowlink — a slow but live link is not taken for a dead peer. Two region namespaces
# on a bridge (prefix wt22d, 10.222.0.0/24): r0 unshaped, r1's uplink shaped to 1 MB/s (tc tbf
# 8 Mbit/s); two peerd in each, the coordinator in the hub namespace. A 2 x 2 run all-reduces
# each stage's gradients every step, so every step waits on the 1 MB/s uplink for hundreds of
# kilobytes. The receive deadlines are derived from the measured (slow) steps, so the run must
# finish in its first train epoch: no receive gives up, no epoch fails. The test prints each
# member's step time and derived deadline from /status. The coordinator derives each member's
# link deadlines from the probed links into it: a stage's state (the hand-over or a shard fetch)
# sent over the shaped uplink must get a longer deadline than one over the unshaped links, so
# every member in r0 (which receives from r1's peers) must have a longer state deadline than every
# member in r1 (whose senders are in r0 or beside it). NETNS_PREFIX overrides the namespace
# names' prefix.
# Skips (77) where namespaces cannot be made (not root, no ip/tc, no netns).
#   tests/netns/test_netns_slowlink.sh BIN_DIR
set -uo pipefail
BIN=$1
P=${NETNS_PREFIX:-wt22d}
NET=10.222.0
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "not root: network namespaces need root (ip netns)"
command -v ip >/dev/null && command -v tc >/dev/null || skip "ip or tc not found (Debian: iproute2)"
command -v curl >/dev/null || skip "curl not found"
ip netns add ${P}chk 2>/dev/null || skip "cannot make a network namespace"
ip netns exec ${P}chk ip link add x type bridge 2>/dev/null || { ip netns del ${P}chk; skip "cannot make a bridge in a namespace"; }
ip netns del ${P}chk
WORK=$(mktemp -d "${TMPDIR:-/tmp}/wt-slowlink-XXXXXX")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  for ns in ${P}hub ${P}r0 ${P}r1; do ip netns del $ns 2>/dev/null; done
  [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$WORK"/*.log; do echo "--- $f"; grep -v "^\[info\]" "$f" | tail -8; done
  exit 1
}
for ns in ${P}hub ${P}r0 ${P}r1; do ip netns del $ns 2>/dev/null; done
ip netns add ${P}hub || fail "ip netns add"
H=(ip netns exec ${P}hub)
"${H[@]}" ip link set lo up
"${H[@]}" ip link add ${P}br type bridge
"${H[@]}" ip addr add $NET.254/24 dev ${P}br
"${H[@]}" ip link set ${P}br up
for k in 0 1; do
  ip netns add ${P}r$k
  "${H[@]}" ip link add ${P}h$k type veth peer name ${P}u$k netns ${P}r$k
  "${H[@]}" ip link set ${P}h$k master ${P}br up
  ip netns exec ${P}r$k ip link set lo up
  ip netns exec ${P}r$k ip addr add $NET.$((k + 1))/24 dev ${P}u$k
  ip netns exec ${P}r$k ip link set ${P}u$k up
done
# r1's uplink: 1 MB/s, a 16 KiB bucket
ip netns exec ${P}r1 tc qdisc add dev ${P}u1 root tbf rate 8mbit burst 16384 latency 400ms ||
  fail "tc tbf on ${P}u1"

STEPS=30
STATE=$WORK/state
"${H[@]}" "$BIN/coordinator" --state-dir "$STATE" --open --bind "tcp://$NET.254:*" \
  --http-bind $NET.254 --stages 2 --replicas 2 --steps $STEPS --batch 8 --seq 32 --channels 96 \
  --heads 2 --layers 2 --micro-batches 2 --warmup 0 --val-every 0 --val-batches 1 \
  --checkpoint-every 0 --probe-kib 64 --heartbeat 0.25 --liveness 8 --peer-timeout 30 \
  --exit-when-done >"$WORK/coord.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$STATE/endpoint" ] && [ -s "$STATE/http_port" ] && break; sleep 0.1; done
[ -s "$STATE/endpoint" ] || fail "the coordinator did not start"
EP=$(cat "$STATE/endpoint") PORT=$(cat "$STATE/http_port")
for n in 0 1 2 3; do
  k=$((n / 2))
  ip netns exec ${P}r$k "$BIN/peerd" --coordinator "$EP" --coordinator-key "$STATE/coordinator.pub" \
    --host $NET.$((k + 1)) --region r$k --data-dir "$WORK/peer$n" >"$WORK/peer$n.log" 2>&1 &
  PIDS+=($!)
done
seen="" seen_links=""
end=$((SECONDS + 150))
while [ $SECONDS -lt $end ]; do
  st=$("${H[@]}" curl -sf --max-time 3 "http://$NET.254:$PORT/status" 2>/dev/null)
  line=$(echo "$st" | python3 -c "
import json, sys
s = json.load(sys.stdin)
m = [p for p in s['peers'] if p['stage'] >= 0 and 'step_q90_s' in p.get('deadline', {})]
if len(m) == 4:
    print(' | '.join(f\"peer {p['id']} ({p['region']}) step {p['deadline']['step_q90_s']:.3f} s, receive deadline {p['deadline']['recv_s']:.3f} s\" for p in sorted(m, key=lambda p: p['id'])))" 2>/dev/null)
  [ -n "$line" ] && seen=$line
  links=$(echo "$st" | python3 -c "
import json, sys
s = json.load(sys.stdin)
m = [p for p in s['peers'] if p['stage'] >= 0 and 'links' in p.get('deadline', {})]
if len(m) == 4:
    print(' '.join(f\"{p['region']}:{p['deadline']['links']['state_s']:.3f}:{p['deadline']['links']['recv_s']:.3f}:{p['deadline']['links']['slowest']['bandwidth_Bps']:.0f}\" for p in m))" 2>/dev/null)
  [ -n "$links" ] && seen_links=$links
  grep -q "the run finished $STEPS steps" "$WORK/coord.log" && break
  grep -qE "stopped:" "$WORK/coord.log" && break
  sleep 0.5
done
echo "derived (at 1 MB/s): ${seen:-none seen}"
grep -q "the run finished $STEPS steps" "$WORK/coord.log" || fail "the run did not finish"
epochs=$(grep -cE "epoch [0-9]+: train" "$WORK/coord.log")
timeouts=$(cat "$WORK"/peer*.log | grep -c "no message from rank")
echo "train epochs: $epochs, receives that gave up: $timeouts"
[ "$epochs" = 1 ] || fail "the slow link aborted an epoch ($epochs train epochs)"
[ "$timeouts" = 0 ] || fail "a receive gave up on a live peer behind the slow link"
[ -n "$seen" ] || fail "/status never showed the members' derived deadlines"
[ -n "$seen_links" ] || fail "/status never showed the members' link deadlines"
echo "link deadlines (region:state_s:recv_s:slowest inbound B/s): $seen_links"
python3 -c "
import sys
m = [e.split(':') for e in '$seen_links'.split()]
slow = [float(e[1]) for e in m if e[0] == 'r0']
fast = [float(e[1]) for e in m if e[0] == 'r1']
sys.exit(0 if slow and fast and min(slow) > max(fast) else 1)" ||
  fail "the members behind the 1 MB/s link do not get longer state deadlines: $seen_links"
echo "test_netns_slowlink: all checks passed"
