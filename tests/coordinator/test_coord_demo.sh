#!/usr/bin/env bash
# test_coord_demo — `wantrain demo --json` end to end, shortened: 60 steps, then 20 with a random
# placement, on the WAN emulated at 1/25 of its real time (the demo's default is 1/10; the probe
# epochs that time every pair's latency and bandwidth are most of the run). It must finish the
# run after killing a peer, and its last line must be the JSON the README promises: the loss
# going down on the shipped Shakespeare text, the GA's predicted cost below random placements' on
# average, both placements measured, a recovery time, WAN bytes far below uncompressed
# training's (the wan preset and int8 activations), and a text sample that reads as text (the
# prompt, then mostly letters, spaces and punctuation).
#   tests/coordinator/test_coord_demo.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
"$BIN/wantrain" demo --steps 60 --compare-steps 20 --time-scale 0.04 --minutes 2 --json \
  --dir "$WORK/demo" >"$WORK/demo.log" 2>&1 || fail "wantrain demo failed: $(tail -5 "$WORK/demo.log")"
tail -1 "$WORK/demo.log" | python3 -c "
import json, sys
j = json.loads(sys.stdin.read())
keys = ['peers', 'steps', 'first_loss', 'final_loss', 'predicted_iteration_ga_s',
        'measured_iteration_ga_s', 'predicted_iteration_random_mean_s',
        'predicted_iteration_random_s', 'measured_iteration_random_s', 'wan_bytes',
        'wan_bytes_uncompressed', 'peer_killed', 'recovery_s', 'sample']
missing = [k for k in keys if k not in j]
problems = ['missing ' + ', '.join(missing)] if missing else []
if not problems:
    s = j['sample']
    texty = sum(c.isalpha() or c in \" ,.;:'!?-/\" for c in s) / max(len(s), 1)
    checks = {
        'peers and steps': j['peers'] == 9 and j['steps'] == 60,
        'loss goes down': j['final_loss'] < j['first_loss'],
        'GA predicted below the random mean':
            0 < j['predicted_iteration_ga_s'] < j['predicted_iteration_random_mean_s'],
        'both placements measured':
            j['measured_iteration_ga_s'] > 0 and j['measured_iteration_random_s'] > 0
            and j['predicted_iteration_random_s'] > 0,
        'a peer killed and recovered': j['peer_killed'] > 0 and 0 < j['recovery_s'] < 30,
        'WAN bytes 4x below uncompressed': 0 < 4 * j['wan_bytes'] < j['wan_bytes_uncompressed'],
        'the sample reads as text': s.startswith('ROMEO:') and len(s) >= 60 and texty >= 0.9,
    }
    problems = [k for k, ok in checks.items() if not ok]
print(j)
for p in problems: print('  failed: ' + p)
sys.exit(1 if problems else 0)" || fail "the demo's JSON line is not what it should be"
grep -q "placement, random      predicted .* measured .*x measured" "$WORK/demo.log" ||
  fail "the summary does not show the random placement measured beside predicted"
[ -s "$WORK/demo/loss.png" ] || grep -q "loss curve .*not drawn" "$WORK/demo.log" ||
  fail "no loss curve and no reason"
echo "test_coord_demo: all checks passed"
