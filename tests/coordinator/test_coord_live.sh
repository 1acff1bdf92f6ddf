#!/usr/bin/env bash
# test_coord_live — live recovery of a DiLoCo run: a `--preset wan` run (DiLoCo H=100, sign
# pseudo-gradients) of 2 stages x 2 replicas plus a standby, checkpointing only at its end (no
# checkpoint is committed before the recovery), loses a member (kill -9) part-way after its
# first outer step. The next epoch must start from the members' own state at the newest step any
# of them holds, the standby must take a live replica's outer state over the data links
# (SHA-256 checked), and no survivor may train a step twice: the coordinator's recovery line says
# "steps trained again: 0" and every survivor's step counter (peerd's "trained steps A to B" per
# epoch) goes on past where it stopped. The run ends with a loss near the undisturbed run's (no
# longer bitwise: the replacement starts its round from the outer weights); both are printed.
#   tests/coordinator/test_coord_live.sh BIN_DIR [KILL_STEP]
BIN=$1
KILL_AT=${2:-120}
. "$(dirname "$0")/harness.sh"
STEPS=${STEPS:-170}
ARGS=(--open --stages 2 --replicas 2 --steps $STEPS --checkpoint-every 1000 --heartbeat 0.25
      --liveness 4 --peer-timeout 5 --exit-when-done --scenario "$(dirname "$0")/lab8.json"
      --links scenario --preset wan ${SEED:+--seed $SEED})

run() { # run NAME PEERS: coordinator + PEERS peers on state dir $WORK/NAME
  STATE=$WORK/$1 PEER_LOG=$1-peer
  start_coord "$1.log" "${ARGS[@]}" --checkpoint-dir "$WORK/$1-ckpt"
  for i in $(seq "$2"); do start_peer "$i" --region lab; done
}
status_step() {
  curl -sf "http://127.0.0.1:$(cat "$WORK/$1/http_port")/status" 2>/dev/null |
    python3 -c "import json,sys; print(json.load(sys.stdin)['step'])" 2>/dev/null || echo 0
}

run plain 5
wait_for "$WORK/plain.log" "the run finished $STEPS steps" 90 || fail "the undisturbed run did not finish"
wait_exit "$CPID" 60
L0=$(json_field plain.log loss)

run kill 5
end=$((SECONDS + 60)) step=0
while [ $SECONDS -lt $end ]; do step=$(status_step kill); [ "$step" -ge "$KILL_AT" ] && break; sleep 0.05; done
[ "$step" -ge "$KILL_AT" ] || fail "kill: the run never reached step $KILL_AT"
members=$(grep -oE "peers by world rank \[[0-9 ]+\]" "$WORK/kill.log" | tail -1 | grep -oE "\[.*\]" | tr -d '[]')
victim=$(echo "$members" | tr ' ' '\n' | shuf -n 1)
vpid=$(pid_of_peer "$victim") || fail "kill: no pid for peer $victim"
kill -9 "$vpid" 2>/dev/null || fail "kill: peer $victim had exited before the kill"
echo "kill: killed peer $victim at step $step"
wait_for "$WORK/kill.log" "the run finished $STEPS steps" 90 || fail "kill: the run did not finish after the kill"
wait_exit "$CPID" 60
line=$(grep -E "from step [0-9]+ \(" "$WORK/kill.log" | tail -1)
from=$(echo "$line" | grep -oE "from step [0-9]+" | grep -oE "[0-9]+")
echo "kill: $line"
# no checkpoint but the final one was committed before that epoch: it cannot have read one
sed -n "1,/$(echo "$line" | grep -oE "epoch [0-9]+: train")/p" "$WORK/kill.log" |
  grep -oE "checkpoint: step [0-9]+ complete" | grep -vq "step $STEPS " &&
  fail "kill: a checkpoint was committed before the recovery epoch"
echo "$line" | grep -q "the members' own state" || fail "kill: the next epoch did not start from the members' state"
[ "$from" -ge $((step - 1)) ] || fail "kill: restarted at step $from, but step $step was reached before the kill"
rec=$(grep -E "live recovery at step $from:" "$WORK/kill.log" | tail -1)
echo "kill: $rec"
echo "$rec" | grep -q "steps trained again: 0;" || fail "kill: survivors trained steps again: $rec"
grep -qhE "stage [01] at step $from: .* MB of state from rank [0-9]+ .*SHA-256 ok; a replacement replica" \
  "$WORK"/kill-peer*.log || fail "kill: no peer took a live replica's outer state over the data links"
# every survivor's step counter: the steps its epochs trained never overlap
for f in "$WORK"/kill-peer*.log; do
  { grep -oE "epoch [0-9]+: stage [01] replica [01] trained steps [0-9]+ to [0-9]+" "$f" || true; } |
    awk -v f="${f##*/}" '{a=$(NF-2); b=$NF; if (a <= last) {print f ": trained step " a " again (last " last ")"; bad=1} last=b}
                         END {exit bad}' || fail "kill: a survivor trained a step twice"
done
grep -hoE "epoch [0-9]+: stage [01] replica [01] trained steps [0-9]+ to [0-9]+" "$WORK"/kill-peer*.log | sort -t' ' -k2n
t_done=$(grep -oE "training resumed past step [0-9]+ [0-9.]+ s after the loss" "$WORK/kill.log" | tail -1 | grep -oE "[0-9.]+ s after" | grep -oE "[0-9.]+")
L=$(json_field kill.log loss)
echo "kill: final loss $L, undisturbed $L0, difference $(python3 -c "print($L - $L0)"); recovery ${t_done:-?} s"
echo "RESULT kill_step=$step from=$from loss=$L undisturbed=$L0 recovery_s=${t_done:-nan}"
python3 -c "import sys, math; sys.exit(0 if math.isfinite($L) and abs($L - $L0) < 0.25 * $L0 else 1)" ||
  fail "kill: final loss $L is far from the undisturbed run's $L0"
echo "test_coord_live: all checks passed"
