#!/usr/bin/env bash
# spot-experiments — docs/trust.md's spot-check tables (tests/trust/trust_experiment, a tiny model
# over the in-process transport): the drift lie (a well-scaled wrong gradient) against each
# aggregate with spot checks every 10 syncs (and every 1, for how soon a liar goes), honest runs'
# spot-check failures, and the compute spot checks cost at every 10 and every 1 syncs against
# none (a model of 128 channels, so that compute outweighs the in-process sync); the same for
# activation checks in a pipeline of 2 stages: the act lie (stage 0's activations replaced by
# noise), honest pipelines, and their cost.
#
#   bash scripts/spot-experiments.sh [build-dir] [out-dir]
#
# Writes one JSON line per run to out-dir/spot.jsonl, then prints the markdown tables of what it
# ran. SEEDS, FP_RUNS, COST_RUNS and STEPS override the defaults (3, 20, 5, 60); GRIDS picks the
# grids (default "drift act codec diloco cost": drift, the act lie, drift through the gradient
# codecs fp16, bf16, int8 and int4, DiLoCo H=5 with checks of its rounds — drift, flip, noise,
# honest runs and the cost —, the cost of the synchronous checks).
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
grids=" ${GRIDS:-drift act codec diloco cost} "

run() { nice "$exe" --steps "$steps" "$@" >>"$runs"; }

[[ $grids == *" drift "* ]] && for group in "4 1" "8 2"; do
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
[[ $grids == *" act "* ]] && for group in "4 1" "8 2"; do
  read -r R L <<<"$group"
  for every in 10 1; do
    for s in $seeds; do
      run --lie act --stages 2 --robust centered-clip --replicas "$R" --liars "$L" \
        --spot-check-every "$every" --seed "$s"
    done
  done
  for s in $(seq 101 $((100 + fp_runs))); do
    run --lie honest --stages 2 --robust centered-clip --replicas "$R" --liars 0 \
      --spot-check-every 10 --seed "$s"
  done
done
[[ $grids == *" codec "* ]] && for codec in fp16 bf16 int8 int4; do
  for every in 10 1; do
    for s in $seeds; do
      run --lie drift --grad-codec "$codec" --robust centered-clip --replicas 4 --liars 1 \
        --spot-check-every "$every" --seed "$s"
    done
  done
  for s in $(seq 101 $((100 + fp_runs))); do
    run --lie honest --grad-codec "$codec" --robust centered-clip --replicas 4 --liars 0 \
      --spot-check-every 10 --seed "$s"
  done
done
[[ $grids == *" diloco "* ]] && for group in "4 1" "8 2"; do
  read -r R L <<<"$group"
  for lie in drift moments flip noise; do
    for every in 10 1; do
      for s in $seeds; do
        run --lie "$lie" --diloco 5 --robust centered-clip --replicas "$R" --liars "$L" \
          --spot-check-every "$every" --seed "$s"
      done
    done
  done
  for s in $(seq 101 $((100 + fp_runs))); do
    run --lie honest --diloco 5 --robust centered-clip --replicas "$R" --liars 0 \
      --spot-check-every 1 --seed "$s"
  done
done
[[ $grids == *" diloco "* ]] && for every in 0 10 1; do
  for s in $(seq 201 $((200 + cost_runs))); do
    run --lie honest --diloco 5 --robust centered-clip --replicas 4 --liars 0 \
      --spot-check-every "$every" --channels 128 --seed "$s"
  done
done
[[ $grids == *" cost "* ]] && for stages in 1 2; do
  for every in 0 10 1; do
    for s in $(seq 201 $((200 + cost_runs))); do
      run --lie honest --stages "$stages" --robust centered-clip --replicas 4 --liars 0 \
        --spot-check-every "$every" --channels 128 --seed "$s"
    done
  done
done

python3 - "$runs" "$steps" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
steps = sys.argv[2]

def pick(**kw):
    kw.setdefault("codec", "none")
    kw.setdefault("diloco", 0)
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

def table(title, header, rows):
    if not rows: return
    print(title)
    print()
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    for r in rows: print(r)
    print()

rows = []
for R, L in ((4, 1), (8, 2)):
    cc = pick(lie="drift", replicas=R, robust="centered-clip", spot_check_every=10)
    cc1 = pick(lie="drift", replicas=R, robust="centered-clip", spot_check_every=1)
    if not cc: continue
    cells = [loss(pick(lie="drift", replicas=R, robust=a, spot_check_every=10))
             for a in ("none", "trimmed-mean", "median", "centered-clip")]
    rows.append("| %d, %d | %s | %s | %s | %s |" % (R, L, " | ".join(cells), flagged(cc),
                                                   spotted(cc), spotted(cc1)))
table("### drift, spot checks every 10 syncs: validation loss after %s steps (mean of the seeds)"
      % steps, "| replicas, liars | --robust none | trimmed-mean | median | centered-clip | robust sync (centered-clip) | spot checks every 10 (centered-clip) | every 1 |", rows)

rows = []
for R, L in ((4, 1), (8, 2)):
    a10 = pick(lie="act", replicas=R, spot_check_every=10)
    a1 = pick(lie="act", replicas=R, spot_check_every=1)
    if a10:
        rows.append("| %d, %d | %s | %s | %s | %s |" % (R, L, loss(a10), flagged(a10),
                                                       spotted(a10), spotted(a1)))
table("### act, 2 stages, spot checks of stage 0's activations (centered-clip, mean of the seeds)",
      "| replicas, liars | validation loss | robust sync | spot checks every 10 | every 1 |", rows)

