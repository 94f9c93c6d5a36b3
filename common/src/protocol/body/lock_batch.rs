//! LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) bodies: `LockBatchRequestBody`,
//! `LockBatchResponseBody` (`{"lockOKMQSet":[...]}`) and `UnlockBatchRequestBody`.
//!
//! Orderly consumers lock their queues on the broker before consuming; the response lists the queues
//! actually locked. Java's `Set<MessageQueue>` is a `Vec` (order kept). 5.x's `onlyThisBroker` is
//! ignored on input.

use serde::Deserialize;
use serde::Serialize;

use super::JsonBody;
use super::message_queue::MessageQueue;
use super::null_as_default;

/// LOCK_BATCH_MQ (41) request body.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LockBatchRequestBody {
    /// The locking client (`ip@instanceName`).
    #[serde(deserialize_with = "null_as_default")]
    pub client_id: String,
    /// Consumer group.
    #[serde(deserialize_with = "null_as_default")]
    pub consumer_group: String,
    /// Queues to lock.
    #[serde(rename = "mqSet", deserialize_with = "null_as_default")]
    pub mq_set: Vec<MessageQueue>,
}

impl JsonBody for LockBatchRequestBody {
    const NAME: &'static str = "LockBatchRequestBody";
}

/// LOCK_BATCH_MQ (41) response body.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LockBatchResponseBody {
    /// Queues now locked by the requester.
    #[serde(rename = "lockOKMQSet", deserialize_with = "null_as_default")]
    pub lock_ok_mq_set: Vec<MessageQueue>,
}

impl JsonBody for LockBatchResponseBody {
    const NAME: &'static str = "LockBatchResponseBody";
}

/// UNLOCK_BATCH_MQ (42) request body.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UnlockBatchRequestBody {
    /// The unlocking client.
    #[serde(deserialize_with = "null_as_default")]
    pub client_id: String,
    /// Consumer group.
    #[serde(deserialize_with = "null_as_default")]
    pub consumer_group: String,
    /// Queues to unlock.
    #[serde(rename = "mqSet", deserialize_with = "null_as_default")]
    pub mq_set: Vec<MessageQueue>,
}

impl JsonBody for UnlockBatchRequestBody {
    const NAME: &'static str = "UnlockBatchRequestBody";
}

#[cfg(test)]
pub(crate) mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::protocol::body::testing::check_body;
    use crate::protocol::body::testing::text;

    pub(crate) fn arb_mq() -> impl Strategy<Value = MessageQueue> {
        (text(), text(), any::<i32>())
            .prop_map(|(topic, broker_name, queue_id)| MessageQueue::new(topic, broker_name, queue_id))
    }

    #[test]
    fn lock_bodies_satisfy_body_properties() {
        let mqs = || proptest::collection::vec(arb_mq(), 0..4);
        check_body(
            (text(), text(), mqs())
                .prop_map(|(client_id, consumer_group, mq_set)| LockBatchRequestBody {
                    client_id,
                    consumer_group,
                    mq_set,
                })
                .boxed(),
        );
        check_body(mqs().prop_map(|lock_ok_mq_set| LockBatchResponseBody { lock_ok_mq_set }).boxed());
        check_body(
            (text(), text(), mqs())
                .prop_map(|(client_id, consumer_group, mq_set)| UnlockBatchRequestBody {
                    client_id,
                    consumer_group,
                    mq_set,
                })
                .boxed(),
        );
    }

    #[test]
    fn java_lock_bodies_decode() {
        let req = br#"{"clientId":"10.0.0.1@9","consumerGroup":"og","mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"T"},{"brokerName":"broker-a","queueId":1,"topic":"T"}],"onlyThisBroker":false}"#;
        let body = LockBatchRequestBody::decode(req).expect("decodes");
        assert_eq!(body.consumer_group, "og");
        assert_eq!(body.mq_set[1], MessageQueue::new("T", "broker-a", 1));
        let resp = LockBatchResponseBody { lock_ok_mq_set: vec![MessageQueue::new("T", "broker-a", 0)] };
        assert_eq!(
            String::from_utf8(resp.encode().unwrap()).unwrap(),
            r#"{"lockOKMQSet":[{"brokerName":"broker-a","queueId":0,"topic":"T"}]}"#
        );
    }
}
