#!/usr/bin/env bash
# The layout checker refuses each kind of violation on a small made-up tree, then passes on the
# real one.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${WT_SOURCE_DIR:-$here/../..}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

expect_violation() { # name, file, content, expected message part
  rm -rf "$tmp/t"
  mkdir -p "$tmp/t/common" "$tmp/t/assign" "$tmp/t/kernels/cpu" "$tmp/t/model"
  echo '' >"$tmp/t/common/common.h"
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

if out=$(bash "$here/check_layout.sh" "$src" 2>&1); then
  echo "ok   the source tree"
else
  echo "FAIL the source tree:"
  echo "$out"
  fails=$((fails + 1))
fi
echo "$((6 - fails)) passed, $fails failed"
[ $fails -eq 0 ]
