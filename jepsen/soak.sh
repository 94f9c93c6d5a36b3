#!/usr/bin/env bash
# Soak: COUNT runs of raftmq-jepsen (seeds FIRST..FIRST+COUNT-1), LANES of them at a time, each in
# its own network namespace, then one line per run in OUT/results.tsv. A run's store files are
# deleted once its checkers ran (dumps.json keeps the per-replica digests); logs, history.jsonl and
# dumps.json are gzipped (gunzip them before `raftmq-jepsen --recheck`).
#
#   jepsen/soak.sh OUT FIRST COUNT [LANES] [TIME_LIMIT_S] [NEMESES]
#   jepsen/soak.sh soak 5000 20 4 300    # the 20 × 300 s runs of jepsen/RESULTS.md
#   RAFTMQ_JEPSEN_ARGS="--tx-producers 2" jepsen/soak.sh soak 9200 8 4 240   # with transactions
#
# Needs root (ip netns, iptables) and release binaries: cargo build --release -p raftmq -p raftmq-jepsen
set -euo pipefail

out=${1:?OUT}
first=${2:?FIRST seed}
count=${3:?COUNT}
lanes=${4:-4}
time_limit=${5:-300}
nemeses=${6:-partition,kill,pause,lose-unfsynced,power-loss,namesrv,clock,membership,disk-full,fd-exhaustion}
bin=${RAFTMQ_JEPSEN_BIN:-target/release/raftmq-jepsen}
# Extra raftmq-jepsen arguments for every run, split on spaces (e.g. "--tx-producers 2").
read -r -a extra <<<"${RAFTMQ_JEPSEN_ARGS:-}"

mkdir -p "$out"
lane() {
    local lane=$1 seed
    for ((seed = first + lane; seed < first + count; seed += lanes)); do
        local dir="$out/$seed"
        local started=$SECONDS rc=0
        "$bin" --nemesis "$nemeses" --time-limit "$time_limit" --seed "$seed" --out "$dir" "${extra[@]}" \
            >"$out/$seed.out" 2>"$out/$seed.err" || rc=$?
        rm -rf "$dir"/nodes/*/disk/store
        find "$dir" \( -name '*.log' -o -name '*.jsonl' -o -name 'dumps.json' \) -exec gzip -f {} + 2>/dev/null || true
        printf '%s\t%s\t%s\t%s\n' "$seed" "$rc" "$((SECONDS - started))" \
            "$(tr '\n' ' ' <"$dir/summary.txt" 2>/dev/null | tr -s ' ')" >>"$out/results.tsv"
    done
}
for ((l = 0; l < lanes; l++)); do
    lane "$l" &
done
wait
sort -n "$out/results.tsv" -o "$out/results.tsv"
cat "$out/results.tsv"
# Exit 0 only when every run exited 0 (every checker valid).
! cut -f2 "$out/results.tsv" | grep -qv '^0$'
