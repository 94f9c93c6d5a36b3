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

    /// The body of issue 30: numbers for the enums (ordinals), `subVersion` as a string.
    const CPP_STYLE_HEARTBEAT: &str = r#"{"clientID":"10.0.0.9@cpp","consumerDataSet":[{"consumeFromWhere":1,"consumeType":1,"groupName":"g","messageModel":1,"subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":"1733000000000","tagsSet":[],"topic":"T"}],"unitMode":false}],"producerDataSet":[]}"#;

    /// What rocketmq-client-cpp 1.2.x `HeartbeatData::Encode` writes for a push consumer on `T` with
    /// `TagA || TagB` plus its retry topic: JsonCpp `FastWriter` (keys sorted, trailing newline), enums
    /// as ordinals, `subVersion` through `to_string`, no `unitMode`/`classFilterMode`/`expressionType`,
    /// and an empty `tagsSet`/`codeSet` or `producerDataSet` left out (JsonCpp appends create them).
    const CPP_1_2_PUSH_CONSUMER_HEARTBEAT: &str = concat!(
        r#"{"clientID":"10.0.0.9@12345","consumerDataSet":[{"consumeFromWhere":4,"consumeType":1,"groupName":"GID_cpp","#,
        r#""messageModel":1,"subscriptionDataSet":[{"codeSet":[2598919,2598920],"subString":"TagA || TagB","#,
        r#""subVersion":"1733000000000","tagsSet":["TagA","TagB"],"topic":"T"},{"subString":"*","#,
        r#""subVersion":"1733000000001","topic":"%RETRY%GID_cpp"}]}]}"#,
        "\n"
    );

    #[test]
    fn cpp_client_heartbeat_with_ordinals_and_string_sub_version_decodes() {
        let hb = HeartbeatData::decode(CPP_STYLE_HEARTBEAT.as_bytes()).expect("the C++ heartbeat decodes");
        let c = &hb.consumer_data_set[0];
        assert_eq!(c.consume_from_where, ConsumeFromWhere::ConsumeFromLastOffsetAndFromMinWhenBootFirst);
        assert_eq!(c.consume_type, ConsumeType::ConsumePassively);
        assert_eq!(c.message_model, MessageModel::Clustering);
        assert_eq!(c.subscription_data_set[0].sub_version, 1_733_000_000_000);
        assert!(c.subscription_data_set[0].is_sub_all());

        let hb =
            HeartbeatData::decode(CPP_1_2_PUSH_CONSUMER_HEARTBEAT.as_bytes()).expect("the C++ 1.2 heartbeat decodes");
        assert_eq!(hb.client_id, "10.0.0.9@12345");
        assert!(hb.producer_data_set.is_empty());
        let c = &hb.consumer_data_set[0];
        assert_eq!(c.consume_from_where, ConsumeFromWhere::ConsumeFromFirstOffset);
        assert_eq!(c.consume_type, ConsumeType::ConsumePassively);
        assert_eq!(c.message_model, MessageModel::Clustering);
        assert!(!c.unit_mode);
        let sub = &c.subscription_data_set[0];
        assert_eq!((sub.sub_version, sub.tags_set.len(), sub.expression_type.as_str()), (1_733_000_000_000, 2, "TAG"));
        let retry = &c.subscription_data_set[1];
        assert!(retry.is_sub_all() && retry.tags_set.is_empty() && retry.code_set.is_empty());
        assert_eq!(retry.topic, "%RETRY%GID_cpp");
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 256,
            failure_persistence: None,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x4842_4f52_4449_4e41),
            ..ProptestConfig::default()
        })]

        /// Every enum by name, by lower-case name or by ordinal, and `subVersion` as a number or a
        /// string, decodes to the same heartbeat.
        #[test]
        fn enums_by_name_or_ordinal_and_numbers_as_strings_decode_alike(hb in arb_heartbeat(), picks in any::<u64>()) {
            let mut value = serde_json::to_value(&hb).expect("serializes");
            let mut pick = picks;
            let mut next = || { pick = pick.rotate_left(7) ^ 0x9e37_79b9; pick % 3 };
            for consumer in value["consumerDataSet"].as_array_mut().into_iter().flatten() {
                for (key, names) in [
                    ("consumeFromWhere", &["CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST", "CONSUME_FROM_MIN_OFFSET", "CONSUME_FROM_MAX_OFFSET", "CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_TIMESTAMP"][..]),
                    ("consumeType", &["CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP"][..]),
                    ("messageModel", &["BROADCASTING", "CLUSTERING"][..]),
                ] {
                    let name = consumer[key].as_str().expect("a name").to_owned();
                    let ordinal = names.iter().position(|n| *n == name).expect("a known name");
                    consumer[key] = match next() {
                        0 => serde_json::json!(ordinal),
                        1 => serde_json::json!(name.to_ascii_lowercase()),
                        _ => serde_json::json!(name),
                    };
                }
                for sub in consumer["subscriptionDataSet"].as_array_mut().into_iter().flatten() {
                    if next() == 0 {
                        sub["subVersion"] = serde_json::json!(sub["subVersion"].to_string());
                    }
                }
            }
            let bytes = serde_json::to_vec(&value).expect("serializes");
            prop_assert_eq!(HeartbeatData::decode(&bytes).expect("decodes"), hb);
        }
    }
}
