#!/usr/bin/env bash
# test_dashboard_run — the dashboard page against a real run. A coordinator and five peerd
# (2 stages x 2 replicas plus a standby) train in lab8.json's emulated 2 ms lab; once a checkpoint
# is committed, headless Chromium loads the page, lets its script poll /status for 4 s of virtual
# time and dumps the DOM. The DOM must show the step (between what /status said just before and
# just after), the state, a loss that /status served, every member on its stage x replica seat,
# the standby among the other peers, and a drawn loss curve. Skips (77) without Chromium.
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
timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
  --disable-extensions --disable-background-networking --virtual-time-budget=4000 \
  --user-data-dir="$WORK/profile" --dump-dom "$URL/" >"$WORK/dom.html" 2>"$WORK/chromium.log" ||
  fail "chromium failed: $(tail -5 "$WORK/chromium.log")"
curl -sf "$URL/status" >"$WORK/after.json" || fail "/status did not answer after chromium"
python3 - "$WORK" <<'PY' || fail "the dashboard does not show the run as it is"
import json, sys
from html.parser import HTMLParser
work = sys.argv[1]
before = json.load(open(f"{work}/before.json"))
after = json.load(open(f"{work}/after.json"))

class Dom(HTMLParser):
    """Text by element id, the seats' text by (stage, replica), the other peers' rows."""
    def __init__(self):
        super().__init__()
        self.by_id, self.seats, self.others, self.stack, self.points = {}, {}, [], [], ""
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        key = None
        if "id" in a: key = ("id", a["id"])
        if tag == "td" and "data-stage" in a: key = ("seat", (int(a["data-stage"]), int(a["data-replica"])))
        if tag == "tr" and a.get("class") == "other": key = ("other", len(self.others)); self.others.append("")
        if a.get("id") == "loss-line": self.points = a.get("points", "")
        self.stack.append((tag, key))
    def handle_endtag(self, tag):
        while self.stack:
            t, _ = self.stack.pop()
            if t == tag: break
    def handle_data(self, data):
        for _, key in self.stack:
            if key is None: continue
            kind, k = key
            if kind == "id": self.by_id[k] = self.by_id.get(k, "") + data
            if kind == "seat": self.seats[k] = self.seats.get(k, "") + data + " "
            if kind == "other": self.others[k] += data + " "

d = Dom()
d.feed(open(f"{work}/dom.html").read())
step = int(d.by_id.get("step", "-1"))
problems = []
if d.by_id.get("conn") != "live": problems.append(f"connection indicator '{d.by_id.get('conn')}'")
if not before["step"] <= step <= after["step"]:
    problems.append(f"step {step} is not between /status's {before['step']} and {after['step']}")
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
print(f"dashboard: step {step} (status {before['step']}..{after['step']}), loss {shown}, "
      f"seats {sorted((k, v.split()[0]) for k, v in d.seats.items())}, curve {len(d.points.split())} points")
for p in problems: print("  " + p)
sys.exit(1 if problems else 0)
PY
echo "test_dashboard_run: all checks passed"
