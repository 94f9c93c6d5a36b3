#!/usr/bin/env bash
# Issue 37's single-message latency: one synchronous sender (1 KiB, one in flight) against a fresh
# `raftmq dev` group of NODES replicas (fsync on a quorum before each SEND_OK), ROUNDS runs of
# DURATION after a 3 s warm-up, each printing msg/s and the client's p50 / p99. First it prints
# the floor this machine sets at that moment: `fdatasync` of one message's bytes into written
# blocks (deploy/fsync-probe.py, as the CommitLog's zero-ahead leaves them), NODES probes at once
# as the group's replicas sync at once on this one disk, and a loopback TCP round trip of 1 KiB
# between two Python processes (an upper bound of one client-to-broker round trip).
# A send with one in flight is at least one round trip and one sync on 1 node, and on 3 nodes one
# more loopback round trip and a follower's sync (the leader's own sync runs beside it).
#
#   deploy/bench-latency.sh [NODES] [DURATION] [ROUNDS] [BIN]    # defaults: 3 10s 3 target/release/raftmq
set -euo pipefail
nodes=${1:-3}
duration=${2:-10s}
rounds=${3:-3}
bin=${4:-target/release/raftmq}
ns=127.0.0.1:19876
here=$(dirname "$0")

echo "== floor (load before: $(cut -d' ' -f1-3 /proc/loadavg))"
# One probe per replica at once: the replicas of a `raftmq dev` group share this disk, and their
# syncs of one message run at the same time.
for _ in $(seq 1 "$nodes"); do
    FSYNC_PROBE_ROUNDS=3000 python3 "$here/fsync-probe.py" "${TMPDIR:-/tmp}" 1100 written &
done | sort
wait
python3 - <<'PY'
import socket, time
from multiprocessing import Process

def echo(listener):
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        data = b""
        while len(data) < 1100:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        conn.sendall(b"y" * 100)

listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
server = Process(target=echo, args=(listener,), daemon=True)
server.start()
client = socket.create_connection(listener.getsockname())
client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
lat = []
for i in range(3000):
    t = time.perf_counter()
    client.sendall(b"x" * 1100)
    got = 0
    while got < 100:
        got += len(client.recv(65536))
    if i >= 300:
        lat.append(time.perf_counter() - t)
client.close()
lat.sort()
print("loopback round trip of 1100 B / 100 B: p50 %.3f ms, p99 %.3f" % (lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99)] * 1e3))
PY

data=$(mktemp -d /tmp/raftmq-bench.XXXXXX)
# shellcheck source=deploy/dev-up.sh
. "$here/dev-up.sh"
dev_up "$bin" "$nodes" "$data"
"$bin" admin updateTopic -n $ns -c DefaultCluster -t Latency -r 8 -w 8 >/dev/null
"$bin" bench produce -n $ns -t Latency --duration 3s --size 1024 --concurrency 1 --mode sync --json >/dev/null 2>&1
echo "== $nodes node(s), 1 KiB, one in flight, $rounds x $duration"
for _ in $(seq 1 "$rounds"); do
    "$bin" bench produce -n $ns -t Latency --duration "$duration" --size 1024 --concurrency 1 --mode sync --json \
        2>/dev/null | python3 -c 'import json, sys; d = json.load(sys.stdin); print("msg/s=%.0f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f failed=%d" % (d["tps"], d["p50_ms"], d["p99_ms"], d["p999_ms"], d["failed"]))'
done
