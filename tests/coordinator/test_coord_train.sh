#!/usr/bin/env bash
# test_coord_train — 8 peerd (2 stages x 4 replicas) plus one standby train a small GPT under a
# coordinator on loopback. An undisturbed run must get below a loss of 2.2 nats (it starts at
# ln 64 = 4.16). Then, twice, a random member is killed with kill -9 at a random moment: the
# standby must take over, training must resume from a step no older than the last complete
# checkpoint before the kill (no committed step lost), within 30 s, and end at the undisturbed
# run's final loss (resume is bit-exact, so within 1e-4 relative). During the undisturbed run,
# /status and /metrics must show the true step, state and peers, and its coordinator is killed
# and restarted once: the restarted one must show the rings the members run. The peers sit in an
# emulated lab with 2 ms links (lab8.json), so a step takes at least ~20 ms on any machine and the
# kills land mid-run; placement takes its links from that scenario, so no probe epoch precedes
# training (test_coord_probe tests the probe).
#   tests/coordinator/test_coord_train.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
STEPS=100
ARGS=(--open --stages 2 --replicas 4 --steps $STEPS --checkpoint-every 10 --heartbeat 0.25
      --liveness 4 --peer-timeout 5 --exit-when-done --scenario "$(dirname "$0")/lab8.json"
      --links scenario)

run() { # run NAME: coordinator + 9 peers on state dir $WORK/NAME, logs NAME.log / NAME-peerN.log
  STATE=$WORK/$1 PEER_LOG=$1-peer
  start_coord "$1.log" "${ARGS[@]}"
  for i in $(seq 9); do start_peer "$i" --region lab; done
}

run plain
# during training, /status and /metrics show the true step and the peers
wait_committed "$WORK/plain.log" 20 60 || fail "no checkpoint in the undisturbed run"
port=$(cat "$WORK/plain/http_port")
status=$(curl -sf "http://127.0.0.1:$port/status") || fail "/status did not answer"
metrics=$(curl -sf "http://127.0.0.1:$port/metrics") || fail "/metrics did not answer"
committed=$(grep -oE "checkpoint: step [0-9]+ complete" "$WORK/plain.log" | tail -1 | grep -oE "[0-9]+")
echo "$status" | python3 -c "
import json, sys
s = json.load(sys.stdin)
states = [p['state'] for p in s['peers']]
ok = s['state'] == 'training' and $committed <= s['step'] <= $STEPS and states.count('training') == 8 \
     and states.count('standby') == 1 and s['stages'] == 2 and s['replicas'] == 4
