#!/usr/bin/env bash
# Send-to-delivery latency at half of peak load (issue 37), on a fresh `raftmq dev` group of NODES
# replicas (deploy/dev-up.sh): first the peak, `raftmq bench produce` (1 KiB, 256 sync senders) for
# DURATION; then ROUNDS runs of `raftmq bench e2e` at 50 % of that rate for DURATION each (a paced
# producer and a push consumer of one topic in one process; latency from the stamped send time to
# the listener). Prints the peak line and one line per e2e run.
#
#   deploy/bench-e2e.sh NODES DURATION ROUNDS [BIN]
#   deploy/bench-e2e.sh 3 20s 3 target/release/raftmq
set -euo pipefail

nodes=$1
duration=$2
rounds=$3
bin=${4:-target/release/raftmq}
ns=127.0.0.1:19876
data=$(mktemp -d /tmp/raftmq-bench.XXXXXX)

# shellcheck source=deploy/dev-up.sh
. "$(dirname "$0")/dev-up.sh"
dev_up "$bin" "$nodes" "$data"
"$bin" admin updateTopic -n $ns -c DefaultCluster -t Peak -r 8 -w 8 >/dev/null
"$bin" admin updateTopic -n $ns -c DefaultCluster -t E2e -r 8 -w 8 >/dev/null
peak=$("$bin" bench produce -n $ns -t Peak --duration "$duration" --size 1024 --concurrency 256 --mode sync \
    --json 2>/dev/null)
rate=$(python3 -c 'import json,sys; print(max(1, int(json.loads(sys.argv[1])["tps"] / 2)))' "$peak")
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("peak msg/s=%.0f p50_ms=%.2f p99_ms=%.2f" % (d["tps"], d["p50_ms"], d["p99_ms"]))' "$peak"
for r in $(seq 1 "$rounds"); do
    "$bin" bench e2e -n $ns -t E2e -g "e2e_$r" --rate "$rate" --duration "$duration" --size 1024 --json 2>/dev/null \
        | python3 -c 'import json,sys; d=json.load(sys.stdin); print("e2e rate=%d msg/s=%.0f send_p50_ms=%.2f send_p99_ms=%.2f e2e_p50_ms=%.2f e2e_p99_ms=%.2f e2e_p999_ms=%.2f e2e_max_ms=%.2f undelivered=%d" % (d["rate"], d["tps"], d["send_p50_ms"], d["send_p99_ms"], d["e2e_p50_ms"], d["e2e_p99_ms"], d["e2e_p999_ms"], d["e2e_max_ms"], d["undelivered"]))'
done
