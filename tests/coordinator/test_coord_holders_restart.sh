#!/usr/bin/env bash
# test_coord_holders_restart — checkpoints on the peers (--checkpoint-storage peers), no shared
# path: every peer has its own --data-dir, and the coordinator's state directory holds no shard.
#  U. an uninterrupted 2 x 1 run with three peers (two members, one standby), for its final loss,
#     with --checkpoint-store: the coordinator's directory receives every stage's final shard,
#     and its files verify against their SHA256SUMS;
#  R. the same run killed (coordinator and every peer, kill -9) once a committed step's stage-1
#     shard has its two copies, with the stage-1 member's own copies of its shards damaged on
#     disk while everything is down; all restarted on the same state and data directories: the
#     run resumes from that step or a later one, the member refuses its damaged copy by the
#     digest and fetches the shard from the peer that holds the other copy, and the run ends at
#     run U's final loss bit for bit.
# Links are lab8.json's 2 ms at time scale 3, so that the kill lands mid-run.
# Placement takes lab8.json's links as they are (--links scenario): no probe epoch first.
#   tests/coordinator/test_coord_holders_restart.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
ARGS=(--open --stages 2 --replicas 1 --steps 240 --checkpoint-every 10 --heartbeat 0.25
      --liveness 4 --peer-timeout 5 --exit-when-done --checkpoint-storage peers
      --scenario "$(dirname "$0")/lab8.json" --time-scale 3
      --links scenario)
peers() { for i in "$@"; do start_peer "$i" --region lab; done; }
# doubled: the newest step whose stage-1 shard two live peers hold (from /status), or nothing
doubled() {
  curl -sf "http://127.0.0.1:$(cat "$STATE/http_port")/status" | python3 -c "
import json, sys
s = json.load(sys.stdin)
print(next((e['step'] for e in s.get('shards', [])
            if e['stage'] == 1 and e['replica'] == 0 and len(e['holders']) >= 2), ''))" 2>/dev/null
}

# U
STATE=$WORK/u PEER_LOG=u-peer
start_coord u.log "${ARGS[@]}" --checkpoint-store "$WORK/store"
peers 1 2 3
wait_exit "$CPID" 50 || fail "U: the run did not finish"
LU=$(json_field u.log loss)
[ -n "$LU" ] || fail "U: no final loss"
for s in 0 1; do
  grep -qE "stored step 240 stage $s replica 0 in $WORK/store" "$WORK/u.log" ||
    fail "U: the coordinator's store did not receive stage $s's final shard"
  (cd "$WORK"/store/*/stage-$s/step-00000240 && sha256sum -c --quiet SHA256SUMS) ||
    fail "U: the stored stage-$s shard does not verify"
done
echo "U: the store holds $(grep -c "stored step" "$WORK/u.log") shards, the final ones verified"
[ ! -e "$WORK/u/checkpoints" ] || fail "U: the coordinator's state directory holds checkpoints"
echo "U: uninterrupted, final loss $LU"

# R
STATE=$WORK/r PEER_LOG=r-peer
start_coord r.log "${ARGS[@]}"
peers 11 12 13
wait_committed "$WORK/r.log" 30 40 || fail "R: no checkpoint"
committed=""
for _ in $(seq 100); do
  committed=$(doubled) && [ -n "$committed" ] && [ "$committed" -ge 30 ] && break
  sleep 0.05
done
[ -n "$committed" ] || fail "R: no step of stage 1 has two live holders"
kill -9 "$CPID" 2>/dev/null || fail "R: the run ended before the kill"
for i in 11 12 13; do kill -9 "${PEER_PID[$i]}" 2>/dev/null; done
wait 2>/dev/null
# the stage-1 writer's store is the one with stage-1/latest (a copy has none)
damaged=0
for d in "$WORK"/peer1[123]/runs/*/stage-1; do
  [ -f "$d/latest" ] || continue
  for f in "$d"/step-*/model.safetensors; do
    printf 'XXXXXXXX' | dd of="$f" bs=1 seek=300 conv=notrunc 2>/dev/null
    damaged=$((damaged + 1))
  done
  writer=$(basename "$(dirname "$(dirname "$(dirname "$d")")")")
done
[ "$damaged" -gt 0 ] || fail "R: no stage-1 shard to damage in any peer's store"
start_coord r.log "${ARGS[@]}"
peers 11 12 13
wait_exit "$CPID" 50 || fail "R: the run did not finish after the whole restart"
from=$(grep -oE "predicted cost .* from step [0-9]+" "$WORK/r.log" | tail -1 | grep -oE "[0-9]+$")
[ "$from" -ge "$committed" ] ||
  fail "R: resumed from $from, below step $committed, whose stage-1 shard had two copies"
log=$WORK/r-${writer#peer}.log
[ -f "$WORK/r-peer${writer#peer}.log" ] && log=$WORK/r-peer${writer#peer}.log
grep -E "refused the local copy of step $from stage 1 replica 0: .*SHA-256 mismatch" "$log" >/dev/null ||
  fail "R: $writer did not refuse its damaged copy of step $from by the digest"
grep -E "fetched step $from stage 1 replica 0 from " "$log" >/dev/null ||
  fail "R: $writer did not fetch step $from from another holder"
grep -hE "refused the local copy of step $from stage 1|fetched step $from stage 1" "$log" | cut -c1-240
LR=$(json_field r.log loss)
[ "$LR" = "$LU" ] || fail "R: final loss $LR differs from the uninterrupted run's $LU"
[ ! -e "$WORK/r/checkpoints" ] || fail "R: the coordinator's state directory holds checkpoints"
echo "R: all killed with step $committed held twice, $damaged damaged file(s) on $writer; resumed from step $from, final loss $LR (bit for bit)"
echo "test_coord_holders_restart: all checks passed"
