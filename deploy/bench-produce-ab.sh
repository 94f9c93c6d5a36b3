#!/usr/bin/env bash
# A/B of sends between raftmq binaries: ROUNDS rounds; in each, every BIN in turn starts a fresh
# `raftmq dev` group of NODES replicas (deploy/dev-up.sh) and runs `raftmq bench produce` against it
# for DURATION (1 KiB messages, 256 sync senders in flight), the broker and the client from the same
# binary. Prints msg/s, p50/p99, the broker's cores and CPU per message, and how busy the whole
# machine was. Alternating within one run is what makes the ratio meaningful on a noisy machine.
#
#   deploy/bench-produce-ab.sh NODES DURATION ROUNDS BIN...     # e.g. 1 12s 4 old/raftmq new/raftmq
set -euo pipefail

nodes=$1
duration=$2
rounds=$3
shift 3
ns=127.0.0.1:19876
# shellcheck source=deploy/dev-up.sh
. "$(dirname "$0")/dev-up.sh"

busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
for _ in $(seq 1 "$rounds"); do
    for bin in "$@"; do
        data=$(mktemp -d /tmp/raftmq-bench.XXXXXX)
        dev_up "$bin" "$nodes" "$data"
        "$bin" admin updateTopic -n $ns -c DefaultCluster -t BenchTopic -r 8 -w 8 >/dev/null
        broker0=$(awk '{print $14+$15}' "/proc/$dev/stat")
        busy0=$(busy)
        t0=$(date +%s.%N)
        "$bin" bench produce -n $ns -t BenchTopic --duration "$duration" --size 1024 --concurrency 256 --mode sync \
            --json 2>/dev/null >"$data/bench.json"
        t1=$(date +%s.%N)
        broker1=$(awk '{print $14+$15}' "/proc/$dev/stat")
        busy1=$(busy)
        produce_report "$(basename "$bin")" "$data/bench.json" "$t0" "$t1" "$broker0" "$broker1" "$busy0" "$busy1"
        kill -TERM "$dev" 2>/dev/null || true
        wait "$dev" 2>/dev/null || true
        rm -rf "$data"
        trap - EXIT
    done
done
