#!/usr/bin/env python3
"""Apache's RocketMQ 5 Python client (PyPI `rocketmq-python-client` 5.1.2) with a namespace
(`ClientConfiguration(..., namespace=NS)`): every resource it names carries `resource_namespace`,
which the broker joins into the name as RocketMQ 5.1's proxy does (`NS%Topic`). t71_py5_client.rs
creates `NS%Topic` and `NS%Group` only, and checks what this script prints; it asserts nothing but
its own bounded waits.

  - a producer in the namespace sends COUNT messages to --topic;
  - a producer outside it (no namespace) cannot send to --topic, which does not exist outside the
    namespace: its start or its send raises (event `refused`);
  - a SimpleConsumer in the namespace receives and acks every message, each naming --topic and the
    namespace as the client reads them.

Events: `sent`, `refused`, `received`, `done`, `error`.
"""

import argparse
import sys
import traceback

from py5_common import emit, message, receive_all, shutdown_all
from rocketmq.v5.client import ClientConfiguration, Credentials
from rocketmq.v5.consumer import SimpleConsumer
from rocketmq.v5.model import FilterExpression, Message
from rocketmq.v5.producer import Producer

COUNT = 6
INVISIBLE_S = 20
CONSUME_WAIT_S = 90


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoints", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    args = parser.parse_args()

    def config(namespace):
        return ClientConfiguration(args.endpoints, Credentials(), namespace=namespace)

    started = []
    try:
        producer = Producer(config(args.namespace), (args.topic,))
        producer.startup()
        started.append(producer)
        for seq in range(COUNT):
            receipt = producer.send(message(Message, args.topic, f"ns-{seq}"))
            emit("sent", seq=seq, msg_id=receipt.message_id)

        outsider = Producer(config(""), (args.topic,))
        try:
            outsider.startup()
            started.append(outsider)
            outsider.send(message(Message, args.topic, f"ns-{COUNT}"))
            emit("error", what="a producer outside the namespace sent to its topic")
        except Exception as e:  # the client raises its own exception types
            emit("refused", what=type(e).__name__, text=str(e)[:300])

        consumer = SimpleConsumer(config(args.namespace), args.group, {args.topic: FilterExpression("*")})
        consumer.startup()
        started.append(consumer)
        received = receive_all(
            consumer,
            COUNT,
            INVISIBLE_S,
            CONSUME_WAIT_S,
            lambda m, body: emit("received", msg_id=m.message_id, body=body, topic=m.topic, namespace=m.namespace),
        )
        emit("done", received=len(received))
    except Exception:
        emit("error", what=traceback.format_exc())
    finally:
        shutdown_all(started)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
