"""A concurrent push consumer with the tag expression `TagA || TagB`, fed by sync sends.

Messages cycle through the tags TagA, TagB and TagC; the consumer must get every TagA and TagB
message and no TagC one. Prints `sent` per message, `received` per delivery and, once every expected
message arrived and the consumer is shut down, `done`.
"""

import threading

from rocketmq.client import Message, Producer, PushConsumer, SendStatus

import scenario_common as sc

TAGS = ("TagA", "TagB", "TagC")
EXPRESSION = "TagA || TagB"


def message(topic, mode, seq):
    msg = Message(topic)
    msg.set_tags(TAGS[seq % 3])
    msg.set_keys("key-%s-%d" % (mode, seq))
    msg.set_body(sc.body_of(mode, seq))
    msg.set_property(sc.SEQ_PROPERTY, str(seq))
    msg.set_property(sc.SCENARIO_PROPERTY, mode)
    return msg


def main():
    a = sc.args()
    got = set()
    lock = threading.Lock()

    def on_message(msg):
        sc.received(msg, listener="concurrently")
        with lock:
            got.add(sc.text(msg.get_property(sc.SEQ_PROPERTY)))

    consumer = PushConsumer(a.group)
    consumer.set_namesrv_addr(a.namesrv)
    consumer.subscribe(a.topic, on_message, expression=EXPRESSION)
    consumer.start()

    producer = Producer(a.group + "_producer")
    producer.set_namesrv_addr(a.namesrv)
    producer.start()
    seq = 0
    for _ in range(3 * a.count):
        result = producer.send_sync(message(a.topic, "sync", seq))
        sc.emit("sent", mode="sync", seq=seq, tags=TAGS[seq % 3], status=SendStatus(result.status).name)
        seq += 1
    producer.shutdown()

    wanted = {str(s) for s in range(seq) if TAGS[s % 3] != "TagC"}
    sc.wait_until("every TagA and TagB message", lambda: wanted <= got)
    consumer.shutdown()
    sc.emit("done", sent=seq, expression=EXPRESSION)


if __name__ == "__main__":
    main()
