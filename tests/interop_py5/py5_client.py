#!/usr/bin/env python3
"""Apache's RocketMQ 5 Python client (PyPI `rocketmq-python-client` 5.1.2) against raftmq's gRPC
MessagingService, with the client's default settings (only the endpoints, topics and groups are
set). Every phase prints JSON lines for t71_py5_client.rs to check; this script asserts nothing
but its own bounded waits.

Topics and groups are `<prefix><Name>` (t71 creates them):
  Normal      normal messages (tag, two keys, a user property); PushConsumer group `<prefix>push`
  Fifo        message groups; FIFO PushConsumer group `<prefix>push_fifo` (consumeMessageOrderly)
  Delay       one message due DELAY_MS after its send; SimpleConsumer group `<prefix>delay`
  Tx          one half committed, one rolled back, one left open for the broker's check-back (the
              TransactionChecker commits it); SimpleConsumer group `<prefix>tx`
  Simple      SimpleConsumer group `<prefix>simple`: receive and ack; one message left unacked
              and one whose invisible duration is shortened come back with delivery attempt 2;
              one whose invisible duration is lengthened is acked with its new receipt handle

The transactional producer has an endpoint of its own (--tx-endpoints): the broker's check-back
reaches only producers whose Telemetry stream is on the leader's replica.

Events: `sent`, `ended`, `checked`, `received`, `changed`, `acked`, `done`, `error`.
Randomness (which messages the SimpleConsumer leaves or changes) comes from --seed, printed first.
"""

import argparse
import json
import random
import sys
import threading
import time
import traceback

from rocketmq.grpc_protocol import TransactionResolution
from rocketmq.v5.client import ClientConfiguration, Credentials
from rocketmq.v5.consumer import ConsumeResult, MessageListener, PushConsumer, SimpleConsumer
from rocketmq.v5.model import FilterExpression, Message
from rocketmq.v5.producer import Producer, TransactionChecker

NORMAL_COUNT = 24
FIFO_GROUPS = 3
FIFO_STEPS = 6
SIMPLE_COUNT = 6
# The SimpleConsumer's first receive makes messages invisible this long; the shortened message is
# changed to SHORT_INVISIBLE_S, the lengthened one to LONG_INVISIBLE_S.
INVISIBLE_S = 20
SHORT_INVISIBLE_S = 2
LONG_INVISIBLE_S = 60
DELAY_MS = 3_000
# Bounds of the waits: consumption of what was sent, and the broker's check-back of the open half
# (with the broker's defaults: checked once older than transactionTimeOut, 6 s, on a round every
# transactionCheckInterval, 60 s).
CONSUME_WAIT_S = 90
CHECK_BACK_WAIT_S = 180

_out_lock = threading.Lock()


def now_ms():
    return int(time.time() * 1000)


def emit(event, **fields):
    line = json.dumps({"event": event, **fields}, ensure_ascii=False, sort_keys=True)
    with _out_lock:
        print(line, flush=True)


def body_of(kind, seq):
    return f"{kind}-{seq}-Grüße-消息"


class Recorder:
    """What every consumer received, with a condition to wait on."""

    def __init__(self):
        self.cond = threading.Condition()
        self.received = {}  # consumer -> list of (msg_id, seq, attempt)

    def record(self, consumer, message):
        seq = message.properties.get("interopSeq", "")
        with self.cond:
            self.received.setdefault(consumer, []).append((message.message_id, seq, message.delivery_attempt))
            self.cond.notify_all()
        emit(
            "received",
            consumer=consumer,
            msg_id=message.message_id,
            topic=message.topic,
            tag=message.tag,
            keys=sorted(message.keys),
            props=dict(message.properties),
            body=message.body.decode("utf-8", errors="replace"),
            attempt=message.delivery_attempt,
            message_group=message.message_group,
            delivery_ms=message.delivery_timestamp,
            corrupted=message.corrupted,
            at_ms=now_ms(),
        )

    def ids(self, consumer):
        with self.cond:
            return {r[0] for r in self.received.get(consumer, [])}

    def wait(self, what, timeout_s, done):
        """Waits (bounded) until done(received) holds; raises naming `what` otherwise."""
        with self.cond:
            if not self.cond.wait_for(lambda: done(self.received), timeout=timeout_s):
                raise TimeoutError(f"{what}: not within {timeout_s} s; received {self.received}")


