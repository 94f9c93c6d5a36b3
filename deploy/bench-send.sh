#!/usr/bin/env bash
# Issue 5's send/consume benchmark on one machine, as recorded in BENCHMARKS.md:
#   1. a `raftmq dev` group of NODES replicas (release build, data in a fresh temp dir);
#   2. `raftmq bench produce`: 1 KiB messages, 256 sync senders in flight, for DURATION;
#   3. STORED more messages stored, then `raftmq bench consume --from-first` of all of them (catch-up),
#      once with one message per listener call and once with 32.
#
#   deploy/bench-send.sh [NODES] [DURATION] [STORED]     # defaults: 3 20s 1000000
#
# Ports are offset from the defaults so a running `raftmq dev` is not disturbed (deploy/dev-up.sh).
set -euo pipefail

nodes=${1:-3}
duration=${2:-20s}
stored=${3:-1000000}
bin=${RAFTMQ_BIN:-target/release/raftmq}
ns=127.0.0.1:19876
data=$(mktemp -d /tmp/raftmq-bench.XXXXXX)
# shellcheck source=deploy/dev-up.sh
. "$(dirname "$0")/dev-up.sh"
dev_up "$bin" "$nodes" "$data"
"$bin" admin updateTopic -n $ns -c DefaultCluster -t BenchTopic -r 8 -w 8 >/dev/null
"$bin" admin updateTopic -n $ns -c DefaultCluster -t CatchUp -r 8 -w 8 >/dev/null
echo "== produce: $nodes node(s), 1 KiB, 256 in flight, $duration (load before: $(cut -d' ' -f1-3 /proc/loadavg))"
"$bin" bench produce -n $ns -t BenchTopic --duration "$duration" --size 1024 --concurrency 256 --mode sync --json \
    2>/dev/null
echo "== storing $stored messages for the catch-up read"
"$bin" bench produce -n $ns -t CatchUp --count "$stored" --size 1024 --concurrency 256 --mode sync --json 2>/dev/null
echo "== catch-up consume of $stored stored messages (one message per listener call, RocketMQ's default)"
"$bin" bench consume -n $ns -t CatchUp -g catchup --from-first --count "$stored" --json 2>/dev/null
echo "== catch-up consume of $stored stored messages (consumeMessageBatchMaxSize 32)"
"$bin" bench consume -n $ns -t CatchUp -g catchup32 --from-first --count "$stored" --consume-batch 32 --json \
    2>/dev/null
