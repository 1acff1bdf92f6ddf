#!/usr/bin/env bash
# test_netns_nat — volunteers behind NAT take part. A public namespace holds the coordinator
# (and its relay) and two peerd; two "home" namespaces sit behind router namespaces that
# masquerade outgoing traffic (nftables) and drop every inbound connection, two peerd each.
# A 2 x 3 run is placed over the six (GA on probed links, relayed pairs included). Checks:
#   (a) /status: the four home peers are found unreachable by the connect-back test, the two
#       public ones reachable;
#   (b) the run finishes at the loss of the same run on loopback (same seed, same steps), though
#       a home peer is killed with -9 mid-run and a new home peer takes its place; and every
#       pair of live home peers was probed (through the relay) for the placement's network model;
#   (c) the relay forwarded the traffic between home peers, and a packet capture of the public
#       namespace (tcpdump) shows ZeroMQ's plaintext greetings (so plaintext would be seen) but
#       none of the JSON keys of the control messages nor the seeded training tensors' bytes.
# Skips (77) where namespaces or tcpdump are not available.
#   tests/netns/test_netns_nat.sh BIN_DIR
set -uo pipefail
BIN=$1
P=${NETNS_PREFIX:-wt21n} NET=211 PUB_ADDRS=3 NEED_TOOLS="tcpdump curl python3"
. "$(dirname "$0")/nat_homes.sh"

# ---- one run: the coordinator and peers, in namespaces or all on loopback -------------------
RUN=(--open --stages 2 --replicas 3 --steps 60 --micro-batches 2 --batch 12 --seq 32 --channels 32 --heads 2
     --warmup 0 --val-every 0 --val-batches 1 --checkpoint-every 10 --keep 3 --heartbeat 0.25
     --liveness 4 --peer-timeout 5 --probe-kib 16 --exit-when-done --seed 7)
start_coord() { # start_coord NAME NS HOST [BIND]: $CPID, $EP (at HOST), $STATE
  STATE=$WORK/$1
  ns_exec "$2"
  "${NS_EXEC[@]}" "$BIN/coordinator" --state-dir "$STATE" "${RUN[@]}" --bind "tcp://${4:-$3}:*" \
    --http-bind "$3" >>"$WORK/$1.log" 2>&1 &
  CPID=$!; PIDS+=("$CPID")
  for _ in $(seq 100); do [ -s "$STATE/endpoint" ] && break; sleep 0.1; done
  [ -s "$STATE/endpoint" ] || fail "$1: the coordinator did not start"
  EP=$(cat "$STATE/endpoint")
  EP="tcp://$3:${EP##*:}"
}
status() { in_ns ${P}pub curl -sf --max-time 3 "http://10.211.0.1:$(cat "$WORK/nat/http_port")/status"; }
final_loss() {
  grep '^coordinator: final ' "$WORK/$1.log" | tail -1 | sed 's/^coordinator: final //' |
    python3 -c "import json,sys; print(json.load(sys.stdin)['loss'])"
}

# the reference: the same run on loopback
start_coord loop "" 127.0.0.1
for n in 1 2 3 4 5 6; do start_peer loop $n "" 127.0.0.1; done
wait_exit "$CPID" 60 || fail "the loopback run did not finish"
L0=$(final_loss loop) || fail "the loopback run reported no final loss"

# the NAT run, captured on the public namespace's two links to the homes: every byte the relay
# takes from or gives to a home peer crosses them (lo, where /status is read in plaintext, is
# left out). The probes' bulk transfers make that hundreds of MB, so the capture is scanned as
# it streams by: for ZeroMQ's greetings (NULL: data links, CURVE: control) and for what must not
# be there.
cat >"$WORK/scan.py" <<'PY'
import json, sys
needles = {"NULL": b"NULL", "CURVE": b"CURVE", "zeros512": bytes(512)}
for k in sys.argv[2:]:
    needles[k] = k.encode()
seen = dict.fromkeys(needles, 0)
tail, total = b"", 0
while True:
    chunk = sys.stdin.buffer.read(1 << 20)
    if not chunk:
        break
    total += len(chunk)
    buf = tail + chunk  # a needle cut by the chunk boundary is found in the overlap
    for k, n in needles.items():
        seen[k] += buf.count(n)
    tail = buf[-600:]
seen["bytes"] = total
json.dump(seen, open(sys.argv[1], "w"))
PY
KEYS=('"endpoints"' '"outboxes"' '"relay_in"' '"heartbeat_s"' '"loss"' '"train"')
TPIDS=(); SPIDS=()
for k in 1 2; do
  sh -c 'echo $$ >"$1"; exec ip netns exec "$2" tcpdump -i "$3" -B 32768 -s 0 -U -w -' sh \
    "$WORK/tcpdump$k.pid" ${P}pub ${P}p$k 2>"$WORK/tcpdump$k.log" |
    python3 "$WORK/scan.py" "$WORK/scan$k.json" "${KEYS[@]}" &
  SPIDS+=("$!"); PIDS+=("$!")
done
sleep 0.5
TPIDS=($(cat "$WORK"/tcpdump?.pid)); PIDS+=("${TPIDS[@]}")
# bound to every address, as an operator would: the relay announces 0.0.0.0, and the home
# peers must reach it at the address they reach the coordinator at
start_coord nat ${P}pub 10.211.0.1 0.0.0.0
start_peer nat 1 ${P}pub 10.211.0.2
start_peer nat 2 ${P}pub 10.211.0.3
start_peer nat 3 ${P}h1 192.168.1.2
start_peer nat 4 ${P}h1 192.168.1.2
start_peer nat 5 ${P}h2 192.168.2.2
start_peer nat 6 ${P}h2 192.168.2.2

