#!/usr/bin/env bash
# test_coord_swarm — the coordinator's capacity in short (scripts/bench-swarm.sh measures it):
# 1060 simulated CURVE peers from one coord_swarm process register with a coordinator of
# --max-peers 1024 and heartbeat for 20 s. The 36 past the limit are refused, each told the
# coordinator is full, and the refusals are logged and counted in /status and /metrics; the
# 1024 admitted are never dropped (no "lost" event); /status lists 1000 of them (those of the
# run first: the 32 newcomers of the probe epoch that the 1024th forms, COORD_PROBE_NEWCOMERS)
# and counts all 1024, as /metrics does.
#   tests/coordinator/test_coord_swarm.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
# 32 x 32 seats: a probe epoch forms once the table is full, which the swarm never binds for
start_coord coord.log --open --stages 32 --replicas 32 --layers 32 --batch 32 --micro-batches 1 \
  --heartbeat 1 --max-peers 1024 --max-connections 1200 --max-connections-per-source 1200 \
  --bind-timeout 600
port=$(cat "$STATE/http_port")
"$BIN/tests/coord_swarm" --endpoint "$EP" --server-key "$STATE/coordinator.pub" --peers 1060 \
  --duration 20 --rate 500 --json "$WORK/swarm.json" >"$WORK/swarm.log" 2>&1 &
SWARM=$!
PIDS+=("$SWARM")
wait_for "$WORK/swarm.log" "1024 admitted, 36 refused" 40 || fail "not 1024 admitted and 36 refused"
curl -sf "http://127.0.0.1:$port/status" >"$WORK/status.json" || fail "/status did not answer"
python3 - "$WORK/status.json" <<'PY' || fail "/status does not show the swarm"
import json, sys
s = json.load(open(sys.argv[1]))
print("/status:", {k: s[k] for k in ("max_peers", "peers_total", "peers_live", "refused_full",
                                      "peer_counts")}, "listed", len(s["peers"]))
counts = s["peer_counts"]
first = [p["state"] for p in s["peers"][:32]]
ok = (s["max_peers"] == 1024 and s["peers_total"] == 1024 and s["peers_live"] == 1024 and
      s["refused_full"] == 36 and counts["probing"] == 32 and counts["standby"] == 992 and
      len(s["peers"]) == 1000 and first == ["probing"] * 32)
sys.exit(0 if ok else 1)
PY
metrics=$(curl -sf "http://127.0.0.1:$port/metrics") || fail "/metrics did not answer"
grep -qx 'wantrain_peers{state="standby"} 992' <<<"$metrics" || fail "/metrics does not count 992 standbys"
grep -qx 'wantrain_registrations_refused_full 36' <<<"$metrics" || fail "/metrics does not count the refusals"
grep -q "refused: key .*the coordinator is full (all 1024 slots of --max-peers" "$WORK/coord.log" ||
  fail "the coordinator does not log the refusals past its limit"
wait_exit "$SWARM" 40 || fail "coord_swarm did not end"
python3 - "$WORK/swarm.json" <<'PY' || fail "the swarm saw losses: $(cat "$WORK/swarm.json")"
import json, sys
s = json.load(open(sys.argv[1]))
print("coord_swarm:", s)
sys.exit(0 if s["dropped"] == 0 and s["admitted"] == 1024 and s["acks"] >= 10 * 1024 else 1)
PY
! grep -q "coordinator: lost:" "$WORK/coord.log" || fail "the coordinator lost heartbeating peers"
echo "test_coord_swarm: all checks passed"
