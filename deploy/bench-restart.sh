#!/usr/bin/env bash
# How long a `raftmq dev` group takes to come back after `kill -9` with STORED messages retained,
# as recorded in BENCHMARKS.md: once with the replicas' checkpoints as the crash left them (a
# restart re-applies only the log written since), once with the checkpoint files removed (every
# retained entry is re-applied, as before checkpoints existed), then after a graceful stop.
#
#   deploy/bench-restart.sh [NODES] [STORED]     # defaults: 1 1000000
#
# The time is from starting `raftmq dev` to its "cluster is up" line (a ready leader taking writes;
# a 1-node group also waits out an election timeout, 1.2-2 s, after a crash); each replica's log
# line "state machine recovered" gives the entries it re-applied and how long that took.
set -euo pipefail

nodes=${1:-1}
stored=${2:-1000000}
bin=${RAFTMQ_BIN:-target/release/raftmq}
ns=127.0.0.1:19876
data=$(mktemp -d /tmp/raftmq-bench.XXXXXX)
# shellcheck source=deploy/dev-up.sh
. "$(dirname "$0")/dev-up.sh"

# Starts the group on $data; sets $took to the seconds until it is up.
timed_up() {
    local t0 t1
    t0=$(date +%s.%N)
    dev_up "$bin" "$nodes" "$data"
    t1=$(date +%s.%N)
    took=$(python3 -c "print(f'{$t1 - $t0:.2f}')")
}

crash() {
    kill -KILL "$dev"
    wait "$dev" 2>/dev/null || true
}

timed_up
"$bin" admin updateTopic -n $ns -c DefaultCluster -t BenchTopic -r 8 -w 8 >/dev/null
echo "== storing $stored messages of 1 KiB"
"$bin" bench produce -n $ns -t BenchTopic --count "$stored" --size 1024 --concurrency 256 --mode sync --json \
    2>/dev/null
crash
timed_up
echo "restart after kill -9, checkpoints as left: $took s"
grep -h "state machine recovered" "$data/dev.log" | sed "s/.*INFO /  /" | cut -c1-200 || true
crash
find "$data" -type f -name checkpoint -delete
timed_up
echo "restart after kill -9, checkpoints removed (every retained entry re-applied): $took s"
grep -h "state machine recovered" "$data/dev.log" | sed "s/.*INFO /  /" | cut -c1-200 || true
kill -TERM "$dev"
wait "$dev" 2>/dev/null || true
timed_up
echo "restart after a graceful stop: $took s"
grep -h "state machine recovered" "$data/dev.log" | sed "s/.*INFO /  /" | cut -c1-200 || true
