#!/usr/bin/env bash
# What the plain ACL costs a send (cluster secret alone, then with the ACL): the `secret acl`
# configurations of deploy/bench-security-ab.sh, kept under this name for the commands in
# BENCHMARKS.md.
#   deploy/bench-acl-ab.sh NODES DURATION ROUNDS [BIN]     # e.g. 1 12s 4 target/release/raftmq
set -euo pipefail
exec "$(dirname "$0")/bench-security-ab.sh" "$1" "$2" "$3" "${4:-target/release/raftmq}" "secret acl"
