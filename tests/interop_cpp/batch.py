"""`send_batch` of `count` messages, then a pull consumer reads what the broker stored.

librocketmq 1.2.x sends a batch as SEND_MESSAGE_V2 with the batch flag `m` written as `1`; Java's
broker reads it with `Boolean.parseBoolean` (false), so it stores the whole batch as ONE message
whose body is the batch encoding (upstream: apache/rocketmq-client-cpp#363). raftmq decodes as
Java's broker does. Prints `sent` per batched message, `received` (with the body in hex) per
pulled message and `done`.
"""

from rocketmq.client import Message, Producer, PullConsumer, SendStatus

import scenario_common as sc


def main():
    a = sc.args()
    producer = Producer(a.group)
    producer.set_namesrv_addr(a.namesrv)
    producer.start()
    batch = []
    for seq in range(a.count):
        msg = Message(a.topic)
        msg.set_tags("TagBatch")
        msg.set_keys("batch-%d" % seq)
        msg.set_body(sc.body_of("batch", seq))
        msg.set_property(sc.SEQ_PROPERTY, str(seq))
        msg.set_property(sc.SCENARIO_PROPERTY, "batch")
        batch.append(msg)
    result = producer.send_batch(batch)
    for seq in range(a.count):
        sc.emit("sent", mode="batch", seq=seq, status=SendStatus(result.status).name, msg_id=result.msg_id)
    producer.shutdown()

    consumer = PullConsumer(a.group + "_pull")
    consumer.set_namesrv_addr(a.namesrv)
    consumer.start()
    pulled = []

    def pull_pass():
        for msg in consumer.pull(a.topic):
            sc.received(msg, body_hex=sc.raw(msg.body).hex())
            pulled.append(msg)
        return len(pulled) > 0

    sc.wait_until("the batch pulled", pull_pass)
    consumer.shutdown()
    sc.emit("done", sent=a.count)


if __name__ == "__main__":
    main()
