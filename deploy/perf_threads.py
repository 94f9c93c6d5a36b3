#!/usr/bin/env python3
"""Each process's threads in a `perf record` file, with their share of the process's samples and
the symbols their samples were in (self time, first frame), from `perf script`. Used with
deploy/profile-send.sh (issue 37): a thread's share times the process's µs/msg is the µs/msg of
that thread.

    deploy/perf_threads.py PERF_DATA [TOP]      # TOP symbols per thread (default 8)
"""
import collections
import re
import subprocess
import sys

path = sys.argv[1]
top = int(sys.argv[2]) if len(sys.argv) > 2 else 8
script = subprocess.run(["perf", "script", "-i", path, "-F", "pid,tid,comm,ip,sym"], capture_output=True, text=True,
                        check=True).stdout
threads = collections.Counter()
per_pid = collections.Counter()
symbols = collections.defaultdict(collections.Counter)
current = None
for line in script.splitlines():
    head = re.match(r"\s*(\S.*?)\s+(\d+)/(\d+)\s*$", line)
    if head:
        current = (int(head.group(2)), int(head.group(3)), head.group(1).strip())
        threads[current] += 1
        per_pid[current[0]] += 1
        first = True
        continue
    if current and first and line.strip():
        parts = line.split(None, 1)
        symbols[current][parts[1].strip() if len(parts) > 1 else parts[0]] += 1
        first = False
total = sum(per_pid.values())
for pid in sorted(per_pid):
    print(f"pid {pid}: {per_pid[pid]} samples, {100 * per_pid[pid] / total:.1f} % of all")
    for key, n in threads.most_common():
        if key[0] != pid or n < per_pid[pid] * 0.02:
            continue
        print(f"  {key[2]:16} tid {key[1]}: {100 * n / per_pid[pid]:.1f} % of the process")
        for sym, m in symbols[key].most_common(top):
            print(f"      {100 * m / n:5.1f} %  {sym[:100]}")