print(f\"/status: state {s['state']}, step {s['step']} (committed $committed), peers {states}\")
sys.exit(0 if ok else 1)" || fail "/status does not show the run as it is: $status"
# each stage's data-parallel ring in /status is a ring of its 4 replicas from replica 0, and
# every member of the stage runs that ring (its log says which)
echo "$status" | python3 -c "
import json, re, sys, glob
s = json.load(sys.stdin)
rings = s['rings']
ok = len(rings) == 2 and all(sorted(r) == [0, 1, 2, 3] and r[0] == 0 for r in rings)
seen = 0
for f in glob.glob('$WORK/plain-peer*.log'):
    for m in re.finditer(r'stage (\\d+) replica \\d+ of 2 x 4 trains.*the stage.s ring: replicas ([0-9 ]+)', open(f).read()):
        seen += 1
        ok = ok and [int(x) for x in m.group(2).split()] == rings[int(m.group(1))]
print('/status rings', rings, 'run by', seen, 'members')
ok = ok and seen == 8
sys.exit(0 if ok else 1)" || fail "the stages' rings in /status are not the ones the peers run"
# a coordinator killed mid-run and started again on its state keeps the plan's rings: /status
# shows the rings the running members still run, not replica order
rings_of() { curl -sf "http://127.0.0.1:$(cat "$WORK/plain/http_port")/status" |
             python3 -c "import json,sys; print(json.load(sys.stdin)['rings'])"; }
rings_before=$(rings_of) || fail "/status did not answer before the restart"
kill -9 "$CPID" 2>/dev/null || fail "the coordinator had exited before the kill"
wait "$CPID" 2>/dev/null
start_coord plain.log "${ARGS[@]}"
rings_after=""
for _ in $(seq 50); do rings_after=$(rings_of) && break; sleep 0.1; done
[ "$rings_after" = "$rings_before" ] ||
  fail "the restarted coordinator shows rings $rings_after, the members run $rings_before"
echo "rings after a coordinator restart: $rings_after (before: $rings_before)"
step_m=$(echo "$metrics" | grep -E "^wantrain_step " | awk '{print $2}')
[ -n "$step_m" ] && [ "${step_m%.*}" -ge "$committed" ] || fail "/metrics has no true wantrain_step: $step_m"
echo "$metrics" | grep -q 'wantrain_peers{state="training"} 8' || fail "/metrics does not count 8 training peers"
wait_for "$WORK/plain.log" "the run finished $STEPS steps" 60 || fail "the undisturbed run did not finish"
wait_exit "$CPID" 60
# the gradients went around those rings: each member's bytes to the replica of its stage that is
# not next to it in the ring are a small part of what it sent its ring neighbours
python3 - "$WORK" <<'PY' || fail "the stages' gradient bytes did not follow their rings"
import glob, re, sys
R = 4
rings, sent = {}, {}
for f in glob.glob(sys.argv[1] + '/plain-peer*.log'):
    text = open(f).read()
    for m in re.finditer(r'stage (\d+) replica (\d+) of 2 x 4 trains.*the stage.s ring: replicas ([0-9 ]+)', text):
        rings[int(m.group(1))] = [int(x) for x in m.group(3).split()]
    for m in re.finditer(r'stage (\d+) replica (\d+) \(rank \d+\) sent MB to ranks 0\.\.7: ([0-9. ]+)', text):
        sent[(int(m.group(1)), int(m.group(2)))] = [float(x) for x in m.group(3).split()]
ok = len(rings) == 2 and len(sent) == 8
for (s, r), mb in sorted(sent.items()):
    ring = rings[s]
    i = ring.index(r)
    near = {ring[(i + 1) % R], ring[(i - 1) % R]}
    far = [x for x in range(R) if x != r and x not in near]
    to_near = max(mb[s * R + x] for x in near)
    to_far = max(mb[s * R + x] for x in far)
    print(f'stage {s} replica {r}: ring {ring}, MB to neighbours {to_near:.3f}, to the far one {to_far:.3f}')
    ok = ok and to_far < 0.1 * to_near
sys.exit(0 if ok else 1)
PY
L0=$(json_field plain.log loss)
F0=$(json_field plain.log first_loss)
echo "undisturbed: first loss $F0, final loss $L0"
python3 -c "import sys; sys.exit(0 if $L0 < 2.2 and $F0 > 3.5 else 1)" ||
  fail "the undisturbed run ended at loss $L0 (first $F0); expected below 2.2"

for round in 1 2; do
  name=kill$round
  run "$name"
  K=$(( (RANDOM % 3 + 2) * 10 ))  # a checkpoint in 20..40: at least 60 steps (1.2 s) remain
  wait_committed "$WORK/$name.log" "$K" 60 || fail "$name: no checkpoint at or after step $K"
  sleep "0.$((RANDOM % 5))"
  committed=$(grep -oE "checkpoint: step [0-9]+ complete" "$WORK/$name.log" | tail -1 | grep -oE "[0-9]+")
  members=$(grep -oE "train 2 stages x 4 replicas, peers by world rank \[[0-9 ]+\]" "$WORK/$name.log" |
            tail -1 | grep -oE "\[.*\]" | tr -d '[]')
  victim=$(echo "$members" | tr ' ' '\n' | shuf -n 1 --random-source=<(yes $RANDOM))
  vpid=$(pid_of_peer "$victim") || fail "$name: no pid for peer $victim"
  kill -9 "$vpid" 2>/dev/null || fail "$name: peer $victim had exited before the kill (the run ended too early)"
  echo "$name: killed peer $victim (pid $vpid) after committed step $committed"
  wait_for "$WORK/$name.log" "the run finished $STEPS steps" 60 || fail "$name: the run did not finish after the kill"
  wait_exit "$CPID" 60
  grep -q "standby: peer [0-9]* takes over world rank" "$WORK/$name.log" || fail "$name: no standby took over"
  from=$(grep -oE "predicted cost .* from step [0-9]+" "$WORK/$name.log" | tail -1 | grep -oE "[0-9]+$")
  [ "$from" -ge "$committed" ] || fail "$name: resumed from step $from, but step $committed was committed"
  R=$(json_field "$name.log" recovery_s)
  L=$(json_field "$name.log" loss)
  echo "$name: resumed from step $from (committed $committed), recovery $R s, final loss $L (undisturbed $L0)"
  python3 -c "import sys; sys.exit(0 if 0 < $R < 30 else 1)" || fail "$name: recovery took $R s"
  python3 -c "import sys; sys.exit(0 if abs($L - $L0) <= 1e-4 * abs($L0) else 1)" ||
    fail "$name: final loss $L differs from the undisturbed $L0"
done
echo "test_coord_train: all checks passed"
