#!/usr/bin/env bash
# A/B of catch-up consumption between consumer binaries, against one stored backlog:
#   1. a `raftmq dev` group of NODES replicas from BROKER_BIN (release build, data in a fresh temp dir);
#   2. STORED 1 KiB messages stored with `raftmq bench produce`;
#   3. ROUNDS rounds; in each, every CLIENT_BIN in turn runs `raftmq bench consume --from-first` of
#      all of them as a new consumer group, once with one message per listener call and once with 32.
# Prints msg/s and the broker's CPU ticks (1/100 s) for each consume. Alternating the binaries within
# one run, against the same data, is what makes their ratio meaningful on a noisy machine.
#
#   deploy/bench-catchup-ab.sh BROKER_BIN STORED ROUNDS CLIENT_BIN...    # NODES=1 by default
set -euo pipefail

broker=$1
stored=$2
rounds=$3
shift 3
nodes=${NODES:-1}
ns=127.0.0.1:19876
data=$(mktemp -d /tmp/raftmq-bench.XXXXXX)

# shellcheck source=deploy/dev-up.sh
. "$(dirname "$0")/dev-up.sh"
dev_up "$broker" "$nodes" "$data"
"$broker" admin updateTopic -n $ns -c DefaultCluster -t CatchUp -r 8 -w 8 >/dev/null
# The consumers read exactly what was stored: a send that failed would leave them waiting forever.
stored=$("$broker" bench produce -n $ns -t CatchUp --count "$stored" --size 1024 --concurrency 256 --mode sync \
    --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["sent"])')
echo "stored $stored messages"
group=0
for _ in $(seq 1 "$rounds"); do
    for client in "$@"; do
        for batch in 1 32; do
            group=$((group + 1))
            before=$(awk '{print $14+$15}' /proc/$dev/stat)
            tps=$("$client" bench consume -n $ns -t CatchUp -g "catchup$group" --from-first --count "$stored" \
                --consume-batch $batch --json 2>"$data/consume.err" \
                | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["tps"]))') \
                || { cat "$data/consume.err" >&2; exit 1; }
            after=$(awk '{print $14+$15}' /proc/$dev/stat)
            echo "$(basename "$client") per-call=$batch msg/s=$tps broker_ticks=$((after - before))"
        done
    done
done
