#!/usr/bin/env bash
# bench-swarm.sh — the coordinator's capacity on this machine: --live simulated peers
# (coord_swarm) register and heartbeat at the default interval for --duration seconds while
# /status and /metrics are fetched five times a second; then, on a fresh state directory,
# --registered peers register and heartbeat at --registered-heartbeat. The run's seats
# (stages x replicas) exceed the live peers, so no epoch forms there: what is measured is
# admission, heartbeats and the status server. The seats are at most 64 x 64, so among more
# peers probe epochs form; the simulated peers never bind, and are excluded from them. Prints a table and one JSON line:
#   {"bench":"swarm","live":..,"duration_s":..,"heartbeat_s":..,"lost":..,"dropped":..,
#    "status_p50_ms":..,"status_p99_ms":..,"status_max_ms":..,"status_bytes":..,
#    "metrics_p50_ms":..,"cpu_pct":..,"cpu_pct_per_100":..,"us_per_heartbeat":..,
#    "ack_p50_ms":..,"ack_p99_ms":..,"registered":..,"registered_admitted":..,
#    "registered_lost":..,"register_s":..,"registered_status_p50_ms":..,
#    "registered_status_p99_ms":..,"registered_cpu_pct":..,"rss_mib":..,"loadavg":..}
# "lost" counts the coordinator's "lost" events, "dropped" the swarm peers it dropped while
# they heartbeated; both are false losses and should be 0.
# --registered 0 skips the second part. A third part, --probing N peers that answer probes
# (coord_swarm --answer 1: 4 regions, a simulated network, --pair-s seconds per probed pair)
# join a 4 x 4 run: the time until its first train epoch starts, the probe epochs on the way
# (their largest group and pair count) and the coordinator's CPU meanwhile; 0 skips it:
#    "probing":..,"probing_first_train_s":..,"probing_epochs":..,"probing_max_members":..,
#    "probing_max_pairs":..,"probing_cpu_pct":..,"probing_status_p99_ms":..
#   scripts/bench-swarm.sh [--build build] [--live 1000] [--duration 300] [--registered 10000]
#                          [--registered-heartbeat 5] [--registered-duration 60]
#                          [--probing 100] [--pair-s 0.05]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build LIVE=1000 DURATION=300 REGISTERED=10000 REG_HB=5 REG_DURATION=60 PROBING=100 PAIR_S=0.05
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --live) LIVE=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --registered) REGISTERED=$2; shift 2 ;;
    --registered-heartbeat) REG_HB=$2; shift 2 ;;
    --registered-duration) REG_DURATION=$2; shift 2 ;;
    --probing) PROBING=$2; shift 2 ;;
    --pair-s) PAIR_S=$2; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "bench-swarm.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
for b in coordinator tests/coord_swarm; do
  [ -x "$BUILD/bin/$b" ] || { echo "bench-swarm.sh: $BUILD/bin/$b not built" >&2; exit 2; }
done
command -v python3 >/dev/null || { echo "bench-swarm.sh: python3 is missing (scripts/deps.sh)" >&2; exit 2; }
exec python3 - "$BUILD/bin" "$LIVE" "$DURATION" "$REGISTERED" "$REG_HB" "$REG_DURATION" "$PROBING" "$PAIR_S" <<'EOF'
import json, os, subprocess, sys, tempfile, time, urllib.request

BIN, LIVE, DURATION, REGISTERED, REG_HB, REG_DURATION, PROBING, PAIR_S = (
    sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]),
    float(sys.argv[6]), int(sys.argv[7]), float(sys.argv[8]))
PER_PROCESS = 4000  # each simulated peer costs its process two descriptors
TICK = os.sysconf("SC_CLK_TCK")

def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK

def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0

def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else -1

def fetch(port, path):
    t = time.perf_counter()
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10).read()
    return (time.perf_counter() - t) * 1e3, body

def seats(n):
    # stages x replicas above n (at most 64 x 64), so that no epoch forms among the simulated
    # peers; past 4096 peers epochs do form, and the silent peers are excluded from them
    side = 1
    while side * side <= n and side < 64:
        side *= 2
    return ["--stages", str(side), "--replicas", str(side), "--layers", str(side),
            "--batch", str(side), "--micro-batches", "1", "--channels", "32", "--heads", "2"]

def seats_of(n):
    return int(seats(n)[1]) * int(seats(n)[3])

