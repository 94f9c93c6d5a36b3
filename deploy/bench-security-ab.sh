#!/usr/bin/env bash
# What security costs a send, A/B in one run: ROUNDS rounds; in each, every configuration in
# CONFIGS in turn on a fresh `raftmq dev` group of NODES replicas (deploy/dev-up.sh), each loaded
# by `raftmq bench produce` (1 KiB, 256 sync senders) for DURATION. Prints one line per run:
# msg/s, p50/p99, the broker's cores and CPU per message, and how busy the machine was.
#
# Configurations (CONFIGS, space separated; default "off secret tls"):
#   off     no cluster secret (`--insecure-no-cluster-secret`): Raft RPCs and registrations unsigned
#   secret  the dev cluster's own cluster secret: every Raft RPC signed (keyed BLAKE3) and checked
#   tls     cluster secret + TLS (`raftmq dev --tls`: every remoting port TLS-enforcing, the
#           brokers' own calls over TLS; the bench client and admin with `--tls`)
#   acl     cluster secret + the plain ACL (an admin account the replicas sign with, a producer
#           account with PUB on the topic; the bench signs every send)
#
#   deploy/bench-security-ab.sh NODES DURATION ROUNDS [BIN] [CONFIGS]
#   deploy/bench-security-ab.sh 3 20s 3 target/release/raftmq               # off / secret / tls
#   deploy/bench-security-ab.sh 1 12s 4 target/release/raftmq "secret acl"  # what the ACL costs
set -euo pipefail

nodes=$1
duration=$2
rounds=$3
bin=${4:-target/release/raftmq}
configs=${5:-off secret tls}
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

run() { # CONFIG
    local config=$1 data
    data=$(mktemp -d /tmp/raftmq-bench.XXXXXX)
    case $config in
        off) ( dev_up "$bin" "$nodes" "$data" --insecure-no-cluster-secret; measure "$config" "$data" -- -- ) ;;
        secret) ( dev_up "$bin" "$nodes" "$data"; measure "$config" "$data" -- -- ) ;;
        tls) ( dev_up "$bin" "$nodes" "$data" --tls
               tls=(--tls --tlsTrustCertPath "$data/tls/ca.pem")
               measure "$config" "$data" "${tls[@]}" -- "${tls[@]}" -- ) ;;
        acl) ( dev_up "$bin" "$nodes" "$data" --acl-file "$acl" --inner-access-key benchAdmin \
                   --inner-secret-key bench-admin-secret
               measure "$config" "$data" --accessKey benchAdmin --secretKey bench-admin-secret -- \
                   --accessKey benchProducer --secretKey bench-producer-secret -- ) ;;
        *) echo "unknown configuration $config (off, secret, tls, acl)" >&2; exit 2 ;;
    esac
}
measure() { # CONFIG DATA [ADMIN_FLAGS...] -- [BENCH_FLAGS...] --
    local config=$1 data=$2 a=() p=()
    shift 2
    while [ "$1" != -- ]; do a+=("$1"); shift; done
    shift
    while [ "$1" != -- ]; do p+=("$1"); shift; done
    # `${x[@]+"${x[@]}"}`: an empty array under `set -u` on bash before 4.4.
    "$bin" admin updateTopic -n $ns -c DefaultCluster -t BenchTopic -r 8 -w 8 ${a[@]+"${a[@]}"} >/dev/null
    produce_measured "config=$config" "$bin" "$data" "$duration" 256 ${p[@]+"${p[@]}"}
}
for _ in $(seq 1 "$rounds"); do
    for config in $configs; do
        run "$config"
    done
done
