#!/usr/bin/env bash
# test_netns_placement — placement holds on a kernel-shaped network. Four region namespaces on a
# bridge, each region's uplink shaped by tbf (200 / 100 / 50 / 25 Mbit/s), two peerd per region
# and the coordinator in a hub namespace; a 2 x 4 run placed by the GA, then three runs placed
# at random (--solver shuffle), all on the same namespaces (scripts/bench_netns.py). Checks:
#   (a) the probes: every region's two peers found behind one shared uplink; the directed links
#       between regions against one TCP stream through the same tbf (the reference): median
#       within 15%, every one within 35% (each printed);
#   (b) each run's measured iteration within 25% of the coordinator's prediction and of
#       netsim simulate for the same plan (the random runs: their mean);
#   (c) the GA placement measured faster than the mean of the random ones.
# Skips (77) where namespaces cannot be made (not root, no ip netns).
#   tests/netns/test_netns_placement.sh BIN_DIR SOURCE_DIR
set -uo pipefail
BIN=$1
SRC=$2
OUT=$(mktemp "${TMPDIR:-/tmp}/wt-netns-test-XXXXXX.json")
trap 'rm -f "$OUT"' EXIT
python3 "$SRC/scripts/bench_netns.py" --bin "$BIN" --rates 200,100,50,25 --random 3 \
  --channels 192 --steps 10 --prefix wt19t --subnet 218 --json-out "$OUT"
rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || { echo "FAIL: the namespaces bench failed ($rc)"; exit 1; }
python3 - "$OUT" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
bad = []
# (a) shared uplinks and directed links
by_region = {}
for a in r["access"]:
    by_region.setdefault(a["region"], set()).add(a["link"])
for region, links in sorted(by_region.items()):
    if len(links) != 1:
        bad.append(f"region {region}'s peers were not found behind one uplink: links {links}")
errs = [abs(l["error"]) for l in r["links"]]
print(f"(a) {len(errs)} directed links between regions: median |error| {statistics.median(errs):.1%}"
      f", worst {max(errs):.1%} (target 15%)")
if len(errs) != 48 or statistics.median(errs) > 0.15 or max(errs) > 0.35:
    bad.append("probed links too far from the TCP reference")
# (b) measured vs predicted and netsim
ga, rnd = r["runs"][0], r["runs"][1:]
mean = lambda k: statistics.mean(x[k] for x in rnd)
for name, m, p, s in [("ga", ga["measured_s"], ga["predicted_s"], ga["netsim_s"]),
                      ("random (mean)", mean("measured_s"), mean("predicted_s"), mean("netsim_s"))]:
    print(f"(b) {name}: measured {m:.3f} s, predicted {p:.3f} s ({m / p - 1:+.1%}), "
          f"netsim {s:.3f} s ({m / s - 1:+.1%})")
    if abs(m / p - 1) > 0.25 or abs(m / s - 1) > 0.25:
        bad.append(f"{name}: measured iteration more than 25% from the prediction or netsim")
# (c) GA vs random
print(f"(c) GA {ga['measured_s']:.3f} s vs random mean {mean('measured_s'):.3f} s: measured "
      f"speed-up {r['speedup_measured']:.2f}x, predicted {r['speedup_predicted']:.2f}x")
if not ga["measured_s"] < mean("measured_s"):
    bad.append("the GA placement was not measured faster than the random ones")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
rc=$?
[ $rc = 0 ] && echo "test_netns_placement: all checks passed"
exit $rc
