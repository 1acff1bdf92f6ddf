#!/usr/bin/env bash
# test_coord_promote — a peer joining mid-run replaces a much slower member. Four peerd train
# 2 stages x 2 replicas; one of them reports 0.01 GFLOP/s (peerd --flops), so by the cost model
# its compute dominates the iteration. A fifth, normal peer joins after step 20 is committed: at
# the next checkpoint the coordinator must predict the gain, abort the epoch, probe the newcomer's
# links, and start a new epoch without the slow peer from the step the members hold (the newcomer
# receiving its stage's state) or from that checkpoint. The run must end at exactly the loss of an undisturbed run with
# four normal peers (the hand-over is bit-exact). lab8.json's 2 ms lab keeps the steps slow
# enough for the join to land mid-run.
#   tests/coordinator/test_coord_promote.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
STEPS=150
ARGS=(--open --stages 2 --replicas 2 --steps $STEPS --checkpoint-every 10 --heartbeat 0.25
      --liveness 4 --peer-timeout 5 --exit-when-done --scenario "$(dirname "$0")/lab8.json")

STATE=$WORK/plain PEER_LOG=plain-peer
start_coord plain.log "${ARGS[@]}"
for i in 1 2 3 4; do start_peer "$i" --region lab; done
wait_for "$WORK/plain.log" "the run finished $STEPS steps" 90 || fail "the undisturbed run did not finish"
wait_exit "$CPID" 60
L0=$(json_field plain.log loss)

STATE=$WORK/promote PEER_LOG=promote-peer
start_coord promote.log "${ARGS[@]}"
for i in 1 2 3; do start_peer "$i" --region lab; done
start_peer 4 --region lab --flops 1e7
wait_committed "$WORK/promote.log" 20 60 || fail "no checkpoint at step 20"
grep -q "run finished" "$WORK/promote.log" && fail "the run ended before the join"
start_peer 5 --region lab
wait_for "$WORK/promote.log" "the run finished $STEPS steps" 90 || fail "the run did not finish"
wait_exit "$CPID" 60
slow=$(grep -oE "^peerd [0-9]+: admitted" "$WORK/promote-peer4.log" | grep -oE "[0-9]+")
new=$(grep -oE "^peerd [0-9]+: admitted" "$WORK/promote-peer5.log" | grep -oE "[0-9]+")
grep "promote:" "$WORK/promote.log" | sed 's/^\[info\] //'
grep -qE "promote: standby peer $new .* in place of peer $slow .* re-placing at checkpoint step" \
  "$WORK/promote.log" || fail "the coordinator did not decide to promote peer $new over slow peer $slow"
grep -qE "promote: peer $new takes world rank [0-9]+ from peer $slow" "$WORK/promote.log" ||
  fail "peer $new did not take the slow peer's place"
members=$(grep -oE "peers by world rank \[[0-9 ]+\]" "$WORK/promote.log" | tail -1)
echo "last epoch: $members"
echo "$members" | grep -qwE "$new" || fail "peer $new is not in the last epoch"
echo "$members" | grep -qwE "$slow" && fail "slow peer $slow is still in the last epoch"
# The newcomer starts from its stage's live state, or from the checkpoint the swap was made at
# when the members hold nothing newer by then (which one depends on timing; both are exact).
start=$(grep -oE "\((from live replicas' state|resuming from the latest checkpoint)\)" \
        "$WORK/promote-peer5.log" | tail -1)
[ -n "$start" ] || fail "the newcomer did not say where its state came from"
echo "newcomer started $start"
L=$(json_field promote.log loss)
echo "final loss $L, undisturbed $L0"
[ "$L" = "$L0" ] || fail "final loss $L differs from the undisturbed run's $L0"
echo "test_coord_promote: all checks passed"