class Listener(MessageListener):
    def __init__(self, recorder, consumer):
        self.recorder = recorder
        self.consumer = consumer

    def consume(self, message):
        self.recorder.record(self.consumer, message)
        return ConsumeResult.SUCCESS


class Checker(TransactionChecker):
    """Commits the half left open on purpose; any other check is a surprise: rolled back."""

    def __init__(self):
        self.cond = threading.Condition()
        self.commit_ids = set()
        self.checked = []

    def check(self, message):
        commit = message.message_id in self.commit_ids
        resolution = TransactionResolution.COMMIT if commit else TransactionResolution.ROLLBACK
        emit("checked", msg_id=message.message_id, resolution="COMMIT" if commit else "ROLLBACK", at_ms=now_ms())
        with self.cond:
            self.checked.append(message.message_id)
            self.cond.notify_all()
        return resolution


def message(topic, kind, seq, tag):
    m = Message()
    m.topic = topic
    m.body = body_of(kind, seq).encode("utf-8")
    m.tag = tag
    m.keys = f"key-{kind}-{seq}"
    m.keys = f"order-{seq % 3}"
    m.add_property("interopSeq", str(seq))
    m.add_property("interopKind", kind)
    return m


def sent(kind, seq, receipt, **extra):
    emit(
        "sent",
        kind=kind,
        seq=seq,
        msg_id=receipt.message_id,
        tx_id=receipt.transaction_id or "",
        queue=str(receipt.message_queue),
        at_ms=now_ms(),
        **extra,
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoints", required=True, help="gRPC endpoint of every client but the transactional producer")
    parser.add_argument("--tx-endpoints", required=True, help="gRPC endpoint of the transactional producer")
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--seed", type=int, required=True)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    emit("seed", seed=args.seed)
    p = args.prefix
    topics = {name: f"{p}{name}" for name in ["Normal", "Fifo", "Delay", "Tx", "Simple"]}
    config = ClientConfiguration(args.endpoints, Credentials())
    tx_config = ClientConfiguration(args.tx_endpoints, Credentials())
    recorder = Recorder()
    checker = Checker()
    started = []

    def start(client):
        client.startup()
        started.append(client)
        return client

    try:
        producer = start(Producer(config, tuple(topics.values())))
        tx_producer = start(Producer(tx_config, (topics["Tx"],), checker))

        # The half left open goes first: the broker's check-back clock starts with it.
        tx = tx_producer.begin_transaction()
        orphan = message(topics["Tx"], "orphan", 0, "TagT")
        receipt = tx_producer.send(orphan, transaction=tx)
        with checker.cond:
            checker.commit_ids.add(receipt.message_id)
        sent("orphan", 0, receipt)

        for seq, resolution in [(1, "commit"), (2, "rollback")]:
            tx = tx_producer.begin_transaction()
            receipt = tx_producer.send(message(topics["Tx"], resolution, seq, "TagT"), transaction=tx)
            sent(resolution, seq, receipt)
            (tx.commit if resolution == "commit" else tx.rollback)()
            emit("ended", kind=resolution, msg_id=receipt.message_id)

        # Half of the normal messages before the PushConsumer starts, half while it runs.
        for seq in range(NORMAL_COUNT // 2):
            sent("normal", seq, producer.send(message(topics["Normal"], "normal", seq, "TagA")))
        for step in range(FIFO_STEPS):
            for g in range(FIFO_GROUPS):
                seq = g * FIFO_STEPS + step
                m = message(topics["Fifo"], "fifo", seq, "TagF")
                m.message_group = f"group-{g}"
                m.add_property("interopStep", str(step))
                sent("fifo", seq, producer.send(m), message_group=f"group-{g}", step=step)
        delayed = message(topics["Delay"], "delay", 0, "TagD")
        # 5.1.2 documents `delivery_timestamp` in ms but writes it to the Timestamp's `seconds`: a
        # value in seconds is what reaches a broker (Java's proxy, too, refuses one in ms).
        deliver_at_s = (now_ms() + DELAY_MS) // 1000 + 1
        deliver_at_ms = deliver_at_s * 1000
        delayed.delivery_timestamp = deliver_at_s
        sent("delay", 0, producer.send(delayed), deliver_at_ms=deliver_at_ms)

        start(
            PushConsumer(
                config, f"{p}push", Listener(recorder, "push"), {topics["Normal"]: FilterExpression("*")}
            )
        )
        start(
            PushConsumer(
                config,
                f"{p}push_fifo",
                Listener(recorder, "push_fifo"),
                {topics["Fifo"]: FilterExpression("TagF")},
            )
        )
        for seq in range(NORMAL_COUNT // 2, NORMAL_COUNT):
            sent("normal", seq, producer.send(message(topics["Normal"], "normal", seq, "TagA")))

        recorder.wait(
            "every normal message pushed",
            CONSUME_WAIT_S,
            lambda r: len({x[0] for x in r.get("push", [])}) >= NORMAL_COUNT,
        )
        recorder.wait(
            "every FIFO message pushed",
            CONSUME_WAIT_S,
            lambda r: len({x[0] for x in r.get("push_fifo", [])}) >= FIFO_GROUPS * FIFO_STEPS,
        )

        simple_phase(config, producer, topics["Simple"], f"{p}simple", recorder, rng)
        receive_until(
            config, f"{p}delay", topics["Delay"], recorder, "delay", CONSUME_WAIT_S, lambda ids: len(ids) >= 1
        )
        # The committed half at once; the open one once the broker asked and the checker committed.
        receive_until(
            config, f"{p}tx", topics["Tx"], recorder, "tx", CHECK_BACK_WAIT_S, lambda ids: len(ids) >= 2
        )
        emit(
            "done",
            seed=args.seed,
            push=len(recorder.received.get("push", [])),
            push_fifo=len(recorder.received.get("push_fifo", [])),
        )
    except Exception as e:  # noqa: BLE001 - every failure is reported as a line
        emit("error", what=f"{type(e).__name__}: {e}", trace=traceback.format_exc())
        return 1
    finally:
        for client in reversed(started):
            try:
                client.shutdown()
            except Exception as e:  # noqa: BLE001
                emit("shutdown_error", what=f"{type(e).__name__}: {e}")
    return 0


def receive_until(config, group, topic, recorder, name, timeout_s, done):
    """A SimpleConsumer that receives and acks until done(ids received) or the bound."""
    consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")})
    consumer.startup()
    try:
        deadline = time.monotonic() + timeout_s
        while not done(recorder.ids(name)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name}: received only {recorder.ids(name)} within {timeout_s} s")
            for m in consumer.receive(32, INVISIBLE_S):
                recorder.record(name, m)
                consumer.ack(m)
                emit("acked", consumer=name, msg_id=m.message_id)
    finally:
        consumer.shutdown()


def simple_phase(config, producer, topic, group, recorder, rng):
    """Receive and ack; one message left unacked and one shortened come back with attempt 2; one
    lengthened is acked with the receipt handle the change answered."""
    seqs = list(range(SIMPLE_COUNT))
    rng.shuffle(seqs)
    unacked, shortened, lengthened = seqs[0], seqs[1], seqs[2]
    emit("simple_plan", unacked=unacked, shortened=shortened, lengthened=lengthened)
    for seq in range(SIMPLE_COUNT):
        sent("simple", seq, producer.send(message(topic, "simple", seq, "TagS")))
    consumer = SimpleConsumer(config, group, {topic: FilterExpression("TagS")})
    consumer.startup()
    try:
        deadline = time.monotonic() + CONSUME_WAIT_S
        seen = set()
        back = set()  # seqs delivered a second time, acked then
        while back != {unacked, shortened} or len(seen) < SIMPLE_COUNT:
            if time.monotonic() > deadline:
                raise TimeoutError(f"simple: only {back} came back within {CONSUME_WAIT_S} s")
            for m in consumer.receive(32, INVISIBLE_S):
                recorder.record("simple", m)
                seq = int(m.properties.get("interopSeq", "-1"))
                seen.add(seq)
                if m.delivery_attempt == 1 and seq == unacked:
                    continue
                if m.delivery_attempt == 1 and seq in (shortened, lengthened):
                    to = SHORT_INVISIBLE_S if seq == shortened else LONG_INVISIBLE_S
                    old = m.receipt_handle
                    consumer.change_invisible_duration(m, to)
                    emit("changed", msg_id=m.message_id, seq=seq, to_s=to, new_handle=m.receipt_handle != old,
                         at_ms=now_ms())
                    if seq == shortened:
                        continue
                consumer.ack(m)
                emit("acked", consumer="simple", msg_id=m.message_id, seq=seq, attempt=m.delivery_attempt)
                if m.delivery_attempt > 1:
                    back.add(seq)
    finally:
        consumer.shutdown()


if __name__ == "__main__":
    sys.exit(main())
