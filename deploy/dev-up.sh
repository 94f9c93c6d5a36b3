# Sourced by the benchmark drivers: starts a `raftmq dev` group on the benchmark ports and waits for
# it (`dev_up`), and prints one line per `bench produce` run (`produce_report`).
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

# One line for a `bench produce --json` run: LABEL JSON T0 T1 BROKER_TICKS0 BROKER_TICKS1 BUSY0 BUSY1
# (times from `date +%s.%N`, ticks from /proc): msg/s, p50/p99, failures, the broker's cores and
# CPU per message, and how busy the whole machine was.
produce_report() {
    python3 - "$@" <<'PY'
import json, sys
name, path, t0, t1, b0, b1, m0, m1 = sys.argv[1:]
d = json.load(open(path))
wall = float(t1) - float(t0)
broker = (int(b1) - int(b0)) / 100
print(f"{name} msg/s={d['tps']:.0f} p50_ms={d['p50_ms']:.2f} p99_ms={d['p99_ms']:.2f} failed={d['failed']} "
      f"broker_cores={broker / wall:.2f} busy_cores={(int(m1) - int(m0)) / 100 / wall:.2f} "
      f"broker_us_per_msg={broker * 1e6 / max(d['sent'], 1):.1f}")
PY
}
