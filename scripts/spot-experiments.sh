#!/usr/bin/env bash
# spot-experiments — docs/trust.md's spot-check tables (tests/trust/trust_experiment, a tiny model
# over the in-process transport): the drift lie (a well-scaled wrong gradient) against each
# aggregate with spot checks every 10 syncs (and every 1, for how soon a liar goes), honest runs'
# spot-check failures, and the compute spot checks cost at every 10 and every 1 syncs against
# none (a model of 128 channels, so that compute outweighs the in-process sync).
#
#   bash scripts/spot-experiments.sh [build-dir] [out-dir]
#
# Writes one JSON line per run to out-dir/spot.jsonl, then prints the markdown tables. SEEDS,
# FP_RUNS, COST_RUNS and STEPS override the defaults (3, 20, 5, 60).
set -euo pipefail
build=${1:-build}
out=${2:-$build/trust}
exe=$build/bin/tests/trust_experiment
seeds=$(seq 1 "${SEEDS:-3}")
fp_runs=${FP_RUNS:-20}
cost_runs=${COST_RUNS:-5}
steps=${STEPS:-60}
[[ -x $exe ]] || { echo "spot-experiments: build $exe first (cmake --build $build)" >&2; exit 2; }
mkdir -p "$out"
runs=$out/spot.jsonl
: >"$runs"
export OMP_NUM_THREADS=1 WT_LOG_LEVEL=error

run() { nice "$exe" --steps "$steps" "$@" >>"$runs"; }

for group in "4 1" "8 2"; do
  read -r R L <<<"$group"
  for agg in none trimmed-mean median centered-clip; do
    for s in $seeds; do
      run --lie drift --robust "$agg" --replicas "$R" --liars "$L" --spot-check-every 10 --seed "$s"
    done
  done
  for s in $seeds; do
    run --lie drift --robust centered-clip --replicas "$R" --liars "$L" --spot-check-every 1 \
      --seed "$s"
  done
  for s in $(seq 101 $((100 + fp_runs))); do
    run --lie honest --robust centered-clip --replicas "$R" --liars 0 --spot-check-every 10 \
      --seed "$s"
  done
done
for every in 0 10 1; do
  for s in $(seq 201 $((200 + cost_runs))); do
    run --lie honest --robust centered-clip --replicas 4 --liars 0 --spot-check-every "$every" \
      --channels 128 --seed "$s"
  done
done

python3 - "$runs" "$steps" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
steps = sys.argv[2]

def pick(**kw):
    return [r for r in runs if all(r[k] == v for k, v in kw.items())]

def loss(rs):
    bad = [r for r in rs if not r["ok"] or r["val_loss"] is None]
    if bad: return "failed %d/%d" % (len(bad), len(rs))
    return "%.3f" % statistics.mean(r["val_loss"] for r in rs)

def flagged(rs):
    return "%.0f%% of syncs" % (100 * statistics.mean(
        r["liar_flagged"] / (r["syncs"] * r["liars"]) for r in rs))

def spotted(rs):
    firsts = "/".join(str(r["liar_first_spot_fail"]) if r["liar_first_spot_fail"] else "never" for r in rs)
    out = sum(r["liars_spot_excluded"] for r in rs)
    at = "/".join(str(r["spot_excluded_at"]) if r["spot_excluded_at"] else "never" for r in rs)
    return "failed from step %s; %d/%d excluded (step %s)" % (
        firsts, out, sum(r["liars"] for r in rs), at)

print("### drift, spot checks every 10 syncs: validation loss after %s steps (mean of %d seeds)"
      % (steps, len(pick(lie="drift", replicas=4, robust="none"))))
print()
print("| replicas, liars | --robust none | trimmed-mean | median | centered-clip | robust sync (centered-clip) | spot checks every 10 (centered-clip) | every 1 |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for R, L in ((4, 1), (8, 2)):
    cells = [loss(pick(lie="drift", replicas=R, robust=a, spot_check_every=10))
             for a in ("none", "trimmed-mean", "median", "centered-clip")]
    cc = pick(lie="drift", replicas=R, robust="centered-clip", spot_check_every=10)
    cc1 = pick(lie="drift", replicas=R, robust="centered-clip", spot_check_every=1)
    print("| %d, %d | %s | %s | %s | %s |" % (R, L, " | ".join(cells), flagged(cc), spotted(cc),
                                             spotted(cc1)))
print()
print("### honest runs with spot checks every 10 syncs (centered-clip)")
print()
print("| replicas | runs | spot checks | failed | lowest cosine needed |")
print("| --- | --- | --- | --- | --- |")
for R in (4, 8):
    rs = pick(lie="honest", replicas=R, liars=0, spot_check_every=10)
    rs = [r for r in rs if r["seed"] > 100 and r["seed"] <= 200]
    print("| %d | %d | %d | %d | 0.99 |" % (R, len(rs), sum(r["spot_checks"] for r in rs),
                                          sum(r["honest_spot_failed"] for r in rs)))
print()
print("### cost: 4 replicas, centered-clip, 128 channels, %s steps, median of the runs" % steps)
print()
print("| spot checks | runs | checks per run | compute s (all replicas) | ratio | of it in checks | wall s | ratio |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
base = None
for every in (0, 10, 1):
    rs = [r for r in pick(lie="honest", replicas=4, spot_check_every=every) if r["seed"] > 200]
    c = statistics.median(r["compute_s"] for r in rs)
    w = statistics.median(r["seconds"] for r in rs)
    if base is None: base = (c, w)
    sp = statistics.median(r["spot_s"] for r in rs)
    print("| %s | %d | %d | %.3f | %.2f | %.3f s | %.3f | %.2f |" % (
        "none" if every == 0 else "every %d" % every, len(rs),
        statistics.median(r["spot_checks"] for r in rs), c, c / base[0], sp, w, w / base[1]))
EOF
