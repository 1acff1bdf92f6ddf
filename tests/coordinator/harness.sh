# harness — shell helpers for the coordinator integration tests: start a coordinator and peers
# on loopback (ephemeral ports) in a scratch directory, wait for log lines with a deadline, and
# kill only the processes started here when the test ends. Source it; set BIN first.
set -uo pipefail
WORK=$(mktemp -d "${TMPDIR:-/tmp}/wt-coord-XXXXXX")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$WORK"/*.log; do echo "--- $f"; tail -12 "$f"; done
  exit 1
}
# need_tool CMD PACKAGE: fails, naming the Debian package, when CMD is not on PATH.
need_tool() {
  command -v "$1" >/dev/null 2>&1 || fail "$1 not found: install the Debian package $2 (scripts/deps.sh does)"
}
need_tool python3 python3
need_tool curl curl
# The run the tests train unless they say otherwise: a small model and a lab-sized run (2 x 4,
# 200 steps, two micro-batches, a checkpoint every 10 steps, validation at the end only), so
# that a multi-process test takes seconds on two cores. A test's own ARGS come after and win.
LAB_RUN=(--stages 2 --replicas 4 --steps 200 --micro-batches 2 --seq 32 --channels 32 --heads 2
         --warmup 0 --val-every 0 --val-batches 1 --checkpoint-every 10 --keep 3)
# start_coord LOG ARGS...: runs the coordinator on $STATE (default $WORK/state) with LAB_RUN and
# ARGS; its endpoint lands in $EP, its pid in $CPID.
start_coord() {
  local log=$1; shift
  STATE=${STATE:-$WORK/state}
  rm -f "$STATE/endpoint"
  "$BIN/coordinator" --state-dir "$STATE" "${LAB_RUN[@]}" "$@" >>"$WORK/$log" 2>&1 &
  CPID=$!
  PIDS+=("$CPID")
  for _ in $(seq 100); do [ -s "$STATE/endpoint" ] && break; sleep 0.1; done
  [ -s "$STATE/endpoint" ] || fail "the coordinator did not start"
  EP=$(cat "$STATE/endpoint")
}
# start_peer N ARGS...: peerd number N with its own data dir; its pid in PEER_PID[N].
declare -A PEER_PID
start_peer() {
  local n=$1; shift
  "$BIN/peerd" --coordinator "$EP" --coordinator-key "$STATE/coordinator.pub" \
    --data-dir "$WORK/peer$n" "$@" >>"$WORK/${PEER_LOG:-peer}$n.log" 2>&1 &
  PEER_PID[$n]=$!
  PIDS+=("$!")
}
# pid_of_peer ID: the pid of the peerd the coordinator calls peer ID (from "peerd ID: admitted").
pid_of_peer() {
  local f n
  for f in "$WORK"/${PEER_LOG:-peer}*.log; do
    if grep -q "^peerd $1: admitted" "$f"; then
      n=${f##*/${PEER_LOG:-peer}}; n=${n%.log}
      echo "${PEER_PID[$n]}"
      return 0
    fi
  done
  return 1
}
# json_field LOG KEY: KEY's value in the coordinator's "final" JSON line of LOG.
json_field() {
  grep '^coordinator: final ' "$WORK/$1" | tail -1 | sed 's/^coordinator: final //' |
    python3 -c "import json,sys; v=json.load(sys.stdin)['$2']; print(v)"
}
# wait_committed LOG STEP SECONDS: returns 0 once LOG says a checkpoint at or after STEP is complete.
wait_committed() {
  local end=$((SECONDS + $3)) last
  while [ $SECONDS -lt "$end" ]; do
    last=$(grep -oE "checkpoint: step [0-9]+ complete" "$1" 2>/dev/null | tail -1 | grep -oE "[0-9]+")
    [ -n "$last" ] && [ "$last" -ge "$2" ] && return 0
    sleep 0.1
  done
  return 1
}
# wait_exit PID SECONDS: waits for a child to exit within SECONDS; its status in $?, 124 if not.
wait_exit() {
  local end=$((SECONDS + $2))
  while kill -0 "$1" 2>/dev/null && [ $SECONDS -lt "$end" ]; do sleep 0.2; done
  kill -0 "$1" 2>/dev/null && return 124
  wait "$1"
}
# wait_for FILE REGEX SECONDS: returns 0 once FILE has a line matching REGEX.
wait_for() {
  local end=$((SECONDS + $3))
  while [ $SECONDS -lt "$end" ]; do
    grep -qE "$2" "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}
