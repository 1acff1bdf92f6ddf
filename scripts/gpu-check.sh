#!/usr/bin/env bash
# gpu-check — everything a few minutes on a GPU machine should measure, in one go: builds with
# CUDA, runs the gpu-labelled tests, bench-train --device and bench-codecs --device, and writes
# each result to a file under OUT_DIR (created). Meant to be run as it is, unattended.
#
#   scripts/gpu-check.sh OUT_DIR [DEVICE]      DEVICE defaults to cuda:0
#   scripts/gpu-check.sh --prebuilt PACK OUT_DIR [DEVICE]
#
# With --prebuilt, nothing is built: PACK is what scripts/gpu-pack.sh made on another machine
# (binaries, their non-CUDA libraries, the gpu test list), for a GPU machine that has the CUDA
# runtime, cuBLAS and NCCL but not the project's other dependencies.
#
# The CUDA back end has two sets of kernels (WANTRAIN_CUDA_KERNELS, docs/performance.md): the
# gpu tests of the kernels and the model run on both (CTest's *_plain twins; with --prebuilt,
# a second run of those binaries), and bench-train runs once per set, fused then plain.
#
# Files: env.txt (GPU, driver, nvcc, commit), build.log, gpu-tests.log, bench-train.txt and
# bench-train.json (its JSON line; fused kernels), bench-train-plain.txt and
# bench-train-plain.json (plain kernels), bench-codecs.txt and bench-codecs.json, launch-1x1.txt,
# launch-2x2.txt and launch-scale.txt / launch-scale.json (`wantrain launch --device` 2 x 2 beside
# 1 x 1 on the same GPU and model: median tokens/s of steps 6..), summary.txt
# (with the fused / plain step-time ratio). Exits 0 when the build, every gpu test and the
# benchmarks succeeded, 1 otherwise; a step that fails does not stop the later ones (their
# output is what the run is for). Budget: about 8 minutes on one H200 (the step deadlines).
set -uo pipefail

usage() {
  echo "usage: scripts/gpu-check.sh [--prebuilt PACK] OUT_DIR [DEVICE]   (DEVICE: cuda:N, default cuda:0)" >&2
  exit 2
}
pack=
if [ "${1:-}" = "--prebuilt" ]; then
  [ $# -ge 3 ] || usage
  pack=$(cd "$2" && pwd) || usage
  shift 2
fi
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then usage; fi
out=$(mkdir -p "$1" && cd "$1" && pwd) || { echo "gpu-check: cannot create $1" >&2; exit 1; }
device=${2:-cuda:0}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GPU_CHECK_BUILD:-$root/build-gpu} # an existing CUDA build dir may be reused
jobs=$(nproc 2>/dev/null || echo 4)
status=0
summary="$out/summary.txt"
: >"$summary"

note() { echo "$*" | tee -a "$summary"; }

# Runs a step with a deadline; its output goes to $out/$name; records pass/fail.
step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$out/$name" 2>&1
  local rc=$?
  note "$(printf '%-16s rc=%-3d %4ds  %s' "$name" "$rc" $((SECONDS - t0)) "$*")"
  [ $rc -eq 0 ] || status=1
  return $rc
}

{
  date -u
  git -C "$root" rev-parse HEAD 2>/dev/null
  nvidia-smi 2>&1 || echo "nvidia-smi: not found"
  /usr/local/cuda/bin/nvcc --version 2>&1 || nvcc --version 2>&1
} >"$out/env.txt"

# A field of a one-line JSON file, e.g. json_field bench-train.json step_s_bf16.
json_field() {
  sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" "$out/$1"
}

# The median tokens_per_s of steps 6.. of a launch JSON log (the first steps include start-up).
median_tok_s() {
  sed -n 's/.*"step":\([0-9]*\),.*"tokens_per_s":\([0-9.]*\).*/\1 \2/p' "$1" 2>/dev/null |
    awk '$1 > 5 {print $2}' | sort -g | awk '{v[NR] = $1} END {print NR ? v[int((NR + 1) / 2)] : 0}'
}

