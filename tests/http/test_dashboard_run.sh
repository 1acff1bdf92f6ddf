#!/usr/bin/env bash
# test_dashboard_run — the dashboard page against a real run, in two parts.
#  A. A coordinator and five peerd (2 stages x 2 replicas plus a standby) train in lab8.json's
#     emulated 2 ms lab; once a checkpoint is committed, headless Chromium loads the page, lets
#     its script poll /status for 4 s of virtual time and dumps the DOM. The DOM must show the
#     step (between what /status said just before and just after), the total steps, the state, a
#     loss that /status served, the latest complete checkpoint, the measured iteration, every
#     member on its stage x replica seat, the standby among the other peers, a drawn loss curve,
#     the probed links of all five peers and the event log (joins, epochs, checkpoints).
#  B. A short run finishes and its coordinator is started again on the state directory, with no
#     peer: /status and the page show the finished run as it ended (same run id, state done, its
#     last step and final loss, every peer "finished", none "lost", the completion event).
# Skips (77) without Chromium.
#   tests/http/test_dashboard_run.sh BIN_DIR
BIN=$1
CHROMIUM=${WT_CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome)}
if [ -z "$CHROMIUM" ]; then
  echo "test_dashboard_run: skipped, no chromium (apt-get install chromium, or set WT_CHROMIUM)"
  exit 77
fi
. "$(dirname "$0")/../coordinator/harness.sh"
start_coord coord.log --open --stages 2 --replicas 2 --steps 100000 --checkpoint-every 10 \
  --heartbeat 0.25 --liveness 4 --peer-timeout 5 --scenario "$(dirname "$0")/../coordinator/lab8.json"
for i in 1 2 3 4 5; do start_peer "$i" --region lab; done
wait_committed "$WORK/coord.log" 10 60 || fail "no checkpoint: the run did not start"
URL="http://127.0.0.1:$(cat "$STATE/http_port")"
curl -sf "$URL/status" >"$WORK/before.json" || fail "/status did not answer"
# dump_dom URL OUT: the page's DOM after 4 s of virtual time.
dump_dom() {
  timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --disable-extensions --disable-background-networking --virtual-time-budget=4000 \
    --user-data-dir="$WORK/profile" --dump-dom "$1/" >"$2" 2>"$WORK/chromium.log" ||
    fail "chromium failed: $(tail -5 "$WORK/chromium.log")"
}
dump_dom "$URL" "$WORK/dom.html"
curl -sf "$URL/status" >"$WORK/after.json" || fail "/status did not answer after chromium"
python3 - "$WORK" "$(dirname "$0")" <<'PY' || fail "A: the dashboard does not show the run as it is"
import json, sys
work = sys.argv[1]
before = json.load(open(f"{work}/before.json"))
after = json.load(open(f"{work}/after.json"))

sys.path.insert(0, sys.argv[2])
from dashboard_dom import Dom
d = Dom()
d.feed(open(f"{work}/dom.html").read())
step = int(d.by_id.get("step", "-1"))
problems = []
if d.by_id.get("conn") != "live": problems.append(f"connection indicator '{d.by_id.get('conn')}'")
if not before["step"] <= step <= after["step"]:
    problems.append(f"step {step} is not between /status's {before['step']} and {after['step']}")
if d.by_id.get("steps") != "100000": problems.append(f"total steps '{d.by_id.get('steps')}'")
ckpt = d.by_id.get("ckpt", "")
if not (ckpt.startswith("step ") and before["committed_step"] <= int(ckpt[5:]) <= after["committed_step"]):
    problems.append(f"checkpoint '{ckpt}' is not /status's {before['committed_step']}..{after['committed_step']}")
if not d.by_id.get("it-measured", "-").endswith(" ms"):
    problems.append(f"measured iteration '{d.by_id.get('it-measured')}'")
# the probed links of all five peers: a 5 x 5 matrix whose measured cells read
# "<latency> ms <bandwidth> bit/s", each pair measured in at least one direction, as /status has it
links = {k: v for k, v in d.links.items() if k[0] != k[1]}
measured = {k for k, v in links.items() if v != "-"}
pr = after["probe"]
served = {(str(a), str(b)) for i, a in enumerate(pr["peers"]) for j, b in enumerate(pr["peers"])
          if i != j and (pr["bandwidth_Bps"][i][j] or -1) > 0}
pairs = {tuple(sorted(k)) for k in measured}
if (len(links) != 20 or len(pairs) != 10 or not measured <= served
        or not all(links[k].endswith("bit/s") and " ms " in links[k] for k in measured)):
    problems.append(f"probed links {links}")
