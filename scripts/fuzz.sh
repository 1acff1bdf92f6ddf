#!/usr/bin/env bash
# Builds libFuzzer targets with clang, ASan and UBSan, seeds each, and runs each for a bounded
# time. A target is a file */fuzz/fuzz_<name>.c (or */*/fuzz/, as in parallel/transport/); the
# lines of its header comment say what it links:
#   fuzz-sources: model/safetensors.c common/common.c    (globs allowed)
#   fuzz-flags:   -DNAME=value                           (optional compile flags)
#   fuzz-libs:    -lcjson -lm                            (optional)
# (a key given on several lines takes them all, so that a long list keeps to the line width)
# and its seeds are the files in <its folder>/seeds/<name>/ if there are any. The codec targets
# (compress/fuzz/) name no sources: they share the codec sources and the valid encodings that
# compress/fuzz/gen_corpus.c writes.
#   scripts/fuzz.sh [--time SECONDS] [--out DIR] [--rss MB] [name ...]
# Defaults: 10 s per target, build-fuzz/, 2048 MB, every target. Exits 77 (skip) when clang or
# libFuzzer is missing, nonzero when a target finds a crash (the input is left in DIR/crashes).
set -euo pipefail
cd "$(dirname "$0")/.."
TIME=10
OUT=build-fuzz
RSS=2048
NAMES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time) TIME="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --rss) RSS="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) NAMES+=("$1"); shift ;;
  esac
done
shopt -s nullglob
if [ ${#NAMES[@]} -eq 0 ]; then
  for f in */fuzz/fuzz_*.c */*/fuzz/fuzz_*.c; do
    n=$(basename "$f" .c)
    NAMES+=("${n#fuzz_}")
  done
fi
TARGETS=()
for n in "${NAMES[@]}"; do
  found=(*/fuzz/fuzz_"$n".c */*/fuzz/fuzz_"$n".c)
  [ ${#found[@]} -gt 0 ] || { echo "fuzz.sh: no target */fuzz/fuzz_$n.c" >&2; exit 2; }
  TARGETS+=("${found[0]}")
done
shopt -u nullglob
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

FLAGS=(-g -O1 -std=gnu11 -I. -Wno-unknown-pragmas
       -fsanitize=address,undefined -fno-sanitize-recover=undefined)
CODEC_SRCS=(compress/codec*.c compress/wire.c compress/ef.c common/common.c common/rng.c
            common/bytes.c)

# The values of a target's "fuzz-KEY:" header lines, joined by spaces ("" if none).
header_line() { sed -n "s/^ \* fuzz-$2: *//p" "$1" | tr '\n' ' '; }

# Compiles sources (with coverage instrumentation) into objects under $OUT/obj/<tag>/ and
# prints their paths; each source compiles once per tag.
compile() {
  local tag=$1; shift
  local extra=$1; shift
  mkdir -p "$OUT/obj/$tag"
  for src in "$@"; do
    local obj
    obj="$OUT/obj/$tag/$(echo "${src%.c}" | tr / _).o"
    if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ]; then
      # shellcheck disable=SC2086
      "$CC" "${FLAGS[@]}" $extra -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
    fi
    echo "$obj"
  done
}

codec_objs=()
status=0
for target in "${TARGETS[@]}"; do
  name=$(basename "$target" .c)
  name=${name#fuzz_}
  srcs=$(header_line "$target" sources)
  seeds=()
  if [ -z "$srcs" ]; then # a codec target
    if [ ${#codec_objs[@]} -eq 0 ]; then
      mapfile -t codec_objs < <(compile codecs "" "${CODEC_SRCS[@]}")
      "$CC" "${FLAGS[@]}" compress/fuzz/gen_corpus.c "${codec_objs[@]}" -lz -lm \
        -o "$OUT/gen_corpus" -fsanitize=fuzzer-no-link
      rm -rf "$OUT/seeds"
      "$OUT/gen_corpus" "$OUT/seeds"
    fi
    objs=("${codec_objs[@]}")
    libs="-lz -lm"
    seeds=("$OUT/seeds/$name")
  else
    flags=$(header_line "$target" flags)
    # shellcheck disable=SC2086
    mapfile -t objs < <(compile "$name" "$flags" $srcs)
    libs=$(header_line "$target" libs)
    seed_dir="$(dirname "$target")/seeds/$name"
    [ -d "$seed_dir" ] && seeds=("$seed_dir")
  fi
  # shellcheck disable=SC2086
  "$CC" "${FLAGS[@]}" -fsanitize=fuzzer "$target" "${objs[@]}" $libs -o "$OUT/fuzz_$name"
  mkdir -p "$OUT/corpus/$name"
  echo "== fuzz_$name for ${TIME}s"
  if ! "$OUT/fuzz_$name" -max_total_time="$TIME" -rss_limit_mb="$RSS" -timeout=20 \
      -artifact_prefix="$OUT/crashes/$name-" -print_final_stats=0 \
      "$OUT/corpus/$name" "${seeds[@]}" 2>"$OUT/fuzz_$name.log"; then
    tail -40 "$OUT/fuzz_$name.log"
    echo "fuzz.sh: fuzz_$name FAILED; reproduce with $OUT/fuzz_$name $OUT/crashes/$name-*"
    status=1
  else
    grep -E "^Done" "$OUT/fuzz_$name.log" | tail -1 || true
  fi
done
exit $status
