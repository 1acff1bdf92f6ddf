#!/usr/bin/env bash
# gpu-profile — where a GPU training step's time goes: runs bench-train --device under Nsight
# Compute (kernel durations only, clocks left alone) and sums the time per kernel name, so the
# next optimisation aims at the biggest line. Also runs the PyTorch reference step
# (bench/torch_gpt2_step.py) when python3 has torch with CUDA, unless GPU_PROFILE_TORCH=0.
#
#   scripts/gpu-profile.sh BENCH_TRAIN OUT_DIR      writes ncu.csv, profile.txt, torch.txt
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: scripts/gpu-profile.sh BENCH_TRAIN OUT_DIR" >&2; exit 2; }
bench=$1 out=$2 root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
ncu=$(command -v ncu || find /usr/local /opt -name ncu -type f -perm -u+x 2>/dev/null | head -1)
if [ -n "$ncu" ]; then
  timeout 400 "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv \
    "$bench" --device cuda:0 --repeats 1 >"$out/ncu.csv" 2>&1
  python3 - "$out/ncu.csv" >"$out/profile.txt" 2>&1 <<'PY'
import csv, collections, sys
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
tot, cnt = collections.Counter(), collections.Counter()
for r in csv.DictReader(rows):
    if r.get("Metric Name") != "gpu__time_duration.sum": continue
    name = r["Kernel Name"].split("(")[0][:70]
    v = float(r["Metric Value"].replace(",", ""))
    v *= {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}.get(r["Metric Unit"], 1e-6)
    tot[name] += v; cnt[name] += 1
all_ms = sum(tot.values())
print(f"{'kernel':72s} {'calls':>6s} {'ms':>10s} {'share':>6s}")
for k, v in tot.most_common(40):
    print(f"{k:72s} {cnt[k]:6d} {v:10.2f} {v / all_ms:6.1%}")
print(f"{'all kernels':72s} {sum(cnt.values()):6d} {all_ms:10.2f}")
PY
  grep -q '^"' "$out/ncu.csv" || tail -20 "$out/ncu.csv" >>"$out/profile.txt" # ncu's own complaint
else
  echo "no ncu on this machine" >"$out/profile.txt"
fi
if [ "${GPU_PROFILE_TORCH:-1}" = 1 ]; then
  python3 "$root/bench/torch_gpt2_step.py" >"$out/torch.txt" 2>&1 || echo "torch reference failed" >>"$out/torch.txt"
fi
