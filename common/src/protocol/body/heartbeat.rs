//! HEART_BEAT (34) body: `HeartbeatData` with its `ProducerData`, `ConsumerData` and
//! `SubscriptionData`, plus the consumer enums `ConsumeType`, `MessageModel`, `ConsumeFromWhere`.
//!
//! Clients send it every 30 s to every broker of their routes; the broker registers the groups and,
//! from the consumer data, the subscriptions PULL_MESSAGE is filtered by. Java's `Set`s are `Vec`s
//! here (order kept, so encodings round-trip); receivers deduplicate where it matters. Enum values are
//! the Java constant names; 5.x's `CONSUME_POP` is accepted so 5.x-era clients can register.
//! `SubscriptionData.filterClassSource` is never serialized by Java (`@JSONField(serialize=false)`)
//! and is ignored on input.

use serde::Deserialize;
use serde::Serialize;

use super::JsonBody;
use super::null_as_default;

/// `SubscriptionData.SUB_ALL`: subscribe to every tag.
pub const SUB_ALL: &str = "*";

/// How a consumer gets messages (`ConsumeType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConsumeType {
    /// Pull consumer.
    ConsumeActively,
    /// Push consumer.
    #[default]
    ConsumePassively,
    /// 5.x pop consumer.
    ConsumePop,
}

/// How a group shares a topic's messages (`MessageModel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MessageModel {
    /// Every consumer gets every message.
    Broadcasting,
    /// Each message goes to one consumer of the group.
    #[default]
    Clustering,
}

/// Where a group without a stored offset starts (`ConsumeFromWhere`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConsumeFromWhere {
    /// From the queue's end.
    #[default]
    ConsumeFromLastOffset,
    /// Deprecated.
    ConsumeFromLastOffsetAndFromMinWhenBootFirst,
    /// Deprecated.
    ConsumeFromMinOffset,
    /// Deprecated.
    ConsumeFromMaxOffset,
    /// From the queue's beginning.
    ConsumeFromFirstOffset,
    /// From the consumer's `consumeTimestamp`.
    ConsumeFromTimestamp,
}

/// One topic subscription of a consumer group (`SubscriptionData`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionData {
    /// Filter-class mode (filter server; unsupported).
    pub class_filter_mode: bool,
    /// Java `String.hashCode` of each tag in `tags_set`.
    #[serde(deserialize_with = "null_as_default")]
    pub code_set: Vec<i32>,
    /// `TAG` or `SQL92`.
    #[serde(deserialize_with = "null_as_default")]
    pub expression_type: String,
    /// The expression as written, e.g. `TagA || TagB` or `*`.
    #[serde(deserialize_with = "null_as_default")]
    pub sub_string: String,
    /// Version (the client's clock when it subscribed, ms); newer wins.
    pub sub_version: i64,
    /// Tags parsed from `sub_string`; empty for `*`.
    #[serde(deserialize_with = "null_as_default")]
    pub tags_set: Vec<String>,
    /// Topic.
    #[serde(deserialize_with = "null_as_default")]
    pub topic: String,
}

impl Default for SubscriptionData {
    fn default() -> Self {
        SubscriptionData {
            class_filter_mode: false,
            code_set: Vec::new(),
            expression_type: "TAG".to_owned(),
            sub_string: String::new(),
            sub_version: 0,
            tags_set: Vec::new(),
            topic: String::new(),
        }
    }
}

impl SubscriptionData {
    /// Subscribes to every tag (`*`) or to no particular tag set.
    pub fn is_sub_all(&self) -> bool {
        self.sub_string.is_empty() || self.sub_string == SUB_ALL
    }
}

/// CHECK_CLIENT_CONFIG (46) request body (`CheckClientRequestBody`): before it starts, a consumer
/// whose subscription is not a TAG expression asks each broker whether it can filter by it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CheckClientRequestBody {
    /// The asking client (`ip@instanceName`).
    #[serde(deserialize_with = "null_as_default")]
    pub client_id: String,
    /// Consumer group.
    #[serde(deserialize_with = "null_as_default")]
    pub group: String,
    /// The subscription to check.
    #[serde(deserialize_with = "null_as_default")]
    pub subscription_data: SubscriptionData,
}

