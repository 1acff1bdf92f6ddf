#!/usr/bin/env bash
# test_netns_nat_shards — checkpoints on the peers behind NAT, no shared directory. A public
# namespace holds only the coordinator (and its relays); two "home" namespaces sit behind router
# namespaces that masquerade outgoing traffic (nftables) and drop every inbound connection, one
# peerd each, each with its own --data-dir. A 2 x 1 run that keeps state across steps (delta8
# activations) with --checkpoint-storage peers --checkpoint-copies 2: each stage's shard lives
# on its writer and on the other home's peer. Once a step's stage-1 shard has both copies, the
# stage-1 member is killed with -9 and a new peer starts in its home. Its only holder is the other
# home's peer, which accepts no inbound connection, so a direct fetch is impossible. Checks:
#   - the replacement fetched the shard through the shard relay (its log) with the digest checked,
#     and the coordinator's shard relay passed at least the shard's bytes (/status's final line);
#   - --checkpoint-store took the last step's shards from the NATed holders (through the relay);
#   - the run finished at the loss of the same run on loopback without a kill (same seed).
# Skips (77) without root, ip netns or nftables.
#   tests/netns/test_netns_nat_shards.sh BIN_DIR
set -uo pipefail
BIN=$1
P=wt22n
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to make network namespaces"
for t in ip nft curl python3; do
  command -v $t >/dev/null 2>&1 || skip "$t not found (scripts/deps.sh installs it)"
done
ip netns add ${P}chk 2>/dev/null || skip "cannot make network namespaces (ip netns add failed)"
ip netns del ${P}chk
WORK=$(mktemp -d "${TMPDIR:-/tmp}/wt-natsh-XXXXXX")
PIDS=()
NS=(${P}pub ${P}r1 ${P}r2 ${P}h1 ${P}h2)
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  for n in "${NS[@]}"; do ip netns del "$n" 2>/dev/null; done
  [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$WORK"/*.log; do echo "--- $f"; tail -8 "$f"; done
  exit 1
}
in_ns() { local n=$1; shift; ip netns exec "$n" "$@"; }

# ---- the network: pub (10.212.0.1 on lo) --- r1 / r2 (NAT) --- h1 (192.168.1.2) / h2 (.2.2)
for n in "${NS[@]}"; do ip netns add "$n" || fail "ip netns add $n"; in_ns "$n" ip link set lo up; done
in_ns ${P}pub ip addr add 10.212.0.1/32 dev lo
for k in 1 2; do
  ip link add ${P}p$k netns ${P}pub type veth peer name ${P}w$k netns ${P}r$k || fail "veth"
  ip link add ${P}l$k netns ${P}r$k type veth peer name ${P}h$k netns ${P}h$k || fail "veth"
  in_ns ${P}pub ip addr add 10.212.$k.1/24 dev ${P}p$k
  in_ns ${P}pub ip link set ${P}p$k up
  # the public side routes to the home subnet, so a connect-back reaches the router and is dropped
  in_ns ${P}pub ip route add 192.168.$k.0/24 via 10.212.$k.2
  in_ns ${P}r$k ip addr add 10.212.$k.2/24 dev ${P}w$k
  in_ns ${P}r$k ip addr add 192.168.$k.1/24 dev ${P}l$k
  in_ns ${P}r$k ip link set ${P}w$k up
  in_ns ${P}r$k ip link set ${P}l$k up
  in_ns ${P}r$k ip route add default via 10.212.$k.1
  in_ns ${P}r$k sysctl -qw net.ipv4.ip_forward=1
  in_ns ${P}r$k nft -f - <<NFT || skip "nftables cannot load a NAT table here"
table ip ${P}nat {
  chain masq { type nat hook postrouting priority 100; oifname "${P}w$k" masquerade; }
}
table inet ${P}fw {
  chain inbound_fwd { type filter hook forward priority 0; policy accept;
                                 iifname "${P}w$k" ct state new drop; }
  chain inbound_local { type filter hook input priority 0; policy accept;
                        iifname "${P}w$k" ct state new drop; }
}
NFT
  in_ns ${P}h$k ip addr add 192.168.$k.2/24 dev ${P}h$k
  in_ns ${P}h$k ip link set ${P}h$k up
  in_ns ${P}h$k ip route add default via 192.168.$k.1
done

# ---- one run: the coordinator and peers, in namespaces or all on loopback -------------------
RUN=(--open --stages 2 --replicas 1 --steps 600 --micro-batches 2 --batch 8 --seq 32 --channels 32
     --heads 2 --warmup 0 --val-every 0 --val-batches 1 --checkpoint-every 100 --keep 3
     --act-codec delta8 --checkpoint-storage peers --checkpoint-copies 2 --heartbeat 0.5
     --liveness 4 --peer-timeout 5 --probe-kib 16 --exit-when-done --seed 11)
