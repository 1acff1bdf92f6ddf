#!/usr/bin/env bash
# Builds coordinator/fuzz/fuzz_coord_msg.c with clang, libFuzzer, ASan and UBSan and runs it for
# a bounded time (default 10 s) from valid and broken control messages.
#   tests/coordinator/fuzz_coord_msg.sh SOURCE_DIR BUILD_DIR [SECONDS]
# Exits 77 (skip) when clang or libFuzzer is missing, 1 when the fuzzer finds a crash (the input
# is left in BUILD_DIR/fuzz-coord/crash-*).
set -euo pipefail
SRC=$1
OUT=$2/fuzz-coord
TIME=${3:-10}
CC=${FUZZ_CC:-clang}
command -v "$CC" >/dev/null || { echo "fuzz_coord_msg: $CC not found; skipping"; exit 77; }
mkdir -p "$OUT/corpus" "$OUT/seeds"
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' >"$OUT/probe.c"
if ! "$CC" -fsanitize=fuzzer "$OUT/probe.c" -o "$OUT/probe" 2>/dev/null; then
  echo "fuzz_coord_msg: $CC cannot link libFuzzer (install libclang-rt-14-dev); skipping"
  exit 77
fi
"$CC" -g -O1 -std=gnu11 -I"$SRC" -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined "$SRC/coordinator/fuzz/fuzz_coord_msg.c" \
  "$SRC/coordinator/protocol.c" "$SRC/common/common.c" \
  $(pkg-config --cflags --libs libcjson libsodium) -lm -o "$OUT/fuzz_coord_msg"
SID=0123456789abcdef0123456789abcdef
printf '{"v":1,"cmd":"heartbeat","sid":"%s","seq":7,"step":3,"loss":2.5}' $SID >"$OUT/seeds/hb"
printf '{"v":1,"cmd":"register","sid":"%s","seq":1,"token":"wt1.x","device":{"kind":"cpu","flops":1e9}}' \
  $SID >"$OUT/seeds/reg"
printf '{"v":2,"cmd":"epoch","sid":"%s","seq":1e300}' $SID >"$OUT/seeds/bad"
if ! "$OUT/fuzz_coord_msg" -max_total_time="$TIME" -rss_limit_mb=1024 -timeout=10 \
    -max_len=70000 -artifact_prefix="$OUT/" -print_final_stats=0 "$OUT/corpus" "$OUT/seeds" \
    2>"$OUT/fuzz.log"; then
  tail -30 "$OUT/fuzz.log"
  echo "fuzz_coord_msg: FAILED; reproduce with $OUT/fuzz_coord_msg $OUT/crash-*"
  exit 1
fi
grep -E "^Done" "$OUT/fuzz.log" | tail -1 || true