kinds = set(d.event_kinds)
if not {"joined", "epoch", "checkpoint"} <= kinds: problems.append(f"event kinds {kinds}")
if d.by_id.get("state") != "training": problems.append(f"state '{d.by_id.get('state')}'")
served = [round(l, 4) for _, l in after["loss_history"]]
shown = float(d.by_id.get("lossv", "nan"))
if round(shown, 4) not in served: problems.append(f"loss {shown} is not one /status served")
if int(d.by_id.get("npeers", "0")) != 5: problems.append(f"{d.by_id.get('npeers')} peers shown")
for p in after["peers"]:
    if p["state"] == "training":
        seat = d.seats.get((p["stage"], p["replica"]), "")
        if str(p["id"]) not in seat.split():
            problems.append(f"seat stage {p['stage']} replica {p['replica']} shows '{seat.strip()}', want peer {p['id']}")
    elif not any(str(p["id"]) in row.split() for row in d.others):
        problems.append(f"standby peer {p['id']} is not among the other peers {d.others}")
if len(d.seats) != 4: problems.append(f"{len(d.seats)} seats for 2 x 2 tasklets")
if len(d.points.split()) < 3: problems.append(f"loss curve '{d.points}'")
print(f"A: dashboard: step {step} (status {before['step']}..{after['step']}), loss {shown}, "
      f"checkpoint {ckpt}, {len(measured)} of {len(links)} links measured, events {sorted(kinds)}, "
      f"seats {sorted((k, v.split()[0]) for k, v in d.seats.items())}, curve {len(d.points.split())} points")
for p in problems: print("  " + p)
sys.exit(1 if problems else 0)
PY
kill "$CPID"; for i in 1 2 3 4 5; do kill "${PEER_PID[$i]}"; done; wait 2>/dev/null

# B
STATE=$WORK/b PEER_LOG=b-peer
start_coord b.log --open --stages 2 --replicas 2 --steps 30 --checkpoint-every 10 --heartbeat 0.25 \
  --liveness 4 --peer-timeout 5 --exit-when-done --scenario "$(dirname "$0")/../coordinator/lab8.json"
for i in 1 2 3 4; do start_peer "$i" --region lab; done
wait_exit "$CPID" 90 || fail "B: the run did not finish"
grep '^coordinator: final ' "$WORK/b.log" | tail -1 | sed 's/^coordinator: final //' >"$WORK/final.json"
for i in 1 2 3 4; do wait "${PEER_PID[$i]}" 2>/dev/null; done
start_coord b.log --open --stages 2 --replicas 2 --steps 30 --checkpoint-every 10 --heartbeat 0.25 \
  --liveness 4 --peer-timeout 5 --scenario "$(dirname "$0")/../coordinator/lab8.json"
sleep 2 # longer than the liveness window: a peer wrongly taken as live would be lost by now
URL="http://127.0.0.1:$(cat "$STATE/http_port")"
curl -sf "$URL/status" >"$WORK/restarted.json" || fail "B: /status did not answer"
dump_dom "$URL" "$WORK/dom-b.html"
python3 - "$WORK" "$(dirname "$0")" <<'PY' || fail "B: the restarted coordinator does not show the finished run"
import json, sys
sys.path.insert(0, sys.argv[2])
from dashboard_dom import Dom
work = sys.argv[1]
final = json.load(open(f"{work}/final.json"))
st = json.load(open(f"{work}/restarted.json"))
d = Dom()
d.feed(open(f"{work}/dom-b.html").read())
problems = []
for k in ("run", "state", "step", "loss", "committed_step"):
    if st[k] != final[k]: problems.append(f"/status {k} {st[k]!r}, the run ended with {final[k]!r}")
if st["state"] != "done" or st["step"] != 30: problems.append(f"state {st['state']} at step {st['step']}")
states = sorted(p["state"] for p in st["peers"])
if states != ["finished"] * 4: problems.append(f"peer states {states}")
if not any(e["kind"] == "complete" for e in st["events"]): problems.append("no completion event")
if d.by_id.get("run") != final["run"]: problems.append(f"page run id {d.by_id.get('run')}")
if d.by_id.get("state") != "done" or d.by_id.get("step") != "30":
    problems.append(f"page: state {d.by_id.get('state')} step {d.by_id.get('step')}")
if d.by_id.get("lossv") != f"{final['loss']:.4f}": problems.append(f"page loss {d.by_id.get('lossv')}")
if d.by_id.get("eta") != "done" or d.by_id.get("progress") != "100.0 %":
    problems.append(f"page progress {d.by_id.get('progress')}, time left {d.by_id.get('eta')}")
if "lost" in " ".join(d.others): problems.append(f"peers shown lost: {d.others}")
if "complete" not in d.event_kinds: problems.append(f"page events {d.event_kinds}")
print(f"B: restarted on the finished run {st['run']}: {st['state']} at step {st['step']}, loss "
      f"{st['loss']}, peers {states}; page shows {d.by_id.get('state')} step {d.by_id.get('step')}")
for p in problems: print("  " + p)
sys.exit(1 if problems else 0)
PY
echo "test_dashboard_run: all checks passed"
