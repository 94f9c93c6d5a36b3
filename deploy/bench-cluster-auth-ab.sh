#!/usr/bin/env bash
# What cluster authentication costs a send (no secret, then the cluster secret): the `off secret`
# configurations of deploy/bench-security-ab.sh, kept under this name for the commands in
# BENCHMARKS.md.
#   deploy/bench-cluster-auth-ab.sh NODES DURATION ROUNDS [BIN]     # e.g. 3 20s 3 target/release/raftmq
set -euo pipefail
exec "$(dirname "$0")/bench-security-ab.sh" "$1" "$2" "$3" "${4:-target/release/raftmq}" "off secret"
