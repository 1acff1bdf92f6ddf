#!/usr/bin/env bash
# test_coord_site — a site inside the WAN run: `peerd --gpus 2` registers as one device of the
# two GPUs' aggregate and trains its stage with tensor parallelism over 2 ranks.
#   - /status shows the site peer (--site-efficiency 0.9) with gpus 2, FLOP/s = 2 x 0.9 x its
#     --flops and twice the
#     memory of a one-GPU peer on the same machine; the one-GPU peer shows gpus 1 and its --flops;
#   - a 2-stage run of the site peer and a one-GPU peer finishes, the loss goes down, and the
#     site peer's log says its stage ran on a site of 2 ranks;
#   - --gpus 2 on a GPU device and --gpus 0 are refused before registering;
#   - context parallelism inside the site: a run with --site-cp 2 has the --gpus 2 peer run its
#     stage on 1 tensor-parallel x 2 context-parallel ranks and finishes with the loss going
#     down; a --gpus 3 peer (not a multiple of 2) is refused at registration with a message, and
#     a --seq that does not split into 4 chunks is refused by the coordinator; that --gpus 2 peer
#     measures its efficiency E (no --site-efficiency), prints it, and /status shows 2 x E x its
#     --flops;
#   - expert parallelism inside the site: a run of the MoE model (--moe-experts 4) has the --gpus 2
#     peer run its stage on 2 expert-parallel ranks and finishes with the loss going down; a
#     --gpus 3 peer (3 does not divide 4 experts) is refused at registration with the reason,
#     and the coordinator refuses --moe-top-k without --moe-experts and MoE with --site-cp.
#   tests/coordinator/test_coord_site.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
STEPS=20

