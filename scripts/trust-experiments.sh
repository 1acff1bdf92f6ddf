#!/usr/bin/env bash
# trust-experiments — the tables of docs/trust.md: lying replicas against each robust aggregate
# (tests/trust/trust_experiment, a tiny model over the in-process transport), the false-positive
# rate over honest runs, DiLoCo, and bench-robust's cost table.
#
#   bash scripts/trust-experiments.sh [build-dir] [out-dir]
#
# Writes one JSON line per run to out-dir/runs.jsonl (and bench-robust's output to
# out-dir/bench.txt), then prints the markdown tables. SEEDS, FP_RUNS and STEPS override the
# defaults (3, 20, 60).
set -euo pipefail
build=${1:-build}
out=${2:-$build/trust}
exe=$build/bin/tests/trust_experiment
seeds=$(seq 1 "${SEEDS:-3}")
fp_runs=${FP_RUNS:-20}
steps=${STEPS:-60}
[[ -x $exe ]] || { echo "trust-experiments: build $exe first (cmake --build $build)" >&2; exit 2; }
mkdir -p "$out"
runs=$out/runs.jsonl
: >"$runs"
export OMP_NUM_THREADS=1 WT_LOG_LEVEL=error

run() { nice "$exe" --steps "$steps" "$@" >>"$runs"; }

lies="honest nan scale flip noise zero stale act"
aggs="none trimmed-mean median centered-clip"
for group in "4 1" "8 2"; do
  read -r R L <<<"$group"
  for lie in $lies; do
    stages=1
    [[ $lie == act ]] && stages=2
    for agg in $aggs; do
      for s in $seeds; do
        run --lie "$lie" --robust "$agg" --replicas "$R" --liars "$L" --stages "$stages" --seed "$s"
      done
    done
  done
  for agg in trimmed-mean median centered-clip; do
    for s in $(seq 101 $((100 + fp_runs))); do
      run --lie honest --robust "$agg" --replicas "$R" --liars 0 --seed "$s"
    done
  done
done
for lie in honest nan scale flip noise zero stale; do
  for agg in none trimmed-mean; do
    for s in $seeds; do
      run --lie "$lie" --robust "$agg" --replicas 4 --liars 1 --diloco 5 --seed "$s"
    done
  done
done
if [[ -x $build/bin/bench-robust ]]; then
  OMP_NUM_THREADS=1 nice "$build/bin/bench-robust" --n 262144 --runs 5 >"$out/bench.txt"
fi

python3 - "$runs" "$steps" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
steps = sys.argv[2]
aggs = ["none", "trimmed-mean", "median", "centered-clip"]
lies = ["honest", "nan", "scale", "flip", "noise", "zero", "stale", "act"]

def pick(**kw):
    return [r for r in runs if all(r[k] == v for k, v in kw.items())]

def loss(rs):
    if not rs: return "-"
    bad = [r for r in rs if not r["ok"] or r["val_loss"] is None]
    if bad: return "failed %d/%d" % (len(bad), len(rs))
    return "%.3f" % statistics.mean(r["val_loss"] for r in rs)

def detect(rs):
    if not rs: return "-"
    firsts = [r["liar_first_flag"] for r in rs if r["ok"]]
    if not firsts: return "-"
    flagged = [r["liar_flagged"] / (r["syncs"] * r["liars"]) for r in rs if r["ok"]]
    out = sum(r["liars_excluded"] for r in rs if r["ok"])
    liars = sum(r["liars"] for r in rs if r["ok"])
    first = "never" if max(firsts) == 0 else "step %s" % "/".join(str(f) if f else "never" for f in firsts)
    return "%s; %.0f%% of syncs; %d/%d excluded" % (first, 100 * statistics.mean(flagged), out, liars)

for R, L, dl in ((4, 1, 0), (8, 2, 0), (4, 1, 5)):
    sub = [r for r in runs if r["replicas"] == R and r["diloco"] == dl and r["liars"] == L]
    if not sub: continue
    print("\n#### %d replicas, %d lying%s: validation loss after %s steps (mean of %d seeds)\n"
          % (R, L, ", DiLoCo H=%d" % dl if dl else "", steps, len({r["seed"] for r in sub})))
    use = [a for a in aggs if any(r["robust"] == a for r in sub)]
    print("| lie | " + " | ".join("--robust " + a for a in use) + " | detected (robust " + use[-1] + ") |")
    print("|" + " --- |" * (len(use) + 2))
    for lie in lies:
        if not any(r["lie"] == lie for r in sub): continue
        cells = [loss([r for r in sub if r["lie"] == lie and r["robust"] == a]) for a in use]
        det = detect([r for r in sub if r["lie"] == lie and r["robust"] == use[-1]]) if lie != "honest" else ""
        print("| %s | %s | %s |" % (lie, " | ".join(cells), det))
    if not dl:
        print("\nDetection per aggregate (first flagged step per seed; share of syncs flagged; liars excluded):\n")
        print("| lie | " + " | ".join(a for a in aggs[1:]) + " |")
        print("|" + " --- |" * 4)
        for lie in lies[1:]:
            print("| %s | %s |" % (lie, " | ".join(detect([r for r in sub if r["lie"] == lie and r["robust"] == a]) for a in aggs[1:])))

print("\n#### Honest runs: false positives (%s steps each)\n" % steps)
print("| replicas | aggregate | runs | syncs with an honest contribution left out | most in one run, one replica | honest replicas excluded |")
print("| --- | --- | --- | --- | --- | --- |")
for R in (4, 8):
    for a in aggs[1:]:
        rs = [r for r in runs if r["replicas"] == R and r["liars"] == 0 and r["robust"] == a and r["diloco"] == 0]
        if not rs: continue
        flagged = sum(r["honest_flagged"] for r in rs)
        total = sum(r["syncs"] * r["replicas"] for r in rs)
        print("| %d | %s | %d | %d of %d (%.2f%%) | %d | %d |" % (R, a, len(rs), flagged, total, 100 * flagged / total,
              max(r["honest_flagged_max"] for r in rs), sum(r["honest_excluded"] for r in rs)))
EOF
[[ -f $out/bench.txt ]] && { echo; echo '#### bench-robust'; echo; sed -n '1,13p' "$out/bench.txt"; }
