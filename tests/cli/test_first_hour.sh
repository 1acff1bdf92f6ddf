#!/usr/bin/env bash
# test_first_hour — runs the README's "First hour" as written: every fenced block marked
# `sh first-hour`, in order, in a scratch copy of the repository root (its entries linked, build/
# the build under test), with two substitutions that keep it short: each `--steps N` becomes
# `--steps $WT_FIRST_HOUR_STEPS` (default 20), each `--tokens N` `--tokens 20`, and the
# coordinator's port 7700 a free one. Each block must exit 0 within its deadline and print what
# it is for (a sample starting with the prompt, a loss, netsim's prediction, the solvers' table,
# a peer told the run is complete).
#   tests/cli/test_first_hour.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$(cd "${1:?usage: test_first_hour.sh SOURCE_DIR BUILD_DIR}" && pwd)
build=$(cd "${2:?usage: test_first_hour.sh SOURCE_DIR BUILD_DIR}" && pwd)
steps=${WT_FIRST_HOUR_STEPS:-20}
work=$(mktemp -d "${TMPDIR:-/tmp}/wt-first-hour-XXXXXX")
cleanup() {
  jobs -p | xargs -r kill 2>/dev/null
  [ "${KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "test_first_hour: FAILED: $*" >&2
  exit 1
}

for entry in "$src"/*; do
  name=${entry##*/}
  [ "$name" = build ] || ln -s "$entry" "$work/$name"
done
ln -s "$build" "$work/build"
port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")

# The blocks, one file each, with the substitutions made.
python3 - "$src/README.md" "$work/blocks" "$steps" "$port" <<'PY' || fail "could not read the README's blocks"
import os, re, sys
readme, out, steps, port = sys.argv[1:]
blocks = re.findall(r"^```sh first-hour\n(.*?)^```", open(readme).read(), re.S | re.M)
os.makedirs(out)
for i, b in enumerate(blocks):
    b = re.sub(r"--steps \d+", f"--steps {steps}", b)
    b = re.sub(r"--tokens \d+", "--tokens 20", b)
    b = b.replace(":7700", f":{port}")
    open(f"{out}/{i:02d}.sh", "w").write(b)
print(f"test_first_hour: {len(blocks)} blocks of README.md")
PY

# What a block's output must hold, by what the block runs.
expect_of() {
  case $1 in
  *"peerd "*) echo "the run is complete" ;;
  *"netsim compare"*) echo "ga" ;;
  *"wantrain launch"*) echo "netsim predicts" ;;
  *"wantrain eval"*) echo "loss" ;;
  *"wantrain sample"*) echo "^ROMEO:" ;;
  *) echo "." ;;
  esac
}

n=0
for block in "$work"/blocks/*.sh; do
  n=$((n + 1))
  echo "--- block $n:"
  sed 's/^/    /' "$block"
  start=$SECONDS
  (cd "$work" && timeout 300 bash -euo pipefail "$block") >"$block.out" 2>&1
  rc=$?
  tail -n 4 "$block.out" | sed 's/^/  > /'
  [ $rc -eq 0 ] || fail "block $n exited $rc after $((SECONDS - start)) s: $(tail -n 20 "$block.out")"
  want=$(expect_of "$(cat "$block")")
  grep -Eq -- "$want" "$block.out" || fail "block $n printed no line matching '$want'"
  echo "  ok in $((SECONDS - start)) s"
done
[ $n -ge 5 ] || fail "only $n blocks marked 'sh first-hour' in README.md"
echo "test_first_hour: all $n blocks ran"
