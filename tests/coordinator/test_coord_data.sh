#!/usr/bin/env bash
# test_coord_data — the corpus named by URL in the run config is fetched by every peer, cached
# and checked against its SHA-256: with the wrong digest the peers refuse it and the coordinator
# stops the run naming the mismatch (exit 1); with the right one the run trains to the end.
#   tests/coordinator/test_coord_data.sh BIN_DIR
BIN=$1
. "$(dirname "$0")/harness.sh"
corpus=$WORK/corpus.txt
for i in $(seq 400); do echo "the quick brown fox $i jumps over the lazy dog"; done >"$corpus"
sum=$(sha256sum "$corpus" | cut -d' ' -f1)
wrong=$(printf '%s' "$sum" | tr '0-9a-f' '1-9a-f0')
ARGS=(--open --stages 1 --replicas 2 --steps 6 --batch 4 --micro-batches 1 --seq 16
      --data "file://$corpus" --heartbeat 0.25 --liveness 8 --exit-when-done)

STATE=$WORK/bad PEER_LOG=bad-peer
start_coord bad.log "${ARGS[@]}" --data-sha256 "$wrong"
start_peer 1; start_peer 2
wait_exit "$CPID" 60
rc=$?
[ "$rc" = 1 ] || fail "a corpus with the wrong SHA-256: the coordinator exited $rc, expected 1"
grep -q "stopped: .*data: .*SHA-256" "$WORK/bad.log" || fail "the stop does not name the data's SHA-256"
grep -h "stopped:" "$WORK/bad.log" | cut -c1-240

STATE=$WORK/good PEER_LOG=good-peer
start_coord good.log "${ARGS[@]}" --data-sha256 "$sum"
start_peer 3; start_peer 4
wait_exit "$CPID" 60 || fail "the run with the right digest failed"
grep -q "the run finished 6 steps" "$WORK/good.log" || fail "the run with the right digest did not finish"
echo "test_coord_data: all checks passed"
