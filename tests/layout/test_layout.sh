#!/usr/bin/env bash
# The layout checkers refuse each kind of violation on a small made-up tree, then pass on the
# real one: check_layout.sh on the sources, check_calls.sh on the objects of the build.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${WT_SOURCE_DIR:-$here/../..}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

expect_violation() { # name, file, content, expected message part
  rm -rf "$tmp/t"
  mkdir -p "$tmp/t/common" "$tmp/t/assign" "$tmp/t/kernels/cpu" "$tmp/t/model" \
    "$tmp/t/parallel/runtime" "$tmp/t/coordinator"
  echo '' >"$tmp/t/common/common.h"
  echo '' >"$tmp/t/parallel/runtime/tasklet.h"
  echo '' >"$tmp/t/coordinator/coordinator.h"
  echo '' >"$tmp/t/kernels/cpu/fast.h"
  echo '' >"$tmp/t/model/gpt.h"
  echo '' >"$tmp/t/model/gpt_internal.h"
  mkdir -p "$tmp/t/$(dirname "$2")"
  printf '%s\n' "$3" >"$tmp/t/$2"
  out=$(bash "$here/check_layout.sh" "$tmp/t" 2>&1)
  rc=$?
  if [ $rc -ne 1 ] || [[ "$out" != *"$4"* ]]; then
    echo "FAIL $1: rc=$rc, wanted '$4' in: $out"
    fails=$((fails + 1))
  else
    echo "ok   $1"
  fi
}

expect_violation "bare include" model/a.c '#include "gpt.h"' 'not a path from the repository root'
expect_violation "missing file" model/a.c '#include "model/nope.h"' 'names no file'
expect_violation "internal header" assign/a.c '#include "model/gpt_internal.h"' 'internal to model/'
expect_violation "kernel back end" model/a.c '#include "kernels/cpu/fast.h"' 'internal to kernels/'
expect_violation "arrow backwards" assign/a.c '#include "model/gpt.h"' 'assign/ must not depend on model/'
expect_violation "layer upwards" parallel/transport/a.c '#include "parallel/runtime/tasklet.h"' \
  'parallel/transport/ must not depend on parallel/runtime/'
expect_violation "a header not allowed" peer/a.c '#include "coordinator/coordinator.h"' \
  'peer/ may include only coordinator/protocol.h of coordinator/'

# A made-up build of two files that call each other, a third that only calls one of them, and
# the object of a fourth whose source is gone (a moved file's leftover), which is skipped.
expect_loop() {
  local b=$tmp/b obj=$tmp/b/x/CMakeFiles/wt_x.dir
  rm -rf "$b" "$tmp/src"
  mkdir -p "$obj" "$tmp/src/x"
  printf 'void b(void);\nvoid a(void) { b(); }\n' >"$tmp/src/x/a.c"
  printf 'void a(void);\nvoid b(void) { a(); }\n' >"$tmp/src/x/b.c"
  printf 'void a(void);\nvoid c(void) { a(); }\n' >"$tmp/src/x/c.c"
  printf 'void c(void);\nvoid d(void) { c(); }\n' >"$tmp/src/x/d.c"
  for f in a b c d; do cc -c "$tmp/src/x/$f.c" -o "$obj/$f.c.o" || return 1; done
  rm "$tmp/src/x/d.c" # d.c.o stays behind; with it, c and d would make a second loop
  printf 'void d(void);\nvoid c(void) { d(); }\n' >"$tmp/src/x/c.c"
  cc -c "$tmp/src/x/c.c" -o "$obj/c.c.o" || return 1
  out=$(bash "$here/check_calls.sh" "$b" "$tmp/src" 2>&1)
  rc=$?
  if [ $rc -ne 1 ] || [[ "$out" != *"x/a.c"* || "$out" != *"x/b.c"* || "$out" == *"x/c.c"* ||
                        "$out" == *"x/d.c"* ]]; then
    echo "FAIL a circle between files: rc=$rc, wanted x/a.c and x/b.c (not c or d) in: $out"
    fails=$((fails + 1))
  else
    echo "ok   a circle between files"
  fi
}
expect_loop

if out=$(bash "$here/check_layout.sh" "$src" 2>&1); then
  echo "ok   the source tree"
else
  echo "FAIL the source tree:"
  echo "$out"
  fails=$((fails + 1))
fi
bin=${WT_BINARY_DIR:-$src/build}
if out=$(bash "$here/check_calls.sh" "$bin" "$src" 2>&1); then
  echo "ok   the build's files call no loop"
else
  echo "FAIL the build ($bin):"
  echo "$out"
  fails=$((fails + 1))
fi
echo "$((10 - fails)) passed, $fails failed"
[ $fails -eq 0 ]
