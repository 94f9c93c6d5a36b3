#!/usr/bin/env bash
# What cluster authentication costs a send: ROUNDS rounds; in each, a fresh `raftmq dev` group of
# NODES replicas (deploy/dev-up.sh) started with `--insecure-no-cluster-secret` (Raft RPCs and
# registrations unsigned), then one with its own cluster secret (every Raft RPC HMAC-SHA256-signed
# by the leader and checked by the follower), each loaded by `raftmq bench produce` (1 KiB, 256
# sync senders) for DURATION. Prints msg/s, p50/p99, the broker's cores and CPU per message, and
# how busy the machine was.
#
#   deploy/bench-cluster-auth-ab.sh NODES DURATION ROUNDS [BIN]     # e.g. 3 20s 3 target/release/raftmq
set -euo pipefail

nodes=$1
duration=$2
rounds=$3
bin=${4:-target/release/raftmq}
ns=127.0.0.1:19876
# shellcheck source=deploy/dev-up.sh
. "$(dirname "$0")/dev-up.sh"

busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
run() { # MODE: off | on
    local mode=$1 data
    data=$(mktemp -d /tmp/raftmq-bench.XXXXXX)
    if [ "$mode" = off ]; then
        ( dev_up "$bin" "$nodes" "$data" --insecure-no-cluster-secret; measure "$mode" "$data" )
    else
        ( dev_up "$bin" "$nodes" "$data"; measure "$mode" "$data" )
    fi
}
measure() { # MODE DATA
    local mode=$1 data=$2 b0 b1 m0 m1 t0 t1
    "$bin" admin updateTopic -n $ns -c DefaultCluster -t BenchTopic -r 8 -w 8 >/dev/null
    b0=$(awk '{print $14+$15}' "/proc/$dev/stat"); m0=$(busy); t0=$(date +%s.%N)
    "$bin" bench produce -n $ns -t BenchTopic --duration "$duration" --size 1024 --concurrency 256 --mode sync \
        --json 2>/dev/null >"$data/bench.json"
    b1=$(awk '{print $14+$15}' "/proc/$dev/stat"); m1=$(busy); t1=$(date +%s.%N)
    produce_report "auth=$mode" "$data/bench.json" "$t0" "$t1" "$b0" "$b1" "$m0" "$m1"
}
for _ in $(seq 1 "$rounds"); do
    run off
    run on
done
