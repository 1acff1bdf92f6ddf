#!/usr/bin/env bash
# Builds parallel/fuzz/fuzz_zmq_frame.c with clang, libFuzzer, ASan and UBSan and runs it for a
# bounded time (default 10 s) from a valid header seed.
#   tests/transport/fuzz_zmq_frame.sh SOURCE_DIR BUILD_DIR [SECONDS]
# Exits 77 (skip) when clang or libFuzzer is missing, 1 when the fuzzer finds a crash (the input
# is left in BUILD_DIR/fuzz-zmq/crash-*).
set -euo pipefail
SRC=$1
OUT=$2/fuzz-zmq
TIME=${3:-10}
CC=${FUZZ_CC:-clang}
command -v "$CC" >/dev/null || { echo "fuzz_zmq_frame: $CC not found; skipping"; exit 77; }
mkdir -p "$OUT/corpus" "$OUT/seeds"
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' >"$OUT/probe.c"
if ! "$CC" -fsanitize=fuzzer "$OUT/probe.c" -o "$OUT/probe" 2>/dev/null; then
  echo "fuzz_zmq_frame: $CC cannot link libFuzzer (install libclang-rt-14-dev); skipping"
  exit 77
fi
"$CC" -g -O1 -std=gnu11 -I"$SRC" -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined "$SRC/parallel/fuzz/fuzz_zmq_frame.c" \
  "$SRC/parallel/zmq_protocol.c" -o "$OUT/fuzz_zmq_frame"
# Seed: a valid header (kind DATA, source rank 1, run id 1) with a 4-byte payload.
printf 'WTZM\001\001\000\000\001\000\000\000\000\000\000\000\000\000\000\000\001\000\000\000' \
  >"$OUT/seeds/valid"
printf '\000%.0s' $(seq 16) >>"$OUT/seeds/valid"
printf '\004\000\000\000\000\000\000\000abcd' >>"$OUT/seeds/valid"
if ! "$OUT/fuzz_zmq_frame" -max_total_time="$TIME" -rss_limit_mb=1024 -timeout=10 \
    -artifact_prefix="$OUT/" -print_final_stats=0 "$OUT/corpus" "$OUT/seeds" \
    2>"$OUT/fuzz.log"; then
  tail -30 "$OUT/fuzz.log"
  echo "fuzz_zmq_frame: FAILED; reproduce with $OUT/fuzz_zmq_frame $OUT/crash-*"
  exit 1
fi
grep -E "^Done" "$OUT/fuzz.log" | tail -1 || true
