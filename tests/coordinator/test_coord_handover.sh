#!/usr/bin/env bash
# test_coord_handover — a replacement peer starts from a live replica's state, not from a file.
# 8 peerd (2 stages x 4 replicas) plus a standby train with one checkpoint at the end (--checkpoint-every 1000), so the
# shared checkpoint directory is empty while they train. A member is killed with kill -9 part-way:
# the coordinator must start the next epoch from the step the survivors hold (not from scratch),
# the standby must receive its stage's weights and optimizer state over the data links with a
# SHA-256 check, and the run must end at exactly the undisturbed run's final loss (bit-exact).
# Then the fallback: 2 stages x 1 replica, where a killed member's stage has no live replica, so
# everyone restarts from the latest complete checkpoint. The peers sit in lab8.json's emulated
# 2 ms lab, so the kills land mid-run on any machine.
#   tests/coordinator/test_coord_handover.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
STEPS=120
# --links scenario: placement and rings from lab8's own links, so both runs sum their gradients in
# the same ring order (rings chosen on probed links would follow the probes' noise, and a ring's
# order decides the last bits of the sum)
ARGS=(--open --stages 2 --replicas 4 --steps $STEPS --checkpoint-every 1000 --heartbeat 0.25
      --liveness 4 --peer-timeout 5 --exit-when-done --scenario "$(dirname "$0")/lab8.json"
      --links scenario)

run() { # run NAME PEERS: coordinator + PEERS peers on state dir $WORK/NAME
  STATE=$WORK/$1 PEER_LOG=$1-peer
  start_coord "$1.log" "${ARGS[@]}"
  for i in $(seq "$2"); do start_peer "$i" --region lab; done
}
status_step() { # the step /status shows for run NAME, 0 when it does not answer
  curl -sf "http://127.0.0.1:$(cat "$WORK/$1/http_port")/status" 2>/dev/null |
    python3 -c "import json,sys; print(json.load(sys.stdin)['step'])" 2>/dev/null || echo 0
}
# kill_member NAME MINSTEP: kills a random member once /status shows step MINSTEP or later
kill_member() {
  local end=$((SECONDS + 60)) step=0
  while [ $SECONDS -lt $end ]; do
    step=$(status_step "$1"); [ "$step" -ge "$2" ] && break; sleep 0.1
  done
  [ "$step" -ge "$2" ] || fail "$1: the run never reached step $2"
  members=$(grep -oE "peers by world rank \[[0-9 ]+\]" "$WORK/$1.log" | tail -1 | grep -oE "\[.*\]" | tr -d '[]')
  victim=$(echo "$members" | tr ' ' '\n' | shuf -n 1)
  vpid=$(pid_of_peer "$victim") || fail "$1: no pid for peer $victim"
  kill -9 "$vpid" 2>/dev/null || fail "$1: peer $victim had exited before the kill"
  KILL_STEP=$step
  echo "$1: killed peer $victim at step $step"
}

run plain 9
wait_for "$WORK/plain.log" "the run finished $STEPS steps" 90 || fail "the undisturbed run did not finish"
wait_exit "$CPID" 60
L0=$(json_field plain.log loss)

run kill 9
kill_member kill 30
ls -d "$WORK"/kill/checkpoints/stage-*/step-* 2>/dev/null &&
  fail "the checkpoint directory was meant to be empty while training"
wait_for "$WORK/kill.log" "the run finished $STEPS steps" 90 || fail "kill: the run did not finish after the kill"
wait_exit "$CPID" 60
line=$(grep -E "from step [0-9]+ \(" "$WORK/kill.log" | tail -1)
from=$(echo "$line" | grep -oE "from step [0-9]+" | grep -oE "[0-9]+")
echo "kill: $line"
echo "$line" | grep -q "the members' own state" || fail "kill: the next epoch did not start from the survivors' state"
# a member may be one step behind the step /status showed (the victim's last per-step message
# may have reached some peers and not others), so a whole stage may hold one step less
[ "$from" -ge $((KILL_STEP - 1)) ] || fail "kill: restarted at step $from, but step $KILL_STEP was reached before the kill"
grep -hE "MB of state from rank [0-9]+ .*SHA-256 ok" "$WORK"/kill-peer*.log | head -3
grep -qhE "stage [01] at step $from: .* MB of state from rank [0-9]+ .*SHA-256 ok" "$WORK"/kill-peer*.log ||
  fail "kill: no peer received its stage's state over the data links"
L=$(json_field kill.log loss)
echo "kill: final loss $L, undisturbed $L0"
[ "$L" = "$L0" ] || fail "kill: final loss $L differs from the undisturbed run's $L0"

# fallback: no live replica of the killed member's stage -> the latest complete checkpoint
ARGS=(--open --stages 2 --replicas 1 --steps $STEPS --checkpoint-every 10 --heartbeat 0.25
      --liveness 4 --peer-timeout 5 --exit-when-done --scenario "$(dirname "$0")/lab8.json")
run solo 3
wait_committed "$WORK/solo.log" 20 60 || fail "solo: no checkpoint at step 20"
kill_member solo 20
wait_for "$WORK/solo.log" "the run finished $STEPS steps" 90 || fail "solo: the run did not finish after the kill"
wait_exit "$CPID" 60
line=$(grep -E "from step [0-9]+ \(" "$WORK/solo.log" | tail -1)
# the checkpoint committed last before that epoch was formed (a shard reported late may commit
# a newer one afterwards)
committed=$(sed -n "1,/$(echo "$line" | grep -oE "epoch [0-9]+: train")/p" "$WORK/solo.log" |
            grep -oE "checkpoint: step [0-9]+ complete" | tail -1 | grep -oE "[0-9]+")
echo "solo: $line"
echo "$line" | grep -q "from step $committed (the latest complete checkpoint)" ||
  fail "solo: expected a restart from the checkpoint at step $committed"
echo "test_coord_handover: all checks passed"
