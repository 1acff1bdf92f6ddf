#!/usr/bin/env bash
# test_coord_robust_pipe — a coordinator run with --robust centered-clip over a pipeline, 2 stages
# x 2 honest peerd processes: the activation spot checks (every 10 steps by default: a stage-0
# replica recomputes the other's forward of a micro-batch, on the copy its stage-1 neighbour
# received, over the peers' ZeroMQ links) are made, all pass, reach the coordinator in the
# peers' reports, and nobody is excluded.
#   tests/coordinator/test_coord_robust_pipe.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
start_coord coord.log --open --stages 2 --replicas 2 --layers 2 --steps 30 --checkpoint-every 0 \
  --robust centered-clip --heartbeat 0.2 --exit-when-done --checkpoint-dir "$WORK/ck"
for n in 1 2 3 4; do start_peer "$n"; done
wait_exit "$CPID" 100 || fail "the run did not finish"
grep -q "the run finished 30 steps" "$WORK/coord.log" || fail "the run did not train 30 steps"
grep -q "are not its forward" "$WORK"/peer*.log && fail "an honest peer failed an activation check"
grep '^coordinator: final ' "$WORK/coord.log" | tail -1 | sed 's/^coordinator: final //' |
  python3 -c '
import json, sys
st = json.load(sys.stdin)
assert st["peers_excluded"] == 0, st["excluded"]
tr = {t["id"]: t for t in st["trust"]}
assert len(tr) == 4, "trust records of %d peers, want 4: %s" % (len(tr), tr)
checks = sum(t["spot_checks"] for t in tr.values())
assert all(t["spot_failed"] == 0 and t["spot_checkers"] == 0 for t in tr.values()), tr
assert 1 <= checks <= 3, "%d activation checks in 30 steps, want up to 3 (steps 10, 20, 30)" % checks
print("activation spot checks: %d, all passed" % checks)
' || fail "the trust record does not show the activation checks"
echo "test_coord_robust_pipe: all checks passed"