declare -A PEER_PID
ns_exec() { NS_EXEC=(); [ -n "$1" ] && NS_EXEC=(ip netns exec "$1"); }
start_coord() { # start_coord NAME NS HOST [ARGS...]: $CPID, $EP (at HOST), $STATE
  STATE=$WORK/$1
  ns_exec "$2"
  local name=$1 host=$3
  shift 3
  "${NS_EXEC[@]}" "$BIN/coordinator" --state-dir "$STATE" "${RUN[@]}" --bind "tcp://$host:*" \
    --http-bind "$host" "$@" >>"$WORK/$name.log" 2>&1 &
  CPID=$!; PIDS+=("$CPID")
  for _ in $(seq 100); do [ -s "$STATE/endpoint" ] && break; sleep 0.1; done
  [ -s "$STATE/endpoint" ] || fail "$name: the coordinator did not start"
  EP=$(cat "$STATE/endpoint")
}
start_peer() { # start_peer NAME N NS HOST: its own data directory, nothing shared
  ns_exec "$3"
  "${NS_EXEC[@]}" "$BIN/peerd" --coordinator "$EP" --coordinator-key "$STATE/coordinator.pub" \
    --host "$4" --data-dir "$WORK/$1-peer$2" >>"$WORK/$1-peer$2.log" 2>&1 &
  PEER_PID[$1-$2]=$!; PIDS+=("$!")
}
status() { in_ns ${P}pub curl -sf --max-time 3 "http://10.212.0.1:$(cat "$WORK/nat/http_port")/status"; }
final_field() { # final_field NAME PYTHON-EXPR-ON-f
  grep '^coordinator: final ' "$WORK/$1.log" | tail -1 | sed 's/^coordinator: final //' |
    python3 -c "import json,sys; f = json.load(sys.stdin); print($2)"
}
wait_exit() { # wait_exit PID SECONDS
  local end=$((SECONDS + $2))
  while kill -0 "$1" 2>/dev/null && [ $SECONDS -lt "$end" ]; do sleep 0.2; done
  ! kill -0 "$1" 2>/dev/null
}

# the reference: the same run on loopback, undisturbed
start_coord loop "" 127.0.0.1
for n in 1 2; do start_peer loop $n "" 127.0.0.1; done
wait_exit "$CPID" 60 || fail "the loopback run did not finish"
L0=$(final_field loop "f['loss']") || fail "the loopback run reported no final loss"

# the coordinator also keeps its own copy of every committed shard, fetched from the NATed
# holders through its shard relay
start_coord nat ${P}pub 10.212.0.1 --checkpoint-store "$WORK/store"
start_peer nat 1 ${P}h1 192.168.1.2
start_peer nat 2 ${P}h2 192.168.2.2
HOME_OF=([1]=${P}h1 [2]=${P}h2)
HOST_OF=([1]=192.168.1.2 [2]=192.168.2.2)

# the newest step whose stage-1 shard has two live holders, while stage 1 trains: "STEP MEMBER"
got=""
end=$((SECONDS + 40))
while [ $SECONDS -lt $end ]; do
  got=$(status | python3 -c "
import json, sys
s = json.load(sys.stdin)
reach = [p['reachable'] for p in s['peers']]
m = next((p['id'] for p in s['peers'] if p['stage'] == 1 and p['state'] == 'training'), None)
for e in s.get('shards', []):
    if reach == ['no', 'no'] and e['stage'] == 1 and e['replica'] == 0 and len(e['holders']) >= 2 \
       and m is not None and s['step'] >= 100:
        print(e['step'], m)
        break" 2>/dev/null)
  [ -n "$got" ] && break
  sleep 0.1
done
[ -n "$got" ] || fail "no step of stage 1 got two live holders behind NAT (both peers unreachable)"
read -r step victim <<<"$got"
# the coordinator numbers peers as they register: the process is the one whose log says its id
n=$(grep -l "^peerd $victim: admitted" "$WORK"/nat-peer[12].log | head -1 | grep -oE "[12]\.log$")
n=${n%.log}
[ -n "$n" ] || fail "no peerd log says it is peer $victim"
{ kill -9 "${PEER_PID[nat-$n]}"; wait "${PEER_PID[nat-$n]}"; } 2>/dev/null
echo "killed peer $victim (stage 1's member, in ${HOME_OF[$n]} behind NAT) once step $step had two copies"
start_peer nat 3 "${HOME_OF[$n]}" "${HOST_OF[$n]}"
wait_exit "$CPID" 60 || fail "the NAT run did not finish after the kill"

line=$(grep -hE "fetched step [0-9]+ stage 1 replica 0 from .* through the shard relay" \
  "$WORK/nat-peer3.log" | head -1)
[ -n "$line" ] || fail "the replacement did not fetch stage 1's shard through the shard relay"
echo "replacement: ${line#*peerd: }"
relayed=$(final_field nat "int(f['shard_relay']['bytes'])") || fail "no shard relay in /status"
echo "the shard relay passed $relayed bytes"
[ "$relayed" -gt 10000 ] || fail "the shard relay passed $relayed bytes: too few for a shard"
for s in 0 1; do
  grep -q "stored step 600 stage $s replica 0 in $WORK/store" "$WORK/nat.log" ||
    fail "--checkpoint-store did not get stage $s of the last step from the NATed holders"
done
echo "--checkpoint-store took both stages of step 600 from the NATed holders"
rec=$(grep -oE "recovered: .*" "$WORK/nat.log" | head -1)
[ -n "$rec" ] || fail "the coordinator logged no recovery"
echo "$rec"
L=$(final_field nat "f['loss']") || fail "the NAT run reported no final loss"
echo "final loss behind NAT after the kill $L, undisturbed on loopback $L0"
python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-4 * max(1, abs(b)))" "$L" "$L0" ||
  fail "the NAT run's loss $L is not the undisturbed run's $L0"
echo "test_netns_nat_shards: all checks passed"
