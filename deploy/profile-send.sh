#!/usr/bin/env bash
# Where a send's CPU goes, replica by replica (issue 37): one `raftmq namesrv` and three
# `raftmq broker -c FILE` processes (one group, loopback, free ports, a cluster secret, real
# fdatasync, every other setting at its default) loaded by `raftmq bench produce` (1 KiB, 256 sync
# senders) for DURATION_S seconds. Prints the rate, messages per Raft entry, fsyncs, and for each
# replica its CPU and context switches per message (/proc ticks over the whole run). With
# PERF=1, `perf record -g` samples the three brokers during the middle third of the run into
# OUT/perf.data; `deploy/perf_threads.py OUT/perf.data` then gives each thread's share and top
# symbols. PERF_CALL_GRAPH=dwarf unwinds user-space stacks too (the binary has no frame pointers;
# the default, fp, stops at the first Rust frame). Separate processes cost a few µs/msg more than `raftmq dev` (one process) but tell
# the leader from the followers.
#
#   deploy/profile-send.sh BIN DURATION_S OUT [PERF]     # e.g. target/release/raftmq 21 /tmp/prof 1
set -euo pipefail

bin=$(realpath "$1")
dur=$2
out=$3
doperf=${4:-0}
mkdir -p "$out"
dir=$(mktemp -d /tmp/raftmq-prof.XXXXXX)
declare -A pid
cleanup() {
    local p
    for p in "${pid[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pid[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT

# Free loopback ports, chosen now (bound to port 0 and released).
read -r -a ports < <(python3 -c '
import socket
s = [socket.socket() for _ in range(10)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))')
ns=127.0.0.1:${ports[0]}
# shellcheck source=deploy/replicas.sh
. "$(dirname "$0")/replicas.sh"

"$bin" cluster-secret "$dir/cluster.secret" >/dev/null
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
"$bin" namesrv --listenPort "${ports[0]}" -D "clusterSecretFile=$dir/cluster.secret" >>"$dir/namesrv.log" 2>&1 &
pid[ns]=$!
for id in 1 2 3; do
    "$bin" broker -c "$dir/broker-$id.toml" >>"$dir/broker-$id.log" 2>&1 &
    pid[$id]=$!
done
wait_whole
lead=$(leader)
"$bin" admin updateTopic -n "$ns" -c DefaultCluster -t BenchTopic -r 8 -w 8 >/dev/null
for _ in $(seq 1 100); do
    "$bin" admin topicRoute -n "$ns" -t BenchTopic >/dev/null 2>&1 && break
    sleep 0.2
done

ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/{s+=$2} END{print s}'; }
metric() { curl -sf "http://$(admin "$1")/metrics" | awk -v k="$2" 'index($1, k"{")==1{print $2}'; }
follower=$((lead % 3 + 1))
declare -A t0 t1 c0 c1
for id in 1 2 3; do t0[$id]=$(ticks "${pid[$id]}"); c0[$id]=$(switches "${pid[$id]}"); done
i0=$(metric "$lead" raftmq_raft_last_log_index)
fl0=$(metric "$lead" raftmq_fsync_total)
ff0=$(metric "$follower" raftmq_fsync_total)
"$bin" bench produce -n "$ns" -t BenchTopic --duration "${dur}s" --size 1024 --concurrency 256 --mode sync --json \
    2>/dev/null >"$out/bench.json" &
bench=$!
if [[ $doperf == 1 ]]; then
    sleep $((dur / 3))
    perf record -F 999 --call-graph "${PERF_CALL_GRAPH:-fp}" -o "$out/perf.data" -p "${pid[1]},${pid[2]},${pid[3]}" -- sleep $((dur / 3)) \
        >/dev/null 2>"$out/perf.log" || true
fi
wait $bench
for id in 1 2 3; do t1[$id]=$(ticks "${pid[$id]}"); c1[$id]=$(switches "${pid[$id]}"); done
i1=$(metric "$lead" raftmq_raft_last_log_index)
fl1=$(metric "$lead" raftmq_fsync_total)
ff1=$(metric "$follower" raftmq_fsync_total)
python3 - "$out/bench.json" "$i0" "$i1" "$fl0" "$fl1" "$ff0" "$ff1" <<'PY' | tee "$out/summary.txt"
import json, sys
d = json.load(open(sys.argv[1]))
i0, i1, fl0, fl1, ff0, ff1 = (int(float(x)) for x in sys.argv[2:])
print(f"msg/s={d['tps']:.0f} p50_ms={d['p50_ms']:.2f} p99_ms={d['p99_ms']:.2f} failed={d['failed']} "
      f"msgs_per_entry={d['sent'] / max(i1 - i0, 1):.1f} leader_fsyncs={fl1 - fl0} follower_fsyncs={ff1 - ff0}")
PY
sent=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['sent'])" "$out/bench.json")
for id in 1 2 3; do
    role=follower
    [[ $id == "$lead" ]] && role=leader
    python3 -c "
import sys
t, c, sent = (int(x) for x in sys.argv[1:4])
print(f'node {sys.argv[4]} {sys.argv[5]} pid {sys.argv[6]}: us_per_msg={t * 1e4 / sent:.2f} switches_per_msg={c / sent:.2f}')" \
        $((t1[$id] - t0[$id])) $((c1[$id] - c0[$id])) "$sent" "$id" "$role" "${pid[$id]}" | tee -a "$out/summary.txt"
done
