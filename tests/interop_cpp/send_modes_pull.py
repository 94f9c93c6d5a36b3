"""Sync, async and oneway sends, then a pull consumer reads every message back.

Each message carries a tag (TagA / TagB), two keys, a unique body and two user properties. Prints a
`sent` event per send (with its mode and, for sync and async, the broker's answer), then a
`received` event per message the pull consumer fetched.
"""

import threading

from rocketmq.client import Message, Producer, PullConsumer, SendStatus

import scenario_common as sc

MODES = ("sync", "async", "oneway")


def message(topic, mode, seq):
    msg = Message(topic)
    msg.set_tags("TagA" if seq % 2 == 0 else "TagB")
    msg.set_keys("key-%s-%d order-%d" % (mode, seq, seq % 3))
    msg.set_body(sc.body_of(mode, seq))
    msg.set_property(sc.SEQ_PROPERTY, str(seq))
    msg.set_property(sc.SCENARIO_PROPERTY, mode)
    return msg


def main():
    a = sc.args()
    producer = Producer(a.group)
    producer.set_namesrv_addr(a.namesrv)
    producer.start()

    async_done = []
    lock = threading.Lock()

    def on_success(result, seq):
        sc.emit("sent", mode="async", seq=seq, status=SendStatus(result.status).name, msg_id=result.msg_id)
        with lock:
            async_done.append(seq)

    def on_exception(exc, seq):
        sc.emit("error", reason="async send %d failed: %s" % (seq, exc))
        with lock:
            async_done.append(seq)

    seq = 0
    for mode in MODES:
        for _ in range(a.count):
            msg = message(a.topic, mode, seq)
            if mode == "sync":
                result = producer.send_sync(msg)
                sc.emit("sent", mode=mode, seq=seq, status=SendStatus(result.status).name, msg_id=result.msg_id)
            elif mode == "async":
                producer.send_async(
                    msg,
                    lambda r, s=seq: on_success(r, s),
                    lambda e, s=seq: on_exception(e, s),
                )
            else:
                producer.send_oneway(msg)
                sc.emit("sent", mode=mode, seq=seq, status="ONEWAY")
            seq += 1
    sc.wait_until("the async sends' callbacks", lambda: len(async_done) == a.count)

    consumer = PullConsumer(a.group + "_pull")
    consumer.set_namesrv_addr(a.namesrv)
    consumer.start()
    seen = set()
    # Oneway sends have no answer: pull until every message is there (each pass reads each queue
    # from the offset the previous pass reached).

    def pull_pass():
        for msg in consumer.pull(a.topic):
            sc.received(msg)
            seen.add(sc.text(msg.get_property(sc.SEQ_PROPERTY)))
        return len(seen) == seq

    sc.wait_until("every message pulled", pull_pass)
    consumer.shutdown()
    producer.shutdown()
    sc.emit("done", sent=seq)


if __name__ == "__main__":
    main()
