#!/usr/bin/env bash
# Follower reads under load (issue 35): while a consumer group catches up a large backlog, what
# is left of the leader's send throughput when a follower serves the catch-up (`slaveReadEnable`)
# and when the leader does, against sends alone; and how fast is the catch-up?
#
#   deploy/bench-follower-read.sh [ROUNDS] [DURATION] [STORED]    # defaults: 3 10s 1000000
#   RAFTMQ_BIN=target/release/raftmq   the binary (default); LEADER_CPU=0 OTHERS_CPU=1 the cores;
#   MODES="alone on off"               the runs of a round (default; `lag` and `hog` below);
#   CONSUMER_NICE=0                    the consumer's nice value (19: it takes only CPU the rest leave)
#   LAYOUT=leader-alone                or `split` (which process runs on which core, below)
#
# What it runs: one `raftmq namesrv` and three `raftmq broker -c FILE` processes (one group,
# `raftPeers` inline, loopback, free ports chosen at start, a cluster secret made with
# `raftmq cluster-secret`, real fdatasync, every other setting at its default). STORED 1 KiB
# messages are stored in topic CatchUp (`bench produce --count`, 256 senders). Then ROUNDS rounds of
# one run per mode, `alone` first, the others in MODES order in odd rounds and reversed in even
# ones (so neither catch-up always comes second):
#   alone  `bench produce --duration DURATION` (1 KiB, 256 sync senders) to topic Sends;
#   on     the same sends, and 1 s after they start a new consumer group reads CatchUp from its
#          first offset to the end (`bench consume --from-first --count STORED`), with
#          `slaveReadEnable=true` on every replica (`admin updateBrokerConfig -c`, a runtime key)
#          and the group's `brokerId` 1 (`admin updateSubGroup -i 1`): the leader's pull answers
#          suggest a follower and the SDK pulls there (the first pull of each queue is the
#          leader's); the sends stop when the catch-up has ended (SIGINT: `bench produce` ends
#          with its summary);
#   off    the same with `slaveReadEnable=false` (same group settings): the leader serves it all;
#   lag    (not by default) `slaveReadEnable=true` and the group's default settings (`brokerId` 0,
#          `whichBrokerWhenConsumeSlowly` 1): RocketMQ's rule, a follower only for a consumer
#          further behind the CommitLog's end than the tail assumed cached
#          (`accessMessageInMemoryMaxRatio` of RAM); 1 M x 1 KiB is far less, so the leader serves it;
#   hog    (not by default) sends alone while two busy loops run on OTHERS_CPU: no reads at all,
#          only the CPU of the processes there taken (is a starved follower alone what slows sends?).
# The send rate compared is the rate inside a window, from the producer's 100 ms reports
# (`--interval 100ms`): for a catch-up run, from the consumer's first report with messages to its
# last message (`elapsed_s` after its start); for `alone`, after the same first second of
# warm-up. Per run: that rate (and the whole run's, p50/p99 ms and failures from `--json`), the
# catch-up's msg/s (`bench consume`'s figure: STORED over its time from start, rebalance
# included) and window, the messages each replica served (`msgGetTotalTodayNow`), and in the
# window each process's cores (/proc/PID/stat ticks sampled every 100 ms: brokers, NameServer,
# producer, consumer), the bytes each made the kernel read from the disk (read_bytes) and how
# busy each of the two cores was (/proc/stat: every process on the machine). Then the ratio of each mode's send rate to the same round's sends alone, per round and
# over the means.
#
# Emulating three machines on two cores: with every replica in one process (`raftmq dev`), or
# with the processes free to run anywhere, the replicas share every core, and a read served by a
# follower costs the leader's sends exactly as much CPU as one served by the leader: follower
# reads cannot show their point. So the leader (`/api/v1/status`) is pinned alone to LEADER_CPU
# (`taskset -a -p`, every thread) and everything else to OTHERS_CPU: both followers, the NameServer
# and both clients. The clients go with the followers, not with the leader: on real machines they
# run elsewhere, and the question is what the leader's machine has left for sends.
# Limits: OTHERS_CPU stands for four machines (two followers, producer, consumer) on one core, so
# a follower serving reads also slows the replication acks the sends wait for (one follower's ack
# makes the quorum, and both followers share that core), and the producer competes with the
# consumer and the follower serving it; when OTHERS_CPU is saturated and LEADER_CPU is not, the
# send rate measures that core, not the leader (the busy columns tell which). Loopback TCP costs
# far less than a network; the disk and the page cache are one, shared by the three replicas (a
# follower keeps only the last `raftPageCacheFollowerWindowBytes`, 64 MiB, of its log cached: its
# first catch-up reads come from the disk, later rounds find them cached again). Other processes
# on the machine are not kept off either core: run it on an otherwise idle machine (a libFuzzer run
# at nice 10 filling idle time cut the sends by half in every mode, BENCHMARKS.md). If leadership moves during a run the line says so
# and the pinning no longer matches the roles; every run pins the roles it finds again.
# LAYOUT=split moves the write path to LEADER_CPU and the read path to OTHERS_CPU: the leader,
# the follower the SDK does not read from (it picks the follower of the lowest node id) and the
# producer on one core; the follower that serves the catch-up, the consumer and the NameServer on
# the other. It asks whether the catch-up leaves the write path alone when it has machines of its
# own; the leader's core then also carries one follower's replication and the producer, so sends
# alone are bounded by that core.
set -euo pipefail

