#!/usr/bin/env bash
# test_coord_run — the peers of a coordinator run train exactly the run the operator described:
# a 2 x 1 run with a schedule, min-lr, warmup, sequence length and checkpoint count other than
# the defaults; each peer says what it trains, and each stage keeps exactly --keep checkpoints.
#   tests/coordinator/test_coord_run.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
start_coord coord.log --open --stages 2 --replicas 1 --steps 12 --checkpoint-every 3 --keep 4 \
  --schedule gpipe --min-lr 1e-4 --warmup 3 --seq 48 --heartbeat 0.25 --exit-when-done \
  --checkpoint-dir "$WORK/ck"
start_peer 1; start_peer 2
wait_exit "$CPID" 90 || fail "the run did not finish"
grep -q "the run finished 12 steps" "$WORK/coord.log" || fail "the run did not train 12 steps"
want="trains seq 48, 2 layers x 32 channels, batch 16 in 2 micro-batches, gpipe, lr 0.003 to 0.0001 after 3 warmup steps, keeping 4 checkpoints"
for n in 1 2; do
  grep -qF "$want" "$WORK/peer$n.log" || fail "peer $n does not train the operator's run: $(grep trains "$WORK/peer$n.log")"
done
for s in 0 1; do
  kept=$(find "$WORK/ck/stage-$s" -maxdepth 1 -name 'step-*' -type d | wc -l)
  [ "$kept" = 4 ] || fail "stage $s keeps $kept checkpoints, the run says 4"
done
echo "test_coord_run: all checks passed"
