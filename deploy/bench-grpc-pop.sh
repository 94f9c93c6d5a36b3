#!/usr/bin/env bash
# gRPC sends and POP consumption beside their remoting counterparts (issue 33), on a fresh
# `raftmq dev` group of NODES replicas serving gRPC on every replica (deploy/dev-up.sh). Each round:
#   remoting   `bench produce` (1 KiB, 256 sync senders) for DURATION to topic Rem
#   grpc       `bench grpc-send` (1 KiB, 256 calls in flight) to the leader's gRPC endpoint, topic Grpc
#   grpc-all   the same through every replica's endpoint in turn (followers relay to the leader)
#   pop-drain  `bench pop --drain` (POPPERS poppers, 8 by default, batch 32, 1 s long polling,
#              one ACK_MESSAGE per message) by a new group: the catch-up of everything Rem holds
#   push-drain `bench consume --from-first` (push consumer, 1 per listener call) by a new group,
#              the same messages: the remoting catch-up to compare with
#   live       `bench pop` beside `bench produce` (128 senders) on a fresh topic for DURATION
# Prints one line per run: msg/s, p50/p99 ms (pops: the pop's RT; push-drain: born-to-consume,
# meaningless for a backlog), failures, the broker's cores and CPU per message (live-pop: the
# producer's share included).
#
#   [POPPERS=N] deploy/bench-grpc-pop.sh NODES DURATION ROUNDS [BIN]
#   flock /work/cargo.lock deploy/bench-grpc-pop.sh 3 10s 3 target/release/raftmq
set -euo pipefail

nodes=$1
duration=$2
rounds=$3
bin=${4:-target/release/raftmq}
ns=127.0.0.1:19876
poppers=${POPPERS:-8}
data=$(mktemp -d /tmp/raftmq-bench.XXXXXX)

# shellcheck source=deploy/dev-up.sh
. "$(dirname "$0")/dev-up.sh"
dev_up "$bin" "$nodes" "$data" --grpc-port 28085
leader=$(grep -o 'leader n[0-9]*' "$data/dev.log" | head -1 | cut -c9-)
grpc_of() { grep " n$1  remoting " "$data/dev.log" | grep -o 'grpc [0-9.:]*' | cut -c6-; }
leader_grpc=$(grpc_of "$leader")
all_grpc=$(for n in $(seq 0 $((nodes - 1))); do grpc_of "$n"; done | paste -sd';')
echo "leader n$leader gRPC $leader_grpc; every replica: $all_grpc"

# run LABEL CMD...: runs a `--json` bench, prints its line with the broker's CPU; its summary stays
# in $data/LABEL.json.
run() {
    local name=$1 out t0 t1 b0 b1 m0 m1
    shift
    out=$(mktemp)
    t0=$(date +%s.%N) b0=$(ticks "$dev") m0=$(busy)
    "$@" --json >"$out" 2>/dev/null || true
    t1=$(date +%s.%N) b1=$(ticks "$dev") m1=$(busy)
    tail -1 "$out" >"$data/$name.json"
    python3 - "$name" "$out" "$t0" "$t1" "$b0" "$b1" "$m0" "$m1" <<'PY'
import json, sys
name, path, t0, t1, b0, b1, m0, m1 = sys.argv[1:]
d = json.loads(open(path).read().strip().splitlines()[-1])
wall = float(t1) - float(t0)
broker = (int(b1) - int(b0)) / 100
n = d.get("sent", d.get("received", 0))
extra = ""
if d["kind"] == "pop":
    extra = f" acked={d['acked']} ack_failed={d['ack_failed']} pop_failed={d['pop_failed']}"
    failed = d["ack_failed"] + d["pop_failed"]
elif d["kind"] == "consume":
    failed = d["failed"]
else:
    failed = d["failed"]
print(f"{name} n={n} msg/s={d['tps']:.0f} p50_ms={d['p50_ms']:.2f} p99_ms={d['p99_ms']:.2f} "
      f"p999_ms={d['p999_ms']:.2f} failed={failed}{extra} broker_cores={broker / wall:.2f} "
      f"busy_cores={(int(m1) - int(m0)) / 100 / wall:.2f} broker_us_per_msg={broker * 1e6 / max(n, 1):.1f}")
PY
    rm -f "$out"
}

for r in $(seq 1 "$rounds"); do
    for t in "Rem$r" "Grpc$r" "Live$r"; do
        "$bin" admin updateTopic -n $ns -c DefaultCluster -t "$t" -r 8 -w 8 >/dev/null
    done
    echo "round $r"
    run remoting "$bin" bench produce -n $ns -t "Rem$r" --duration "$duration" --size 1024 --concurrency 256
    run grpc "$bin" bench grpc-send --endpoints "$leader_grpc" -t "Grpc$r" --duration "$duration" --size 1024 \
        --concurrency 256
    run grpc-all "$bin" bench grpc-send --endpoints "$all_grpc" -t "Grpc$r" --duration "$duration" --size 1024 \
        --concurrency 256
    # Rem$r holds what the remoting run stored: the catch-up's backlog.
    stored=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sent"])' "$data/remoting.json")
    run pop-drain "$bin" bench pop -n $ns -t "Rem$r" -g "pop_$r" --drain --concurrency "$poppers" --batch 32 --poll 1s
    run push-drain "$bin" bench consume -n $ns -t "Rem$r" -g "push_$r" --from-first --count "$stored"
    "$bin" bench produce -n $ns -t "Live$r" --duration "$duration" --size 1024 --concurrency 128 --json \
        >"$data/live-produce.json" 2>/dev/null &
    producer=$!
    run live-pop "$bin" bench pop -n $ns -t "Live$r" -g "live_$r" --duration "$duration" --concurrency "$poppers" --batch 32 \
        --poll 1s
    wait $producer
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("live-produce n=%d msg/s=%.0f p50_ms=%.2f p99_ms=%.2f failed=%d" % (d["sent"], d["tps"], d["p50_ms"], d["p99_ms"], d["failed"]))' \
        "$data/live-produce.json"
done
