#!/usr/bin/env bash
# gpu-pack — builds the CUDA tree here and packs what a bare GPU machine needs to run the
# gpu-labelled tests and the GPU benchmarks without building: the binaries, the shared
# libraries they load that are not part of glibc or the CUDA toolkit (ZeroMQ, libsodium, cJSON,
# libcurl and its deps, OpenBLAS), and the list of gpu tests with their arguments. Run
# `scripts/gpu-check.sh --prebuilt PACK_DIR OUT_DIR` there.
#
#   scripts/gpu-pack.sh PACK_DIR [BUILD_DIR]     BUILD_DIR defaults to build-gpu
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: scripts/gpu-pack.sh PACK_DIR [BUILD_DIR]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
pack=$1
build=${2:-$root/build-gpu}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DWANTRAIN_CUDA=ON >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
rm -rf "$pack"
mkdir -p "$pack/bin" "$pack/lib"
: >"$pack/tests.txt"
# ctest's own list: "name<TAB>binary args..." for every gpu-labelled test
ctest --test-dir "$build" -N -V -L gpu | sed -n 's/^[0-9]*: Test command: //p' |
  while read -r cmd args; do
    cp "$cmd" "$pack/bin/"
    case $cmd in *.sh) args=@BIN@ ;; esac # a script takes the binaries' folder: gpu-check's pack
    echo "$(basename "$cmd")${args:+ $args}" | tr -d '"' >>"$pack/tests.txt"
  done
cp "$root/tests/coordinator/harness.sh" "$pack/bin/" # what the script tests source
for b in bench-train bench-codecs bench-collectives wantrain peerd coordinator; do
  cp "$build/bin/$b" "$pack/bin/"
done
# every library the binaries resolve here, except glibc's and CUDA's (the GPU machine has its own)
for f in "$pack"/bin/*; do case $f in *.sh) ;; *) ldd "$f" ;; esac; done | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[^/]*)\.so|/cuda|libcublas|libnccl' |
  while read -r lib; do cp -L "$lib" "$pack/lib/"; done
cp -L /usr/lib/x86_64-linux-gnu/libopenblas.so.0 "$pack/lib/" # dlopen'd, so ldd does not list it
cp -L "$(ldd "$pack/bin/bench-train" | awk '/libcudart/ {print $3}')" "$pack/lib/"
du -sh "$pack"
