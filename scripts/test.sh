#!/usr/bin/env bash
# Builds wantrain and runs every test (unit, integration; gpu tests skip without a GPU).
#   scripts/test.sh             Release build in build/, all tests
#   scripts/test.sh --sanitize  ASan+UBSan build in build-sanitize/, unit tests only
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
if [ "${1:-}" = "--sanitize" ]; then
  cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Debug -DWANTRAIN_SANITIZE=ON -DWANTRAIN_CUDA=OFF
  cmake --build build-sanitize -j"$(nproc)"
  ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-sanitize --output-on-failure -L unit
else
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
  cmake --build build -j"$(nproc)"
  ctest --test-dir build --output-on-failure
fi
