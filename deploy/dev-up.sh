# Sourced by the benchmark drivers: starts a `raftmq dev` group on the benchmark ports and waits for it.
#   dev_up BIN NODES DATA_DIR [DEV_FLAGS...]    sets $dev (its pid) and a trap that stops it and
#   removes DATA_DIR; DEV_FLAGS go to `raftmq dev` (e.g. --acl-file).
# Ports are offset from the defaults so a running `raftmq dev` is not disturbed.
dev_up() {
    local bin=$1 nodes=$2 data=$3
    shift 3
    "$bin" dev --data "$data" --nodes "$nodes" --namesrv-port 19876 --broker-port 20911 --raft-port 30911 \
        --admin-port 28080 "$@" >"$data/dev.log" 2>&1 &
    dev=$!
    trap 'kill -TERM $dev 2>/dev/null || true; wait $dev 2>/dev/null || true; rm -rf "'"$data"'"' EXIT
    for _ in $(seq 1 600); do
        grep -q "raftmq dev cluster is up" "$data/dev.log" && return 0
        kill -0 $dev 2>/dev/null || { cat "$data/dev.log"; exit 1; }
        sleep 0.1
    done
    echo "the dev cluster did not come up in 60 s" >&2
    exit 1
}