rounds=${1:-3}
duration=${2:-10s}
stored=${3:-1000000}
bin=${RAFTMQ_BIN:-target/release/raftmq}
leader_cpu=${LEADER_CPU:-0}
others_cpu=${OTHERS_CPU:-1}
layout=${LAYOUT:-leader-alone}
case $layout in leader-alone | split) ;; *) echo "LAYOUT is leader-alone or split, not $layout" >&2; exit 2 ;; esac
consumer_nice=${CONSUMER_NICE:-0}
read -r -a modes <<<"${MODES:-alone on off}"
for mode in "${modes[@]}"; do
    case $mode in alone | on | off | lag | hog) ;; *) echo "unknown mode $mode (alone, on, off, lag, hog)" >&2; exit 2 ;; esac
done
[[ ${modes[0]} == alone ]] || { echo "MODES must start with alone (the ratios' base)" >&2; exit 2; }
[[ -x $bin ]] || { echo "no raftmq binary at $bin (cargo build --release -p raftmq)" >&2; exit 1; }
bin=$(realpath "$bin")
command -v taskset >/dev/null || { echo "needs taskset (util-linux)" >&2; exit 1; }
here=$(dirname "$(realpath "$0")")
dir=$(mktemp -d /tmp/raftmq-fread.XXXXXX)
# A catch-up run's sends and consumer stop at this at the latest (a stalled catch-up fails the run).
cap=600s
declare -A pid

cleanup() {
    local p
    for p in "${pid[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pid[@]}"; do wait "$p" 2>/dev/null || true; done
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

"$bin" cluster-secret "$dir/cluster.secret" >/dev/null
# Admin commands that write to a NameServer need it too.
export RAFTMQ_CLUSTER_SECRET_FILE=$dir/cluster.secret

for id in 1 2 3; do
    {
        echo "brokerClusterName = \"DefaultCluster\""
        echo "brokerName = \"broker-a\""
        echo "brokerIP1 = \"127.0.0.1\""
        echo "listenPort = ${ports[$id]}"
        echo "namesrvAddr = \"$ns\""
        echo "storePathRootDir = \"$dir/node-$id\""
        echo "adminPort = ${ports[$((id + 6))]}"
        echo "clusterSecretFile = \"$dir/cluster.secret\""
        echo "raftSelfId = $id"
        for peer in 1 2 3; do
            echo
            echo "[[raftPeers]]"
            echo "id = $peer"
            echo "remotingAddr = \"$(remoting $peer)\""
            echo "raftAddr = \"$(raft $peer)\""
        done
    } >"$dir/broker-$id.toml"
done

# Waits until the NameServer routes topic $1 (it learns a new topic with the next registration).
wait_route() {
    local deadline=$((SECONDS + 60))
    while ((SECONDS < deadline)); do
        "$bin" admin topicRoute -n "$ns" -t "$1" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    echo "no route of $1 within 60 s" >&2
    exit 1
}
# Messages replica $1 has handed to consumers since it started.
gets() {
    "$bin" admin brokerStatus -n "$ns" -b "$(remoting "$1")" --json 2>/dev/null | python3 -c '
import json, sys
def find(v):
    if isinstance(v, dict):
        if "msgGetTotalTodayNow" in v:
            return v["msgGetTotalTodayNow"]
        v = list(v.values())
    if isinstance(v, list):
        for x in v:
            r = find(x)
            if r is not None:
                return r
print(int(find(json.load(sys.stdin)) or 0))'
}

# A client on core $client_cpu (default OTHERS_CPU): NAME RAFTMQ_ARGS... (at nice $client_nice); the raftmq process's pid goes
# to $dir/NAME.pid (removed by the caller before), and a SIGINT or SIGTERM to this wrapper is passed
# on to it.
cat >"$dir/client.py" <<'EOF'
import os, signal, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(f"{child.pid}\n")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, lambda s, _: child.send_signal(s))
while True:
    try:
        sys.exit(child.wait())
    except InterruptedError:
        continue
