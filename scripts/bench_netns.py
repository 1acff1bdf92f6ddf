#!/usr/bin/env python3
"""bench_netns — sim vs real on a kernel-shaped network (run by scripts/bench-netns.sh).

Builds one network namespace per region plus a hub namespace holding a bridge; every region
namespace reaches the bridge through a veth pair whose region-side end is shaped by the kernel
(tc qdisc tbf: the region's uplink). The peers of a region share its namespace, so they share
its uplink and talk to each other over the namespace's own loopback (the site's LAN). The
coordinator runs in the hub. Then, on the same namespaces: one run placed by the GA and
--random runs each placed by one uniformly random placement (the coordinator's --solver
shuffle, seeds 1..K). For each run: the measured iteration (the coordinator's /status), the
coordinator's prediction for its plan, and netsim simulate for the same plan on a scenario
written from the tbf rates. Prints a table and one JSON line.

What is kernel and what is not: the bandwidth of every link between regions is the kernel's
(tbf on the uplink; TCP over veth and a bridge). No latency is added (this kernel has no
netem, and the transport's user-space emulation is off here: no --scenario), so every link's
latency is the veth's plus wake-ups (0.1-0.8 ms one way as probed).

Exit status: 0, 1 on a failed run, 77 when namespaces cannot be made (not root, no ip netns).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77


def sh(*cmd, check=True, quiet=False):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip() or r.stdout.strip()}")
    return r


class Net:
    """The namespaces: PREFIX-hub with bridge PREFIXbr, PREFIX-rK per region, 10.R.0.0/24."""

    def __init__(self, prefix, rates, subnet):
        self.prefix, self.rates, self.subnet = prefix, rates, subnet
        self.hub = f"{prefix}hub"
        self.regions = [f"{prefix}r{k}" for k in range(len(rates))]
        self.hub_ip = f"10.{subnet}.0.254"

    def ip_of(self, k):
        return f"10.{self.subnet}.0.{k + 1}"

    def up(self):
        self.down()
        sh("ip", "netns", "add", self.hub)
        ex = ["ip", "netns", "exec", self.hub]
        sh(*ex, "ip", "link", "set", "lo", "up")
        sh(*ex, "ip", "link", "add", f"{self.prefix}br", "type", "bridge")
        sh(*ex, "ip", "addr", "add", f"{self.hub_ip}/24", "dev", f"{self.prefix}br")
        sh(*ex, "ip", "link", "set", f"{self.prefix}br", "up")
        for k, (ns, rate) in enumerate(zip(self.regions, self.rates)):
            sh("ip", "netns", "add", ns)
            hub_end, reg_end = f"{self.prefix}h{k}", f"{self.prefix}u{k}"
            sh(*ex, "ip", "link", "add", hub_end, "type", "veth", "peer", "name", reg_end,
               "netns", ns)
            sh(*ex, "ip", "link", "set", hub_end, "master", f"{self.prefix}br", "up")
            rx = ["ip", "netns", "exec", ns]
            sh(*rx, "ip", "link", "set", "lo", "up")
            sh(*rx, "ip", "addr", "add", f"{self.ip_of(k)}/24", "dev", reg_end)
            sh(*rx, "ip", "link", "set", reg_end, "up")
            # the uplink: the kernel's token bucket on the region's egress; a bucket of about
            # 2 ms at the rate (at least 16 KiB, a few packets) keeps bursts small
            burst = max(16 * 1024, int(rate * 1e6 / 8 * 0.002))
            sh(*rx, "tc", "qdisc", "add", "dev", reg_end, "root", "tbf", "rate",
               f"{rate}mbit", "burst", str(burst), "latency", "200ms")

    def tcp_goodput(self, k, seconds=1.5):
        """Payload bytes/s of one plain TCP stream from region k through its uplink to the hub:
        the reference the probes are held to (the tbf rate less TCP/IP's headers)."""
        server = ("import socket,sys,time\n"
                  "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                  f"s.bind(('{self.hub_ip}', 5219)); s.listen(1); print('ready', flush=True)\n"
                  "c,_=s.accept(); n=0; t0=None\n"
                  "while True:\n"
                  " b=c.recv(1<<20)\n"
                  " if not b: break\n"
                  " t0 = t0 or time.time(); n += len(b)\n"
                  "print(n / (time.time() - t0))\n")
        srv = subprocess.Popen(["ip", "netns", "exec", self.hub, "python3", "-c", server],
                               stdout=subprocess.PIPE, text=True)
        srv.stdout.readline()
        total = int(self.rates[k] * 1e6 / 8 * seconds)
        client = ("import socket\n"
                  f"s=socket.create_connection(('{self.hub_ip}', 5219)); b=bytes(1<<16); n=0\n"
                  f"while n < {total}: s.sendall(b); n += len(b)\n"
                  "s.close()\n")
        sh("ip", "netns", "exec", self.regions[k], "python3", "-c", client)
        out, _ = srv.communicate(timeout=60)
        return float(out.strip())

    def down(self):
        for ns in self.regions + [self.hub]:
            sh("ip", "netns", "del", ns, check=False)



def can_make_namespaces(prefix):
    if os.geteuid() != 0:
        return "not root: network namespaces need root (ip netns)"
    if not shutil.which("ip") or not shutil.which("tc"):
        return "ip or tc not found (Debian: iproute2)"
    probe = f"{prefix}chk"
    r = sh("ip", "netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"cannot make a network namespace: {r.stderr.strip()}"
    r = sh("ip", "netns", "exec", probe, "ip", "link", "add", "x", "type", "bridge", check=False)
    sh("ip", "netns", "del", probe, check=False)
    if r.returncode != 0:
        return f"cannot make a bridge in a namespace: {r.stderr.strip()}"
    return None


def get_status(net, port):
    r = sh("ip", "netns", "exec", net.hub, "curl", "-sf", "--max-time", "3",
           f"http://{net.hub_ip}:{port}/status", check=False)
    return json.loads(r.stdout) if r.returncode == 0 and r.stdout else None


def run_once(args, net, work, solver, seed):
    """One coordinator and its peers; returns the status seen while training and at the end."""
    state = os.path.join(work, f"state-{solver}-{seed}")
    log = open(os.path.join(work, f"coord-{solver}-{seed}.log"), "w")
    cmd = ["ip", "netns", "exec", net.hub, f"{args.bin}/coordinator", "--state-dir", state,
           "--open", "--bind", f"tcp://{net.hub_ip}:*", "--http-bind", net.hub_ip,
           "--stages", str(args.stages), "--replicas", str(args.replicas),
           "--steps", str(args.steps), "--batch", str(args.batch), "--seq", str(args.seq),
           "--channels", str(args.channels), "--heads", "2", "--layers", str(args.layers),
           "--micro-batches", str(args.micro_batches), "--warmup", "0", "--val-every", "0",
           "--val-batches", "1", "--checkpoint-every", "0", "--probe-kib", str(args.probe_kib),
           "--peer-timeout", "60", "--solver", solver, "--seed", str(seed)]
    procs = [subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)]
    try:
        for _ in range(100):
            if os.path.exists(f"{state}/endpoint") and os.path.exists(f"{state}/http_port"):
                break
            time.sleep(0.1)
        ep = open(f"{state}/endpoint").read().strip()
        port = open(f"{state}/http_port").read().strip()
        for k, ns in enumerate(net.regions):
            for j in range(args.peers_per_region):
                n = k * args.peers_per_region + j
                plog = open(os.path.join(work, f"peer-{solver}-{seed}-{n}.log"), "w")
                procs.append(subprocess.Popen(
                    ["ip", "netns", "exec", ns, f"{args.bin}/peerd", "--coordinator", ep,
                     "--coordinator-key", f"{state}/coordinator.pub", "--host", net.ip_of(k),
                     "--region", f"r{k}", "--data-dir", os.path.join(work, f"peer{n}")],
                    stdout=plog, stderr=subprocess.STDOUT))
        training, final, deadline = None, None, time.time() + args.run_timeout
        t_probe = None
        while time.time() < deadline:
            st = get_status(net, port)
            if st:
                final = st
                if st.get("state") == "probing" and t_probe is None:
                    t_probe = time.time()
                st["probe_s"] = time.time() - t_probe if t_probe else None
                if st.get("state") == "training" and all(
                        p.get("stage", -1) >= 0 for p in st["peers"] if p["state"] == "training"):
                    training = st
                if st.get("state") in ("done", "stopped"):
                    break
            time.sleep(0.5)
        if not final or final.get("state") != "done" or not training:
            raise RuntimeError(f"run {solver}/{seed} did not finish (see {work})")
        return training, final
    finally:
        for p in procs[::-1]:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()


def plan_of(args, st):
    """groups (devices by stage, replica order) and rings, in netsim's device numbering: region
    k's j-th peer (by id) is device k * peers_per_region + j."""
    peers = [p for p in st["peers"] if p.get("stage", -1) >= 0]
    by_region = {}
    for p in sorted(peers, key=lambda p: int(p["id"])):
        by_region.setdefault(p["region"], []).append(p)
    dev = {}
    for region, ps in by_region.items():
        k = int(region[1:])
        for j, p in enumerate(ps):
            dev[p["id"]] = k * args.peers_per_region + j
    groups = [[None] * args.replicas for _ in range(args.stages)]
    for p in peers:
        groups[p["stage"]][p["replica"]] = dev[p["id"]]
    return {"groups": groups, "rings": st["rings"]}


def scenario_of(args, st, tcp):
    """The namespaces as netsim sees them: per region one shared uplink (what one TCP stream
    carries through its tbf), no other limit (downlinks, the bridge, a namespace's loopback:
    10 Gbit/s)."""
    n = len(args.rates)
    prob = st["probe"]["problem"]
    return {
        "units": {"latency": "ms (one way)", "bandwidth": "Gbit/s per device"},
        "cost_model_constants": {"c_dp_bytes_per_stage": prob["c_dp_bytes"],
                                 "c_pp_bytes_per_cut": prob["c_pp_bytes"],
                                 "d_pp": args.stages, "d_dp": args.replicas},
        "scenarios": [{
            "name": "netns", "regions": [f"r{k}" for k in range(n)],
            "gpus_per_region": [args.peers_per_region] * n,
            "latency_ms": [[0.05] * n for _ in range(n)],
            "bandwidth_gbps": [[10.0] * n for _ in range(n)],
            "access": "region",
            "uplink_gbps": [b * 8e-9 for b in tcp],
            "downlink_gbps": [10.0] * n}]}


def simulate(args, work, st, name, tcp):
    scen = os.path.join(work, "netns-scenario.json")
    json.dump(scenario_of(args, st, tcp), open(scen, "w"))
    plan = os.path.join(work, f"plan-{name}.json")
    json.dump(plan_of(args, st), open(plan, "w"))
    prob = st["probe"]["problem"]
    m = args.micro_batches
    fwd = prob["compute_s"] / 3 / m  # 6 FLOP per parameter and token: 2 forward, 4 backward
    r = sh(f"{args.bin}/netsim", "simulate", "--scenario-file", scen, "--scenario", "netns",
           "--assignment", plan, "--micro-batches", str(m), "--fwd-s", str(max(fwd, 1e-9)),
           "--bwd-s", str(max(2 * fwd, 1e-9)), "--json")
    return json.loads(r.stdout)["simulated_iteration_s"]


def probe_rows(args, st, tcp):
    """Each probed directed link between regions against its uplink's TCP goodput."""
    p = st["probe"]
    region = {a["id"]: int(a["region"][1:]) for a in p["access"]}
    rows = []
    for i, a in enumerate(p["peers"]):
        for j, b in enumerate(p["peers"]):
            if i == j or region[a] == region[b]:
                continue
            want = tcp[region[a]]
            rows.append({"from": a, "to": b, "from_region": region[a], "to_region": region[b],
                         "measured_Bps": p["bandwidth_Bps"][i][j], "want_Bps": want,
                         "error": p["bandwidth_Bps"][i][j] / want - 1})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="the build's bin directory")
    ap.add_argument("--rates", default="200,100,50,25",
                    help="each region's uplink, Mbit/s (one region per entry)")
    ap.add_argument("--peers-per-region", type=int, default=2)
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--channels", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--micro-batches", type=int, default=1)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--random", type=int, default=3, help="random placements to measure")
    ap.add_argument("--probe-kib", type=int, default=256)
    ap.add_argument("--run-timeout", type=float, default=240)
    ap.add_argument("--prefix", default="wt19", help="names of the namespaces and interfaces")
    ap.add_argument("--subnet", type=int, default=219, help="second octet: 10.N.0.0/24")
    ap.add_argument("--json-out", help="also write the JSON line here")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    args.rates = [float(x) for x in args.rates.split(",")]
    if len(args.rates) * args.peers_per_region != args.stages * args.replicas:
        sys.exit("bench-netns: regions × --peers-per-region must equal --stages × --replicas")
    why = can_make_namespaces(args.prefix)
    if why:
        print(f"bench-netns: SKIP: {why}")
        sys.exit(SKIP)
    net = Net(args.prefix, args.rates, args.subnet)
    work = tempfile.mkdtemp(prefix="wt-netns-")
    runs = []
    try:
        net.up()
        tcp = [net.tcp_goodput(k) for k in range(len(args.rates))]
        for solver, seed in [("ga", 1)] + [("shuffle", s) for s in range(1, args.random + 1)]:
            t0 = time.time()
            training, final = run_once(args, net, work, solver, seed)
            name = f"{solver}-{seed}"
            runs.append({
                "placement": "ga" if solver == "ga" else f"random {seed}",
                "measured_s": final["measured_iteration_s"],
                "predicted_s": final["predicted_cost_ga_s"],
                "netsim_s": simulate(args, work, training, name, tcp),
                "rings": training["rings"], "plan": plan_of(args, training),
                "problem": training["probe"]["problem"],
                "probe_s": training["probe_s"],
                "wall_s": time.time() - t0})
            if solver == "ga":
                probe, links = final["probe"], probe_rows(args, final, tcp)
    except RuntimeError as e:
        print(f"bench-netns: {e}")
        sys.exit(1)
    finally:
        net.down()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    # the table
    rates = "/".join(f"{r:g}" for r in args.rates)
    print(f"kernel-shaped uplinks {rates} Mbit/s, {args.peers_per_region} peers per region, "
          f"{args.stages} x {args.replicas}, channels {args.channels}, layers {args.layers}")
    print(f"{'placement':<10} {'measured s':>10} {'predicted s':>11} {'netsim s':>9} "
          f"{'err pred':>9} {'err sim':>8}")
    for r in runs:
        r["error_predicted"] = r["measured_s"] / r["predicted_s"] - 1
        r["error_netsim"] = r["measured_s"] / r["netsim_s"] - 1
        print(f"{r['placement']:<10} {r['measured_s']:10.3f} {r['predicted_s']:11.3f} "
              f"{r['netsim_s']:9.3f} {r['error_predicted']:+9.1%} {r['error_netsim']:+8.1%}")
    prob = runs[0]["problem"]
    print(f"model: c_dp {prob['c_dp_bytes'] / 1e6:.2f} MB per stage, c_pp {prob['c_pp_bytes'] / 1e3:.1f}"
          f" kB per cut, compute {prob['compute_s'] * 1e3:.1f} ms per tasklet (predicted); probe "
          f"epoch {runs[0]['probe_s'] or float('nan'):.1f} s")
    ga, rnd = runs[0], runs[1:]
    summary = {"rates_mbit": args.rates, "peers_per_region": args.peers_per_region,
               "stages": args.stages, "replicas": args.replicas, "channels": args.channels,
               "layers": args.layers, "tcp_goodput_Bps": tcp,
               "tcp_goodput_over_rate": [b * 8e-6 / r for b, r in zip(tcp, args.rates)],
               "runs": runs}
    if rnd:
        summary["speedup_measured"] = statistics.mean(r["measured_s"] for r in rnd) / ga[
            "measured_s"]
        summary["speedup_predicted"] = statistics.mean(r["predicted_s"] for r in rnd) / ga[
            "predicted_s"]
        print(f"GA vs mean of {len(rnd)} random placements: measured {summary['speedup_measured']:.2f}x"
              f", predicted {summary['speedup_predicted']:.2f}x")
    errs = [abs(l["error"]) for l in links]
    print("one TCP stream through each uplink: " + ", ".join(
        f"{b * 8e-6:.1f} Mbit/s ({b * 8e-6 / r:.2f} of {r:g})" for b, r in zip(tcp, args.rates)))
    print(f"probed links between regions: {len(links)}, against that: "
          f"median |error| {statistics.median(errs):.1%}, worst {max(errs):.1%}")
    for a in probe["access"]:
        print(f"  peer {a['id']} ({a['region']}): up {a['up_Bps'] * 8e-6:7.1f} Mbit/s, down "
              f"{a['down_Bps'] * 8e-6:7.1f} Mbit/s, link {a['link']}, together/alone up "
              f"{a['up_together_over_alone']:.2f} down {a['down_together_over_alone']:.2f}")
    summary["links"] = links
    summary["access"] = probe["access"]
    line = json.dumps(summary)
    print(line)
    if args.json_out:
        open(args.json_out, "w").write(line + "\n")


if __name__ == "__main__":
    main()
