#!/usr/bin/env bash
# test_cli_defaults — `wantrain train`, `wantrain launch` and `coordinator` describe one run with
# one set of option rows (parallel/runtime/run_config.h): every option two of them share prints
# the same default in their --help. Also checks that they do share the run's options, so the
# comparison cannot pass on empty lists.
#   tests/cli/test_cli_defaults.sh BIN_DIR
BIN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# defaults CMD...: "name default" per option of CMD's --help.
defaults() {
  "$@" --help | sed -nE 's/^  --([a-z0-9-]+) .*\(default: (.*)\)$/\1 \2/p' | sort
}
defaults "$BIN/wantrain" train >"$tmp/train" || { echo "FAIL: wantrain train --help"; exit 1; }
defaults "$BIN/wantrain" launch >"$tmp/launch" || { echo "FAIL: wantrain launch --help"; exit 1; }
defaults "$BIN/coordinator" >"$tmp/coordinator" || { echo "FAIL: coordinator --help"; exit 1; }
fails=0 checks=0
for a in train launch coordinator; do
  for b in train launch coordinator; do
    [[ "$a" < "$b" ]] || continue
    shared=$(join -o 1.1 "$tmp/$a" "$tmp/$b" | wc -l)
    differ=$(join "$tmp/$a" "$tmp/$b" | awk '{ d1 = $2; d2 = $3 } d1 != d2')
    checks=$((checks + 1))
    if [ -n "$differ" ]; then
      echo "FAIL $a vs $b: options with other defaults (option, $a's, $b's):"
      echo "$differ"
      fails=$((fails + 1))
    else
      echo "ok   $a and $b: $shared shared options, the same defaults"
    fi
  done
done
# The run's options every entry point takes (the model, data, optimizer and checkpoints).
for o in seq layers channels heads lr min-lr warmup steps batch micro-batches seed data keep \
         checkpoint-every val-every optimizer; do
  checks=$((checks + 1))
  if grep -q "^$o " "$tmp/train" && grep -q "^$o " "$tmp/launch" && grep -q "^$o " "$tmp/coordinator"; then
    :
  else
    echo "FAIL --$o is not an option of all three"
    fails=$((fails + 1))
  fi
done
# and the pipeline's and the sync's, which launch and the coordinator take
for o in stages replicas schedule act-slots grad-codec diloco preset act-codec zero site-ranks site-cp; do
  checks=$((checks + 1))
  if ! grep -q "^$o " "$tmp/launch" || ! grep -q "^$o " "$tmp/coordinator"; then
    echo "FAIL --$o is not an option of both launch and coordinator"
    fails=$((fails + 1))
  fi
done
echo "$((checks - fails)) passed, $fails failed"
[ $fails -eq 0 ]
