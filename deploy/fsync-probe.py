#!/usr/bin/env python3
"""How fast this disk makes an append durable, to read benchmark figures against: the mean, p50
and p99 of `fdatasync` after writing 140 KiB (about one group commit) into a fresh sparse file
("fresh") and into blocks written before ("written"), 300 of each. The disk under /work is
shared with other machines, so its speed drifts during the day; BENCHMARKS.md quotes this probe
next to each Raft figure.

    deploy/fsync-probe.py [DIR]     # default: the current directory
"""
import os
import sys
import time

WRITE_BYTES = 140 * 1024
ROUNDS = 300


def probe(path, prewritten):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    try:
        total = WRITE_BYTES * ROUNDS
        if prewritten:
            os.write(fd, b"\0" * total)
            os.fsync(fd)
        else:
            os.ftruncate(fd, total)
            os.fsync(fd)
        buf = b"x" * WRITE_BYTES
        lat = []
        for i in range(ROUNDS):
            os.pwrite(fd, buf, i * WRITE_BYTES)
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
    path = os.path.join(directory, ".fsync-probe-%d" % os.getpid())
    for name, prewritten in (("fresh", False), ("written", True)):
        mean, p50, p99 = probe(path, prewritten)
        print("fdatasync of 140 KiB, %-7s blocks: mean %.2f ms, p50 %.2f, p99 %.2f" % (name, mean, p50, p99))


if __name__ == "__main__":
    main()
