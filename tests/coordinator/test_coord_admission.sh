#!/usr/bin/env bash
# test_coord_admission — what a volunteer sees: peerd prints the coordinator's reason and exits 1
# when refused (no token, forged, expired, used up); a bad flag exits 2; --device naming a GPU
# that is not there (cuda:999: no CUDA in the build, or no such device) is a clear error; a run
# whose codec keeps state (error feedback) is refused with --checkpoint-storage shared and no
# --checkpoint-dir to recover it from, and a contradicting --checkpoint-dir with peer storage too;
# an admitted peer makes its key pair with mode 0600 and, on SIGTERM, tells the coordinator it
# leaves and exits 0.
#   tests/coordinator/test_coord_admission.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
STATE=$WORK/state
mkdir -p "$STATE"
one=$("$BIN/coordinator" token new --state-dir "$STATE" --uses 1) || fail "token new"
short=$("$BIN/coordinator" token new --state-dir "$STATE" --expires 1s --uses 0) || fail "token new"
"$BIN/coordinator" token new --state-dir "$STATE" --expires 5y >/dev/null 2>&1
[ $? = 2 ] || fail "a bad --expires must exit 2"
"$BIN/coordinator" --state-dir "$WORK/x" --act-codec zzz >/dev/null 2>&1
[ $? = 2 ] || fail "an unknown --act-codec must exit 2"
"$BIN/coordinator" --state-dir "$WORK/x" --grad-codec int8 --checkpoint-storage shared \
  2>"$WORK/codec.err"
[ $? = 2 ] && grep -q "only checkpoints carry.*give --checkpoint-dir" "$WORK/codec.err" ||
  fail "a stateful --grad-codec with shared storage and no --checkpoint-dir must be refused up \
front with the reason"
"$BIN/coordinator" --state-dir "$WORK/x" --grad-codec int8 --checkpoint-storage peers \
  --checkpoint-dir "$WORK/ckpt" 2>"$WORK/both.err"
[ $? = 2 ] && grep -q "give one of them" "$WORK/both.err" ||
  fail "--checkpoint-dir with --checkpoint-storage peers must be refused naming both"
start_coord coord.log --stages 2 --replicas 4 --heartbeat 0.2

expect_refused() { # expect_refused N WHAT TOKEN
  local n=$1 what=$2; shift 2
  "$BIN/peerd" --coordinator "$EP" --coordinator-key "$STATE/coordinator.pub" \
    --data-dir "$WORK/peer$n" --register-timeout 10 "$@" >"$WORK/peer$n.log" 2>&1
  local rc=$?
  [ $rc = 1 ] || fail "peer $n ($what): exit $rc, expected 1"
  grep -q "refused this peer: .*$what" "$WORK/peer$n.log" || fail "peer $n does not print '$what'"
  echo "refused as expected: $(grep -o "refused this peer: .*" "$WORK/peer$n.log" | cut -c1-120)"
}
expect_refused 1 "no join token"
expect_refused 2 "does not verify" --token "${one%??}AA"
expect_refused 3 "malformed" --token "hello"
sleep 1.2
expect_refused 4 "expired" --token "$short"

start_peer 5 --token "$one" --coordinator-key "$(cat "$STATE/coordinator.pub")" # the key itself
wait_for "$WORK/peer5.log" "admitted" 15 || fail "a valid token was not admitted"
[ "$(stat -c %a "$WORK/peer5/peer.key")" = 600 ] || fail "the key file is not 0600"
expect_refused 6 "used up" --token "$one"

"$BIN/peerd" --coordinator "$EP" --bogus 1 >/dev/null 2>&1
[ $? = 2 ] || fail "an unknown flag must exit 2"
"$BIN/peerd" >/dev/null 2>&1
[ $? = 2 ] || fail "missing --coordinator must exit 2"
"$BIN/peerd" --coordinator "$EP" --coordinator-key "$STATE/coordinator.pub" --device cuda:999 \
  --data-dir "$WORK/peer7" >"$WORK/peer7.log" 2>&1
[ $? = 1 ] || fail "--device cuda:999 must fail with 1"
grep -qE "cuda:999: this peerd was built without CUDA|no CUDA device 999" "$WORK/peer7.log" ||
  fail "--device cuda:999 does not explain itself: $(cat "$WORK/peer7.log")"

kill -TERM "${PEER_PID[5]}"
wait "${PEER_PID[5]}"
rc=$?
[ $rc = 0 ] || fail "peerd exited $rc on SIGTERM, expected 0"
grep -q "left the run" "$WORK/peer5.log" || fail "peerd did not say it left"
wait_for "$WORK/coord.log" "left: peer 1 said it leaves" 5 || fail "the coordinator did not hear the leave"
echo "test_coord_admission: all checks passed"
