#!/usr/bin/env bash
# A/B of sends between raftmq binaries: ROUNDS rounds; in each, every BIN in turn starts a fresh
# `raftmq dev` group of NODES replicas (deploy/dev-up.sh) and runs `raftmq bench produce` against it
# for DURATION (1 KiB messages, 256 sync senders in flight), the broker and the client from the same
# binary. Prints msg/s, p50/p99, the broker's cores and CPU per message, and how busy the whole
# machine was. Alternating within one run is what makes the ratio meaningful on a noisy machine.
#
#   deploy/bench-produce-ab.sh NODES DURATION ROUNDS BIN...     # e.g. 1 12s 4 old/raftmq new/raftmq
set -euo pipefail

nodes=$1
duration=$2
rounds=$3
shift 3
# shellcheck source=deploy/dev-up.sh
. "$(dirname "$0")/dev-up.sh"

for _ in $(seq 1 "$rounds"); do
    for bin in "$@"; do
        produce_round "$(basename "$bin")" "$bin" "$nodes" "$duration" 256
    done
done
