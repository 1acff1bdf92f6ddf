#!/usr/bin/env bash
# test_coord_demo — `wantrain demo --json` end to end, shortened (40 steps): it must finish the
# run after killing a peer, and its last line must be the JSON the README promises, with the
# loss going down, the GA's predicted cost below random placement's, a recovery time, fewer WAN
# bytes than without compression (int8 activations), and a text sample from the trained model.
#   tests/coordinator/test_coord_demo.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
"$BIN/wantrain" demo --steps 40 --minutes 1.5 --json --dir "$WORK/demo" >"$WORK/demo.log" 2>&1 ||
  fail "wantrain demo failed: $(tail -5 "$WORK/demo.log")"
tail -1 "$WORK/demo.log" | python3 -c "
import json, sys
j = json.loads(sys.stdin.read())
keys = ['peers', 'steps', 'first_loss', 'final_loss', 'predicted_cost_ga_s',
        'predicted_cost_random_s', 'measured_iteration_s', 'wan_bytes', 'peer_killed', 'recovery_s']
missing = [k for k in keys if k not in j]
ok = (not missing and j['peers'] == 9 and j['steps'] == 40 and j['final_loss'] < j['first_loss']
      and 0 < j['predicted_cost_ga_s'] < j['predicted_cost_random_s'] and j['peer_killed'] > 0
      and 0 < j['recovery_s'] < 30 and j['wan_bytes'] > 0 and j['measured_iteration_s'] > 0
      and j['wan_bytes'] < j['wan_bytes_uncompressed'] and len(j.get('sample', '')) >= 60)
print(j)
sys.exit(0 if ok else 1)" || fail "the demo's JSON line is not what it should be"
[ -s "$WORK/demo/loss.png" ] || grep -q "loss curve .*not drawn" "$WORK/demo.log" ||
  fail "no loss curve and no reason"
echo "test_coord_demo: all checks passed"
