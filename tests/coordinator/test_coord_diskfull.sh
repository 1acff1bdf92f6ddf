#!/usr/bin/env bash
# test_coord_diskfull — a checkpoint directory that fills up stops the run with the cause. A 2 × 1
# run checkpoints every 10 steps into a tmpfs that holds one checkpoint: step 10 commits, every
# later save fails with "No space left on device". The coordinator must stop the run after three
# epochs that trained past a checkpoint they could not commit, naming the cause, and exit 1,
# never calling the run complete or printing a NaN loss; every peerd must exit 1 with the
# coordinator's reason; and step 10 must stay the manifest's step with every shard matching its
# SHA256SUMS. Needs mount rights for the tmpfs: without them it is skipped (exit 77), never passed.
#   tests/coordinator/test_coord_diskfull.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
CK=$WORK/ck
mkdir -p "$CK"
if ! mount -t tmpfs -o size=560k tmpfs "$CK" 2>"$WORK/mount.err"; then
  echo "SKIP: cannot mount a 560 KiB tmpfs for the full disk ($(tr "\n" " " <"$WORK/mount.err")); run as root"
  exit 77
fi
unmount() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  umount "$CK" || echo "warning: could not unmount the tmpfs at $CK"
  cleanup
}
trap unmount EXIT

start_coord c.log --open --stages 2 --replicas 1 --steps 300 --checkpoint-every 10 \
  --heartbeat 0.25 --liveness 4 --peer-timeout 5 --exit-when-done --checkpoint-dir "$CK"
start_peer 1
start_peer 2
wait_exit "$CPID" 100
rc=$?
[ "$rc" = 1 ] || fail "the coordinator exited $rc on a full checkpoint directory; expected 1"
grep -q "complete: the run finished" "$WORK/c.log" && fail "the coordinator called the run complete"
grep -qi "final loss.*nan" "$WORK/c.log" && fail "the coordinator printed a NaN final loss"
stop=$(grep -m1 "stopped: " "$WORK/c.log") || fail "no stop message"
echo "$stop" | grep -q "never committed; the latest complete checkpoint is step 10 .*No space left on device" ||
  fail "the stop does not name the uncommitted checkpoints, step 10 and the full disk: $stop"
echo "${stop:0:300}"
[ "$(json_field c.log committed_step)" = 10 ] || fail "committed step $(json_field c.log committed_step), expected 10"
[ "$(json_field c.log state)" = stopped ] || fail "final state $(json_field c.log state), expected stopped"
for i in 1 2; do
  wait_exit "${PEER_PID[$i]}" 20
  prc=$?
  [ "$prc" = 1 ] || fail "peerd $i exited $prc after the run stopped; expected 1"
  grep -q "peerd: error: the coordinator stopped the run: " "$WORK/peer$i.log" ||
    fail "peerd $i does not print the coordinator's reason"
done
grep -q "No space left on device" "$WORK"/peer*.log || fail "no peer names the full disk"
step=$(python3 -c "import json; print(json.load(open('$CK/manifest.json'))['step'])")
[ "$step" = 10 ] || fail "the manifest names step $step, expected 10"
for s in 0 1; do
  (cd "$CK/stage-$s/step-00000010" && sha256sum --quiet -c SHA256SUMS) ||
    fail "stage $s's shard of step 10 does not match its SHA256SUMS"
done
echo "test_coord_diskfull: all checks passed"
