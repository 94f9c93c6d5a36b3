//! `SubscriptionGroupConfig` (a consumer group's broker-side settings: retry queues, retry limit,
//! slow-consumer broker) and `SubscriptionGroupWrapper`, the GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201)
//! response body and UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) request body is one config.
//!
//! Missing keys take Java's defaults (consume enabled, 1 retry queue, 16 retries, brokerId 0).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

use super::JsonBody;
use super::null_as_default;
use super::topic::DataVersion;

/// Java's `SubscriptionGroupConfig.retryMaxTimes` default: reconsumes before the DLQ.
pub const RETRY_MAX_TIMES_DEFAULT_COUNT: i32 = 16;

/// One consumer group's settings (`org.apache.rocketmq.common.subscription.SubscriptionGroupConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionGroupConfig {
    /// Broker the group normally consumes from (0 = master/leader).
    pub broker_id: i64,
    /// Broadcasting consumption allowed.
    pub consume_broadcast_enable: bool,
    /// Consumption allowed at all.
    pub consume_enable: bool,
    /// A new group starts from the minimum offset when the queue's first message is still present.
    pub consume_from_min_enable: bool,
    /// The group.
    #[serde(deserialize_with = "null_as_default")]
    pub group_name: String,
    /// Send NOTIFY_CONSUMER_IDS_CHANGED on membership changes.
    pub notify_consumer_ids_changed_enable: bool,
    /// Reconsumes before the DLQ.
    pub retry_max_times: i32,
    /// Queues of the group's `%RETRY%` topic.
    pub retry_queue_nums: i32,
    /// brokerId suggested to a consumer that falls behind (with `slaveReadEnable`).
    pub which_broker_when_consume_slowly: i64,
    /// 5.x: the group consumes in order (FIFO): POP holds a queue while a message of it is in
    /// flight. Written only when set, so 4.x documents stay byte-identical.
    #[serde(skip_serializing_if = "is_false")]
    pub consume_message_orderly: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Default for SubscriptionGroupConfig {
    fn default() -> Self {
        SubscriptionGroupConfig {
            broker_id: 0,
            consume_broadcast_enable: true,
            consume_enable: true,
            consume_from_min_enable: true,
            group_name: String::new(),
            notify_consumer_ids_changed_enable: true,
            retry_max_times: RETRY_MAX_TIMES_DEFAULT_COUNT,
            retry_queue_nums: 1,
            which_broker_when_consume_slowly: 1,
            consume_message_orderly: false,
        }
    }
}

impl SubscriptionGroupConfig {
    /// A group with Java's defaults.
    pub fn new(group_name: impl Into<String>) -> Self {
        SubscriptionGroupConfig { group_name: group_name.into(), ..SubscriptionGroupConfig::default() }
    }
}

impl JsonBody for SubscriptionGroupConfig {
    const NAME: &'static str = "SubscriptionGroupConfig";
}

/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) response body (`SubscriptionGroupWrapper`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionGroupWrapper {
    /// Version of the table.
    #[serde(deserialize_with = "null_as_default")]
    pub data_version: DataVersion,
    /// Group name → config.
    #[serde(deserialize_with = "null_as_default")]
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
}

impl JsonBody for SubscriptionGroupWrapper {
    const NAME: &'static str = "SubscriptionGroupWrapper";
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::protocol::body::testing::check_body;
    use crate::protocol::body::testing::text;

    fn arb_config() -> impl Strategy<Value = SubscriptionGroupConfig> {
        (any::<i64>(), any::<[bool; 4]>(), text(), any::<i32>(), any::<i32>(), any::<i64>()).prop_map(
            |(broker_id, flags, group_name, retry_max_times, retry_queue_nums, slow)| SubscriptionGroupConfig {
                broker_id,
                consume_broadcast_enable: flags[0],
                consume_enable: flags[1],
                consume_from_min_enable: flags[2],
                group_name,
                notify_consumer_ids_changed_enable: flags[3],
                retry_max_times,
                retry_queue_nums,
                which_broker_when_consume_slowly: slow,
                consume_message_orderly: flags[1] && !flags[2],
            },
        )
    }

    #[test]
    fn subscription_group_bodies_satisfy_body_properties() {
        check_body(arb_config().boxed());
        check_body(
            ((any::<i64>(), any::<i64>()), proptest::collection::btree_map(text(), arb_config(), 0..4))
                .prop_map(|((counter, timestamp), subscription_group_table)| SubscriptionGroupWrapper {
                    data_version: DataVersion { counter, timestamp },
                    subscription_group_table,
                })
                .boxed(),
        );
    }

    #[test]
    fn java_wrapper_decodes_with_defaults_for_missing_keys() {
        let json = r#"{"dataVersion":{"counter":3,"timestamp":1700000000000},"subscriptionGroupTable":{"cg":{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,"groupName":"cg","notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1},"old":{"groupName":"old","consumeEnable":false}}}"#;
        let w = SubscriptionGroupWrapper::decode(json.as_bytes()).expect("decodes");
        assert_eq!(w.data_version.counter, 3);
        assert_eq!(w.subscription_group_table["cg"], SubscriptionGroupConfig::new("cg"));
        let old = &w.subscription_group_table["old"];
        assert!(!old.consume_enable);
        assert_eq!(old.retry_max_times, 16);
    }
}
