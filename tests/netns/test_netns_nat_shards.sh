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
P=${NETNS_PREFIX:-wt22n} NET=212 PUB_ADDRS=1 NEED_TOOLS="curl python3"
. "$(dirname "$0")/nat_homes.sh"

# ---- one run: the coordinator and peers, in namespaces or all on loopback -------------------
RUN=(--open --stages 2 --replicas 1 --steps 600 --micro-batches 2 --batch 8 --seq 32 --channels 32
     --heads 2 --warmup 0 --val-every 0 --val-batches 1 --checkpoint-every 100 --keep 3
     --act-codec delta8 --checkpoint-storage peers --checkpoint-copies 2 --heartbeat 0.5
     --liveness 4 --peer-timeout 5 --probe-kib 16 --exit-when-done --seed 11)
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
status() { in_ns ${P}pub curl -sf --max-time 3 "http://10.212.0.1:$(cat "$WORK/nat/http_port")/status"; }
final_field() { # final_field NAME PYTHON-EXPR-ON-f
  grep '^coordinator: final ' "$WORK/$1.log" | tail -1 | sed 's/^coordinator: final //' |
    python3 -c "import json,sys; f = json.load(sys.stdin); print($2)"
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