# (a) reachability as the coordinator tested it
end=$((SECONDS + 20)); reach=""
while [ $SECONDS -lt $end ]; do
  reach=$(status | python3 -c "
import json, sys
print(' '.join(sorted(p['reachable'] for p in json.load(sys.stdin)['peers'])))" 2>/dev/null)
  [ "$reach" = "no no no no yes yes" ] && break
  sleep 0.3
done
echo "(a) reachable per peer: $reach"
[ "$reach" = "no no no no yes yes" ] || fail "want four unreachable home peers and two reachable"

# (b) kill a home peer that trains, once training is under way; a new home peer replaces it
end=$((SECONDS + 60)); step=0
while [ $SECONDS -lt $end ]; do
  step=$(status | python3 -c "import json,sys; print(json.load(sys.stdin)['step'])" 2>/dev/null || echo 0)
  [ "$step" -ge 12 ] && break; sleep 0.2
done
[ "$step" -ge 12 ] || fail "the NAT run never reached step 12"
victim=""
for n in 3 4 5 6; do grep -q "epoch [0-9]*: train" "$WORK/nat-peer$n.log" && { victim=$n; break; }; done
[ -n "$victim" ] || fail "no home peer holds a seat"
kill -9 "${PEER_PID[nat-$victim]}"
echo "(b) killed home peer nat-peer$victim at step $step"
start_peer nat 7 ${P}h1 192.168.1.2
wait_exit "$CPID" 90 || fail "the NAT run did not finish after the kill"
grep -q "epoch [0-9]*: train" "$WORK/nat-peer7.log" || fail "the new home peer never got a seat"
grep -q "recovered" "$WORK/nat.log" || fail "the coordinator logged no recovery"
L=$(final_loss nat) || fail "the NAT run reported no final loss"
echo "(b) final loss behind NAT $L, on loopback $L0"
python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-4 * max(1, abs(b)))" "$L" "$L0" ||
  fail "the NAT run's loss $L is not the loopback run's $L0"

# the network model: every pair of live home peers was probed, through the relay, like any other
grep '^coordinator: final ' "$WORK/nat.log" | tail -1 | sed 's/^coordinator: final //' >"$WORK/final.json"
python3 - "$WORK/final.json" <<'PY' || fail "the probes left a relayed pair unmeasured"
import json, statistics, sys
f = json.load(open(sys.argv[1]))
probe, reach = f["probe"], {int(p["id"]): p["reachable"] for p in f["peers"]}
ids, lat = probe["peers"], probe["latency_s"]
live = {int(p["id"]) for p in f["peers"] if p["state"] != "lost"}
relayed, direct, missing = [], [], []
for i, a in enumerate(ids):
    for j, b in enumerate(ids):
        if i == j or a not in live or b not in live:
            continue
        both_home = reach.get(a) == "no" and reach.get(b) == "no"
        v = lat[i][j]
        if v is None or v < 0:
            if both_home:
                missing.append((a, b))
            continue
        (relayed if both_home else direct).append(v)
print(f"(b) probed one-way latency: {len(relayed)} relayed pairs median "
      f"{statistics.median(relayed) * 1e6:.0f} us, {len(direct)} other pairs median "
      f"{statistics.median(direct) * 1e6:.0f} us")
sys.exit(1 if missing or not relayed else 0)
PY

# (c) the relay and the capture
kill "${TPIDS[@]}" 2>/dev/null
for p in "${SPIDS[@]}"; do wait_exit "$p" 20; done
grep -h "dropped by kernel" "$WORK"/tcpdump?.log
relay=$(grep -oE "relay inboxes for [0-9]+ unreachable members" "$WORK/nat.log" | head -1)
[ -n "$relay" ] || fail "no epoch used the relay"
fwd=$(grep -oE "relays forwarded [0-9]+ bytes" "$WORK/nat.log" | tail -1 | grep -oE "[0-9]+")
echo "(c) $relay; it forwarded ${fwd:-0} bytes"
[ "${fwd:-0}" -gt 100000 ] || fail "the relay forwarded too little to be the home peers' links"
python3 - "$WORK/scan1.json" "$WORK/scan2.json" "${KEYS[@]}" <<'PY' || fail "the capture check failed"
import json, sys
scans = [json.load(open(f)) for f in sys.argv[1:3]]
seen = {k: sum(s[k] for s in scans) for k in scans[0]}
print(f"(c) captured {seen['bytes'] / 1e6:.0f} MB on the links to the homes: ZeroMQ greetings "
      f"NULL {seen['NULL']}, CURVE {seen['CURVE']}; runs of 512 zero bytes (a probe's payload in "
      f"plaintext) {seen['zeros512']}; " + ", ".join(f"{k} {seen[k]}" for k in sys.argv[3:]))
bad = []
if not (seen["NULL"] and seen["CURVE"]):
    bad.append("no ZeroMQ greeting in the capture: it did not see the traffic")
bad += [f"plaintext {k} in the capture" for k in ["zeros512"] + sys.argv[3:] if seen[k]]
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
echo "test_netns_nat: all checks passed"
