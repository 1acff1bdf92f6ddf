#!/usr/bin/env bash
# bench-live-recovery — what a kill costs a DiLoCo run (`--preset wan`, 2 x 2 peers + a standby,
# 170 steps, H = 100) with live recovery: for each seed and kill step, one undisturbed run and one
# run that loses a random member (kill -9) once /status shows the kill step, both through
# tests/coordinator/test_coord_live.sh. Prints a table (steps trained again by survivors, the
# step the next epoch started from, recovery time, final loss against the undisturbed run) and
# one JSON line with the medians.
#   scripts/bench-live-recovery.sh [BIN_DIR] [SEEDS] [KILL_STEPS]
#   e.g. scripts/bench-live-recovery.sh build/bin "1 2 3" "60 120 150"
BIN=${1:-build/bin}
SEEDS=${2:-1 2 3}
KILLS=${3:-60 120 150}
HERE=$(cd "$(dirname "$0")/.." && pwd)
rows=()
printf '%-5s %-5s %-6s %-10s %-8s %-10s %-10s %-9s\n' seed kill from retrained recov_s loss undisturbed diff
for s in $SEEDS; do
  for k in $KILLS; do
    out=$(SEED=$s bash "$HERE/tests/coordinator/test_coord_live.sh" "$BIN" "$k" 2>&1)
    res=$(echo "$out" | grep '^RESULT ' | tail -1)
    again=$(echo "$out" | grep -oE "steps trained again: [0-9]+" | tail -1 | grep -oE "[0-9]+$")
    if [ -z "$res" ] || ! echo "$out" | grep -q "all checks passed"; then
      echo "seed $s kill $k: the run failed:"; echo "$out" | grep -E "FAIL" | head -3
      continue
    fi
    eval "$(echo "${res#RESULT }" | tr ' ' '\n' | sed 's/^/r_/')"
    diff=$(python3 -c "print(f'{$r_loss - $r_undisturbed:+.4f}')")
    printf '%-5s %-5s %-6s %-10s %-8s %-10.4f %-10.4f %-9s\n' "$s" "$r_kill_step" "$r_from" "$again" \
      "$r_recovery_s" "$r_loss" "$r_undisturbed" "$diff"
    rows+=("$again $r_recovery_s $r_loss $r_undisturbed")
  done
done
printf '%s\n' "${rows[@]}" | python3 -c "
import json, statistics, sys
r = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
if not r: sys.exit(1)
d = [x[2] - x[3] for x in r]
print(json.dumps({'bench': 'live-recovery', 'runs': len(r), 'retrained_max': max(x[0] for x in r),
                  'recovery_s_median': statistics.median(x[1] for x in r),
                  'loss_diff_median': statistics.median(d), 'loss_diff_max_abs': max(map(abs, d))}))"
