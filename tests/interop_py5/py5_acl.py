#!/usr/bin/env python3
"""Apache's RocketMQ 5 Python client (PyPI `rocketmq-python-client` 5.1.2) against a raftmq group
under the plain ACL (`aclEnable`): the client signs every call with its Credentials
(`authorization: MQv2-HMAC-SHA1 ...` over `x-mq-date-time`). t71_py5_client.rs creates the topic,
the group and the accounts, and checks what this script prints; it asserts nothing but its own
bounded waits.

  - a producer with the producer account's keys sends COUNT messages (through --endpoints, a
    follower's port: the follower signs what it relays as that account);
  - a producer with a wrong secret is refused: its start or its send raises (event `refused`);
  - a SimpleConsumer with the consumer account's keys receives and acks every message.

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
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--producer-keys", required=True, help="accessKey:secretKey")
    parser.add_argument("--consumer-keys", required=True, help="accessKey:secretKey")
    args = parser.parse_args()

    def config(keys):
        access_key, secret_key = keys.split(":", 1)
        return ClientConfiguration(args.endpoints, Credentials(access_key, secret_key))

    started = []
    try:
        producer = Producer(config(args.producer_keys), (args.topic,))
        producer.startup()
        started.append(producer)
        for seq in range(COUNT):
            receipt = producer.send(message(Message, args.topic, f"acl-{seq}"))
            emit("sent", seq=seq, msg_id=receipt.message_id)

        access_key = args.producer_keys.split(":", 1)[0]
        impostor = Producer(config(f"{access_key}:not-the-secret"), (args.topic,))
        try:
            impostor.startup()
            started.append(impostor)
            impostor.send(message(Message, args.topic, f"acl-{COUNT}"))
            emit("error", what="a producer with a wrong secret sent a message")
        except Exception as e:  # the client raises its own exception types
            emit("refused", what=type(e).__name__, text=str(e)[:300])

        consumer = SimpleConsumer(config(args.consumer_keys), args.group, {args.topic: FilterExpression("*")})
        consumer.startup()
        started.append(consumer)
        received = receive_all(
            consumer,
            COUNT,
            INVISIBLE_S,
            CONSUME_WAIT_S,
            lambda m, body: emit("received", msg_id=m.message_id, body=body),
        )
        emit("done", received=len(received))
    except Exception:
        emit("error", what=traceback.format_exc())
    finally:
        shutdown_all(started)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
