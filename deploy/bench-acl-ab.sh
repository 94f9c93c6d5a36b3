#!/usr/bin/env bash
# What the plain ACL costs a send: ROUNDS rounds; in each, a fresh `raftmq dev` group of NODES
# replicas (deploy/dev-up.sh) without the ACL, then one with `--acl-file` (an admin account the
# replicas sign with, and a producer account with PUB on the topic), each loaded by
# `raftmq bench produce` (1 KiB, 256 sync senders) for DURATION, signing when the ACL is on.
# Prints msg/s, p50/p99, the broker's cores and CPU per message, and how busy the machine was.
#
#   deploy/bench-acl-ab.sh NODES DURATION ROUNDS [BIN]     # e.g. 1 12s 4 target/release/raftmq
set -euo pipefail

nodes=$1
duration=$2
rounds=$3
bin=${4:-target/release/raftmq}
ns=127.0.0.1:19876
# shellcheck source=deploy/dev-up.sh
. "$(dirname "$0")/dev-up.sh"

acl=$(mktemp /tmp/raftmq-bench.acl.XXXXXX)
trap 'rm -f "$acl"' EXIT
cat >"$acl" <<'YML'
accounts:
  - accessKey: benchAdmin
    secretKey: bench-admin-secret
    admin: true
  - accessKey: benchProducer
    secretKey: bench-producer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - BenchTopic=PUB
YML
admin=(--accessKey benchAdmin --secretKey bench-admin-secret)
producer=(--accessKey benchProducer --secretKey bench-producer-secret)
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
run() { # MODE: off | on
    local mode=$1 data
    data=$(mktemp -d /tmp/raftmq-bench.XXXXXX)
    if [ "$mode" = on ]; then
        ( dev_up "$bin" "$nodes" "$data" --acl-file "$acl" --inner-access-key benchAdmin --inner-secret-key bench-admin-secret
          measure "$mode" "$data" "${admin[@]}" -- "${producer[@]}" )
    else
        ( dev_up "$bin" "$nodes" "$data"; measure "$mode" "$data" -- )
    fi
}
measure() { # MODE DATA [ADMIN_FLAGS...] -- [PRODUCER_FLAGS...]
    local mode=$1 data=$2 a=() p=()
    shift 2
    while [ "$1" != -- ]; do a+=("$1"); shift; done
    shift
    p=("$@")
    # `${x[@]+"${x[@]}"}`: an empty array under `set -u` on bash before 4.4.
    "$bin" admin updateTopic -n $ns -c DefaultCluster -t BenchTopic -r 8 -w 8 ${a[@]+"${a[@]}"} >/dev/null
    local b0 b1 m0 m1 t0 t1
    b0=$(awk '{print $14+$15}' "/proc/$dev/stat"); m0=$(busy); t0=$(date +%s.%N)
    "$bin" bench produce -n $ns -t BenchTopic --duration "$duration" --size 1024 --concurrency 256 --mode sync \
        --json ${p[@]+"${p[@]}"} 2>/dev/null >"$data/bench.json"
    b1=$(awk '{print $14+$15}' "/proc/$dev/stat"); m1=$(busy); t1=$(date +%s.%N)
    produce_report "acl=$mode" "$data/bench.json" "$t0" "$t1" "$b0" "$b1" "$m0" "$m1"
}
for _ in $(seq 1 "$rounds"); do
    run off
    run on
done
