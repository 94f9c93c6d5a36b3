#!/usr/bin/env bash
# Builds the raftmq image from a binary built on this host, for machines with no container registry
# (deploy/Dockerfile needs rust and debian base images): no base image, only the binary, the shared
# libraries it links (ldd) and deploy/*.toml.
#
#   deploy/image-from-host.sh [BINARY]     # default: cargo build --release -p raftmq, then that binary
#   RAFTMQ_IMAGE=raftmq:dev deploy/image-from-host.sh target/debug/raftmq
#
# Then `docker-compose up -d` (or `docker compose up -d --wait`) uses the image: compose builds only
# an image it does not have.
set -euo pipefail
cd "$(dirname "$0")/.."

image=${RAFTMQ_IMAGE:-raftmq:latest}
bin=${1:-}
if [[ -z $bin ]]; then
    cargo build --release -p raftmq
    bin=target/release/raftmq
fi
[[ -x $bin ]] || { echo "no raftmq binary at $bin" >&2; exit 1; }

root=deploy/host-root
rm -rf "$root" deploy/host-data
mkdir -p "$root/usr/local/bin" "$root/tmp" deploy/host-data
cp "$bin" "$root/usr/local/bin/raftmq"
strip "$root/usr/local/bin/raftmq" 2>/dev/null || true
# Every library the binary links, at the path the loader looks for it (the loader itself included).
ldd "$bin" | awk '/=> \//{print $3} /^[ \t]*\/[^ ]+ \(/{print $1}' | while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done
chmod 1777 "$root/tmp"
docker build -q -f deploy/Dockerfile.host -t "$image" . >/dev/null
echo "built $image from $bin ($(docker image inspect -f '{{.Size}}' "$image" | numfmt --to=iec) )"
