#!/usr/bin/env bash
# test_coord_pause — a coordinator that does not run for several liveness windows (SIGSTOP, a
# VM paused or migrated) keeps its healthy peers: stopped alone while they keep sending, and
# stopped with them, waking first to a silence that is its own; a peer killed afterwards is
# still dropped within its window.
#   tests/coordinator/test_coord_pause.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
# two peers of the four a run needs: they stay standbys, no epoch starts; a window is 2 s
start_coord coord.log --open --stages 2 --replicas 2 --heartbeat 0.2 --liveness 10
start_peer 1
start_peer 2
wait_for "$WORK/peer1.log" "admitted" 20 && wait_for "$WORK/peer2.log" "admitted" 20 ||
  fail "the peers were not admitted"
sleep 0.5
kill -STOP "$CPID" # the coordinator alone, for 2.5 windows; the heartbeats queue up
sleep 5
kill -CONT "$CPID"
sleep 1.5
kill -STOP "${PEER_PID[1]}" "${PEER_PID[2]}" # everything, the coordinator waking first
kill -STOP "$CPID"
sleep 5
kill -CONT "$CPID"
sleep 0.5
kill -CONT "${PEER_PID[1]}" "${PEER_PID[2]}"
sleep 2
grep -q "lost: peer" "$WORK/coord.log" &&
  fail "a paused coordinator dropped a healthy peer: $(grep "lost: peer" "$WORK/coord.log")"
grep -q "the loop did not run for" "$WORK/coord.log" || fail "the coordinator did not see its pause"
kill -9 "${PEER_PID[1]}"
wait_for "$WORK/coord.log" "lost: peer" 5 || fail "a killed peer was not dropped within 5 s"
echo "test_coord_pause: all checks passed"