EOF
client() {
    local name=$1
    shift
    exec nice -n "${client_nice:-0}" taskset -c "${client_cpu:-$others_cpu}" python3 "$dir/client.py" "$dir/$name.pid" "$bin" "$@"
}
client_pid() {
    local deadline=$((SECONDS + 10))
    until [[ -s $dir/$1.pid ]]; do
        ((SECONDS < deadline)) || { echo "client $1 did not start" >&2; exit 1; }
        sleep 0.01
    done
    cat "$dir/$1.pid"
}

# Samples every 100 ms, until SIGTERM: OUT NAME=PID...; one JSON line per sample: the time, each
# process's CPU ticks (utime + stime; the last seen once it has exited) and bytes it made the
# kernel read from the disk (`read_bytes` of /proc/PID/io: page-cache misses), each core's busy ticks.
cat >"$dir/sampler.py" <<'EOF'
import json, signal, sys, time
out = open(sys.argv[1], "w")
procs = dict(a.split("=") for a in sys.argv[2:])
last = {}
io = {}
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    t = time.time()
    for name, pid in procs.items():
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            last[name] = int(fields[11]) + int(fields[12])
            for line in open(f"/proc/{pid}/io"):
                if line.startswith("read_bytes:"):
                    io[name] = int(line.split()[1])
        except (OSError, IndexError, ValueError):
            pass
    cores = {}
    for line in open("/proc/stat"):
        f = line.split()
        if f[0].startswith("cpu") and f[0] != "cpu":
            cores[f[0]] = sum(int(x) for x in (f[1], f[2], f[3], f[6], f[7]))
    out.write(json.dumps({"t": t, "ticks": dict(last), "io": dict(io), "cores": cores}) + "\n")
    out.flush()
    time.sleep(0.1)
EOF

taskset -c "$others_cpu" "$bin" namesrv --listenPort "${ports[0]}" -D "clusterSecretFile=$dir/cluster.secret" \
    >>"$dir/namesrv.log" 2>&1 &
pid[ns]=$!
for id in 1 2 3; do
    "$bin" broker -c "$dir/broker-$id.toml" >>"$dir/broker-$id.log" 2>&1 &
    pid[$id]=$!
done

# Pins the leader (kept in $lead) alone to LEADER_CPU and the followers to OTHERS_CPU.
lead=
pin() {
    local now id cpu deadline=$((SECONDS + 60))
    now=$(leader)
    while [[ $now == none ]]; do
        ((SECONDS < deadline)) || { echo "no leader for 60 s (logs: $dir)" >&2; exit 1; }
        sleep 0.2
        now=$(leader)
    done
    [[ $now == "$lead" ]] && return 0
    # The follower the SDK reads from: the lowest node id that does not lead.
    local serving=1
    [[ $now == 1 ]] && serving=2
    for id in 1 2 3; do
        cpu=$others_cpu
        if [[ $id == "$now" ]] || [[ $layout == split && $id != "$serving" ]]; then cpu=$leader_cpu; fi
        taskset -a -p -c "$cpu" "${pid[$id]}" >/dev/null
    done
    lead=$now
    if [[ $layout == split ]]; then
        echo "leader n$lead, the other follower and the producer pinned to cpu $leader_cpu;" \
            "the follower n$serving (read from), the NameServer and the consumer to cpu $others_cpu"
    else
        echo "leader n$lead pinned to cpu $leader_cpu; the followers, the NameServer and the clients to cpu $others_cpu"
    fi
}
wait_whole
echo "binary $bin ($("$bin" --version)); logs in $dir; $(nproc) cores"
pin

for topic in CatchUp Sends; do
    "$bin" admin updateTopic -n "$ns" -c DefaultCluster -t "$topic" -r 8 -w 8 >/dev/null
    wait_route "$topic"
done

pin
t0=$(date +%s.%N)
taskset -c "$([[ $layout == split ]] && echo "$leader_cpu" || echo "$others_cpu")" "$bin" bench produce -n "$ns" -t CatchUp --count "$stored" --size 1024 --concurrency 256 \
    --mode sync --json >"$dir/store.json" 2>/dev/null