rows = []
for codec in ("fp16", "bf16", "int8", "int4"):
    d10 = pick(lie="drift", codec=codec, spot_check_every=10)
    d1 = pick(lie="drift", codec=codec, spot_check_every=1)
    hon = [r for r in pick(lie="honest", codec=codec, spot_check_every=10) if 100 < r["seed"] <= 200]
    if not d10: continue
    use = max(r["honest_spot_bound_use"] for r in hon + d10 + d1)
    rows.append("| %s | %s | %s | %s | %s | %d runs, %d checks, %d failed | %.3f |" % (
        codec, loss(d10), flagged(d10), spotted(d10), spotted(d1), len(hon),
        sum(r["spot_checks"] for r in hon), sum(r["honest_spot_failed"] for r in hon), use))
table("### drift through a gradient codec with error feedback, 4 replicas, 1 liar (centered-clip, mean of the seeds)",
      "| codec | validation loss | robust sync | spot checks every 10 | every 1 | honest runs, every 10 | most of the bound an honest check used |", rows)

rows = []
for S in (1, 2):
    for R in (4, 8):
        rs = [r for r in pick(lie="honest", replicas=R, liars=0, spot_check_every=10, stages=S)
              if 100 < r["seed"] <= 200]
        if rs:
            rows.append("| %d | %d | %d | %d | %d | 0.99 |" % (
                S, R, len(rs), sum(r["spot_checks"] for r in rs),
                sum(r["honest_spot_failed"] for r in rs)))
table("### honest runs with spot checks every 10 syncs (centered-clip)",
      "| stages | replicas | runs | spot checks | failed | lowest cosine needed |", rows)

def excluded(rs):
    return "%d/%d" % (sum(min(r["liars"], r["liars_excluded"] + r["liars_spot_excluded"])
                          for r in rs), sum(r["liars"] for r in rs))

rows = []
for R, L in ((4, 1), (8, 2)):
    for lie in ("drift", "moments", "flip", "noise"):
        d10 = pick(lie=lie, replicas=R, diloco=5, spot_check_every=10)
        d1 = pick(lie=lie, replicas=R, diloco=5, spot_check_every=1)
        if not d10: continue
        rows.append("| %d, %d | %s | %s | %s | %s | %s | %s |" % (
            R, L, lie, loss(d10), flagged(d10), spotted(d10), spotted(d1), excluded(d1)))
table("### DiLoCo H=5, spot checks of rounds (centered-clip, %s steps = 12 rounds, mean of the seeds)"
      % steps, "| replicas, liars | lie | validation loss | robust sync | spot checks every 10 | every 1 | excluded at every 1 (either rule) |", rows)

rows = []
for R in (4, 8):
    rs = [r for r in pick(lie="honest", replicas=R, liars=0, diloco=5, spot_check_every=1)
          if 100 < r["seed"] <= 200]
    if rs:
        rows.append("| %d | %d | %d | %d | %d |" % (
            R, len(rs), sum(r["spot_checks"] for r in rs), sum(r["honest_spot_failed"] for r in rs),
            sum(r["honest_excluded"] for r in rs)))
table("### honest DiLoCo runs, a round check every sync (centered-clip)",
      "| replicas | runs | round checks | failed | excluded |", rows)

rows, base = [], None
for every in (0, 10, 1):
    rs = [r for r in pick(lie="honest", replicas=4, diloco=5, spot_check_every=every) if r["seed"] > 200]
    if not rs: continue
    c = statistics.median(r["compute_s"] for r in rs)
    if base is None: base = c
    sp = statistics.median(r["spot_s"] for r in rs)
    n = statistics.median(r["spot_checks"] for r in rs)
    step = statistics.median(r["compute_s"] / (4 * r["steps"]) for r in rs)
    rows.append("| %s | %d | %d | %.3f | %.2f ms | %.4f s | %s | %.1f%% |" % (
        "none" if every == 0 else "every %d" % every, len(rs), n, c, 1e3 * step, sp,
        "%.2f ms" % (1e3 * sp / n) if n else "", 100 * sp / c))
table("### cost: DiLoCo H=5, 4 replicas, centered-clip, 128 channels, %s steps, median of the runs"
      % steps, "| round checks | runs | checks per run | compute s (all tasklets) | per tasklet step | in checks | per check | of the compute |", rows)

for S in (1, 2):
    rows, base = [], None
    for every in (0, 10, 1):
        rs = [r for r in pick(lie="honest", replicas=4, spot_check_every=every, stages=S)
              if r["seed"] > 200]
        if not rs: continue
        c = statistics.median(r["compute_s"] for r in rs)
        w = statistics.median(r["seconds"] for r in rs)
        if base is None: base = (c, w)
        sp = statistics.median(r["spot_s"] for r in rs)
        n = statistics.median(r["spot_checks"] for r in rs)
        step = statistics.median(r["compute_s"] / (4 * S * r["steps"]) for r in rs)
        rows.append("| %s | %d | %d | %.3f | %.2f | %.2f ms | %.4f s | %s | %.3f | %.2f |" % (
            "none" if every == 0 else "every %d" % every, len(rs), n, c, c / base[0], 1e3 * step,
            sp, "%.2f ms" % (1e3 * sp / n) if n else "", w, w / base[1]))
    table("### cost: %d stage%s, 4 replicas, centered-clip, 128 channels, %s steps, median of the runs"
          % (S, "s" if S > 1 else "", steps),
          "| spot checks | runs | checks per run | compute s (all tasklets) | ratio | per tasklet step | of it in checks | per check | wall s | ratio |", rows)
EOF