# `wantrain launch --device` on one GPU: 2 stages x 2 replicas (four processes) beside 1 x 1, the
# same model and global batch.
launch_scale() { # launch_scale BIN_DIR
  local flags="--layers 4 --channels 256 --heads 4 --seq 256 --batch 16 --micro-batches 2
               --steps 30 --val-every 0 --log-every 10 --timeout 60 --device $device"
  local g
  for g in 1x1 2x2; do
    # shellcheck disable=SC2086
    step launch-$g.txt 90 "$1/wantrain" launch --stages "${g%x*}" --replicas "${g#*x}" $flags \
      --json-log "$out/launch-$g.jsonl"
  done
  local one two
  one=$(median_tok_s "$out/launch-1x1.jsonl")
  two=$(median_tok_s "$out/launch-2x2.jsonl")
  {
    printf '| run (--device %s) | median tokens/s, steps 6..30 |\n| --- | ---: |\n' "$device"
    printf '| 1 x 1 | %s |\n| 2 x 2 | %s |\n' "$one" "$two"
    awk -v a="$one" -v b="$two" 'BEGIN {printf "2 x 2 / 1 x 1: %.3f\n", (a > 0 ? b / a : 0)}'
  } >"$out/launch-scale.txt"
  awk -v a="$one" -v b="$two" -v d="$device" 'BEGIN {printf "{\"bench\":\"launch-scale\",\"device\":\"%s\",\"tokens_per_s_1x1\":%s,\"tokens_per_s_2x2\":%s,\"ratio\":%.4f}\n", d, a, b, (a > 0 ? b / a : 0)}' \
    >"$out/launch-scale.json"
  note "launch-scale     $(tail -1 "$out/launch-scale.txt")"
}

benches() { # benches BIN_DIR
  local set
  for set in fused plain; do
    local name=bench-train
    [ "$set" = fused ] || name=bench-train-$set
    step "$name.txt" 180 env WANTRAIN_CUDA_KERNELS=$set "$1/bench-train" --device "$device" \
      --repeats 5
    grep '^{' "$out/$name.txt" | tail -1 >"$out/$name.json"
  done
  local p
  for p in tf32 bf16; do
    local f pl
    f=$(json_field bench-train.json "step_s_$p")
    pl=$(json_field bench-train-plain.json "step_s_$p")
    if [ -n "$f" ] && [ -n "$pl" ]; then
      note "$(awk -v f="$f" -v p="$pl" -v m="$p" 'BEGIN { printf "bench-train %s: fused %.4f s, plain %.4f s, plain/fused %.3f", m, f, p, p / f }')"
    fi
  done
  step bench-codecs.txt 120 "$1/bench-codecs" --device "$device" --reps 5
  grep '^{' "$out/bench-codecs.txt" | tail -1 >"$out/bench-codecs.json"
  launch_scale "$1"
}

# The gpu tests of the kernels and the model, whose binaries run either set of kernels.
kernel_tests="test_cuda_kernels test_gpu_model"

if [ -n "$pack" ]; then
  # the GPU machine's own CUDA libraries (cuBLAS, NCCL) wherever its toolkit or Python wheels keep them
  cudalibs=$(find /usr /opt /lib* \( -name 'libcublas.so.*' -o -name 'libnccl.so.*' \) 2>/dev/null |
             xargs -r -n1 dirname | sort -u | tr '\n' ':')
  export LD_LIBRARY_PATH="$pack/lib:$cudalibs${LD_LIBRARY_PATH:-}"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >>"$out/env.txt"
  # each gpu test on its own, so one crash does not hide the others; 77 (skipped) is a failure
  # here, since a GPU machine is the point of the run
  : >"$out/gpu-tests.log"
  run_packed() { # run_packed KERNEL_SET NAME ARGS...
    local set=$1 name=$2 t0=$SECONDS
    shift 2
    (cd "$root" && WANTRAIN_CUDA_KERNELS=$set timeout 180 "$pack/bin/$name" "$@") \
      >>"$out/gpu-tests.log" 2>&1
    local rc=$?
    note "$(printf '%-24s rc=%-3d %4ds  %s kernels' "$name${*:+ $*}" "$rc" $((SECONDS - t0)) "$set")"
    [ $rc -eq 0 ] || status=1
  }
  # a binary listed twice (a CTest twin with other variables) runs once per kernel set below
  while read -r name args; do
    args=${args//@BIN@/$pack/bin} # a script test's binaries: the pack's
    # shellcheck disable=SC2086
    run_packed fused "$name" $args
    # shellcheck disable=SC2086
    case " $kernel_tests " in *" $name "*) run_packed plain "$name" $args ;; esac
  done < <(sort -u "$pack/tests.txt")
  benches "$pack/bin"
elif step build.log 900 bash -c "cmake -S '$root' -B '$build' -DCMAKE_BUILD_TYPE=Release \
     -DWANTRAIN_CUDA=ON && cmake --build '$build' -j$jobs"; then
  # The gpu tests are skipped (77) without a device: count skips as a failure here, since a
  # GPU machine is the point of the run.
  step gpu-tests.log 900 ctest --test-dir "$build" -L gpu --output-on-failure --no-tests=error
  if grep -q "Skipped" "$out/gpu-tests.log"; then
    note "gpu-tests: some tests were SKIPPED (no device seen?)"
    status=1
  fi
  benches "$build/bin"
fi
# layers the fused kernels ran the plain way (cuBLASLt had no algorithm): worth knowing
grep -h "cuBLASLt has no algorithm" "$out"/*.txt "$out"/*.log 2>/dev/null | sort -u |
  while read -r line; do note "fallback: $line"; done
note "results in $out (status $status)"
exit $status