t1=$(date +%s.%N)
# The consumers read exactly what was stored: a send that failed would leave them waiting.
stored=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sent"])' "$dir/store.json")
python3 - "$dir/store.json" "$t0" "$t1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"stored {d['sent']} messages of 1 KiB in CatchUp: {d['tps']:.0f} msg/s, p99 {d['p99_ms']:.1f} ms, "
      f"{float(sys.argv[3]) - float(sys.argv[2]):.1f} s")
EOF

set_slave_read() {
    "$bin" admin updateBrokerConfig -n "$ns" -c DefaultCluster -k slaveReadEnable -v "$1" >/dev/null
}

# One run: MODE ROUND. Prints one line and appends one JSON line to $dir/runs.jsonl.
run() {
    local mode=$1 round=$2 group="fread_${1}_$2" id
    case $mode in
        on) set_slave_read true; "$bin" admin updateSubGroup -n "$ns" -b broker-a -g "$group" -i 1 >/dev/null ;;
        off) set_slave_read false; "$bin" admin updateSubGroup -n "$ns" -b broker-a -g "$group" -i 1 >/dev/null ;;
        lag) set_slave_read true ;;
    esac
    pin
    local -A g_before g_after
    for id in 1 2 3; do g_before[$id]=$(gets "$id"); done
    local limit=$duration consume= consume_launch=0 sampler hogs=()
    [[ $mode == alone || $mode == hog ]] || limit=$cap
    rm -f "$dir/produce.pid" "$dir/consume.pid" "$dir/consume.json"
    local producer_cpu=$others_cpu
    if [[ $layout == split ]]; then producer_cpu=$leader_cpu; fi
    client_cpu=$producer_cpu client produce bench produce -n "$ns" -t Sends --duration "$limit" --size 1024 --concurrency 256 --mode sync \
        --interval 100ms --json >"$dir/produce.json" 2>"$dir/produce.err" &
    local produce=$!
    local procs=("n1=${pid[1]}" "n2=${pid[2]}" "n3=${pid[3]}" "namesrv=${pid[ns]}" "producer=$(client_pid produce)")
    # The senders' warm-up (connections, 256 sends in flight) before the catch-up starts.
    sleep 1
    if [[ $mode == hog ]]; then
        for _ in 1 2; do
            taskset -c "$others_cpu" python3 -c 'while True: pass' &
            hogs+=("$!")
        done
    elif [[ $mode != alone ]]; then
        consume_launch=$(date +%s.%N)
        client_nice=$consumer_nice client consume bench consume -n "$ns" -t CatchUp -g "$group" --from-first --count "$stored" \
            --duration "$cap" --interval 100ms --json >"$dir/consume.json" 2>"$dir/consume.err" &
        consume=$!
        procs+=("consumer=$(client_pid consume)")
    fi
    taskset -c "$others_cpu" python3 "$dir/sampler.py" "$dir/samples.jsonl" "${procs[@]}" &
    sampler=$!
    if [[ -n $consume ]]; then
        wait "$consume" || { echo "bench consume failed:" >&2; cat "$dir/consume.err" >&2; exit 1; }
        kill -INT "$produce" 2>/dev/null || true
    fi
    wait "$produce" || { echo "bench produce failed:" >&2; cat "$dir/produce.err" >&2; exit 1; }
    for id in "${hogs[@]}"; do kill -TERM "$id"; wait "$id" 2>/dev/null || true; done
    kill -TERM "$sampler"
    wait "$sampler" || true
    for id in 1 2 3; do g_after[$id]=$(gets "$id"); done
    python3 "$here/bench_follower_read_report.py" run "$mode" "$round" "$lead" "$(leader)" "$stored" \
        "$consume_launch" "$dir" "${g_before[1]}" "${g_after[1]}" "${g_before[2]}" "${g_after[2]}" \
        "${g_before[3]}" "${g_after[3]}" >>"$dir/runs.jsonl"
    python3 "$here/bench_follower_read_report.py" line "$(tail -n 1 "$dir/runs.jsonl")"
}

for round in $(seq 1 "$rounds"); do
    run alone "$round"
    order=("${modes[@]:1}")
    if ((round % 2 == 0)); then
        for ((i = ${#order[@]} - 1; i >= 0; i--)); do run "${order[$i]}" "$round"; done
    else
        for mode in "${order[@]}"; do run "$mode" "$round"; done
    fi
done
python3 "$here/bench_follower_read_report.py" summary "$dir/runs.jsonl"
