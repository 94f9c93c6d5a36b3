//! GET_CONSUMER_CONNECTION_LIST (203) and GET_PRODUCER_CONNECTION_LIST (204) response bodies:
//! `ConsumerConnection` and `ProducerConnection`, each a set of client `Connection`s.
//!
//! `Connection.language` stays the Java constant name (`"JAVA"`); map it with
//! `LanguageCode::from_name`. The consumer's enums are absent in Java when the group had no
//! heartbeat yet, so they are `Option`s here and left out when `None`, as fastjson leaves out nulls.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

use super::JsonBody;
use super::heartbeat::ConsumeFromWhere;
use super::heartbeat::ConsumeType;
use super::heartbeat::MessageModel;
use super::heartbeat::SubscriptionData;
use super::null_as_default;

/// One client connection (`org.apache.rocketmq.common.protocol.body.Connection`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Connection {
    /// Remote address, `ip:port`.
    #[serde(deserialize_with = "null_as_default")]
    pub client_addr: String,
    /// Client id, `ip@instanceName`.
    #[serde(deserialize_with = "null_as_default")]
    pub client_id: String,
    /// `LanguageCode` constant name, e.g. `JAVA`.
    #[serde(deserialize_with = "null_as_default")]
    pub language: String,
    /// Client `MQVersion` ordinal.
    pub version: i32,
}

/// GET_CONSUMER_CONNECTION_LIST (203) response body (`ConsumerConnection`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerConnection {
    /// The group's live clients.
    #[serde(deserialize_with = "null_as_default")]
    pub connection_set: Vec<Connection>,
    /// Where the group starts without an offset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consume_from_where: Option<ConsumeFromWhere>,
    /// Push or pull.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consume_type: Option<ConsumeType>,
    /// Clustering or broadcasting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_model: Option<MessageModel>,
    /// Topic → subscription.
    #[serde(deserialize_with = "null_as_default")]
    pub subscription_table: BTreeMap<String, SubscriptionData>,
}

impl JsonBody for ConsumerConnection {
    const NAME: &'static str = "ConsumerConnection";
}

/// GET_PRODUCER_CONNECTION_LIST (204) response body (`ProducerConnection`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerConnection {
    /// The group's live clients.
    #[serde(deserialize_with = "null_as_default")]
    pub connection_set: Vec<Connection>,
}

impl JsonBody for ProducerConnection {
    const NAME: &'static str = "ProducerConnection";
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::protocol::body::heartbeat::tests::arb_subscription;
    use crate::protocol::body::testing::check_body;
    use crate::protocol::body::testing::text;

    fn arb_connection() -> impl Strategy<Value = Connection> {
        (text(), text(), prop_oneof![Just("JAVA".to_owned()), text()], any::<i32>()).prop_map(
            |(client_addr, client_id, language, version)| Connection { client_addr, client_id, language, version },
        )
    }

    #[test]
    fn connection_bodies_satisfy_body_properties() {
        let consume_from_where = proptest::option::of(prop_oneof![
            Just(ConsumeFromWhere::ConsumeFromLastOffset),
            Just(ConsumeFromWhere::ConsumeFromTimestamp)
        ]);
        let consume_type =
            proptest::option::of(prop_oneof![Just(ConsumeType::ConsumeActively), Just(ConsumeType::ConsumePassively)]);
        let message_model =
            proptest::option::of(prop_oneof![Just(MessageModel::Broadcasting), Just(MessageModel::Clustering)]);
        check_body(
            (
                proptest::collection::vec(arb_connection(), 0..3),
                consume_from_where,
                consume_type,
                message_model,
                proptest::collection::btree_map(text(), arb_subscription(), 0..3),
            )
                .prop_map(|(connection_set, consume_from_where, consume_type, message_model, subscription_table)| {
                    ConsumerConnection {
                        connection_set,
                        consume_from_where,
                        consume_type,
                        message_model,
                        subscription_table,
                    }
                })
                .boxed(),
        );
        check_body(
            proptest::collection::vec(arb_connection(), 0..3)
                .prop_map(|connection_set| ProducerConnection { connection_set })
                .boxed(),
        );
    }

    #[test]
    fn java_consumer_connection_decodes() {
        let json = r#"{"connectionSet":[{"clientAddr":"10.0.0.1:50000","clientId":"10.0.0.1@1","language":"JAVA","version":401}],"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","subscriptionTable":{"T":{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"T"}}}"#;
        let c = ConsumerConnection::decode(json.as_bytes()).expect("decodes");
        assert_eq!(c.connection_set[0].version, 401);
        assert_eq!(c.consume_type, Some(ConsumeType::ConsumePassively));
        assert!(c.subscription_table["T"].is_sub_all());
        assert_eq!(String::from_utf8(c.encode().unwrap()).unwrap(), json);
    }
}
