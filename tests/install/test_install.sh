#!/usr/bin/env bash
# test_install — `cmake --install BUILD --prefix TMP` puts exactly the built programs among
# wantrain, netsim, coordinator and peerd in TMP/bin (wantrain and netsim always), each runs
# `--help` with exit 0 from there, and when peerd is built its systemd unit lands in
# TMP/lib/systemd/system running TMP/bin/peerd (checked by `systemd-analyze verify` if present).
#   tests/install/test_install.sh BUILD_DIR [CMAKE]
set -uo pipefail
build=${1:?usage: test_install.sh BUILD_DIR [CMAKE]}
cmake=${2:-cmake}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/wt-install-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
prefix="$scratch/prefix with space"
bad=0
fail() { echo "test_install: FAILED: $*" >&2; bad=1; }

if ! "$cmake" --install "$build" --prefix "$prefix" >"$scratch/install.log" 2>&1; then
  cat "$scratch/install.log" >&2
  fail "cmake --install exited nonzero"
  exit 1
fi

expected=()
for prog in wantrain netsim coordinator peerd; do
  case $prog in
  wantrain | netsim) expected+=("$prog") ;;
  *) [ -x "$build/bin/$prog" ] && expected+=("$prog") ;;
  esac
done

for prog in "${expected[@]}"; do
  exe="$prefix/bin/$prog"
  if [ ! -x "$exe" ] || [ -L "$exe" ]; then
    fail "$prog is not installed as a program in $prefix/bin"
    continue
  fi
  # From the prefix, with no hint of the source or build tree.
  out=$(cd "$scratch" && env -u WT_SOURCE_DIR -u WT_BIN_DIR timeout 30 "$exe" --help 2>&1)
  rc=$?
  [ $rc -eq 0 ] || fail "$prog --help exited $rc: $out"
  [[ "$out" == *"$prog"* ]] || fail "$prog --help does not name the program: $out"
done

# the demo's text and scenario ship beside the programs, where an installed wantrain demo looks
for f in data/shakespeare.txt scenarios/wan4.json; do
  [ -s "$prefix/share/wantrain/$f" ] || fail "$f is not installed in $prefix/share/wantrain"
done
cmp -s "$prefix/share/wantrain/data/shakespeare.txt" "$(dirname "$0")/../../data/shakespeare.txt" ||
  fail "the installed data/shakespeare.txt differs from the shipped one"
# netsim finds the shipped scenarios in the prefix, not in the tree it was built from.
scen="$prefix/share/wantrain/scenarios/dtfm-2022.json"
[ -f "$scen" ] || fail "no $scen"
out=$(cd "$scratch" && env -u WT_SOURCE_DIR timeout 30 "$prefix/bin/netsim" --help 2>&1)
[[ "$out" == *"share/wantrain/scenarios/dtfm-2022.json"* ]] ||
  fail "installed netsim --help names another default scenario: $out"
out=$(cd "$scratch" && env -u WT_SOURCE_DIR timeout 60 "$prefix/bin/netsim" compare \
  --scenario worldwide_geo_distributed --solvers megatron --max-evals 10 2>&1) ||
  fail "installed netsim compare on the default scenarios: $out"

# Nothing else: no test or benchmark programs leak into the prefix.
got=$(ls "$prefix/bin" | sort | tr '\n' ' ')
want=$(printf '%s\n' "${expected[@]}" | sort | tr '\n' ' ')
[ "$got" = "$want" ] || fail "$prefix/bin holds '$got', want '$want'"

if [[ " ${expected[*]} " == *" peerd "* ]]; then
  unit="$prefix/lib/systemd/system/peerd.service"
  if [ ! -f "$unit" ]; then
    fail "no systemd unit at $unit"
  else
    grep -qF "ExecStart=\"$prefix/bin/peerd\" " "$unit" || fail "the unit does not run $prefix/bin/peerd"
    if command -v systemd-analyze >/dev/null; then
      # verify also reads the EnvironmentFile's absence as fine; it checks the syntax and paths.
      msgs=$(systemd-analyze verify "$unit" 2>&1) || fail "systemd-analyze verify: $msgs"
      [ -z "$msgs" ] || fail "systemd-analyze verify complains: $msgs"
    fi
  fi
fi

if [ $bad -ne 0 ]; then
  echo "install log:" >&2
  cat "$scratch/install.log" >&2
  exit 1
fi
echo "test_install: all checks passed (${expected[*]} installed and run --help)"
