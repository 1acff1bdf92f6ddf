#!/usr/bin/env bash
# test_coord_preset — communication presets in a coordinator run, and recovery of a run whose
# replicas keep sync state. 2 stages x 2 replicas of peerd (plus a standby) in lab8.json's
# emulated 2 ms lab:
#   - a `--preset wan` run (DiLoCo H=100, sign pseudo-gradients) trains to the end, its peers log
#     the setting, and all the peers together send at most half the bytes of a `--preset none`
#     run of the same steps (what remains is mostly the pipeline's activations); its /status
#     shows the applied setting under "sync";
#   - a run with int8 gradients and error feedback every step (no DiLoCo) loses a member, killed
#     with kill -9 after a checkpoint: the standby takes over, the next epoch starts from the
#     latest complete checkpoint (never from the survivors' memory, which lacks the
#     error-feedback residuals), and the run ends at exactly the undisturbed run's final loss, so
#     the replacement started from the lost replica's residuals. (A DiLoCo run recovers live
#     instead: test_coord_live.)
# Placement takes lab8.json's links as they are (--links scenario): no probe epoch first.
#   tests/coordinator/test_coord_preset.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
STEPS=130
ARGS=(--open --stages 2 --replicas 2 --steps $STEPS --checkpoint-every 10 --heartbeat 0.25
      --liveness 4 --peer-timeout 5 --exit-when-done --scenario "$(dirname "$0")/lab8.json"
      --links scenario)

run() { # run NAME PEERS PRESET [ARGS...]: coordinator + PEERS peers on state dir $WORK/NAME
  local name=$1 peers=$2 preset=$3; shift 3
  STATE=$WORK/$name PEER_LOG=$name-peer
  start_coord "$name.log" "${ARGS[@]}" --preset "$preset" --checkpoint-dir "$WORK/$name-ckpt" "$@"
  for i in $(seq "$peers"); do start_peer "$i" --region lab; done
}
finish() { # finish NAME: waits for the run's end and prints its total bytes
  wait_for "$WORK/$1.log" "the run finished $STEPS steps" 60 || fail "$1: the run did not finish"
  wait_exit "$CPID" 30 || fail "$1: the coordinator did not exit cleanly"
}
bytes() { python3 -c "print(int($(json_field "$1.log" bytes_intra_region) + $(json_field "$1.log" wan_bytes)))"; }

run none 4 none
finish none
run wan 4 wan
curl -sf "http://127.0.0.1:$(cat "$STATE/http_port")/status" | python3 -c "
import json, sys
s = json.load(sys.stdin)['sync']
print('wan: /status sync', s)
sys.exit(0 if (s['preset'], s['diloco'], s['grad_codec'], s['grad_ef'], s['outer_lr']) ==
         ('wan', 100, 'sign', 'off', 0.7) else 1)" || fail "wan: /status does not show the preset's setting"
finish wan
grep -q "coordinator: preset wan: DiLoCo H=100" "$WORK/wan.log" || fail "wan: the coordinator did not print the preset"
n=$(cat "$WORK"/wan-peer*.log | grep -c "syncs with DiLoCo H=100 (outer lr 0.7, momentum 0.9), grad codec sign, error feedback off")
[ "$n" -ge 4 ] || fail "wan: $n peers logged the preset's setting, expected 4"
B0=$(bytes none) B1=$(bytes wan)
L0=$(json_field none.log loss) L1=$(json_field wan.log loss)
echo "none: $B0 bytes, final loss $L0; wan: $B1 bytes, final loss $L1"
python3 -c "import sys; sys.exit(0 if 0 < $B1 <= 0.5 * $B0 else 1)" ||
  fail "wan sent $B1 bytes, not at most half of none's $B0"
python3 -c "import sys; sys.exit(0 if $L1 < 3.5 else 1)" || fail "wan did not train: final loss $L1"

EF=(--grad-codec int8 --grad-ef on)
run ef 4 none "${EF[@]}"
finish ef
LL=$(json_field ef.log loss)
run kill 5 none "${EF[@]}"
wait_committed "$WORK/kill.log" 40 60 || fail "kill: no checkpoint at or after step 40"
committed=$(grep -oE "checkpoint: step [0-9]+ complete" "$WORK/kill.log" | tail -1 | grep -oE "[0-9]+")
members=$(grep -oE "train 2 stages x 2 replicas, peers by world rank \[[0-9 ]+\]" "$WORK/kill.log" |
          tail -1 | grep -oE "\[.*\]" | tr -d '[]')
victim=$(echo "$members" | tr ' ' '\n' | shuf -n 1 --random-source=<(yes $RANDOM))
vpid=$(pid_of_peer "$victim") || fail "kill: no pid for peer $victim"
kill -9 "$vpid" 2>/dev/null || fail "kill: peer $victim had exited before the kill"
echo "kill: killed peer $victim (pid $vpid) after committed step $committed"
finish kill
grep -q "standby: peer [0-9]* takes over world rank" "$WORK/kill.log" || fail "kill: no standby took over"
last=$(grep -oE "from step [0-9]+ \(.*\)" "$WORK/kill.log" | tail -1)
echo "kill: the last epoch started $last"
echo "$last" | grep -q "the latest complete checkpoint" ||
  fail "kill: the epoch after the loss did not start from the checkpoint: $last"
from=$(echo "$last" | grep -oE "[0-9]+" | head -1)
[ "$from" -ge "$committed" ] || fail "kill: resumed from step $from, but step $committed was committed"
L=$(json_field kill.log loss)
echo "int8 + error feedback: final loss $LL undisturbed, $L after the kill"
python3 -c "import sys; sys.exit(0 if abs($L - $LL) <= 1e-6 * abs($LL) else 1)" ||
  fail "kill: final loss $L differs from the undisturbed run's $LL"
echo "test_coord_preset: all checks passed"
