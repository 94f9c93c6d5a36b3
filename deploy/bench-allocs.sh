#!/usr/bin/env bash
# Heap allocations per message on the send path (issue 37): a fresh `raftmq dev` group of NODES
# replicas loaded by `raftmq bench produce` (1 KiB sync sends, 256 in flight) for DURATION; uprobes
# on mimalloc's two allocation entry points (`_mi_page_malloc_zero`, the fast path every allocation
# takes, and `_mi_malloc_generic`, its slow path) count the broker's and the client's calls. Counts,
# not times: a probe costs microseconds, so the run is several times slower than a plain one, but
# the count per message is what a change to the code moves. Needs root and perf; the binary must
# keep its symbols (the release profile does). Then the same messages are read back by a push
# consumer from the first offset (`bench consume`, one message per listener call), counted the
# same way: the catch-up path.
#
#   deploy/bench-allocs.sh BIN [NODES] [DURATION]      # e.g. target/release/raftmq 1 5s
set -euo pipefail

bin=$(realpath "$1")
nodes=${2:-1}
duration=${3:-5s}
# shellcheck source=deploy/dev-up.sh
. "$(dirname "$0")/dev-up.sh"

group=rmqalloc$$
perf probe -q -x "$bin" -a "$group:fast=_mi_page_malloc_zero" -a "$group:slow=_mi_malloc_generic"
events=$group:fast,$group:slow
data=$(mktemp -d /tmp/raftmq-bench.XXXXXX)
dev_up "$bin" "$nodes" "$data"
trap 'kill -TERM $dev 2>/dev/null || true; wait $dev 2>/dev/null || true; rm -rf "'"$data"'"; perf probe -q -d "'"$group"':*" || true' EXIT
"$bin" admin updateTopic -n $dev_ns -c DefaultCluster -t BenchTopic -r 8 -w 8 >/dev/null
perf stat -x, -e "$events" -p "$dev" -o "$data/broker.stat" &
broker_stat=$!
# The client is counted whole, its start-up (a route lookup, one connection) included: a few
# thousand allocations against tens of thousands of messages.
perf stat -x, -e "$events" -o "$data/client.stat" -- "$bin" bench produce -n $dev_ns -t BenchTopic \
    --duration "$duration" --size 1024 --concurrency 256 --mode sync --json 2>/dev/null >"$data/bench.json"
kill -INT $broker_stat
wait $broker_stat || true
sent=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["sent"])' "$data/bench.json")
perf stat -x, -e "$events" -p "$dev" -o "$data/broker-consume.stat" &
broker_stat=$!
perf stat -x, -e "$events" -o "$data/client-consume.stat" -- "$bin" bench consume -n $dev_ns -t BenchTopic \
    -g alloc_count --from-first --count "$sent" --json 2>/dev/null >"$data/consume.json"
kill -INT $broker_stat
wait $broker_stat || true
python3 - "$data" "$nodes" "$sent" <<'PY'
import json, sys
data, nodes, sent = sys.argv[1], sys.argv[2], int(sys.argv[3])
def count(name):
    n = {}
    for line in open(f"{data}/{name}.stat"):
        parts = line.strip().split(",")
        if len(parts) > 2 and parts[0].isdigit():
            n[parts[2].split(":")[-1]] = int(parts[0])
    return sum(n.values()), n.get("slow", 0)
consumed = json.load(open(f"{data}/consume.json")).get("received", sent)
for what, msgs, broker, client in (("send", sent, "broker", "client"), ("catch-up", consumed, "broker-consume", "client-consume")):
    (b, bs), (c, cs) = count(broker), count(client)
    m = max(msgs, 1)
    print(f"{what}: nodes={nodes} messages={msgs} broker_allocs_per_msg={b / m:.1f} (slow path {bs / m:.1f}) "
          f"client_allocs_per_msg={c / m:.1f} (slow path {cs / m:.1f})")
PY