out=$("$BIN/peerd" --coordinator tcp://127.0.0.1:1 --coordinator-key x --gpus 2 --device cuda:0 2>&1)
[ $? -ne 0 ] && echo "$out" | grep -q "process-wide" || fail "--gpus 2 --device cuda:0 not refused: $out"
out=$("$BIN/peerd" --coordinator tcp://127.0.0.1:1 --coordinator-key x --gpus 0 2>&1)
[ $? -ne 0 ] && echo "$out" | grep -q -- "--gpus" || fail "--gpus 0 not refused: $out"

start_coord coord.log --open --stages 2 --replicas 1 --steps $STEPS --checkpoint-every 10 \
  --heartbeat 0.25 --exit-when-done
start_peer 1 --gpus 2 --flops 1e9 --site-efficiency 0.9
start_peer 2 --flops 1e9
port=$(cat "$STATE/http_port")
# /status once both peers are admitted (the run may already be training)
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
ok = len(site) == 1 and len(one) == 1
if ok:
    s, o = site[0], one[0]
    print(f\"/status: site flops {s['flops']:.4g} memory {s['memory']:.4g}; \"
          f\"one GPU flops {o['flops']:.4g} memory {o['memory']:.4g}\")
    ok = abs(s['flops'] - 1.8e9) <= 1e-6 * 1.8e9 and abs(o['flops'] - 1e9) <= 1e-3 \
         and o['memory'] > 0 and abs(s['memory'] - 2 * o['memory']) <= 1e-9 * s['memory']
sys.exit(0 if ok else 1)" || fail "/status does not show the site's aggregate: $status"

wait_for "$WORK/coord.log" "the run finished $STEPS steps" 90 || fail "the run did not finish"
wait_exit "$CPID" 30
L=$(json_field coord.log loss)
F=$(json_field coord.log first_loss)
echo "run with a site of 2: first loss $F, final loss $L"
python3 -c "import sys, math; sys.exit(0 if math.isfinite($L) and $L < $F else 1)" ||
  fail "the loss did not go down: first $F, final $L"
grep -q "on a site of 2 tensor-parallel x 1 context-parallel ranks" "$WORK/peer1.log" ||
  fail "the site peer did not run its stage on a site"
grep -q "on a site of" "$WORK/peer2.log" && fail "the one-GPU peer ran a site"

out=$("$BIN/coordinator" --state-dir "$WORK/bad" --site-cp 2 --seq 30 2>&1)
[ $? -eq 2 ] && echo "$out" | grep -q "seq 30 is not a multiple of 2 x site-cp = 4" || fail "--site-cp 2 --seq 30: $out"
STATE=$WORK/state-cp
start_coord coord-cp.log --open --stages 2 --replicas 1 --steps $STEPS --checkpoint-every 10 \
  --heartbeat 0.25 --exit-when-done --site-cp 2
PEER_LOG=cp start_peer 3 --gpus 3 --flops 1e9
wait_for "$WORK/cp3.log" "refused this peer" 30 || fail "a --gpus 3 peer was not refused"
grep -q "multiple of --site-cp 2" "$WORK/cp3.log" || fail "the refusal does not say why"
PEER_LOG=cp start_peer 4 --gpus 2 --flops 1e9
PEER_LOG=cp start_peer 5 --flops 1e9
wait_for "$WORK/cp4.log" "site efficiency" 30 || fail "the --gpus 2 peer did not measure its efficiency"
E=$(sed -n 's/.*site efficiency \([0-9.]*\) (measured.*/\1/p' "$WORK/cp4.log")
port=$(cat "$STATE/http_port")
for _ in $(seq 100); do
  status=$(curl -sf "http://127.0.0.1:$port/status") &&
    echo "$status" | python3 -c 'import json,sys; sys.exit(0 if any(p["gpus"] == 2 for p in json.load(sys.stdin)["peers"]) else 1)' &&
    break
  sleep 0.2
done
echo "$status" | python3 -c "
import json, sys
e = float('$E')
site = [p for p in json.load(sys.stdin)['peers'] if p['gpus'] == 2]
print(f'measured site efficiency {e}; /status flops {site[0][\"flops\"]:.4g}' if site else 'no site')
sys.exit(0 if site and 0 < e <= 1 and abs(site[0]['flops'] - 2 * e * 1e9) <= 1e6 else 1)" ||
  fail "the measured efficiency ($E) is not what the site registered: $status"
wait_for "$WORK/coord-cp.log" "the run finished $STEPS steps" 90 || fail "the --site-cp 2 run did not finish"
wait_exit "$CPID" 30
L=$(json_field coord-cp.log loss)
F=$(json_field coord-cp.log first_loss)
echo "run with a site of 1 x 2 (context parallel): first loss $F, final loss $L"
python3 -c "import sys, math; sys.exit(0 if math.isfinite($L) and $L < $F else 1)" ||
  fail "the loss did not go down with --site-cp 2: first $F, final $L"
grep -q "on a site of 1 tensor-parallel x 2 context-parallel ranks" "$WORK/cp4.log" ||
  fail "the site peer did not run its stage on 2 context-parallel ranks"

out=$("$BIN/coordinator" --state-dir "$WORK/bad" --moe-top-k 2 2>&1)
[ $? -eq 2 ] && echo "$out" | grep -q "add --moe-experts" || fail "--moe-top-k alone: $out"
out=$("$BIN/coordinator" --state-dir "$WORK/bad" --moe-experts 4 --site-cp 2 2>&1)
[ $? -eq 2 ] && echo "$out" | grep -q "without context parallelism" || fail "MoE + --site-cp: $out"
STATE=$WORK/state-ep
start_coord coord-ep.log --open --stages 2 --replicas 1 --steps $STEPS --checkpoint-every 10 \
  --heartbeat 0.25 --exit-when-done --moe-experts 4 --moe-top-k 2 --moe-capacity 2
PEER_LOG=ep start_peer 6 --gpus 3 --flops 1e9
wait_for "$WORK/ep6.log" "refused this peer" 30 || fail "a --gpus 3 peer was not refused for 4 experts"
grep -q "split the 4 experts evenly" "$WORK/ep6.log" || fail "the MoE refusal does not say why"
PEER_LOG=ep start_peer 7 --gpus 2 --flops 1e9
PEER_LOG=ep start_peer 8 --flops 1e9
wait_for "$WORK/coord-ep.log" "the run finished $STEPS steps" 90 || fail "the MoE run did not finish"
wait_exit "$CPID" 30
L=$(json_field coord-ep.log loss)
F=$(json_field coord-ep.log first_loss)
echo "MoE run with a site of 2 expert-parallel ranks: first loss $F, final loss $L"
python3 -c "import sys, math; sys.exit(0 if math.isfinite($L) and $L < $F else 1)" ||
  fail "the loss did not go down in the MoE run: first $F, final $L"
grep -q "on a site of 2 expert-parallel ranks" "$WORK/ep7.log" ||
  fail "the site peer did not run its MoE stage on 2 expert-parallel ranks"
echo "test_coord_site: all checks passed"