def start(work, n, heartbeat, run=None):
    state = os.path.join(work, "state")
    log = open(os.path.join(work, "coord.log"), "w")
    args = [f"{BIN}/coordinator", "--state-dir", state, "--open", "--heartbeat", str(heartbeat),
            "--max-peers", str(max(n + 16, seats_of(n))), "--max-connections", str(n + 64),
            "--max-connections-per-source", str(n + 64)] + (run or seats(n))
    if os.environ.get("WT_BENCH_NO_MAX_PEERS"):  # a coordinator that predates --max-peers
        args = args[:6] + args[8:]
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(200):
        if os.path.exists(f"{state}/http_port") and os.path.exists(f"{state}/endpoint"):
            break
        time.sleep(0.05)
    ep = open(f"{state}/endpoint").read().strip()
    port = int(open(f"{state}/http_port").read())
    return proc, state, ep, port

RATE = 250  # registrations per second, all processes together

def swarm(work, state, ep, n, duration, tag):
    procs, n_procs = [], (n + PER_PROCESS - 1) // PER_PROCESS
    for k in range(0, n, PER_PROCESS):
        m = min(PER_PROCESS, n - k)
        out = os.path.join(work, f"{tag}{k}.json")
        procs.append((subprocess.Popen(
            [f"{BIN}/tests/coord_swarm", "--endpoint", ep, "--server-key",
             f"{state}/coordinator.pub", "--peers", str(m), "--duration", str(duration),
             "--rate", str(RATE / n_procs), "--json", out],
            stdout=open(os.path.join(work, f"{tag}{k}.log"), "w"), stderr=subprocess.STDOUT), out))
    return procs

def totals(procs):
    t = {}
    for p, out in procs:
        p.wait()
        for k, v in json.load(open(out)).items():
            t.setdefault(k, []).append(v)
    return t

def wait_admitted(port, n, limit_s):
    end = time.time() + limit_s
    while time.time() < end:
        st = json.loads(fetch(port, "/status")[1])
        live = st.get("peers_live")  # the peers list holds at most 1000
        if live is None:
            live = sum(1 for p in st["peers"] if p["state"] != "lost")
        if live >= n:
            return True
        time.sleep(0.5)
    return False

def lost_events(work):
    return sum(1 for line in open(os.path.join(work, "coord.log")) if "coordinator: lost:" in line)

def phase(n, heartbeat, duration, tag):
    work = tempfile.mkdtemp(prefix=f"wt-bench-swarm-{tag}-")
    proc, state, ep, port = start(work, n, heartbeat)
    t_reg = time.time()
    procs = swarm(work, state, ep, n, n / RATE + 4 * heartbeat + duration + 10, tag)
    try:
        if not wait_admitted(port, n, n / RATE + 60):
            sys.exit(f"bench-swarm.sh: not all {n} peers were admitted; see {work}/coord.log")
        register_s = time.time() - t_reg
        time.sleep(2 * heartbeat)  # every peer past its first beat
        c0, t0 = cpu_s(proc.pid), time.time()
        status, metrics, size = [], [], 0
        while time.time() - t0 < duration:
            ms, body = fetch(port, "/status")
            status.append(ms)
            size = len(body)
            if len(status) % 10 == 0:
                metrics.append(fetch(port, "/metrics")[0])
            time.sleep(0.2)
        cpu = (cpu_s(proc.pid) - c0) / (time.time() - t0)
        rss = rss_mib(proc.pid)
        st = json.loads(fetch(port, "/status")[1])
    finally:
        t = totals(procs)
        proc.terminate()
        proc.wait()
    beats = n / heartbeat
    return {"work": work, "register_s": register_s, "status": status, "metrics": metrics,
            "size": size, "cpu": cpu, "rss": rss, "beats_per_s": beats, "swarm": t,
            "lost": lost_events(work), "st": st}

def probing(n):
    """n peers that answer probes join a 4 x 4 run: until its first train epoch starts."""
    import re
    work = tempfile.mkdtemp(prefix="wt-bench-swarm-probing-")
    run = ["--stages", "4", "--replicas", "4", "--layers", "4", "--batch", "4",
           "--micro-batches", "1", "--channels", "32", "--heads", "2"]
    proc, state, ep, port = start(work, n, 1, run)
    out = os.path.join(work, "probing.json")
    c0, t0 = cpu_s(proc.pid), time.time()
    sw = subprocess.Popen(
        [f"{BIN}/tests/coord_swarm", "--endpoint", ep, "--server-key", f"{state}/coordinator.pub",
         "--peers", str(n), "--duration", "300", "--train-then", "1", "--rate", "200",
         "--answer", "1", "--regions", "4", "--pair-s", str(PAIR_S), "--json", out],
        stdout=open(os.path.join(work, "probing.log"), "w"), stderr=subprocess.STDOUT)
    status = []
    while sw.poll() is None:
        status.append(fetch(port, "/status")[0])
        time.sleep(0.2)
    cpu = (cpu_s(proc.pid) - c0) / (time.time() - t0)
    proc.terminate()
    proc.wait()
    log = open(os.path.join(work, "coord.log")).read()
    groups = [len(m.split()) for m in re.findall(r"epoch \d+: probe the links among peers \[([^\]]*)\]", log)]
    pairs = [int(m) for m in re.findall(r"(\d+) pairs\n", log)]
    pairs += [int(m) for m in re.findall(r"the placement uses (\d+) links", log)]
    r = json.load(open(out))
    return {"probing": n, "probing_first_train_s": r["first_train_s"],
            "probing_epochs": len(groups), "probing_max_members": max(groups, default=0),
            "probing_max_pairs": max(pairs, default=0), "probing_cpu_pct": round(100 * cpu, 1),
            "probing_status_p99_ms": round(quantile(status, 0.99), 2)}

