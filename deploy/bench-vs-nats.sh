#!/usr/bin/env bash
# raftmq against NATS JetStream in one run, with one load shape: ROUNDS rounds; in each, a fresh
# raftmq group of NODES replicas (`raftmq dev`, deploy/dev-up.sh) takes `raftmq bench produce`, then
# a fresh NATS cluster of NODES servers (Debian's nats-server, JetStream, file store, a stream of
# NODES replicas) takes deploy/nats-bench: 1 KiB bodies, CONCURRENCY senders each with one send in
# flight, for DURATION seconds. One line per system and round, in produce_report's fields; the
# server CPU is the raftmq dev process (every replica and the NameServer) or the NATS servers.
#
#   deploy/bench-vs-nats.sh NODES DURATION_S ROUNDS CONCURRENCY [BIN]   # e.g. 3 15 3 256
#
# raftmq acknowledges a send after a quorum fsynced it; NATS 2.9 acknowledges after a quorum stored
# it in its page cache (it syncs its files every 2 minutes). The script builds deploy/nats-bench
# (release) on first use.
set -euo pipefail

nodes=$1
duration=$2
rounds=$3
concurrency=$4
bin=${5:-target/release/raftmq}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=deploy/dev-up.sh
. "$here/dev-up.sh"
command -v nats-server >/dev/null || { echo "nats-server is not installed (apt-get install nats-server)" >&2; exit 1; }
nats_bench="$here/nats-bench/target/release/nats-bench"
[ -x "$nats_bench" ] || cargo build --release --quiet --manifest-path "$here/nats-bench/Cargo.toml"

# Starts NODES nats-servers with JetStream under DATA (client ports 14222.., routes 16222..) and
# waits until each is ready; sets $nats_pids.
nats_up() {
    local data=$1 i routes=""
    nats_pids=()
    for i in $(seq 0 $((nodes - 1))); do routes+="nats-route://127.0.0.1:$((16222 + i)),"; done
    for i in $(seq 0 $((nodes - 1))); do
        mkdir -p "$data/n$i"
        {
            echo "listen: 127.0.0.1:$((14222 + i))"
            echo "server_name: n$i"
            echo "jetstream { store_dir: \"$data/n$i\", max_memory_store: 1G, max_file_store: 20G }"
            [ "$nodes" -gt 1 ] && echo "cluster { name: bench, listen: 127.0.0.1:$((16222 + i)), routes: [${routes%,}] }"
        } >"$data/n$i.conf"
        nats-server -c "$data/n$i.conf" >"$data/n$i.log" 2>&1 &
        nats_pids+=($!)
    done
    for i in $(seq 0 $((nodes - 1))); do
        for _ in $(seq 1 300); do
            grep -q "Server is ready" "$data/n$i.log" && break
            kill -0 "${nats_pids[$i]}" 2>/dev/null || { cat "$data/n$i.log"; exit 1; }
            sleep 0.1
        done
    done
}

for _ in $(seq 1 "$rounds"); do
    produce_round "raftmq-${nodes}n" "$bin" "$nodes" "${duration}s" "$concurrency"

    data=$(mktemp -d /tmp/nats-bench.XXXXXX)
    nats_up "$data"
    trap 'kill -TERM ${nats_pids[*]} 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "'"$data"'"' EXIT
    # The stream is created (and its leader elected) before the clock starts, as the raftmq topic is.
    "$nats_bench" --url nats://127.0.0.1:14222 --replicas "$nodes" --create-only 2>"$data/create.err" \
        || { cat "$data/create.err"; exit 1; }
    s0=$(ticks "${nats_pids[@]}"); m0=$(busy); t0=$(date +%s.%N)
    "$nats_bench" --url nats://127.0.0.1:14222 --existing-stream --size 1024 --concurrency "$concurrency" \
        --duration "$duration" --json 2>"$data/nats-bench.err" >"$data/bench.json" \
        || { cat "$data/nats-bench.err"; exit 1; }
    t1=$(date +%s.%N); s1=$(ticks "${nats_pids[@]}"); m1=$(busy)
    produce_report "nats-js-${nodes}n" "$data/bench.json" "$t0" "$t1" "$s0" "$s1" "$m0" "$m1"
    kill -TERM "${nats_pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$data"
    trap - EXIT
done
