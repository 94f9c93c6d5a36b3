"""Shared by every C++-client scenario: arguments, JSON-line output, waiting with a deadline.

Each scenario is run by tests/interop_cpp/t70_cpp_client.rs (root package) as
`python3 <scenario>.py --namesrv ADDR --topic TOPIC --group GROUP [--count N] [--client-home DIR]`
and prints one JSON object per
line on stdout: `sent`, `received`, `done` or `error` events the Rust side asserts on. Everything
goes through PyPI's `rocketmq` 0.4.4 (librocketmq 1.2.x, the official C++ core) with its default
settings; only the NameServer address and the names are set.
"""

import argparse
import json
import os
import sys
import threading
import time

# Bound on every wait of a scenario; a wait ends as soon as its condition holds.
WAIT_S = 60.0
# The property every scenario stamps on its messages, with the message's sequence number.
SEQ_PROPERTY = "interopSeq"
SCENARIO_PROPERTY = "interopScenario"


def args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--client-home", help="where the C++ client writes logs/rocketmq-cpp/ (its $HOME)")
    parsed = parser.parse_args()
    if parsed.client_home:
        # librocketmq opens its log under getenv("HOME") when the first client is created; Python's
        # own start-up (site-packages) is done by now, so only the C++ client sees the change.
        os.makedirs(parsed.client_home, exist_ok=True)
        os.environ["HOME"] = parsed.client_home
    return parsed


_emit_lock = threading.Lock()


def emit(event, **fields):
    """One JSON line on stdout (callbacks run on the C++ client's threads, hence the lock)."""
    line = json.dumps(dict(event=event, **fields), ensure_ascii=False, sort_keys=True)
    with _emit_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def body_of(scenario, seq):
    # Unique and partly non-ASCII, so a body that is cut or re-encoded shows.
    return "%s-%d-Grüße-消息" % (scenario, seq)


def text(value):
    """The wrapper returns some fields as bytes: decode them (invalid UTF-8 shows as U+FFFD)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def received(message, **extra):
    """The `received` event of one consumed message, with everything the Rust side checks."""
    emit(
        "received",
        topic=text(message.topic),
        tags=text(message.tags),
        keys=text(message.keys),
        body=text(message.body),
        queue_id=message.queue_id,
        queue_offset=message.queue_offset,
        reconsume_times=message.reconsume_times,
        msg_id=text(message.id),
        seq=text(message.get_property(SEQ_PROPERTY)),
        scenario=text(message.get_property(SCENARIO_PROPERTY)),
        **extra
    )


def wait_until(what, condition, wait_s=WAIT_S):
    """Polls `condition` until it holds; exits the scenario with an `error` event at the deadline."""
    deadline = time.monotonic() + wait_s
    while not condition():
        if time.monotonic() > deadline:
            emit("error", reason="timed out after %.0f s waiting for %s" % (wait_s, what))
            sys.exit(2)
        time.sleep(0.05)


def hashing(queues, arg):
    """The wrapper's own `hashing_queue_selector` (queue = arg % queues), reused by selectors that
    also record what they saw."""
    from rocketmq.client import hashing_queue_selector

    return hashing_queue_selector(queues, None, arg)


def raw(value):
    """A body as bytes, whichever type the wrapper returned."""
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")
