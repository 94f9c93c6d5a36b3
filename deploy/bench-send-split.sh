#!/usr/bin/env bash
# Where a send's time goes, inside the broker's send path and outside it (issue 37): a fresh
# `raftmq dev` group of NODES replicas (deploy/dev-up.sh) takes `raftmq bench produce` (1 KiB, sync,
# CONCURRENCY in flight) for DURATION. Prints the bench's line, then the client's mean latency
# against the broker's own (`rocketmq_send_latency_seconds`: from the send processor taking the
# request to its SEND_OK), the difference (the client, both connections' read and write loops, the
# frame decode before the processor) and the group's syncs, all from the admin ports' /metrics.
#
#   deploy/bench-send-split.sh NODES CONCURRENCY DURATION [BIN]    # e.g. 1 256 10s
set -euo pipefail

nodes=$1
concurrency=$2
duration=$3
bin=${4:-target/release/raftmq}
# shellcheck source=deploy/dev-up.sh
. "$(dirname "$0")/dev-up.sh"

data=$(mktemp -d /tmp/raftmq-bench.XXXXXX)
dev_up "$bin" "$nodes" "$data"
"$bin" admin updateTopic -n $dev_ns -c DefaultCluster -t BenchTopic -r 8 -w 8 >/dev/null
admins=$(grep -o 'admin http://[0-9.:]*' "$data/dev.log" | head -"$nodes" | cut -c7-)
# Sums over the replicas (only the leader serves sends) of the series read here.
scrape() {
    for a in $admins; do curl -s "$a/metrics"; done |
        grep -E '^(rocketmq_send_latency_seconds|raftmq_fsync_latency_seconds)_(sum|count)|^raftmq_raft_last_log_index' |
        awk '{k = $1; sub(/\{.*/, "", k); v[k] += $2} END {for (k in v) print k, v[k]}' | sort
}
scrape >"$data/before"
produce_measured "nodes=$nodes in_flight=$concurrency" "$bin" "$data" "$duration" "$concurrency"
scrape >"$data/after"
python3 - "$data/before" "$data/after" "$data/bench.json" "$nodes" <<'PY'
import json, sys
before, after = ({k: float(v) for k, v in (l.split() for l in open(p))} for p in sys.argv[1:3])
d = {k: after[k] - before.get(k, 0) for k in after}
bench = json.load(open(sys.argv[3]))
nodes = int(sys.argv[4])
broker_ms = 1000 * d["rocketmq_send_latency_seconds_sum"] / max(d["rocketmq_send_latency_seconds_count"], 1)
client_ms = bench["avg_ms"]
sync_ms = 1000 * d["raftmq_fsync_latency_seconds_sum"] / max(d["raftmq_fsync_latency_seconds_count"], 1)
entries = d["raftmq_raft_last_log_index"] / nodes
print(f"client_mean_ms={client_ms:.3f} broker_send_path_mean_ms={broker_ms:.3f} "
      f"outside_ms={client_ms - broker_ms:.3f} ({100 * (client_ms - broker_ms) / client_ms:.0f} %) "
      f"sync_mean_ms={sync_ms:.3f} syncs_per_replica={d['raftmq_fsync_latency_seconds_count'] / nodes:.0f} "
      f"msgs_per_entry={bench['sent'] / max(entries, 1):.1f}")
PY
dev_down "$data"