a = phase(LIVE, 0.5, DURATION, "live")
print("live part:", {k: a[k] for k in ("register_s", "cpu", "lost")}, "status p50/p99 ms",
      round(quantile(a["status"], 0.5), 2), round(quantile(a["status"], 0.99), 2),
      "dropped", sum(a["swarm"]["dropped"]), "loadavg", os.getloadavg()[0], flush=True)
EMPTY = {"register_s": 0, "status": [-1], "cpu": 0, "rss": 0, "lost": 0,
         "swarm": {"admitted": [0], "dropped": [0]}}
b = phase(REGISTERED, REG_HB, REG_DURATION, "reg") if REGISTERED > 0 else EMPTY
sw = a["swarm"]
res = {
    "bench": "swarm", "live": LIVE, "duration_s": DURATION, "heartbeat_s": 0.5,
    "lost": a["lost"], "dropped": sum(sw["dropped"]),
    "status_p50_ms": round(quantile(a["status"], 0.5), 2),
    "status_p99_ms": round(quantile(a["status"], 0.99), 2),
    "status_max_ms": round(max(a["status"]), 2), "status_bytes": a["size"],
    "metrics_p50_ms": round(quantile(a["metrics"], 0.5), 2),
    "cpu_pct": round(100 * a["cpu"], 1), "cpu_pct_per_100": round(100 * a["cpu"] / (LIVE / 100), 2),
    "us_per_heartbeat": round(1e6 * a["cpu"] / a["beats_per_s"], 1),
    "ack_p50_ms": max(sw["ack_p50_ms"]), "ack_p99_ms": max(sw["ack_p99_ms"]),
    "registered": REGISTERED, "registered_admitted": sum(b["swarm"]["admitted"]),
    "registered_lost": b["lost"] + sum(b["swarm"]["dropped"]),
    "register_s": round(b["register_s"], 1),
    "registered_status_p50_ms": round(quantile(b["status"], 0.5), 2),
    "registered_status_p99_ms": round(quantile(b["status"], 0.99), 2),
    "registered_cpu_pct": round(100 * b["cpu"], 1), "rss_mib": round(b["rss"], 1),
    "loadavg": os.getloadavg()[0],
}
if PROBING > 0:
    res.update(probing(PROBING))
    res["loadavg"] = os.getloadavg()[0]
rows = [("live peers (heartbeat 0.5 s)", LIVE), ("seconds", DURATION),
        ("false losses (lost + dropped)", res["lost"] + res["dropped"]),
        ("/status p50 / p99 / max, ms", f'{res["status_p50_ms"]} / {res["status_p99_ms"]} / {res["status_max_ms"]}'),
        ("/status bytes", res["status_bytes"]), ("/metrics p50, ms", res["metrics_p50_ms"]),
        ("coordinator CPU, % of a core", res["cpu_pct"]),
        ("CPU per 100 live peers, %", res["cpu_pct_per_100"]),
        ("CPU per heartbeat, us", res["us_per_heartbeat"]),
        ("heartbeat to ACK p50 / p99, ms", f'{res["ack_p50_ms"]} / {res["ack_p99_ms"]}'),
        (f"registered peers (heartbeat {REG_HB} s)", f'{res["registered_admitted"]} of {REGISTERED}'),
        ("  false losses", res["registered_lost"]), ("  seconds to admit all", res["register_s"]),
        ("  /status p50 / p99, ms", f'{res["registered_status_p50_ms"]} / {res["registered_status_p99_ms"]}'),
        ("  coordinator CPU, %", res["registered_cpu_pct"]), ("  coordinator RSS, MiB", res["rss_mib"])]
if PROBING > 0:
    rows += [(f"probing peers, 4 x 4 run ({PAIR_S} s a pair)", PROBING),
             ("  seconds to the first train epoch", res["probing_first_train_s"]),
             ("  probe epochs (largest group, pairs)", f'{res["probing_epochs"]} ({res["probing_max_members"]}, {res["probing_max_pairs"]})'),
             ("  coordinator CPU, %", res["probing_cpu_pct"]),
             ("  /status p99, ms", res["probing_status_p99_ms"])]
for k, v in rows:
    print(f"{k:<38} {v}")
print(json.dumps(res))
EOF
