"""A message whose listener fails comes back through the broker's retry topic.

A concurrent push consumer fails (raises) on the first delivery of every message, so the C++ client
sends each back to the broker (CONSUMER_SEND_MSG_BACK); the broker stores it in `%RETRY%<group>`
with a delay level, and the consumer, subscribed to that retry topic by the client itself, gets it
again with reconsume times 1 and its original topic, keys, tags and properties. Prints `sent`,
`received` per delivery (with `failed` saying whether the listener failed it) and `done`.
"""

import threading

from rocketmq.client import Message, Producer, PushConsumer, RecvMessage, SendStatus
from rocketmq.client import _CConsumeStatus, dll, ffi_check

import scenario_common as sc


def main():
    a = sc.args()
    succeeded = set()
    lock = threading.Lock()

    def on_message(_consumer, handle):
        # The C API's listener (CONSUME_SUCCESS or RECONSUME_LATER). The wrapper's `subscribe`
        # turns a raised exception into RECONSUME_LATER but then re-raises it inside the ctypes
        # callback, which leaves the status the C++ client sees undefined; so this listener
        # returns RECONSUME_LATER itself.
        msg = RecvMessage(handle)
        seq = sc.text(msg.get_property(sc.SEQ_PROPERTY))
        failing = msg.reconsume_times == 0
        sc.received(msg, listener="concurrently", failed=failing,
                    retry_topic=sc.text(msg.get_property("RETRY_TOPIC")))
        if failing:
            return _CConsumeStatus.RECONSUME_LATER.value
        with lock:
            succeeded.add(seq)
        return _CConsumeStatus.CONSUME_SUCCESS.value

    consumer = PushConsumer(a.group)
    consumer.set_namesrv_addr(a.namesrv)
    ffi_check(dll.Subscribe(consumer._handle, a.topic.encode("utf-8"), b"*"))
    consumer._register_callback(on_message)
    consumer.start()

    producer = Producer(a.group + "_producer")
    producer.set_namesrv_addr(a.namesrv)
    producer.start()
    for seq in range(a.count):
        msg = Message(a.topic)
        msg.set_tags("TagRetry")
        msg.set_keys("retry-%d" % seq)
        msg.set_body(sc.body_of("retry", seq))
        msg.set_property(sc.SEQ_PROPERTY, str(seq))
        msg.set_property(sc.SCENARIO_PROPERTY, "retry")
        result = producer.send_sync(msg)
        sc.emit("sent", mode="sync", seq=seq, status=SendStatus(result.status).name)
    producer.shutdown()

    # The first retry waits for delay level 3 (10 s) on the broker.
    wanted = {str(s) for s in range(a.count)}
    sc.wait_until("every message consumed after its retry", lambda: wanted <= succeeded)
    consumer.shutdown()
    sc.emit("done", sent=a.count)


if __name__ == "__main__":
    main()
