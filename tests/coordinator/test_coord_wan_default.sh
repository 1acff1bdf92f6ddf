#!/usr/bin/env bash
# test_coord_wan_default — a volunteer WAN run needs no checkpoint flags: `--preset wan` (DiLoCo,
# state across steps) with neither --checkpoint-dir nor --checkpoint-storage keeps its
# checkpoints on the peers (each its own --data-dir, no shared path), says so in its log and
# /status, trains, and recovers from a lost member through the peers' copies. A 2 x 1 run on
# four peers (two members, two standbys): stage 1's member — the writer of its shards — is
# killed with kill -9 once a committed step of stage 1 has two live holders, however far behind
# the newest it is (the stores keep the pinned step); no live member holds stage 1 then, so the
# standby that takes the seat must fetch the shard from the copy left. The run must then finish.
#   tests/coordinator/test_coord_wan_default.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
STATE=$WORK/state PEER_LOG=peer
start_coord coord.log --open --stages 2 --replicas 1 --steps 200 --checkpoint-every 10 \
  --heartbeat 0.25 --liveness 4 --peer-timeout 5 --exit-when-done --preset wan \
  --scenario "$(dirname "$0")/lab8.json" --time-scale 3
status() { curl -sf "http://127.0.0.1:$(cat "$STATE/http_port")/status"; }
grep -q "checkpoints on the peers (auto: the run keeps state across steps and names no --checkpoint-dir)" \
  "$WORK/coord.log" || fail "the coordinator does not say it keeps the checkpoints on the peers"
status | python3 -c "
import json, sys
s = json.load(sys.stdin)
assert s['checkpoint_storage'] == 'peers', s['checkpoint_storage']
assert s['checkpoint_storage_why'].startswith('auto:'), s['checkpoint_storage_why']" ||
  fail "/status does not report checkpoint_storage peers chosen by auto"
for i in 1 2 3 4; do start_peer "$i" --region lab; done
wait_committed "$WORK/coord.log" 20 60 || fail "no checkpoint at or past step 20"
# "STEP MEMBER HOLDERS...": the newest step whose stage-1 shard has two live holders, with the id
# of the peer training stage 1 now
got=""
for _ in $(seq 400); do
  got=$(status | python3 -c "
import json, sys
s = json.load(sys.stdin)
m = next((p['id'] for p in s['peers'] if p['stage'] == 1 and p['state'] == 'training'), None)
for e in s.get('shards', []):
    if e['stage'] == 1 and e['replica'] == 0 and len(e['holders']) >= 2 and m is not None:
        print(e['step'], m, *e['holders'])
        break" 2>/dev/null) && [ -n "$got" ] && break
  sleep 0.05
done
[ -n "$got" ] || fail "no committed step of stage 1 had two live holders within 20 s"
read -r step victim h <<<"$got"
pid=$(pid_of_peer "$victim") || fail "no process for peer $victim"
at=$(status | python3 -c "import json,sys; print(json.load(sys.stdin)['step'])" 2>/dev/null)
kill -9 "$pid"
echo "step $step of stage 1 held by peers [$h]; killed peer $victim (stage 1's member) at step ${at:-?}"
wait_for "$WORK/coord.log" "recovered: training resumed" 40 || fail "the run did not resume"
from=$(grep -oE "predicted cost .* from step [0-9]+" "$WORK/coord.log" | tail -1 | grep -oE "[0-9]+$")
[ "$from" -ge "$step" ] || fail "resumed from $from, below the committed step $step"
# stage 1's new seat takes a committed step from a copy: the resume step, or with DiLoCo's live
# recovery an older one of the same outer round (stage 0 goes on from its own state)
got=$(grep -hoE "fetched step [0-9]+ stage 1 replica 0 from" "$WORK"/peer*.log | head -1 | grep -oE "step [0-9]+" | grep -oE "[0-9]+")
[ -n "$got" ] || fail "no standby fetched stage 1 from a peer's copy"
[ "$got" -ge "$step" ] && [ "$got" -le "$from" ] ||
  fail "stage 1's seat fetched step $got, not a committed step from $step to $from"
echo "resumed from step $from; stage 1's new seat fetched step $got from a peer's copy"
grep -oE "recovered: training resumed past step [0-9]+ [0-9.]+ s after the loss" "$WORK/coord.log" | head -1
grep -hoE "fetched step $got stage 1 replica 0 from .* in [0-9.]+ s" "$WORK"/peer*.log | head -1
# what the kill cost stage 0's survivor: the steps it trained past the resume step before it
resume_epoch=$(grep -oE "epoch [0-9]+: train .* from step $from" "$WORK/coord.log" | tail -1 | grep -oE "^epoch [0-9]+" | grep -oE "[0-9]+")
last=$(grep -hoE "epoch [0-9]+: stage 0 replica 0 trained steps [0-9]+ to [0-9]+" "$WORK"/peer*.log |
  awk -v e="${resume_epoch:-0}" -v f="$from" '{n = $2 + 0} n < e && $NF > f && $NF > m {m = $NF} END {print m}')
[ -n "$last" ] || last=$from
echo "stage 0 had trained to step $last before epoch $resume_epoch: $((last - from)) steps trained again"
wait_exit "$CPID" 90 || fail "the run did not finish after the kill"
grep -q "the run finished 200 steps" "$WORK/coord.log" || fail "the run did not complete its 200 steps"
[ -z "$(find "$WORK" -path '*/checkpoints/*' -name 'SHA256SUMS' 2>/dev/null | grep -v '/peer[0-9]*/')" ] ||
  fail "a checkpoint was written outside the peers' data directories"
echo "final loss $(json_field coord.log loss)"
echo "test_coord_wan_default: all checks passed"
