#!/usr/bin/env bash
# The demo: installs the Debian packages (scripts/deps.sh), builds wantrain, netsim, the coordinator
# and peerd in build/, then runs `wantrain demo`: a coordinator and 9 peerd on this machine over an
# emulated 4-region WAN (2 pipeline stages x 4 data-parallel replicas plus a standby), GA
# placement, int8 activations; one peer is killed part-way and the standby takes over. Ends
# with a summary (WAN bytes with and without compression, a text sample) and the loss curve as a PNG.
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
