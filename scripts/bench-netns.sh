#!/usr/bin/env bash
# bench-netns — sim vs real on kernel-shaped links: namespaces per region behind tbf-shaped
# uplinks, a coordinator and its peers, the GA placement and random ones measured beside the
# coordinator's prediction and netsim's simulation (scripts/bench_netns.py says how).
#   scripts/bench-netns.sh [--bin build/bin] [--rates 200,100,50,25] [--peers-per-region 2]
#                          [--channels 128] [--layers 2] [--steps 12] [--random 3] ...
# Needs root (ip netns, tc); exits 77 where namespaces cannot be made.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
args=("$@")
case " $* " in *" --bin "*) ;; *) args=(--bin "$here/../build/bin" "${args[@]}") ;; esac
exec python3 "$here/bench_netns.py" "${args[@]}"
