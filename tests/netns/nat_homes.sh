# nat_homes.sh — the network of the NAT tests, sourced by them: a public namespace and two
# "home" namespaces, each behind a router namespace that masquerades outgoing traffic
# (nftables) and drops every inbound connection:
#
#   ${P}pub (10.$NET.0.1..N on lo) --- ${P}r1 / ${P}r2 (NAT) --- ${P}h1 (192.168.1.2) / ${P}h2 (.2.2)
#
# The sourcing test sets P (its namespace prefix), NET (the public addresses' second octet),
# PUB_ADDRS (how many addresses pub's lo gets) and NEED_TOOLS (the programs it needs), then
# sources this. It skips (77) without root, namespaces or a tool; gives WORK (a fresh
# directory), PIDS (killed at exit), fail, in_ns, ns_exec, start_peer and wait_exit; and
# removes the namespaces and WORK at exit (KEEP=1 keeps WORK).
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to make network namespaces"
for t in ip nft $NEED_TOOLS; do
  command -v "$t" >/dev/null 2>&1 || skip "$t not found (scripts/deps.sh installs it)"
done
ip netns add "${P}chk" 2>/dev/null || skip "cannot make network namespaces (ip netns add failed)"
ip netns del "${P}chk"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/wt-$P-XXXXXX")
PIDS=()
NS=("${P}pub" "${P}r1" "${P}r2" "${P}h1" "${P}h2")
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

for n in "${NS[@]}"; do ip netns add "$n" || fail "ip netns add $n"; in_ns "$n" ip link set lo up; done
for a in $(seq "$PUB_ADDRS"); do in_ns "${P}pub" ip addr add "10.$NET.0.$a/32" dev lo; done
for k in 1 2; do
  ip link add "${P}p$k" netns "${P}pub" type veth peer name "${P}w$k" netns "${P}r$k" || fail "veth"
  ip link add "${P}l$k" netns "${P}r$k" type veth peer name "${P}h$k" netns "${P}h$k" || fail "veth"
  in_ns "${P}pub" ip addr add "10.$NET.$k.1/24" dev "${P}p$k"
  in_ns "${P}pub" ip link set "${P}p$k" up
  # the public side routes to the home subnet, so a connect-back reaches the router and is dropped
  in_ns "${P}pub" ip route add "192.168.$k.0/24" via "10.$NET.$k.2"
  in_ns "${P}r$k" ip addr add "10.$NET.$k.2/24" dev "${P}w$k"
  in_ns "${P}r$k" ip addr add "192.168.$k.1/24" dev "${P}l$k"
  in_ns "${P}r$k" ip link set "${P}w$k" up
  in_ns "${P}r$k" ip link set "${P}l$k" up
  in_ns "${P}r$k" ip route add default via "10.$NET.$k.1"
  in_ns "${P}r$k" sysctl -qw net.ipv4.ip_forward=1
  in_ns "${P}r$k" nft -f - <<NFT || skip "nftables cannot load a NAT table here"
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
  in_ns "${P}h$k" ip addr add "192.168.$k.2/24" dev "${P}h$k"
  in_ns "${P}h$k" ip link set "${P}h$k" up
  in_ns "${P}h$k" ip route add default via "192.168.$k.1"
done

declare -A PEER_PID
# ip netns exec runs the program in its own process, so $! is the daemon's pid
ns_exec() { NS_EXEC=(); [ -n "$1" ] && NS_EXEC=(ip netns exec "$1"); }
start_peer() { # start_peer NAME N NS HOST: peerd with its own data directory, nothing shared
  ns_exec "$3"
  "${NS_EXEC[@]}" "$BIN/peerd" --coordinator "$EP" --coordinator-key "$STATE/coordinator.pub" \
    --host "$4" --data-dir "$WORK/$1-peer$2" >>"$WORK/$1-peer$2.log" 2>&1 &
  PEER_PID[$1-$2]=$!; PIDS+=("$!")
}
wait_exit() { # wait_exit PID SECONDS
  local end=$((SECONDS + $2))
  while kill -0 "$1" 2>/dev/null && [ $SECONDS -lt "$end" ]; do sleep 0.2; done
  ! kill -0 "$1" 2>/dev/null
}