impl JsonBody for CheckClientRequestBody {
    const NAME: &'static str = "CheckClientRequestBody";
}

/// A consumer group the client belongs to (`ConsumerData`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerData {
    /// Where to start without a stored offset.
    pub consume_from_where: ConsumeFromWhere,
    /// Push or pull.
    pub consume_type: ConsumeType,
    /// The consumer group.
    #[serde(deserialize_with = "null_as_default")]
    pub group_name: String,
    /// Clustering or broadcasting.
    pub message_model: MessageModel,
    /// Subscriptions (including the group's `%RETRY%` topic for push consumers).
    #[serde(deserialize_with = "null_as_default")]
    pub subscription_data_set: Vec<SubscriptionData>,
    /// Unit mode.
    pub unit_mode: bool,
}

/// A producer group the client belongs to (`ProducerData`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerData {
    /// The producer group.
    #[serde(deserialize_with = "null_as_default")]
    pub group_name: String,
}

/// HEART_BEAT (34) body (`HeartbeatData`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct HeartbeatData {
    /// `ip@instanceName` (the key really is spelled `clientID`).
    #[serde(rename = "clientID", deserialize_with = "null_as_default")]
    pub client_id: String,
    /// Consumer groups.
    #[serde(rename = "consumerDataSet", deserialize_with = "null_as_default")]
    pub consumer_data_set: Vec<ConsumerData>,
    /// Producer groups.
    #[serde(rename = "producerDataSet", deserialize_with = "null_as_default")]
    pub producer_data_set: Vec<ProducerData>,
}

impl JsonBody for HeartbeatData {
    const NAME: &'static str = "HeartbeatData";
}

