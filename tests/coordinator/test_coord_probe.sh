#!/usr/bin/env bash
# test_coord_probe — the links the coordinator measures through the peers' own ZeroMQ links
# under WAN emulation match the emulated scenario (coordinator/scenarios/wan4.json): five peers
# in four regions (two in eu-west, so a link inside a region is measured too) probe each other;
# every probed one-way latency and bandwidth, in both directions, must be within 10% of the
# scenario's, and /status must show the directed matrix and the access links. A peer whose
# region the scenario does not have is refused with the list of regions. The GA placement's
# predicted cost must be below the mean of random placements on the same links.
#   tests/coordinator/test_coord_probe.sh BIN_DIR SOURCE_DIR
BIN=$1
SRC=$2
. "$(dirname "$0")/harness.sh"
SCEN=$SRC/coordinator/scenarios/wan4.json
start_coord coord.log --open --stages 2 --replicas 2 --steps 2 --scenario "$SCEN" --probe-kib 1024 \
  --heartbeat 0.25 --liveness 8
regions=(eu-west eu-west us-east asia oceania)
for i in 0 1 2 3 4; do start_peer "$i" --region "${regions[$i]}"; done
"$BIN/peerd" --coordinator "$EP" --coordinator-key "$STATE/coordinator.pub" --region mars \
  --data-dir "$WORK/peer9" >"$WORK/peer9.log" 2>&1
grep -q "region 'mars' is not in the emulated scenario wan4; start peerd with --region one of: eu-west, us-east, asia, oceania" \
  "$WORK/peer9.log" || fail "an unknown region is not refused with the list"
wait_for "$WORK/coord.log" "train 2 stages x 2 replicas" 60 || fail "the probe did not finish"
python3 - "$STATE/state.db" "$SCEN" <<'PY' || fail "probed links do not match the scenario"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
s = json.load(open(sys.argv[2]))["scenarios"][0]
names = s["regions"]
region = dict(db.execute("SELECT key, region FROM peers"))
rows = db.execute("SELECT a, b, latency_s, bandwidth_Bps FROM links").fetchall()
worst, bad = 0.0, 0
print(f"{'link':<20} {'alpha ms':>9} {'want':>6} {'beta MB/s':>10} {'want':>6}")
for a, b, lat, bw in rows:
    i, j = names.index(region[a]), names.index(region[b])
    want_l = s["latency_ms"][i][j] / 1e3
    want_b = s["bandwidth_gbps"][i][j] * 1e9 / 8
    el, eb = abs(lat - want_l) / want_l, abs(bw - want_b) / want_b
    worst = max(worst, el, eb)
    bad += el > 0.10 or eb > 0.10
    print(f"{region[a] + '-' + region[b]:<20} {lat*1e3:9.2f} {want_l*1e3:6.0f} {bw/1e6:10.2f} {want_b/1e6:6.2f}")
print(f"{len(rows)} links, worst relative error {worst:.3f}")
sys.exit(0 if len(rows) == 20 and bad == 0 else 1)
PY
# both directions of every pair, and each peer's access link, are in /status; the two peers of
# eu-west have emulated links of their own, so their contention rounds find no shared uplink
grep -q "region eu-west (2 peers): separate uplink" "$WORK/coord.log" ||
  fail "the contention round of eu-west did not find separate links"
curl -sf "http://127.0.0.1:$(cat "$STATE/http_port")/status" >"$WORK/status.json" ||
  fail "/status did not answer"
python3 - "$WORK/status.json" <<'PY' || fail "/status lacks the probed model"
import json, sys
p = json.load(open(sys.argv[1]))["probe"]
n = len(p["peers"])
bw = p["bandwidth_Bps"]
assert n == 5 and all(bw[i][j] > 0 for i in range(n) for j in range(n) if i != j), bw
assert all(a["up_Bps"] > 0 and a["down_Bps"] > 0 for a in p["access"]), p["access"]
assert len({a["link"] for a in p["access"]}) == 5, p["access"]
print("status probe: 5 peers, 20 directed links, 5 access links")
PY
# the GA placement on the measured links costs less than a random placement's mean
costs=$(grep -oE "predicted cost [0-9.]+ s \(random placement [0-9.]+ s\)" "$WORK/coord.log" | head -1)
ga=$(echo "$costs" | awk '{print $3}')
rnd=$(echo "$costs" | awk '{print $7}')
python3 -c "import sys; sys.exit(0 if 0 < $ga < $rnd else 1)" ||
  fail "GA placement costs $ga s, not below the random mean $rnd s"
echo "predicted cost: GA $ga s, random placement mean $rnd s"
echo "test_coord_probe: all checks passed"
