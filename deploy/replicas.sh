# Sourced by the drivers that run a 3-replica group as separate `raftmq broker` processes
# (failover-gaps.sh, bench-follower-read.sh). The caller sets `ports` (NameServer, then remoting,
# Raft and admin ports of replicas 1-3) and `dir` (where the logs are).
#   remoting ID / raft ID / admin ID   a replica's addresses
#   role_of ID                         "leader", "follower", ... or "down"
#   leader                             the id of the replica that leads, or "none"
#   wait_whole                         waits (60 s at most) until every replica is ready and a leader is known
remoting() { echo "127.0.0.1:${ports[$1]}"; }
raft() { echo "127.0.0.1:${ports[$(($1 + 3))]}"; }
admin() { echo "127.0.0.1:${ports[$(($1 + 6))]}"; }

role_of() {
    curl -sf --max-time 1 "http://$(admin "$1")/api/v1/status" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["role"])' 2>/dev/null || echo down
}

leader() {
    local id
    for id in 1 2 3; do
        if [[ $(role_of "$id") == leader ]]; then echo "$id"; return; fi
    done
    echo none
}

wait_whole() {
    local deadline=$((SECONDS + 60)) id ok
    while ((SECONDS < deadline)); do
        ok=1
        for id in 1 2 3; do
            curl -sf --max-time 1 -o /dev/null "http://$(admin "$id")/readyz" || ok=0
        done
        ((ok)) && [[ $(leader) != none ]] && return 0
        sleep 0.2
    done
    echo "the group did not become whole within 60 s (logs: $dir)" >&2
    exit 1
}
