#!/usr/bin/env python3
"""Failover gaps as an unchanged RocketMQ C++ client sees them (issue 29), the counterpart of
`raftmq bench produce|consume --json` in deploy/failover-gaps.sh (CLIENT=cpp).

    deploy/cpp_client_gaps.py produce NAMESRV TOPIC SECONDS [THREADS]
    deploy/cpp_client_gaps.py consume NAMESRV TOPIC GROUP SECONDS

The client is PyPI's `rocketmq` 0.4.4: Apache rocketmq-client-cpp 1.2.x (librocketmq) behind a
thin ctypes wrapper, used with its defaults (3 s send timeout, 2 retries, the C++ client's fixed
30 s route poll, which the wrapper does not expose).

produce: THREADS (default 2) threads send_sync in a loop for SECONDS; one JSON line with
`sent`, `failed_sends` and `max_send_gap_ms`, the longest time without a SEND_OK (between two,
or from the last to the end), as `raftmq bench produce` defines it. A failed send is retried after
10 ms so a dead address is not hammered.

consume: a push consumer (concurrent listener) for SECONDS; one JSON line with `received` and
`max_delivery_gap_ms`, the longest time between two deliveries.
"""

import json
import sys
import threading
import time

from rocketmq.client import Message, Producer, PushConsumer

RETRY_PAUSE_S = 0.01


class Gaps:
    """The longest time between two successes (and, for sends, to the end)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.last = None
        self.max_between = 0.0
        self.count = 0

    def success(self):
        now = time.monotonic()
        with self.lock:
            if self.last is not None:
                self.max_between = max(self.max_between, now - self.last)
            self.last = now
            self.count += 1

    def max_with_trailing(self, end):
        with self.lock:
            if self.last is None:
                return 0.0
            return max(self.max_between, end - self.last)


def produce(ns, topic, seconds, threads):
    producer = Producer("cpp_failover_gaps_producer")
    producer.set_namesrv_addr(ns)
    producer.start()
    gaps = Gaps()
    failed = [0]
    failed_lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def loop(worker):
        n = 0
        while time.monotonic() < deadline:
            msg = Message(topic)
            msg.set_body(f"gap {worker} {n}")
            n += 1
            try:
                producer.send_sync(msg)
                gaps.success()
            except Exception:  # the wrapper raises one exception type per C error code
                with failed_lock:
                    failed[0] += 1
                time.sleep(RETRY_PAUSE_S)

    workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    end = time.monotonic()
    producer.shutdown()
    print(json.dumps({
        "sent": gaps.count, "failed_sends": failed[0],
        "max_send_gap_ms": round(gaps.max_with_trailing(end) * 1000, 1),
    }), flush=True)


def consume(ns, topic, group, seconds):
    consumer = PushConsumer(group)
    consumer.set_namesrv_addr(ns)
    gaps = Gaps()

    def on_message(_msg):
        gaps.success()  # returning normally acknowledges the message

    consumer.subscribe(topic, on_message)
    consumer.start()
    time.sleep(seconds)  # the run's length, not a synchronisation
    consumer.shutdown()
    print(json.dumps({
        "received": gaps.count, "max_delivery_gap_ms": round(gaps.max_between * 1000, 1),
    }), flush=True)


def main():
    mode = sys.argv[1]
    if mode == "produce":
        threads = int(sys.argv[5]) if len(sys.argv) > 5 else 2
        produce(sys.argv[2], sys.argv[3], float(sys.argv[4]), threads)
    elif mode == "consume":
        consume(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]))
    else:
        sys.exit(f"unknown mode {mode!r}: produce or consume")


if __name__ == "__main__":
    main()
