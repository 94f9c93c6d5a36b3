"""What the scripts of this folder share: JSON-line events, a message, receiving everything with a
SimpleConsumer within a bound, and shutting the clients down."""

import json
import time


def emit(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


def message(message_class, topic, body, tag="TagA"):
    m = message_class()
    m.topic = topic
    m.body = body.encode("utf-8")
    m.tag = tag
    return m


def receive_all(consumer, count, invisible_s, wait_s, on_message):
    """Receives and acks until `count` distinct bodies came, calling `on_message(m, body)` for
    each; raises TimeoutError after `wait_s` seconds."""
    received = set()
    deadline = time.monotonic() + wait_s
    while len(received) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"received only {sorted(received)} within {wait_s} s")
        for m in consumer.receive(32, invisible_s):
            consumer.ack(m)
            body = m.body.decode("utf-8", errors="replace")
            received.add(body)
            on_message(m, body)
    return received


def shutdown_all(started):
    for client in reversed(started):
        try:
            client.shutdown()
        except Exception:
            pass
