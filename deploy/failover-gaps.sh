#!/usr/bin/env bash
# Failover as clients see it at default settings (issue 29), as recorded in BENCHMARKS.md: one
# NameServer and three `raftmq broker -c` processes (one group, raftPeers inline, loopback, free
# ports), then KILLS rounds where the leader gets `kill -9` and STOPS rounds where it gets SIGTERM
# (a graceful stop: it hands leadership over first).
#
#   deploy/failover-gaps.sh [KILLS] [STOPS]     # defaults: 20 20; RAFTMQ_BIN=target/release/raftmq
#   CLIENT=cpp deploy/failover-gaps.sh [KILLS] [STOPS]
#
# Each round runs a push consumer and a producer (concurrency 2), both with default client
# settings; about 3 s into the produce run the leader (found through each replica's
# `/api/v1/status`) is stopped. The figures are the producer's `max_send_gap_ms` (the longest
# time without a SEND_OK) and the consumer's `max_delivery_gap_ms` (the longest time between two
# deliveries), and the NameServer's `route_delay_ms` (deploy/route_watch.py: from the first status
# that shows the new leader to the first GET_ROUTEINFO_BY_TOPIC answer that routes to it). The
# stopped broker is then restarted and the round ends when every replica's `/readyz` answers 200
# again. Per-round figures, then p50/p99/max (nearest rank) of each series.
#
# CLIENT=raftmq (default): `raftmq bench consume|produce --json` (the raftmq SDK), 8 s of sends.
# CLIENT=cpp: the unchanged Apache C++ client 1.2.x (PyPI `rocketmq` 0.4.4, deploy/cpp_client_gaps.py),
# whose route poll is a fixed 30 s, so each round sends for 45 s.
set -euo pipefail

kills=${1:-20}
stops=${2:-20}
bin=${RAFTMQ_BIN:-target/release/raftmq}
[[ -x $bin ]] || { echo "no raftmq binary at $bin (cargo build --release -p raftmq)" >&2; exit 1; }
bin=$(realpath "$bin")
client=${CLIENT:-raftmq}
here=$(dirname "$(realpath "$0")")
case $client in
    raftmq) produce_s=8 ;;
    cpp)
        python3 -c 'import rocketmq.client' 2>/dev/null ||
            { echo "CLIENT=cpp needs PyPI's rocketmq 0.4.4: pip install rocketmq==0.4.4" >&2; exit 1; }
        produce_s=45 ;;
    *) echo "CLIENT must be raftmq or cpp, not $client" >&2; exit 1 ;;
esac
consume_s=$((produce_s + 4))
dir=$(mktemp -d /tmp/raftmq-failover.XXXXXX)
topic=FailoverGaps
declare -A pid

