#!/usr/bin/env bash
# test_coord_siteproc — a site whose ranks are two peerd processes (--site FILE --site-rank R):
#   - the options are checked before anything runs: --site-rank without --site, --site without
#     --site-rank, a rank outside the file, --gpus 3 on a site of 2 and a key that is not the
#     file's entry are refused with what to do;
#   - the leader (rank 0) registers as one device of the site: /status shows it with gpus 2,
#     FLOP/s = 2 x E x its --flops (E measured over the two processes) and twice the memory of a
#     one-GPU peer; the member never
#     registers (the coordinator sees two peers);
#   - a 2-stage run of the leader's site and a one-GPU peer finishes, the loss goes down, the
#     leader's log says its stage ran on a site of 2 ranks and the member's log says it served;
#   - in a second run, the member killed with kill -9 while the site trains makes the leader's
#     epoch end within 15 s with an error naming "site member rank 1"; nothing hangs: the
#     coordinator still answers /status and the leader stays up; a member restarted at its
#     entry serves the site again and the run finishes.
#   tests/coordinator/test_coord_siteproc.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
STEPS=20

# The two site processes' keys: peerd makes DATA_DIR/peer.key on its first start.
for n in 1 9; do
  "$BIN/peerd" --data-dir "$WORK/peer$n" --site "$WORK/none.json" --site-rank 0 \
    --coordinator tcp://127.0.0.1:1 --coordinator-key x >"$WORK/keys$n.out" 2>&1
  grep -q "cannot\|site file" "$WORK/keys$n.out" || fail "a missing site file: $(cat "$WORK/keys$n.out")"
done
K1=$(sed -n 's/^public //p' "$WORK/peer1/peer.key")
K9=$(sed -n 's/^public //p' "$WORK/peer9/peer.key")
[ ${#K1} = 40 ] && [ ${#K9} = 40 ] || fail "no keys in the peers' key files"
read -r P0 P1 < <(python3 -c "
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(('127.0.0.1', 0))
print(*[x.getsockname()[1] for x in s])")
SITE=$WORK/site.json
cat >"$SITE" <<EOF
{"ranks": [{"endpoint": "tcp://127.0.0.1:$P0", "public_key": "$K1"},
           {"endpoint": "tcp://127.0.0.1:$P1", "public_key": "$K9"}]}
EOF

refused() { # refused REGEX ARGS...: peerd exits nonzero saying REGEX
  local re=$1; shift
  out=$("$BIN/peerd" --coordinator tcp://127.0.0.1:1 --coordinator-key x "$@" 2>&1)
  [ $? -ne 0 ] && echo "$out" | grep -q -- "$re" || fail "peerd $* not refused with '$re': $out"
}
refused "without --site FILE" --site-rank 1
refused "needs --site-rank" --site "$SITE"
refused "declares ranks 0 to 1" --site "$SITE" --site-rank 2 --data-dir "$WORK/peer9"
refused "drop --gpus or give 2" --site "$SITE" --site-rank 1 --gpus 3 --data-dir "$WORK/peer9"
refused "ranks\[0\].public_key" --site "$SITE" --site-rank 0 --data-dir "$WORK/peer9"

# The member: no coordinator; serves whatever site rank 0 opens.
start_member() {
  "$BIN/peerd" --data-dir "$WORK/peer9" --site "$SITE" --site-rank 1 --site-timeout 10 \
    >>"$WORK/member.log" 2>&1 &
  MPID=$!
  PIDS+=("$MPID")
}
start_member
start_coord coord.log --open --stages 2 --replicas 1 --steps $STEPS --checkpoint-every 10 \
  --heartbeat 0.25 --exit-when-done
start_peer 1 --site "$SITE" --site-rank 0 --site-timeout 10 --flops 1e9
start_peer 2 --flops 1e9
wait_for "$WORK/peer1.log" "site efficiency" 60 || fail "the leader did not measure its site"
E=$(sed -n 's/.*site efficiency \([0-9.]*\) (measured.*/\1/p' "$WORK/peer1.log")
echo "site of 2 processes: measured efficiency $E"
port=$(cat "$STATE/http_port")
for _ in $(seq 100); do
  status=$(curl -sf "http://127.0.0.1:$port/status") &&
    [ "$(echo "$status" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["peers"]))')" = 2 ] &&
    break
  sleep 0.2
done
echo "$status" | python3 -c "
import json, sys
peers = json.load(sys.stdin)['peers']
site = [p for p in peers if p['gpus'] == 2]
one = [p for p in peers if p['gpus'] == 1]
ok = len(peers) == 2 and len(site) == 1 and len(one) == 1
if ok:
    s, o = site[0], one[0]
    print(f\"/status: site of processes flops {s['flops']:.4g} memory {s['memory']:.4g}; \"
          f\"one GPU flops {o['flops']:.4g} memory {o['memory']:.4g}\")
    ok = 0 < $E <= 1 and abs(s['flops'] - 2 * $E * 1e9) <= 1e6 and o['memory'] > 0 \
         and abs(s['memory'] - 2 * o['memory']) <= 1e-9 * s['memory']
sys.exit(0 if ok else 1)" || fail "/status does not show the site's aggregate: $status"

wait_for "$WORK/coord.log" "the run finished $STEPS steps" 90 || fail "the run did not finish"
wait_exit "$CPID" 30
L=$(json_field coord.log loss)
F=$(json_field coord.log first_loss)
echo "run with a site of 2 processes: first loss $F, final loss $L"
python3 -c "import sys, math; sys.exit(0 if math.isfinite($L) and $L < $F else 1)" ||
  fail "the loss did not go down: first $F, final $L"
grep -q "on a site of 2 tensor-parallel x 1 context-parallel ranks" "$WORK/peer1.log" ||
  fail "the leader did not run its stage on the site"
grep -q "site: rank 1 serves layers" "$WORK/member.log" || fail "the member did not serve"

# Second run: kill the member while the site trains.
STATE=$WORK/state2
PEER_LOG=r2 start_coord coord2.log --open --stages 2 --replicas 1 --steps 400 \
  --checkpoint-every 10 --heartbeat 0.25 --exit-when-done
PEER_LOG=r2 start_peer 1 --site "$SITE" --site-rank 0 --site-timeout 10 --flops 1e9 \
  --site-efficiency 0.9
PEER_LOG=r2 start_peer 2 --flops 1e9
wait_for "$WORK/r21.log" "stage [0-9] replica 0 step [1-9]" 60 || fail "the second run did not train"
kill -9 "$MPID"
killed=$SECONDS
wait_for "$WORK/r21.log" "ended: .*site member rank 1 of 2" 15 ||
  fail "the leader's epoch did not fail naming the member"
echo "member killed: the leader's epoch ended within $((SECONDS - killed)) s: $(grep -m1 -o 'ended: .*' "$WORK/r21.log" | cut -c1-160)"
curl -sf -m 2 "http://127.0.0.1:$(cat "$STATE/http_port")/status" >/dev/null ||
  fail "the coordinator does not answer /status after the member died"
kill -0 "${PEER_PID[1]}" 2>/dev/null || fail "the leader exited when its member died"
start_member
wait_for "$WORK/coord2.log" "the run finished 400 steps" 90 ||
  fail "the run did not finish after the member came back"
wait_exit "$CPID" 30
n=$(grep -c "site: rank 1 serves layers" "$WORK/member.log")
echo "after the member's restart the run finished ($n sessions served in all)"
echo "test_coord_siteproc: all checks passed"