#[cfg(test)]
pub(crate) mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::protocol::body::testing::check_body;
    use crate::protocol::body::testing::text;

    pub(crate) fn arb_subscription() -> impl Strategy<Value = SubscriptionData> {
        (
            any::<bool>(),
            proptest::collection::vec(any::<i32>(), 0..3),
            prop_oneof![Just("TAG".to_owned()), Just("SQL92".to_owned()), text()],
            text(),
            any::<i64>(),
            proptest::collection::vec(text(), 0..3),
            text(),
        )
            .prop_map(
                |(class_filter_mode, code_set, expression_type, sub_string, sub_version, tags_set, topic)| {
                    SubscriptionData {
                        class_filter_mode,
                        code_set,
                        expression_type,
                        sub_string,
                        sub_version,
                        tags_set,
                        topic,
                    }
                },
            )
    }

    fn arb_consumer_data() -> impl Strategy<Value = ConsumerData> {
        let consume_from_where = prop_oneof![
            Just(ConsumeFromWhere::ConsumeFromLastOffset),
            Just(ConsumeFromWhere::ConsumeFromLastOffsetAndFromMinWhenBootFirst),
            Just(ConsumeFromWhere::ConsumeFromMinOffset),
            Just(ConsumeFromWhere::ConsumeFromMaxOffset),
            Just(ConsumeFromWhere::ConsumeFromFirstOffset),
            Just(ConsumeFromWhere::ConsumeFromTimestamp),
        ];
        let consume_type = prop_oneof![
            Just(ConsumeType::ConsumeActively),
            Just(ConsumeType::ConsumePassively),
            Just(ConsumeType::ConsumePop)
        ];
        let message_model = prop_oneof![Just(MessageModel::Broadcasting), Just(MessageModel::Clustering)];
        (
            consume_from_where,
            consume_type,
            text(),
            message_model,
            proptest::collection::vec(arb_subscription(), 0..3),
            any::<bool>(),
        )
            .prop_map(
                |(consume_from_where, consume_type, group_name, message_model, subscription_data_set, unit_mode)| {
                    ConsumerData {
                        consume_from_where,
                        consume_type,
                        group_name,
                        message_model,
                        subscription_data_set,
                        unit_mode,
                    }
                },
            )
    }

    fn arb_heartbeat() -> BoxedStrategy<HeartbeatData> {
        (
            text(),
            proptest::collection::vec(arb_consumer_data(), 0..3),
            proptest::collection::vec(text().prop_map(|group_name| ProducerData { group_name }), 0..3),
        )
            .prop_map(|(client_id, consumer_data_set, producer_data_set)| HeartbeatData {
                client_id,
                consumer_data_set,
                producer_data_set,
            })
            .boxed()
    }

    #[test]
    fn heartbeat_satisfies_body_properties() {
        check_body(arb_heartbeat());
    }

    /// What a 4.9.x `DefaultMQPushConsumer` subscribed to `TopicTest` with `TagA || TagB` sends
    /// (fastjson, keys sorted), plus the inner producer every `MQClientInstance` registers.
    const JAVA_PUSH_CONSUMER_HEARTBEAT: &str = r#"{"clientID":"192.168.0.7@31337","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"please_rename_unique_group_name_4","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[2598919,2598920],"expressionType":"TAG","subString":"TagA || TagB","subVersion":1700000000000,"tagsSet":["TagA","TagB"],"topic":"TopicTest"},{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1700000000001,"tagsSet":[],"topic":"%RETRY%please_rename_unique_group_name_4"}],"unitMode":false}],"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}]}"#;

    #[test]
    fn java_push_consumer_heartbeat_decodes_and_reencodes_byte_exactly() {
        let hb = HeartbeatData::decode(JAVA_PUSH_CONSUMER_HEARTBEAT.as_bytes()).expect("Java heartbeat decodes");
        assert_eq!(hb.client_id, "192.168.0.7@31337");
        assert_eq!(hb.producer_data_set, vec![ProducerData { group_name: "CLIENT_INNER_PRODUCER".to_owned() }]);
        let consumer = &hb.consumer_data_set[0];
        assert_eq!(consumer.consume_type, ConsumeType::ConsumePassively);
        assert_eq!(consumer.message_model, MessageModel::Clustering);
        assert_eq!(consumer.consume_from_where, ConsumeFromWhere::ConsumeFromFirstOffset);
        let sub = &consumer.subscription_data_set[0];
        assert_eq!(sub.tags_set, vec!["TagA", "TagB"]);
        assert_eq!(sub.code_set, vec![2_598_919, 2_598_920]);
        assert!(!sub.is_sub_all());
        assert!(consumer.subscription_data_set[1].is_sub_all());
        assert_eq!(String::from_utf8(hb.encode().unwrap()).unwrap(), JAVA_PUSH_CONSUMER_HEARTBEAT);
    }

    #[test]
    fn producer_only_heartbeat_with_unknown_and_null_fields_decodes() {
        // A 5.x-era client adds fields; a non-Java client may send nulls.
        let json = r#"{"clientID":"10.0.0.1@p","consumerDataSet":null,"heartbeatFingerprint":42,"isWithoutSub":false,
            "producerDataSet":[{"groupName":"pg","extra":1}]}"#;
        let hb = HeartbeatData::decode(json.as_bytes()).expect("decodes");
        assert!(hb.consumer_data_set.is_empty());
        assert_eq!(hb.producer_data_set[0].group_name, "pg");
    }

    #[test]
    fn pull_consumer_with_sql_filter_decodes() {
        let json = r#"{"clientID":"c","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_TIMESTAMP","consumeType":"CONSUME_ACTIVELY","groupName":"g","messageModel":"BROADCASTING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"SQL92","filterClassSource":"x","subString":"a > 5","subVersion":1,"tagsSet":[],"topic":"T"}],"unitMode":true}],"producerDataSet":[]}"#;
        let hb = HeartbeatData::decode(json.as_bytes()).expect("decodes");
        let c = &hb.consumer_data_set[0];
        assert_eq!(c.consume_type, ConsumeType::ConsumeActively);
        assert_eq!(c.message_model, MessageModel::Broadcasting);
        assert_eq!(c.subscription_data_set[0].expression_type, "SQL92");
        assert!(c.unit_mode);
    }

    #[test]
    fn unknown_enum_value_is_an_error_not_a_panic() {
        let json = r#"{"clientID":"c","consumerDataSet":[{"consumeType":"CONSUME_SIDEWAYS"}]}"#;
        assert!(HeartbeatData::decode(json.as_bytes()).is_err());
    }
}
