#!/usr/bin/env bash
# test_coord_swarm_probe — probing that scales: 100 simulated peers in 4 regions that answer
# probes (coord_swarm --answer 1: a simulated network, 50 ms per probed pair) join a 4 x 4 run.
# Within 60 s a train epoch starts with 16 of them, the 84 others standing by. On the way every
# live peer is probed (its access link estimated), no probe epoch has more than 64 members or
# measures more than 256 pairs (all pairs among 100 would be 4950), the probe epochs after the
# first pair the newcomers with landmarks, the placement's estimated links are probed before it
# trains, and no heartbeating peer is lost.
#   tests/coordinator/test_coord_swarm_probe.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
start_coord coord.log --open --stages 4 --replicas 4 --layers 4 --batch 4 --micro-batches 1 \
  --heartbeat 1 --max-connections 300 --max-connections-per-source 300
port=$(cat "$STATE/http_port")
"$BIN/tests/coord_swarm" --endpoint "$EP" --server-key "$STATE/coordinator.pub" --peers 100 \
  --duration 60 --train-then 3 --rate 200 --answer 1 --regions 4 --pair-s 0.05 --json "$WORK/swarm.json" \
  >"$WORK/swarm.log" 2>&1 &
SWARM=$!
PIDS+=("$SWARM")
wait_for "$WORK/coord.log" "epoch [0-9]*: train 4 stages x 4 replicas" 60 ||
  fail "no train epoch within 60 s of the swarm's start"
curl -sf "http://127.0.0.1:$port/status" >"$WORK/status.json" || fail "/status did not answer"
python3 - "$WORK/status.json" <<'PY' || fail "/status does not show 100 probed peers, 16 training"
import json, sys
s = json.load(open(sys.argv[1]))
print("/status:", s["peer_counts"], "probed", s["probe"]["probed"], "of", s["probe"]["live"])
c = s["peer_counts"]
sys.exit(0 if (s["probe"]["probed"] == 100 and s["probe"]["live"] == 100 and
               c["training"] == 16 and c["standby"] == 84) else 1)
PY
python3 - "$WORK/coord.log" <<'PY' || fail "the probe epochs were not bounded"
import re, sys
log = open(sys.argv[1]).read()
groups = [len(m.split()) for m in re.findall(r"epoch \d+: probe the links among peers \[([^\]]*)\]", log)]
pairs = [int(m) for m in re.findall(r"not probed yet: .* (\d+) pairs", log)]
landmarks = [int(m) for m in re.findall(r"of them with (\d+) landmarks", log)]
refined = len(re.findall(r"the placement uses \d+ links that are only estimated", log))
print("probe epochs:", len(groups), "members", groups, "pairs", pairs, "landmarks", landmarks,
      "placement refinements", refined)
ok = (groups and max(groups) <= 64 and pairs and max(pairs) <= 256 and
      all(l > 0 for l in landmarks[1:]) and refined >= 1)
sys.exit(0 if ok else 1)
PY
! grep -q "coordinator: lost:" "$WORK/coord.log" || fail "the coordinator lost heartbeating peers"
wait_exit "$SWARM" 10 || fail "coord_swarm did not end 3 s after the train epoch started"
python3 - "$WORK/swarm.json" <<'PY' || fail "the swarm did not see a train epoch: $(cat "$WORK/swarm.json")"
import json, sys
s = json.load(open(sys.argv[1]))
print("coord_swarm:", s)
sys.exit(0 if s["dropped"] == 0 and s["admitted"] == 100 and s["train_epochs"] >= 1 and
         0 < s["first_train_s"] <= 60 and s["first_train_size"] == 16 else 1)
PY
echo "test_coord_swarm_probe: all checks passed"
