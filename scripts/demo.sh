#!/usr/bin/env bash
# The one-minute demo: installs the Debian packages (scripts/deps.sh), builds wantrain in build/,
# trains the default small GPT on the built-in synthetic corpus for about a minute, prints its
# progress, evaluates it against the corpus' entropy rate and prints a text sample.
#   scripts/demo.sh [SECONDS]     (default 60; WANTRAIN_BUILD_DIR overrides build/)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
build="${WANTRAIN_BUILD_DIR:-build}"
# Idle OpenMP threads sleep instead of spinning: the demo may share the machine (README).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
bash scripts/deps.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$build" -j"$(nproc)" --target wantrain
bin="$build/bin/wantrain"
run="$build/demo-run"

rm -rf "$run" "$run.jsonl"
echo
echo "== training the default small GPT on the synthetic corpus for up to ${seconds} s"
"$bin" train --steps 3000 --time-limit "$seconds" --val-every 250 --log-every 100 \
  --checkpoint-dir "$run" --json-log "$run.jsonl"
echo
echo "== evaluating the checkpoint on the synthetic corpus (the entropy rate is the floor)"
"$bin" eval --checkpoint "$run" --data synthetic
echo
echo "== a sample (synthetic tokens print as letters; the model continues the Markov chain)"
"$bin" sample --checkpoint "$run" --prompt "a" --tokens 240 --temperature 1.0
echo
echo "checkpoint: $run   per-step JSON log: $run.jsonl"
