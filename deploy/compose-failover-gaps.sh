#!/usr/bin/env bash
# The failover gap on the docker-compose cluster (issue 34), as recorded in BENCHMARKS.md: KILLS
# rounds (default 10) of `docker-compose kill` of broker-a's leader while `raftmq bench produce`
# (the SDK at default settings, from the host, both NameServers) sends to a topic that lives on
# broker-a only. The figure is the produce run's `max_send_gap_ms`: the longest time without a
# SEND_OK. The killed container is started again and the round ends when all eight are healthy.
#
#   deploy/image-from-host.sh && docker-compose up -d     # the cluster, as the README says
#   deploy/compose-failover-gaps.sh [KILLS]               # RAFTMQ_BIN=target/release/raftmq
set -euo pipefail
cd "$(dirname "$0")/.."

kills=${1:-10}
bin=${RAFTMQ_BIN:-target/release/raftmq}
compose=${COMPOSE:-docker-compose}
ns="172.28.0.2:9876;172.28.0.3:9876"
topic=ComposeFailoverGaps

# broker-a's leader (1, 2 or 3) as the NameServers list it; the admin HTTP API stays in the containers.
leader() {
    "$bin" admin clusterList -n "$ns" 2>/dev/null |
        awk '$2 == "broker-a" && $5 == "LEADER" { split($4, a, ":"); print substr(a[1], length(a[1])); found = 1 }
             END { if (!found) print "none" }'
}
wait_healthy() {
    local deadline=$((SECONDS + 120))
    while ((SECONDS < deadline)); do
        [[ $($compose ps | grep -c '(healthy)') == 8 ]] && [[ $(leader) != none ]] && return 0
        sleep 0.5
    done
    echo "the cluster did not become healthy within 120 s" >&2
    exit 1
}

wait_healthy
"$bin" admin updateTopic -n "$ns" -b "172.28.0.1$(leader):10911" -t "$topic" -r 8 -w 8 >/dev/null
sleep 2 # the route reaches the NameServers with the next registration

gaps=()
for ((round = 1; round <= kills; round++)); do
    "$bin" bench produce -n "$ns" -t "$topic" --concurrency 2 --duration 8s --json >/tmp/compose-gaps.json &
    produce=$!
    sleep 3
    victim=$(leader)
    $compose kill "broker-a-n$victim" >/dev/null 2>&1
    wait "$produce"
    gap=$(python3 -c "import json; print(json.loads(open('/tmp/compose-gaps.json').read().strip().splitlines()[-1])['max_send_gap_ms'])")
    printf '%-3s kill broker-a-n%s  max_send_gap_ms %9.1f\n' "$round" "$victim" "$gap"
    gaps+=("$gap")
    $compose start "broker-a-n$victim" >/dev/null 2>&1
    wait_healthy
done
python3 - "${gaps[@]}" <<'PY'
import math, sys
xs = sorted(float(x) for x in sys.argv[1:])
rank = lambda q: xs[max(0, math.ceil(q * len(xs)) - 1)]
print(f"compose kill -9 of broker-a's leader, send gap  n={len(xs)}  p50 {rank(0.5):.1f} ms  p99 {rank(0.99):.1f} ms  max {xs[-1]:.1f} ms")
PY
