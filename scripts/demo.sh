#!/usr/bin/env bash
# The demo: installs the Debian packages (scripts/deps.sh), builds wantrain, netsim, the coordinator
# and peerd in build/ (what the README's commands use; `cmake --install build` then works), then
# runs `wantrain demo`: a coordinator and 9 peerd on this machine over an emulated 4-region WAN
# (2 pipeline stages x 4 data-parallel replicas plus a standby) train a byte-level GPT on the
# shipped data/shakespeare.txt with GA placement, --preset wan and int8 activations; one peer is
# killed part-way and the standby takes over; then a short run on the same WAN with a random
# placement measures the GA's gain. Ends with a summary (GA vs random placement predicted and
# measured, WAN bytes against uncompressed training, recovery, a text sample) and the loss curve.
#   scripts/demo.sh [wantrain demo options]   e.g. --minutes 2 --json
#   (WANTRAIN_BUILD_DIR overrides build/)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${WANTRAIN_BUILD_DIR:-build}"
# Idle OpenMP threads sleep instead of spinning: the demo may share the machine (README).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
bash scripts/deps.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$build" -j"$(nproc)" --target wantrain coordinator peerd netsim
exec "$build/bin/wantrain" demo "$@"