cleanup() {
    local p
    for p in "${pid[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Free loopback ports, chosen now (bound to port 0 and released).
read -r -a ports < <(python3 - <<'EOF'
import socket
socks = [socket.socket() for _ in range(10)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
EOF
)
ns=127.0.0.1:${ports[0]}
# shellcheck source=deploy/replicas.sh
. "$(dirname "$0")/replicas.sh"

for id in 1 2 3; do
    {
        echo "brokerClusterName = \"DefaultCluster\""
        echo "brokerName = \"broker-a\""
        echo "brokerIP1 = \"127.0.0.1\""
        echo "listenPort = ${ports[$id]}"
        echo "namesrvAddr = \"$ns\""
        echo "storePathRootDir = \"$dir/node-$id\""
        echo "adminPort = ${ports[$((id + 6))]}"
        echo "raftSelfId = $id"
        # Small files: the defaults reserve a 1 GiB CommitLog file and a 420 MB index per replica.
        echo "mappedFileSizeCommitLog = 67108864"
        echo "maxHashSlotNum = 4096"
        echo "maxIndexNum = 16384"
        for peer in 1 2 3; do
            echo
            echo "[[raftPeers]]"
            echo "id = $peer"
            echo "remotingAddr = \"$(remoting $peer)\""
            echo "raftAddr = \"$(raft $peer)\""
        done
    } >"$dir/broker-$id.toml"
done

start_broker() {
    "$bin" broker -c "$dir/broker-$1.toml" >>"$dir/broker-$1.log" 2>&1 &
    pid[$1]=$!
}


"$bin" namesrv --listenPort "${ports[0]}" >>"$dir/namesrv.log" 2>&1 &
pid[ns]=$!
for id in 1 2 3; do start_broker "$id"; done
wait_whole
"$bin" admin updateTopic -n "$ns" -c DefaultCluster -t "$topic" -r 8 -w 8 >/dev/null
# The route reaches the NameServer with the next registration.
sleep 2

field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }

send_kill=() send_stop=() deliver_kill=() deliver_stop=() route_kill=() route_stop=()
round=0
run_round() {
    local how=$1 victim
    round=$((round + 1))
    if [[ $client == cpp ]]; then
        # The C++ client logs every failed send under $HOME/logs/rocketmq-cpp: keep that in the run's dir.
        HOME=$dir python3 "$here/cpp_client_gaps.py" consume "$ns" "$topic" cpp_failover_gaps_consumer "$consume_s" \
            >"$dir/consume.json" 2>"$dir/consume.err" &
    else
        "$bin" bench consume -n "$ns" -t "$topic" -g failover_gaps_consumer --duration "${consume_s}s" --json \
            >"$dir/consume.json" 2>"$dir/consume.err" &
    fi
    local consume=$!
    sleep 1
    if [[ $client == cpp ]]; then
        HOME=$dir python3 "$here/cpp_client_gaps.py" produce "$ns" "$topic" "$produce_s" 2 \
            >"$dir/produce.json" 2>"$dir/produce.err" &
    else
        "$bin" bench produce -n "$ns" -t "$topic" --concurrency 2 --duration "${produce_s}s" --json \
            >"$dir/produce.json" 2>"$dir/produce.err" &
    fi
    local produce=$!
    sleep 3
    victim=$(leader)
    if [[ $victim == none ]]; then
        echo "round $round: no leader found" >&2
        exit 1
    fi
    python3 "$here/route_watch.py" "$ns" "$topic" "$(remoting "$victim")" \
        "$(admin 1)=$(remoting 1)" "$(admin 2)=$(remoting 2)" "$(admin 3)=$(remoting 3)" >"$dir/route.json" &
    local watch=$!
    if [[ $how == kill ]]; then kill -KILL "${pid[$victim]}"; else kill -TERM "${pid[$victim]}"; fi
    wait "${pid[$victim]}" 2>/dev/null || true
    wait "$watch" || { echo "round $round: the route did not follow the new leader within 30 s" >&2; exit 1; }
    wait "$produce" || { echo "round $round: bench produce failed (see $dir/produce.err)" >&2; exit 1; }
    wait "$consume" || { echo "round $round: bench consume failed (see $dir/consume.err)" >&2; exit 1; }
    local send deliver failed received route
    route=$(field route_delay_ms <"$dir/route.json")
    send=$(field max_send_gap_ms <"$dir/produce.json")
    failed=$(field failed_sends <"$dir/produce.json")
    deliver=$(field max_delivery_gap_ms <"$dir/consume.json")
    received=$(field received <"$dir/consume.json")
    printf '%-3s %-5s leader n%s  max_send_gap_ms %9.1f  failed_sends %6s  max_delivery_gap_ms %9.1f  received %-6s  route_delay_ms %6.1f\n' \
        "$round" "$how" "$victim" "$send" "$failed" "$deliver" "$received" "$route"
    if [[ $how == kill ]]; then send_kill+=("$send"); deliver_kill+=("$deliver"); route_kill+=("$route")
    else send_stop+=("$send"); deliver_stop+=("$deliver"); route_stop+=("$route"); fi
    start_broker "$victim"
    wait_whole
}

echo "client $client; binary $bin ($("$bin" --version 2>/dev/null || echo unknown)), logs in $dir"
for ((i = 0; i < kills; i++)); do run_round kill; done
for ((i = 0; i < stops; i++)); do run_round stop; done

summary() {
    local name=$1
    shift
    python3 - "$name" "$@" <<'EOF'
import math, sys
name, xs = sys.argv[1], sorted(float(x) for x in sys.argv[2:])
if not xs:
    sys.exit(0)
rank = lambda q: xs[max(0, math.ceil(q * len(xs)) - 1)]
print(f"{name:<28} n={len(xs):<3} p50 {rank(0.50):8.1f} ms  p99 {rank(0.99):8.1f} ms  max {xs[-1]:8.1f} ms")
EOF
}
echo "== summary"
summary "kill -9, send gap" "${send_kill[@]}"
summary "kill -9, delivery gap" "${deliver_kill[@]}"
summary "graceful stop, send gap" "${send_stop[@]}"
summary "graceful stop, delivery gap" "${deliver_stop[@]}"
summary "kill -9, route delay" "${route_kill[@]}"
summary "graceful stop, route delay" "${route_stop[@]}"
