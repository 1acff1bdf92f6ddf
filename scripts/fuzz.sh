#!/usr/bin/env bash
# Builds the codec decoders' libFuzzer targets (compress/fuzz/fuzz_<codec>.c) with clang,
# ASan and UBSan, seeds each with valid encodings, and runs each for a bounded time.
#   scripts/fuzz.sh [--time SECONDS] [--out DIR] [--rss MB] [codec ...]
# Defaults: 10 s per target, build-fuzz/, 2048 MB, every codec. Exits 77 (skip) when clang or
# libFuzzer is missing, nonzero when a target finds a crash (the input is left in DIR/crashes).
set -euo pipefail
cd "$(dirname "$0")/.."
TIME=10
OUT=build-fuzz
RSS=2048
CODECS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time) TIME="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --rss) RSS="$2"; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) CODECS+=("$1"); shift ;;
  esac
done
if [ ${#CODECS[@]} -eq 0 ]; then
  CODECS=(fp32 fp16 bf16 int8 int4 topk randk sign)
fi
CC=${FUZZ_CC:-clang}
if ! command -v "$CC" >/dev/null; then
  echo "fuzz.sh: $CC not found; install clang and libclang-rt-14-dev (scripts/deps.sh)"
  exit 77
fi
mkdir -p "$OUT/obj" "$OUT/crashes"
probe="$OUT/probe.c"
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' >"$probe"
if ! "$CC" -fsanitize=fuzzer "$probe" -o "$OUT/probe" 2>/dev/null; then
  echo "fuzz.sh: $CC cannot link libFuzzer; install libclang-rt-14-dev"
  exit 77
fi

# The codec sources only (not the rest of compress/, which has other dependencies), compiled
# once with coverage instrumentation and linked into every target.
SRCS=(compress/codec*.c compress/wire.c compress/ef.c common/common.c common/rng.c common/bytes.c)
FLAGS=(-g -O1 -std=gnu11 -I. -Wno-unknown-pragmas
       -fsanitize=address,undefined -fno-sanitize-recover=undefined)
objs=()
for src in "${SRCS[@]}"; do
  obj="$OUT/obj/$(basename "${src%.c}").o"
  "$CC" "${FLAGS[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
  objs+=("$obj")
done
"$CC" "${FLAGS[@]}" compress/fuzz/gen_corpus.c "${objs[@]}" -lz -lm -o "$OUT/gen_corpus" \
  -fsanitize=fuzzer-no-link
rm -rf "$OUT/seeds"
"$OUT/gen_corpus" "$OUT/seeds"

status=0
for c in "${CODECS[@]}"; do
  src="compress/fuzz/fuzz_$c.c"
  [ -f "$src" ] || { echo "fuzz.sh: no target $src" >&2; exit 2; }
  "$CC" "${FLAGS[@]}" -fsanitize=fuzzer "$src" "${objs[@]}" -lz -lm -o "$OUT/fuzz_$c"
  mkdir -p "$OUT/corpus/$c"
  echo "== fuzz_$c for ${TIME}s"
  if ! "$OUT/fuzz_$c" -max_total_time="$TIME" -rss_limit_mb="$RSS" -timeout=20 \
      -artifact_prefix="$OUT/crashes/$c-" -print_final_stats=0 \
      "$OUT/corpus/$c" "$OUT/seeds/$c" 2>"$OUT/fuzz_$c.log"; then
    tail -40 "$OUT/fuzz_$c.log"
    echo "fuzz.sh: fuzz_$c FAILED; reproduce with $OUT/fuzz_$c $OUT/crashes/$c-*"
    status=1
  else
    grep -E "^Done" "$OUT/fuzz_$c.log" | tail -1 || true
  fi
done
exit $status
