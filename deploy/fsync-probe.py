#!/usr/bin/env python3
"""How fast this disk makes an append durable, to read benchmark figures against: the mean, p50
and p99 of `fdatasync` after writing WRITE_BYTES (default 140 KiB, about one group commit under
load; 1100 is one 1 KiB message with its headers, the floor of a send with one in flight) into a
fresh sparse file ("fresh") and into blocks written before ("written", as the CommitLog's
zero-ahead leaves them), 300 of each (FSYNC_PROBE_ROUNDS). The disk under /work is shared with other machines, so its
speed drifts during the day; BENCHMARKS.md quotes this probe next to each Raft figure.

    deploy/fsync-probe.py [DIR] [WRITE_BYTES] [KIND]   # defaults: the current directory, 143360, both
"""
import os
import sys
import time

WRITE_BYTES_DEFAULT = 140 * 1024
ROUNDS = int(os.environ.get("FSYNC_PROBE_ROUNDS", "300"))


def probe(path, prewritten, write_bytes):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    try:
        total = write_bytes * ROUNDS
        if prewritten:
            os.write(fd, b"\0" * total)
            os.fsync(fd)
        else:
            os.ftruncate(fd, total)
            os.fsync(fd)
        buf = b"x" * write_bytes
        lat = []
        for i in range(ROUNDS):
            os.pwrite(fd, buf, i * write_bytes)
            t = time.perf_counter()
            os.fdatasync(fd)
            lat.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        os.unlink(path)
    lat.sort()
    ms = lambda s: s * 1e3
    return ms(sum(lat) / len(lat)), ms(lat[len(lat) // 2]), ms(lat[int(len(lat) * 0.99)])


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else "."
    write_bytes = int(sys.argv[2]) if len(sys.argv) > 2 else WRITE_BYTES_DEFAULT
    path = os.path.join(directory, ".fsync-probe-%d" % os.getpid())
    kinds = sys.argv[3:] or ["fresh", "written"]
    for name, prewritten in (("fresh", False), ("written", True)):
        if name not in kinds:
            continue
        mean, p50, p99 = probe(path, prewritten, write_bytes)
        print("fdatasync of %d B, %-7s blocks: mean %.3f ms, p50 %.3f, p99 %.3f" % (write_bytes, name, mean, p50, p99))


if __name__ == "__main__":
    main()
