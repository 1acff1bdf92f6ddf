#!/usr/bin/env bash
# bench-collectives.sh — the 4-process all-reduce of wantrain's ZeroMQ transport (sealed and
# --insecure) beside Open MPI's over TCP, 1–64 MiB, in one run on this machine, plus the lone
# pair (plain ZeroMQ, CurveZMQ, the transport sealed and insecure). Alternates the two programs
# for --rounds rounds so both see the same load, takes medians, and prints each program's
# lines and then one merged JSON line:
#   {"bench":"collectives_vs_mpi","procs":4,"rounds":..,"runs":..,"cipher":..,"loadavg":..,
#    "pair_plain_GBps":..,"pair_curve_GBps":..,"pair_sealed_GBps":..,"pair_insecure_GBps":..,
#    "sealed_of_plain":..,"pair_{plain,curve,sealed,insecure}_cpu_s_per_GB":..,
#    "seal_copy_cpu_s_per_GB":..,"seal_direct_cpu_s_per_GB":..,
#    "allreduce":[{"mib":..,"mpi_bus_GBps":..,"sealed_bus_GBps":..,"insecure_bus_GBps":..,
#    "sealed_of_mpi":..,"insecure_of_mpi":..,"mpi_cpu_s":..,"sealed_cpu_s":..,"sealed_cpu_bound_bus_GBps":..,
#    "insecure_cpu_s":..,"insecure_cpu_bound_bus_GBps":..},..]}
# The CPU seconds are all processes' in the timed interval (medians); the CPU
# bound is the bus bandwidth they allow spread over every core with none idle.
# Open MPI (Debian openmpi-bin, libopenmpi-dev) is installed here when mpirun or mpicc is
# missing — by this script only, never by the build or the tests.
#   scripts/bench-collectives.sh [--build build] [--mib 64] [--runs 5] [--rounds 3] [--streams 1]
# (--streams: TCP connections per sealed link, bench-collectives --streams)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build MIB=64 RUNS=5 ROUNDS=3 PROCS=4 STREAMS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --mib) MIB=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --streams) STREAMS=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "bench-collectives.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
BENCH="$BUILD/bin/bench-collectives"
[ -x "$BENCH" ] || { echo "bench-collectives.sh: $BENCH not built; run cmake --build $BUILD --target bench-collectives" >&2; exit 2; }
if ! command -v mpirun >/dev/null || ! command -v mpicc >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "bench-collectives.sh: Open MPI is missing; run: sudo apt-get install -y openmpi-bin libopenmpi-dev" >&2
    exit 2
  fi
  apt-get install -y openmpi-bin libopenmpi-dev >/dev/null
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
mpicc -O2 -o "$OUT/mpi_allreduce" bench/mpi_allreduce.c
MPIRUN=(mpirun -np "$PROCS" --oversubscribe --mca btl tcp,self)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
for r in $(seq "$ROUNDS"); do
  "${MPIRUN[@]}" "$OUT/mpi_allreduce" "$MIB" "$RUNS" | tail -1 | tee -a "$OUT/mpi.jsonl"
  "$BENCH" --procs "$PROCS" --mib "$MIB" --runs "$RUNS" --streams "$STREAMS" --beta 0 2>/dev/null | tee "$OUT/zmq.txt"
  tail -1 "$OUT/zmq.txt" >> "$OUT/zmq.jsonl"
done
python3 - "$OUT/mpi.jsonl" "$OUT/zmq.jsonl" "$ROUNDS" <<'PY'
import json, os, statistics, sys
mpi = [json.loads(l) for l in open(sys.argv[1])]
zmq = [json.loads(l) for l in open(sys.argv[2])]
med = lambda xs: round(statistics.median(xs), 4)
out = {"bench": "collectives_vs_mpi", "procs": zmq[0]["procs"], "rounds": int(sys.argv[3]),
       "runs": zmq[0]["runs"], "cores": zmq[0]["cores"], "cipher": zmq[0]["cipher"],
       "loadavg": round(os.getloadavg()[0], 2)}
for k in ("pair_plain_GBps", "pair_curve_GBps", "pair_sealed_GBps", "pair_insecure_GBps",
          "sealed_of_plain", "pair_plain_cpu_s_per_GB", "pair_curve_cpu_s_per_GB",
          "pair_sealed_cpu_s_per_GB", "pair_insecure_cpu_s_per_GB", "seal_copy_cpu_s_per_GB",
          "seal_direct_cpu_s_per_GB"):
    out[k] = med([z[k] for z in zmq])
rows = []
for i, row in enumerate(zmq[0]["allreduce"]):
    m = med([x["allreduce"][i]["bus_GBps"] for x in mpi])
    s = med([z["allreduce"][i]["sealed_bus_GBps"] for z in zmq])
    n = med([z["allreduce"][i]["insecure_bus_GBps"] for z in zmq])
    mc = med([x["allreduce"][i]["cpu_s"] for x in mpi])
    cs = med([z["allreduce"][i]["sealed_cpu_s"] for z in zmq])
    ci = med([z["allreduce"][i]["insecure_cpu_s"] for z in zmq])
    p, nbytes = zmq[0]["procs"], row["mib"] * 2**20
    bound = lambda cpu: round(2 * (p - 1) / p * nbytes * zmq[0]["cores"] / cpu / 1e9, 4)
    rows.append({"mib": row["mib"], "mpi_bus_GBps": m, "sealed_bus_GBps": s,
                 "insecure_bus_GBps": n, "sealed_of_mpi": round(s / m, 3),
                 "insecure_of_mpi": round(n / m, 3), "mpi_cpu_s": mc, "sealed_cpu_s": cs,
                 "sealed_cpu_bound_bus_GBps": bound(cs), "insecure_cpu_s": ci,
                 "insecure_cpu_bound_bus_GBps": bound(ci)})
out["allreduce"] = rows
print(json.dumps(out, separators=(",", ":")))
PY
