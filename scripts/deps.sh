#!/usr/bin/env bash
# Installs the Debian 12 packages wantrain builds and tests with, if any is missing.
# Runs `apt-get update` once, only when something must be installed. Needs root (or sudo).
set -euo pipefail
PACKAGES=(build-essential cmake pkg-config git
          libzmq3-dev libsodium-dev libcurl4-openssl-dev libssl-dev libopenblas-dev
          libcjson-dev libsqlite3-dev libmicrohttpd-dev libutf8proc-dev
          clang libclang-rt-14-dev gnuplot-nox zlib1g-dev
          chromium   # headless, for the dashboard page test (tests/http)
          python3 curl   # the integration tests read /status and JSON logs with them
          iproute2       # ip netns and tc tbf, for the kernel-shaped network test (tests/netns)
          nftables tcpdump)  # NAT routers and the relay's capture (tests/netns/test_netns_nat.sh)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "wantrain: installing Debian packages: ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
