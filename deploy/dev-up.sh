# Sourced by the benchmark drivers: starts a `raftmq dev` group on the benchmark ports and waits for
# it (`dev_up`), stops it (`dev_down`), runs one measured `bench produce` (`produce_measured`, or a
# whole fresh group around it: `produce_round`) and prints its line (`produce_report`).
#   dev_up BIN NODES DATA_DIR [DEV_FLAGS...]    sets $dev (its pid) and a trap that stops it and
#   removes DATA_DIR; DEV_FLAGS go to `raftmq dev` (e.g. --acl-file).
# Ports are offset from the defaults so a running `raftmq dev` is not disturbed.
dev_ns=127.0.0.1:19876
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

# dev_down DATA_DIR: stops the group dev_up started and removes DATA_DIR.
dev_down() {
    kill -TERM "$dev" 2>/dev/null || true
    wait "$dev" 2>/dev/null || true
    rm -rf "$1"
    trap - EXIT
}

# CPU of the whole machine (busy) and of processes (ticks PID...), in clock ticks from /proc.
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat"))); done; echo $t; }

# produce_measured LABEL BIN DATA_DIR DURATION CONCURRENCY [BENCH_FLAGS...]: `bench produce` of
# 1 KiB sync sends to BenchTopic of the running group ($dev) for DURATION (e.g. 15s), CONCURRENCY
# in flight; prints its produce_report line, the broker CPU being $dev's.
produce_measured() {
    local label=$1 bin=$2 data=$3 duration=$4 concurrency=$5 s0 s1 m0 m1 t0 t1
    shift 5
    s0=$(ticks "$dev"); m0=$(busy); t0=$(date +%s.%N)
    # The client's own CPU (user + system seconds) from its rusage, written to bench.cpu.
    python3 -c '
import resource, subprocess, sys
out, cpu = sys.argv[1], sys.argv[2]
rc = subprocess.run(sys.argv[3:], stdout=open(out, "w"), stderr=subprocess.DEVNULL).returncode
u = resource.getrusage(resource.RUSAGE_CHILDREN)
open(cpu, "w").write(f"{u.ru_utime + u.ru_stime}\n")
sys.exit(rc)' "$data/bench.json" "$data/bench.cpu" \
        "$bin" bench produce -n $dev_ns -t BenchTopic --duration "$duration" --size 1024 --concurrency "$concurrency" \
        --mode sync --json "$@"
    t1=$(date +%s.%N); s1=$(ticks "$dev"); m1=$(busy)
    produce_report "$label" "$data/bench.json" "$t0" "$t1" "$s0" "$s1" "$m0" "$m1" "$(cat "$data/bench.cpu")"
}

# produce_round LABEL BIN NODES DURATION CONCURRENCY: a fresh group of NODES replicas, BenchTopic
# with 8 queues, produce_measured, then the group stopped and its data removed.
produce_round() {
    local label=$1 bin=$2 nodes=$3 duration=$4 concurrency=$5 data
    data=$(mktemp -d /tmp/raftmq-bench.XXXXXX)
    dev_up "$bin" "$nodes" "$data"
    "$bin" admin updateTopic -n $dev_ns -c DefaultCluster -t BenchTopic -r 8 -w 8 >/dev/null
    produce_measured "$label" "$bin" "$data" "$duration" "$concurrency"
    dev_down "$data"
}

# One line for a `bench produce --json` run: LABEL JSON T0 T1 BROKER_TICKS0 BROKER_TICKS1 BUSY0 BUSY1
# [CLIENT_CPU_S] (times from `date +%s.%N`, ticks from /proc): msg/s, p50/p99, failures, the broker's
# cores and CPU per message, how busy the whole machine was, and the client's CPU per message when given.
produce_report() {
    python3 - "$@" <<'PY'
import json, sys
name, path, t0, t1, b0, b1, m0, m1 = sys.argv[1:9]
client = float(sys.argv[9]) if len(sys.argv) > 9 else None
d = json.load(open(path))
wall = float(t1) - float(t0)
broker = (int(b1) - int(b0)) / 100
sent = max(d['sent'], 1)
line = (f"{name} msg/s={d['tps']:.0f} p50_ms={d['p50_ms']:.2f} p99_ms={d['p99_ms']:.2f} failed={d['failed']} "
        f"broker_cores={broker / wall:.2f} busy_cores={(int(m1) - int(m0)) / 100 / wall:.2f} "
        f"broker_us_per_msg={broker * 1e6 / sent:.1f}")
if client is not None:
    line += f" client_us_per_msg={client * 1e6 / sent:.1f}"
print(line)
PY
}
