"""Orderly sends with a queue selector to an orderly push consumer with a tag expression.

`count` orders of six steps each are sent with `send_orderly(msg, order)`: the wrapper's
`hashing_queue_selector` puts order `o` on queue `o % queues`. Steps cycle through TagA, TagB and
TagC; the orderly consumer subscribes `TagA || TagB`. Prints `sent` per send (with the queue the
selector saw), `received` per delivery and `done`.
"""

import threading

from rocketmq.client import Message, Producer, PushConsumer, SendStatus

import scenario_common as sc

STEPS = 6
TAGS = ("TagA", "TagB", "TagC")
EXPRESSION = "TagA || TagB"


def main():
    a = sc.args()
    got = set()
    lock = threading.Lock()

    def on_message(msg):
        sc.received(msg, listener="orderly", order=sc.text(msg.get_property("order")),
                    step=sc.text(msg.get_property("step")))
        with lock:
            got.add(sc.text(msg.get_property(sc.SEQ_PROPERTY)))

    consumer = PushConsumer(a.group, orderly=True)
    consumer.set_namesrv_addr(a.namesrv)
    consumer.subscribe(a.topic, on_message, expression=EXPRESSION)
    consumer.start()

    producer = Producer(a.group + "_producer")
    producer.set_namesrv_addr(a.namesrv)
    producer.start()
    seq = 0
    wanted = set()
    # Interleaved: step 0 of every order, then step 1 of every order, ...
    for step in range(STEPS):
        for order in range(a.count):
            tag = TAGS[step % 3]
            msg = Message(a.topic)
            msg.set_tags(tag)
            msg.set_keys("order-%d-step-%d" % (order, step))
            msg.set_body(sc.body_of("orderly", seq))
            msg.set_property(sc.SEQ_PROPERTY, str(seq))
            msg.set_property(sc.SCENARIO_PROPERTY, "orderly")
            msg.set_property("order", str(order))
            msg.set_property("step", str(step))
            seen_queues = []

            def selector(queues, message, arg, seen=seen_queues):
                seen.append(queues)
                return sc.hashing(queues, arg)

            result = producer.send_orderly(msg, order, queue_selector=selector)
            sc.emit("sent", mode="orderly", seq=seq, order=order, step=step, tags=tag,
                    queues=seen_queues[-1] if seen_queues else None, status=SendStatus(result.status).name)
            if tag != "TagC":
                wanted.add(str(seq))
            seq += 1
    producer.shutdown()

    sc.wait_until("every TagA and TagB step", lambda: wanted <= got)
    consumer.shutdown()
    sc.emit("done", sent=seq, expression=EXPRESSION, steps=STEPS)


if __name__ == "__main__":
    main()
